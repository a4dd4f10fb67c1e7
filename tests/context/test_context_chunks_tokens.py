"""chunk navigation, token counts, peek, get_full and access statistics."""

from __future__ import annotations

import random
import warnings

import pytest

from rlm_runtime.context import Chunk, TextHandle
from rlm_runtime.context import tokens as tokens_module
from rlm_runtime.context.protocol import ACCESS_LOG_SIZE
from rlm_runtime.errors import ContextError

VOCAB = ("the quick brown fox jumps over lazy dog lorem ipsum dolor sit amet café naïve élan "
         "東京 日本語 😀 def return None 12345 3.14159 {x} [y] == != -> :: über").split()


def _prose(seed: int, n_lines: int) -> str:
    rng = random.Random(seed)
    return "\n".join(" ".join(rng.choice(VOCAB) for _ in range(rng.randint(0, 25))) for _ in range(n_lines))


def _encoding():
    enc = tokens_module.encoding()
    if enc is None:
        pytest.skip("no tiktoken encoding available offline")
    return enc


# ------------------------------------------------------------------------- chunks


def test_line_chunks_navigate_and_cover_the_text() -> None:
    """It pages by lines with total/prev/next, and the chunks rebuild the text's lines."""
    text = "\n".join(f"line {i}" for i in range(1, 26))
    h = TextHandle(text)
    assert h.n_chunks(10, "lines") == 3
    first, middle, last = h.chunk(0, 10), h.chunk(1, 10), h.chunk(2, 10)
    assert isinstance(first, Chunk) and isinstance(first, str)
    assert (first.index, first.total, first.prev, first.next) == (0, 3, None, 1)
    assert (middle.prev, middle.next) == (0, 2)
    assert (last.prev, last.next) == (1, None)
    assert first.splitlines() == [f"line {i}" for i in range(1, 11)]
    assert last.splitlines() == [f"line {i}" for i in range(21, 26)]
    assert "\n".join(h.chunks(10)) == text
    assert first.nav == "[chunk 0 of 3 (0-based), 10 lines each; prev=None next=1]"
    assert repr(first) == first.nav + "\n" + str.__str__(first)


