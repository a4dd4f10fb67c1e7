"""File handles (read-only mmap) and lazy handles (loader, cache, LRU eviction)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from rlm_runtime.context import FileHandle, LazyCache, LazyHandle, TextHandle, probe_path
from rlm_runtime.errors import ContextError, RecoverableError

# ----------------------------------------------------------------------------- files


def test_file_handle_reads_like_the_text(write_file: Callable[..., Path]) -> None:
    """It gives a file the same string behaviour as the text it holds."""
    text = "première ligne\nzweite Zeile 😀\nthird\n"
    f = FileHandle(write_file("doc.txt", text))
    t = TextHandle(text)
    assert f.kind == "file" and f.name == "doc.txt" and f.path.endswith("doc.txt")
    assert (len(f), f.n_lines, f.n_bytes, list(f)) == (len(t), t.n_lines, t.n_bytes, list(t))
    assert f[3:20] == t[3:20] == text[3:20]
    assert f.peek(12) == t.peek(12)
    assert repr(f.grep("e")) == repr(t.grep("e"))
    assert f.chunk(1, 1) == t.chunk(1, 1)


def test_file_handle_from_descriptor(write_file: Callable[..., Path]) -> None:
    """It maps an already-open descriptor, leaving it open for its owner."""
    path = write_file("fd.txt", "from a descriptor\n")
    fd = os.open(path, os.O_RDONLY)
    try:
        h = FileHandle(fd=fd, name="given")
        assert h.name == "given" and h.path is None and h[:4] == "from"
        os.fstat(fd)  # still open
    finally:
        os.close(fd)
    with pytest.raises(ValueError):
        FileHandle()
    with pytest.raises(ValueError):
        FileHandle(path, fd=0)


def test_file_handle_is_read_only(write_file: Callable[..., Path]) -> None:
    """It offers no way to change the context: item assignment fails, the map is read-only."""
    h = FileHandle(write_file("ro.txt", "abc\n"))
    with pytest.raises(TypeError):
        h[0] = "x"  # type: ignore[index]
    with pytest.raises(TypeError):
        h._buf().view[0] = 0  # the memoryview over the mmap is read-only


def test_missing_path_is_a_context_error(tmp_path: Path) -> None:
    """It raises a ContextError (recoverable) naming the missing path."""
    missing = tmp_path / "nope.txt"
    with pytest.raises(ContextError, match="not found") as info:
        FileHandle(missing)
    assert str(missing) in str(info.value)
    assert isinstance(info.value, RecoverableError)


def test_folder_is_not_a_file(tmp_path: Path) -> None:
    """It refuses a folder as a file handle, pointing at the corpus."""
    with pytest.raises(ContextError, match="corpus"):
        FileHandle(tmp_path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file_is_a_context_error(write_file: Callable[..., Path]) -> None:
    """It raises a ContextError for a file it may not read."""
    path = write_file("locked.txt", "secret")
    os.chmod(path, 0)
    with pytest.raises(ContextError, match="cannot open"):
        FileHandle(path)


@pytest.mark.parametrize(
    "content",
    [b"\x00\x01\x02binary\x00", b"%PDF-1.4\x00\x00\x00", bytes(range(1, 9)) * 20],
)
def test_binary_file_is_refused(write_file: Callable[..., Path], content: bytes) -> None:
    """It refuses a binary file (NUL or many control bytes) with a clear ContextError."""
    with pytest.raises(ContextError, match="binary") as info:
        FileHandle(write_file("blob.dat", content))
    assert "blob.dat" in str(info.value)


def test_text_with_some_control_characters_is_not_binary(write_file: Callable[..., Path]) -> None:
    """It accepts text with tabs, form feeds and an occasional escape code."""
    h = FileHandle(write_file("term.log", "\tcol\x0cpage\n\x1b[31mred\x1b[0m " + "plain text " * 20 + "\n"))
    assert h.n_lines == 2


def test_empty_file(write_file: Callable[..., Path]) -> None:
    """It opens an empty file (no mmap of zero bytes) and behaves as empty text."""
    h = FileHandle(write_file("empty.txt", b""))
    assert len(h) == 0 and h.peek() == "" and list(h.grep("x")) == [] and h.n_tokens.value == 0


def test_invalid_utf8_is_replaced_and_reported_once(write_file: Callable[..., Path]) -> None:
    """It decodes invalid UTF-8 with U+FFFD like bytes.decode(errors='replace') and warns exactly once."""
    raw = b"good line\nbad \xff\xfe bytes\n\xc3 truncated\nend \xe2\x82\xac\n"
    expected = raw.decode("utf-8", "replace")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        h = FileHandle(write_file("bad.txt", raw))
        h.peek(5)
        assert h.lines(2) == ["bad \ufffd\ufffd bytes"]
        assert list(h) == expected.splitlines()
        h.grep("bytes")
        h[0:3]
        h.get_full()
        h.chunk(0)
    relevant = [w for w in caught if "invalid UTF-8" in str(w.message)]
    assert len(relevant) == 1
    assert "bad.txt" in str(relevant[0].message)
    assert h.get_full() == expected


@pytest.mark.parametrize("first_op", ["peek", "len", "grep"])
def test_invalid_utf8_is_reported_on_first_access(write_file: Callable[..., Path], first_op: str) -> None:
    """It warns on the first access that decodes invalid bytes, not one access later."""
    h = FileHandle(write_file("bad.txt", b"bad \xff\xfe bytes\n"))
    with pytest.warns(UserWarning, match="invalid UTF-8"):
        {"peek": lambda: h.peek(100), "len": lambda: len(h), "grep": lambda: h.grep("bytes")}[first_op]()


def test_probe_reports_replaced_bytes(write_file: Callable[..., Path]) -> None:
    """It says the encoding is UTF-8 with invalid bytes replaced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        probe = probe_path(write_file("bad.txt", b"hello \xff world\n"))
    assert "invalid" in probe.encoding


