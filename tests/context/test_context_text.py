"""A handle behaves like a read-only str: len, slicing by character, lines, iteration."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from _timing import SLACK_S

from rlm_runtime.context import FileHandle, TextHandle
from rlm_runtime.context import buffer as buffer_module
from rlm_runtime.context.buffer import BLOCK
from rlm_runtime.errors import ContextError


def _both(text: str, write_file: Callable[..., Path]) -> list:
    return [TextHandle(text), FileHandle(write_file("same.txt", text))]


@pytest.mark.parametrize("seed", range(6))
def test_slices_match_str_on_small_random_texts(seed: int, make_text: Callable[..., str], write_file: Callable[..., Path]) -> None:
    """It slices by character, like str, on random multi-byte text (text and file handles)."""
    rng = random.Random(seed)
    for trial in range(25):
        text = make_text(rng, rng.randint(0, 60))
        for handle in (TextHandle(text), FileHandle(write_file(f"s{seed}-{trial}.txt", text))) if text else (TextHandle(text),):
            assert len(handle) == len(text)
            for _ in range(60):
                a, b = rng.randint(-70, 70), rng.randint(-70, 70)
                assert handle[a:b] == text[a:b], (text, a, b)
            assert handle[:] == text
            assert handle[5:] == text[5:] and handle[:-3] == text[:-3]


def test_slices_match_str_across_index_blocks(make_text: Callable[..., str], write_file: Callable[..., Path]) -> None:
    """It slices correctly around the 64 KiB index blocks of a >200 KB multi-byte text."""
    rng = random.Random(42)
    text = make_text(rng, 160_000)
    assert len(text.encode("utf-8")) > 3 * BLOCK + 100_000 and len(text) < len(text.encode("utf-8"))
    for handle in _both(text, write_file):
        assert len(handle) == len(text)
        buf = handle._buf()
        block_chars = list(buf._chars)  # characters before each block (the index is built by len())
        assert len(block_chars) >= 4
        # Offsets right at, before and after every block start, and some random ones
        # (few: a slice in a non-ASCII block costs milliseconds, see test_slicing_speed).
        offsets = [c + d for c in block_chars for d in (-1, 0, 1)]
        offsets += [rng.randrange(len(text)) for _ in range(10)]
        for a in offsets:
            a = max(a, 0)
            for width in (0, 1, 70):
                assert handle[a : a + width] == text[a : a + width], (a, width)
        # Slices spanning several blocks at once.
        assert handle[100 : len(text) - 100] == text[100:-100]
        assert handle[BLOCK - 10 : 2 * BLOCK + 10] == text[BLOCK - 10 : 2 * BLOCK + 10]


def test_slices_match_str_with_many_tiny_blocks(make_text: Callable[..., str], write_file: Callable[..., Path],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """It slices and ranges lines correctly when a text spans hundreds of index blocks."""
    monkeypatch.setattr(buffer_module, "BLOCK", 97)  # read when the index is built
    rng = random.Random(7)
    text = make_text(rng, 20_000)
    ref = text.splitlines()
    for handle in _both(text, write_file):
        assert len(handle) == len(text)
        assert len(handle._buf()._starts) > 300
        for _ in range(3000):
            a = rng.randint(-len(text) - 3, len(text) + 3)
            b = a + rng.randint(0, 400)
            assert handle[a:b] == text[a:b], (a, b)
        for _ in range(300):
            first, k = rng.randint(1, len(ref) + 1), rng.randint(0, 5)
            assert handle.lines(first, first + k) == ref[first - 1 : first + k], (first, k)
        assert list(handle) == ref
        assert handle.n_lines == len(ref)


def test_slicing_speed_on_ascii_text() -> None:
    """It slices an ASCII text of 1.2 MB in microseconds at any offset (sparse index)."""
    text = "hello world\n" * 100_000
    h = TextHandle(text)
    len(h)
    rng = random.Random(0)
    start = time.perf_counter()
    for _ in range(2000):
        a = rng.randrange(len(text))
        assert h[a : a + 40] == text[a : a + 40]
    assert time.perf_counter() - start < 1.0 + SLACK_S


def test_slicing_speed_on_non_ascii_text() -> None:
    """It slices a non-ASCII text at any offset in well under a millisecond, like an ASCII one."""
    text = "中文字符测试 hello é\n" * 30_000
    h = TextHandle(text)
    len(h)
    rng = random.Random(0)
    start = time.perf_counter()
    for _ in range(100):
        a = rng.randrange(len(text))
        assert h[a : a + 50] == text[a : a + 50]
    assert time.perf_counter() - start < 0.25 + SLACK_S  # 2.5 ms a slice; ASCII takes ~0.01 ms


def test_single_index_and_negative_index(write_file: Callable[..., Path]) -> None:
    """It indexes single characters like str, negative indices included, and raises IndexError past the end."""
    text = "a€😀\nz"
    for handle in _both(text, write_file):
        assert [handle[i] for i in range(len(text))] == list(text)
        assert [handle[-i] for i in range(1, len(text) + 1)] == [text[-i] for i in range(1, len(text) + 1)]
        with pytest.raises(IndexError):
            handle[len(text)]
        with pytest.raises(IndexError):
            handle[-len(text) - 1]
        with pytest.raises(TypeError):
            handle["a"]  # type: ignore[index]


def test_slice_with_step_is_refused() -> None:
    """It refuses slices with a step (ContextError), but accepts an explicit step of 1."""
    h = TextHandle("abcdef")
    with pytest.raises(ContextError, match="step"):
        h[::2]
    with pytest.raises(ContextError):
        h[::-1]
    assert h[1:4:1] == "bcd"


def _reference_lines(text: str) -> list[str]:
    return text.splitlines()


@pytest.mark.parametrize("seed", range(4))
def test_lines_iteration_and_counts_match_splitlines(seed: int, make_text: Callable[..., str],
                                                     write_file: Callable[..., Path]) -> None:
    """It counts, iterates and ranges lines like str.splitlines() (\\n and \\r\\n endings)."""
    rng = random.Random(100 + seed)
    text = make_text(rng, rng.choice([50, 400, 90_000]))
    ref = _reference_lines(text)
    for handle in _both(text, write_file):
        assert handle.n_lines == len(ref)
        assert list(handle) == ref
        for _ in range(200):
            a = rng.randint(1, len(ref) + 2)
            b = a + rng.randint(0, 12)
            assert handle.lines(a, b) == ref[a - 1 : b], (a, b)
        assert handle.lines(len(ref)) == ref[-1:]  # one line when last is None


def test_lines_edge_cases() -> None:
    """It returns [] for empty or reversed ranges, clamps line 0 to 1 and stops at the end."""
    h = TextHandle("one\ntwo\nthree")
    assert h.lines(0, 1) == ["one"]
    assert h.lines(3, 2) == []
    assert h.lines(3, 99) == ["three"]
    assert h.lines(4, 5) == []
    with pytest.raises(ContextError, match="chunk"):
        h.lines(1, 200_000)


def test_lines_without_a_range_are_every_line_up_to_the_cap() -> None:
    """It returns every line for lines() (as small models loop over the text), and refuses a
    text longer than one call may return with a message naming the ways to page."""
    h = TextHandle("one\ntwo\nthree\n")
    assert h.lines() == ["one", "two", "three"] and h.lines(last=2) == ["one", "two"]
    big = TextHandle("x\n" * 100_005)
    with pytest.raises(ContextError, match=r"the text has 100005\).*for line in context"):
        big.lines()
    assert len(big.lines(1, 100_001)) == 100_001  # the cap counts as it always did


def test_file_without_trailing_newline(write_file: Callable[..., Path]) -> None:
    """It counts a last line that has no newline, and keeps its text."""
    h = FileHandle(write_file("nt.txt", "first\nsecond"))
    assert h.n_lines == 2 and list(h) == ["first", "second"] and h.lines(2) == ["second"]
    h2 = FileHandle(write_file("t.txt", "first\nsecond\n"))
    assert h2.n_lines == 2 and list(h2) == ["first", "second"]


def test_crlf_lines_drop_the_carriage_return_but_slices_keep_it(write_file: Callable[..., Path]) -> None:
    """It strips \\r from CRLF lines, while character slices return the raw text."""
    text = "alpha\r\nbeta é\r\n\r\ngamma\r\n"
    for handle in _both(text, write_file):
        assert list(handle) == ["alpha", "beta é", "", "gamma"] == text.splitlines()
        assert handle.n_lines == 4
        assert handle.lines(2, 3) == ["beta é", ""]
        assert handle[0:7] == "alpha\r\n"
        assert len(handle) == len(text)


def test_empty_text_and_empty_file(write_file: Callable[..., Path]) -> None:
    """It handles an empty context: length 0, no lines, empty slices."""
    for handle in (TextHandle(""), FileHandle(write_file("empty.txt", b""))):
        assert len(handle) == 0 and handle.n_lines == 0 and handle.n_bytes == 0
        assert list(handle) == [] and handle[:] == "" and handle[0:10] == ""
        assert handle.lines(1, 5) == []
        with pytest.raises(IndexError):
            handle[0]


def test_byte_order_mark_is_a_character(write_file: Callable[..., Path]) -> None:
    """It keeps a UTF-8 BOM as U+FEFF, exactly like decoding the bytes with utf-8."""
    raw = "\ufeffhead\nbody\n".encode()
    h = FileHandle(write_file("bom.txt", raw))
    assert len(h) == len(raw.decode("utf-8"))
    assert h[0] == "\ufeff" and h[1:5] == "head"


def test_n_bytes_and_repr_do_not_dump_the_text() -> None:
    """It reports its size in bytes and its repr names the kind, not the content."""
    h = TextHandle("é" * 10, name="mine")
    assert h.n_bytes == 20
    assert "mine" in repr(h) and "20 bytes" in repr(h) and "é" not in repr(h)
    assert str(h) == repr(h)


def test_lines_take_line_numbers_as_small_models_pass_them() -> None:
    """It takes a grep match (its line), or the text of a number, for a line number, and
    refuses anything else with a TypeError naming it."""
    h = TextHandle("one\ntwo\nthree\nfour\n")
    hit = h.grep("three")[0]
    assert h.lines(hit) == ["three"] and h.lines("2", " 3 ") == ["two", "three"] and h.lines(hit.split(":")[0]) == ["three"]
    for bad in ("two", 2.0, True, [1]):
        with pytest.raises(TypeError, match="a line number must be an int"):
            h.lines(bad)  # type: ignore[arg-type]