def test_char_chunks_navigate_and_cover_the_text() -> None:
    """It pages by characters (multi-byte safe), and the chunks concatenate to the text."""
    text = _prose(1, 300)
    h = TextHandle(text)
    chunks = list(h.chunks(777, "chars"))
    assert len(chunks) == -(-len(text) // 777) == chunks[0].total
    assert "".join(chunks) == text
    assert all(len(c) == 777 for c in chunks[:-1])
    assert chunks[-1].next is None and chunks[0].prev is None and chunks[1].prev == 0
    assert all(c.unit == "chars" and c.size == 777 for c in chunks)


def test_token_chunks_are_about_size_tokens_and_cover_the_text() -> None:
    """It pages by (approximate) tokens: chunks concatenate to the text and hold roughly size tokens."""
    enc = _encoding()
    text = _prose(2, 400)
    h = TextHandle(text)
    chunks = list(h.chunks(300, "tokens"))
    assert "".join(chunks) == text
    assert chunks[0].total == len(chunks) == h.n_chunks(300, "tokens")
    total_tokens = len(enc.encode(text))
    assert len(chunks) == pytest.approx(total_tokens / 300, abs=2)
    for c in chunks[:-1]:
        assert 0.6 * 300 <= len(enc.encode(str(c))) <= 1.4 * 300


def test_default_chunk_sizes() -> None:
    """It uses 200 lines, 8000 characters and 2000 tokens when no size is given."""
    h = TextHandle("x\n" * 1000)
    assert h.chunk(0).size == 200 and h.chunk(0).total == 5
    assert h.chunk(0, unit="chars").size == 8000
    assert h.chunk(0, unit="tokens").size == 2000


@pytest.mark.parametrize("unit", ["lines", "chars", "tokens"])
def test_chunk_index_out_of_range(unit: str) -> None:
    """It refuses an index past the end, or negative, with a ContextError giving the count."""
    h = TextHandle("a\nb\nc\nd\n")
    total = h.n_chunks(2, unit)
    assert h.chunk(total - 1, 2, unit).next is None
    with pytest.raises(ContextError, match="out of range"):
        h.chunk(total, 2, unit)
    with pytest.raises(ContextError, match="out of range"):
        h.chunk(-1, 2, unit)


def test_chunk_bad_unit_and_size() -> None:
    """It refuses an unknown unit and a size below 1."""
    h = TextHandle("abc")
    with pytest.raises(ContextError, match="unit"):
        h.chunk(0, 10, "words")
    with pytest.raises(ContextError, match="size"):
        h.chunk(0, 0)


def test_chunk_of_empty_context() -> None:
    """It gives one empty chunk for an empty context, with no neighbours."""
    c = TextHandle("").chunk(0)
    assert c == "" and c.total == 1 and c.prev is None and c.next is None


# ------------------------------------------------------------------------- tokens


def test_n_tokens_is_exact_for_small_text() -> None:
    """It counts tokens exactly with tiktoken below the exact limit."""
    enc = _encoding()
    text = _prose(3, 2000)
    count = TextHandle(text).n_tokens
    assert count.exact and count.error_bound == 0
    assert count.value == len(enc.encode(text)) == int(count)
    assert "exact" in repr(count)
    assert count.to_dict()["value"] == count.value


def test_n_tokens_is_cached() -> None:
    """It computes the token count once per handle."""
    h = TextHandle("hello world")
    assert h.n_tokens is h.n_tokens


def test_n_tokens_of_huge_text_is_an_estimate_within_its_bound() -> None:
    """It estimates a >2 MB text from samples, and the true tiktoken count lies within the stated bound."""
    enc = _encoding()
    rng = random.Random(9)
    # Sections of different kinds so that the samples disagree: prose, numbers, CJK.
    parts = []
    for k in range(30):
        if k % 3 == 0:
            parts.append(_prose(k, 1200))
        elif k % 3 == 1:
            parts.append("\n".join(str(rng.random()) for _ in range(3000)))
        else:
            parts.append("中文字符测试，东京日本語。" * 2500)
    text = "\n".join(parts)
    assert len(text.encode("utf-8")) > tokens_module.EXACT_LIMIT_BYTES
    count = TextHandle(text).n_tokens
    assert not count.exact and count.error_bound > 0
    true = len(enc.encode(text, disallowed_special=()))
    assert abs(true - count.value) <= count.error_bound, (true, count)
    assert count.error_bound < 0.1 * true  # an informative bound, not a shrug
    assert "+/-" in repr(count)


def test_token_count_with_special_token_text() -> None:
    """It counts text that contains special-token strings instead of raising."""
    assert TextHandle("before <|endoftext|> after").n_tokens.value > 0


# ---------------------------------------------------------------------- peek, full


def test_peek_returns_the_start_and_a_size_hint() -> None:
    """It returns the first n characters and a line saying how much is left."""
    h = TextHandle("héllo wörld\n" * 100)
    p = h.peek(5)
    assert p.startswith("héllo\n... [")
    assert f"of {h.n_bytes}" in p and "tokens" in p
    assert repr(p) == str(p)  # echoes as text at the REPL
    assert h.peek(10_000) == "héllo wörld\n" * 100  # all of it: no hint
    assert h.peek(0).startswith("\n... [")


def test_peek_counts_characters_not_bytes() -> None:
    """It cuts after n characters of multi-byte text."""
    h = TextHandle("😀😀😀😀 tail")
    assert h.peek(3).split("\n")[0] == "😀😀😀"


def test_get_full_warns_above_one_megabyte() -> None:
    """It returns the whole text, warning only when it is larger than 1 MB."""
    big_text = "x" * 1_000_001
    with pytest.warns(UserWarning, match="get_full"):
        assert TextHandle(big_text).get_full() == big_text
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert TextHandle("small").get_full() == "small"


# -------------------------------------------------------------------------- stats


def test_access_stats_count_every_kind_of_access() -> None:
    """It counts peeks, greps, chunks, slices, lines and full loads, and the characters handed out."""
    h = TextHandle("alpha\nbeta\ngamma\n")
    h.peek(3)
    h.grep("a")
    h.count("a")
    h.chunk(0, 1)
    h[0:4]
    h.lines(1, 2)
    h.get_full()
    s = h.stats
    assert (s.peeks, s.greps, s.chunks, s.slices, s.lines, s.full_loads) == (1, 2, 1, 1, 1, 1)
    assert s.chars_returned > 0
    ops = [op for _, op, _ in s.log]
    assert ops == ["peeks", "greps", "greps", "chunks", "slices", "lines", "full_loads"]
    assert s.load_to_peek_ratio == pytest.approx(1 / 6)
    d = s.to_dict()
    assert d["full_loads"] == 1 and len(d["log"]) == 7 and d["log"][0]["op"] == "peeks"


def test_load_to_peek_ratio_without_probes() -> None:
    """It is 0 with no access, and counts full loads when nothing else was done."""
    h = TextHandle("abc")
    assert h.stats.load_to_peek_ratio == 0
    h.get_full()
    assert h.stats.load_to_peek_ratio == 1.0


def test_access_log_is_bounded() -> None:
    """It keeps only the last 256 accesses in the log while the counters keep counting."""
    h = TextHandle("abc\n")
    for i in range(ACCESS_LOG_SIZE + 44):
        h.peek(i % 3)
    assert ACCESS_LOG_SIZE == 256
    assert h.stats.peeks == 300
    assert len(h.stats.log) == 256
    assert h.stats.log[-1][2] == str(299 % 3)