# ----------------------------------------------------------------------------- lazy


def _loader(text: str, calls: list[str]) -> Callable[[], str]:
    def load() -> str:
        calls.append(text)
        return text

    return load


def test_lazy_handle_loads_on_first_use_only_once() -> None:
    """It calls the loader on first use, not at creation, and once for many accesses."""
    calls: list[str] = []
    cache = LazyCache()
    h = LazyHandle(_loader("lazy text\nsecond line\n", calls), name="lz", cache=cache)
    assert calls == [] and h not in cache
    assert len(h) == 22 and h[0:4] == "lazy" and h.n_lines == 2
    h.grep("line")
    h.peek(3)
    h.chunk(0)
    assert calls == ["lazy text\nsecond line\n"] and cache.loads == 1 and h in cache
    assert h.kind == "lazy"


def test_lazy_cache_evicts_least_recently_used_under_budget() -> None:
    """It keeps loaded texts under the byte budget, evicting the least recently used first."""
    cache = LazyCache(budget_bytes=100)
    calls: list[str] = []
    a, b, c = (LazyHandle(_loader(ch * 40, calls), name=ch, cache=cache) for ch in "abc")
    len(a), len(b)
    assert a in cache and b in cache and cache.used == 80
    len(c)  # 120 > 100: the oldest, a, goes
    assert a not in cache and b in cache and c in cache and cache.used == 80
    b[0:1]  # b becomes the most recent
    assert a[0:3] == "aaa"  # reloaded: now c is the least recent and goes
    assert calls == ["a" * 40, "b" * 40, "c" * 40, "a" * 40]
    assert c not in cache and b in cache and a in cache
    assert cache.used <= cache.budget and cache.loads == 4


def test_lazy_cache_keeps_one_item_larger_than_the_budget() -> None:
    """It keeps the one text in use even when it alone exceeds the budget."""
    cache = LazyCache(budget_bytes=10)
    h = LazyHandle(lambda: "x" * 50, cache=cache)
    assert len(h) == 50 and h in cache and h[49] == "x"
    assert cache.loads == 1


def test_lazy_loader_must_return_str() -> None:
    """It raises a ContextError naming the handle when the loader returns something else."""
    h = LazyHandle(lambda: b"bytes", name="wrong", cache=LazyCache())  # type: ignore[arg-type,return-value]
    with pytest.raises(ContextError, match="wrong"):
        len(h)


def test_lazy_handles_sharing_a_cache_do_not_mix() -> None:
    """It keeps each handle's own text when several share one cache."""
    cache = LazyCache()
    h1 = LazyHandle(lambda: "one", cache=cache)
    h2 = LazyHandle(lambda: "two", cache=cache)
    assert (h1[:], h2[:], h1[:]) == ("one", "two", "one")
    assert cache.loads == 2
