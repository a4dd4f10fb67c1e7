"""grep: RE2 on bytes, 1-based line numbers, context lines, limits, clear errors."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from _timing import SLACK_S

from rlm_runtime.context import FileHandle, GrepResult, TextHandle
from rlm_runtime.errors import ContextError

WORDS = ("foo", "bar", "Foo", "BAZ", "baz", "école", "ÉCOLE", "😀", "needle", "x1", "a.b", "")


def _random_lines(seed: int, n: int = 1500) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 6))) for _ in range(n)]


def _ref(lines: list[str], pattern: str, flags: int = 0) -> list[tuple[int, str]]:
    return [(i + 1, line) for i, line in enumerate(lines) if re.search(pattern, line, flags)]


PATTERNS = ["needle", "^foo", "baz$", r"fo+ ba", "^$", "x*", "école", "😀 x1", r"\bBAZ\b", r"a\.b", "o", "[0-9]", r"^\S+$", "needle.*needle"]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("trailing_newline", [False, True])
def test_grep_matches_python_re_reference(seed: int, trailing_newline: bool, write_file: Callable[..., Path]) -> None:
    """It reports exactly the lines Python's re finds, with the same 1-based numbers, on text and file handles."""
    lines = _random_lines(seed)
    text = "\n".join(lines) + ("\n" if trailing_newline else "")
    for handle in (TextHandle(text), FileHandle(write_file(f"g{seed}.txt", text))):
        for pattern in PATTERNS:
            got = [(m.line_no, m.line) for m in handle.grep(pattern, max_matches=10_000)]
            assert got == _ref(lines, pattern), pattern
            assert handle.count(pattern) == len(got), pattern


@pytest.mark.parametrize("seed", range(2))
def test_grep_ignore_case_matches_python_re_reference(seed: int) -> None:
    """It folds case like re.IGNORECASE, non-ASCII letters included (école / ÉCOLE)."""
    lines = _random_lines(seed)
    handle = TextHandle("\n".join(lines))
    for pattern in ["foo", "baz", "école", "ÉCOLE", "^needle", "BAZ$"]:
        got = [(m.line_no, m.line) for m in handle.grep(pattern, max_matches=10_000, ignore_case=True)]
        assert got == _ref(lines, pattern, re.IGNORECASE), pattern
        assert handle.count(pattern, ignore_case=True) == len(got)
    inline = [(m.line_no, m.line) for m in handle.grep("(?i)ÉCOLE", max_matches=10_000)]
    assert inline == _ref(lines, "école", re.IGNORECASE)


def test_grep_line_numbers_across_index_blocks() -> None:
    """It numbers lines correctly far into a multi-block text (line_of via the sparse index)."""
    lines = [f"line {i} é€ {'needle' if i % 997 == 0 else 'hay'}" for i in range(1, 40_001)]
    handle = TextHandle("\n".join(lines) + "\n")
    assert handle.n_bytes > 10 * 64 * 1024
    got = handle.grep("needle", max_matches=1000)
    assert [m.line_no for m in got] == [i for i in range(1, 40_001) if i % 997 == 0]
    assert all(m.line == lines[m.line_no - 1] for m in got)


def test_match_prints_as_line_number_and_text() -> None:
    """It prints a match as 'N: text', one per line, and no matches as a clear sentence."""
    h = TextHandle("alpha\nbeta needle\ngamma\nneedle again\n")
    res = h.grep("needle")
    assert isinstance(res, GrepResult) and isinstance(res, list)
    assert [str(m) for m in res] == ["2: beta needle", "4: needle again"]
    assert repr(res) == "2: beta needle\n4: needle again"
    assert res[0].to_dict() == {"doc": None, "line_no": 2, "line": "beta needle", "before": [], "after": []}
    empty = h.grep("zzz")
    assert len(empty) == 0 and empty.complete and "no lines match" in repr(empty)


def test_context_lines_surround_the_match() -> None:
    """It adds context_lines before and after, marked 'N- text', clipped at both ends of the text."""
    lines = [f"l{i}" for i in range(1, 11)]
    h = TextHandle("\n".join(lines))
    (m,) = h.grep("^l5$", context_lines=2)
    assert (m.before, m.line, m.after) == (["l3", "l4"], "l5", ["l6", "l7"])
    assert repr(m) == "3- l3\n4- l4\n5: l5\n6- l6\n7- l7"
    (first,) = h.grep("^l1$", context_lines=3)
    assert first.before == [] and first.after == ["l2", "l3", "l4"]
    (last,) = h.grep("^l10$", context_lines=3)
    assert last.before == ["l7", "l8", "l9"] and last.after == []
    assert repr(last).splitlines()[0] == "7- l7"


def test_context_lines_are_capped_and_never_negative() -> None:
    """It caps context_lines at 50 and treats a negative value as 0."""
    h = TextHandle("\n".join(f"l{i}" for i in range(1, 201)))
    (m,) = h.grep("^l100$", context_lines=500)
    assert len(m.before) == 50 and len(m.after) == 50
    (m,) = h.grep("^l100$", context_lines=-4)
    assert m.before == [] and m.after == []


def test_max_matches_and_complete() -> None:
    """It stops after max_matches lines and says so (complete=False); exactly max_matches is complete."""
    h = TextHandle("\n".join("hit" if i % 2 else "miss" for i in range(100)))
    res = h.grep("hit", max_matches=10)
    assert len(res) == 10 and not res.complete
    assert "stopped after 10" in repr(res)
    exact = h.grep("hit", max_matches=50)
    assert len(exact) == 50 and exact.complete
    assert "stopped" not in repr(exact)
    with pytest.raises(ContextError, match="max_matches"):
        h.grep("hit", max_matches=0)


def test_one_entry_per_line_even_with_several_matches() -> None:
    """It lists a line once however many times the pattern matches in it."""
    h = TextHandle("a a a\nb\na\n")
    assert [m.line_no for m in h.grep("a")] == [1, 3]
    assert h.count("a") == 2


def test_anchors_match_at_every_line() -> None:
    """It anchors ^ and $ at line starts and ends, not only at the text's ends."""
    h = TextHandle("start mid end\nend start\nstart\n")
    assert [m.line_no for m in h.grep("^start")] == [1, 3]
    assert [m.line_no for m in h.grep("end$")] == [1]
    assert [m.line_no for m in h.grep("^start$")] == [3]
    assert [m.line_no for m in h.grep(r"\Aend")] == []  # \A is the text start only


def test_a_match_never_spans_lines() -> None:
    """It never matches across a newline (grep semantics), even with .* or [^x]."""
    h = TextHandle("foo\nbar\n")
    assert list(h.grep("foo.*bar")) == []
    assert list(h.grep("foo[^x]bar")) == []
    assert list(h.grep(r"foo\sbar")) == []


def test_empty_lines_without_final_newline() -> None:
    """It finds empty lines with ^$ when the text does not end with a newline."""
    lines = ["a", "", "b", "", "c"]
    assert [m.line_no for m in TextHandle("\n".join(lines)).grep("^$")] == [2, 4]


def test_match_at_the_last_line_without_newline() -> None:
    """It finds a match on a final line that has no newline."""
    h = TextHandle("a\nb\nlast needle")
    (m,) = h.grep("needle")
    assert (m.line_no, m.line) == (3, "last needle")


@pytest.mark.parametrize(
    ("pattern", "feature"),
    [
        (r"(a)\1", "backreference"),
        (r"(?P<w>a)(?P=w)", "backreference"),
        (r"foo(?=bar)", "lookahead"),
        (r"foo(?!bar)", "lookahead"),
        (r"(?<=foo)bar", "lookbehind"),
        (r"(?<!foo)bar", "lookbehind"),
        (r"(?>ab)", "atomic"),
        (r"a++", "possessive"),
        (r"end\Z", r"\Z"),
    ],
)
def test_unsupported_re2_features_get_an_error_naming_them(pattern: str, feature: str) -> None:
    """It refuses a pattern RE2 cannot run with a ContextError that names the feature and RE2."""
    h = TextHandle("abc\n")
    with pytest.raises(ContextError) as info:
        h.grep(pattern)
    message = str(info.value)
    assert feature in message and "RE2" in message


@pytest.mark.parametrize("pattern", ["(", "a{2,1}", "[z-a]", "*a", "a)"])
def test_invalid_pattern_is_a_context_error(pattern: str) -> None:
    """It turns an invalid pattern into a ContextError quoting the pattern."""
    with pytest.raises(ContextError, match="invalid grep pattern"):
        TextHandle("abc").grep(pattern)


def test_invalid_pattern_error_does_not_show_internal_prefix() -> None:
    """It quotes only the user's pattern in the RE2 error detail."""
    with pytest.raises(ContextError) as info:
        TextHandle("abc").grep("(")
    assert "(?m)" not in str(info.value)


def test_bad_pattern_arguments() -> None:
    """It refuses an empty, non-str or oversized pattern with a ContextError."""
    h = TextHandle("abc")
    for bad in ["", b"abc", 3, "a" * 5000]:
        with pytest.raises(ContextError):
            h.grep(bad)  # type: ignore[arg-type]


def test_bad_pattern_fails_before_scanning_and_is_not_counted() -> None:
    """It raises on a bad pattern without recording a grep access."""
    h = TextHandle("abc")
    with pytest.raises(ContextError):
        h.grep("(a)\\1")
    assert h.stats.greps == 0


def test_pattern_is_not_catastrophic() -> None:
    """It runs a pattern that makes a backtracking engine explode in linear time."""
    import time

    h = TextHandle("a" * 30_000 + "!\n")
    start = time.perf_counter()
    assert list(h.grep("(a+)+$")) == []
    assert list(h.grep("(a|aa)*b")) == []
    assert time.perf_counter() - start < 1.0 + SLACK_S  # a backtracking engine would not finish at all


def test_invalid_utf8_lines_are_decoded_with_replacement(write_file: Callable[..., Path]) -> None:
    """It still greps a file with invalid UTF-8, decoding the matched line with U+FFFD."""
    with pytest.warns(UserWarning):
        h = FileHandle(write_file("bad.txt", b"ok\nbad \xff\xfe needle\n"))
        (m,) = h.grep("needle")
        len(h)
    assert m.line_no == 2 and m.line == "bad \ufffd\ufffd needle"


# ------------------------------------------------ empty matches, CRLF anchors


@pytest.mark.parametrize("pattern", ["^", "x*", "^$", "$"])
def test_empty_matching_pattern_has_no_phantom_line_after_final_newline(pattern: str) -> None:
    """It matches each real line once and no line after the final newline."""
    h = TextHandle("a\nb\n")
    assert [m.line_no for m in h.grep(pattern)] == _ref_numbers(["a", "b"], pattern)
    assert h.count(pattern) == len(_ref_numbers(["a", "b"], pattern))


def _ref_numbers(lines: list[str], pattern: str) -> list[int]:
    return [n for n, _ in _ref(lines, pattern)]


def test_empty_matching_pattern_on_empty_context() -> None:
    """It returns no matches (not an IndexError) on an empty context."""
    h = TextHandle("")
    assert list(h.grep("^")) == []
    assert h.count("^") == 0


def test_dollar_anchor_on_crlf_lines(write_file: Callable[..., Path]) -> None:
    """It matches 'bar$' on CRLF lines ending in bar, as on the lines the handle returns."""
    h = FileHandle(write_file("crlf.txt", "foo bar\r\nbar none\r\nbar\r\n"))
    assert [m.line for m in h.grep("bar$")] == ["foo bar", "bar"]


# ---------------------------------------------------------------- hints for an empty result

HINT_TEXT = "Staff note: Casey reports to Quinn.\nFacilities note: Quinn works in room 589.\nwork, work, work\n"


def test_an_empty_result_says_when_ignoring_case_would_match() -> None:
    """It shows how many lines match ignoring case, and the call that finds them."""
    hint = repr(TextHandle(HINT_TEXT).grep("casey reports"))
    assert "but 1 line match it ignoring case" in hint and "grep('casey reports', ignore_case=True)" in hint


def test_an_empty_phrase_result_names_the_words_that_match_alone() -> None:
    """It counts the phrase's words alone (names first) and suggests the rarest."""
    hint = repr(TextHandle(HINT_TEXT).grep("Casey reports to work"))
    assert "'Casey' 1 line, 'reports' 1 line, 'work' 2 lines" in hint
    assert "Try grep('Casey', ignore_case=True)" in hint


@pytest.mark.parametrize("pattern", ["zebra", "zebra unicorn", r"Casey [a-z]+ work", r"Quinn\d{2} nowhere"])
def test_an_empty_result_suggests_nothing_that_would_not_match(pattern: str) -> None:
    """It denies suggestions for one-word patterns, regexes beyond words and glue, and words that match nothing."""
    hint = repr(TextHandle(HINT_TEXT).grep(pattern))
    assert hint == f"(no lines match /{pattern}/; try fewer or other words)"


def test_a_hint_is_computed_only_when_shown() -> None:
    """It denies scanning again for a hint until the empty result is printed."""
    calls: list[str] = []
    result = GrepResult([], "Casey reports", True, prober=lambda p: calls.append(p) or 0)
    assert calls == []
    repr(result)
    assert calls == ["Casey reports", "Caseyreports", "Casey", "reports"]


def test_a_printed_result_ends_with_how_many_lines_match() -> None:
    """It ends a listing of five or more lines, and one cut at max_matches, with the total."""
    from rlm_runtime.context import open_context

    h = open_context("\n".join(f"row {i} {'billing' if i % 3 == 0 else 'refund'}" for i in range(90)), as_text=True)
    shown = repr(h.grep("billing"))
    assert shown.endswith("(30 lines match /billing/ in all)") and shown.count("\n") == 30
    assert repr(h.grep("row 1 ")).startswith("2: row 1 refund") and "in all" not in repr(h.grep("row 1 "))
    cut = repr(h.grep("billing", max_matches=4))
    assert cut.endswith("(stopped after 4 of 30 matching lines; raise max_matches or narrow the pattern. 30 lines match in all)")


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("max_matches", [5, 100_000])
def test_tally_counts_each_captured_text_over_the_whole_text(seed: int, max_matches: int) -> None:
    """It tallies every matching line of the text (not only those kept), by the first group or
    the whole match, most common first, as the Counter of Python's re over the same lines."""
    from collections import Counter

    rng = random.Random(seed)
    rows = [f"Item {i} | kind={rng.choice(['ab', 'cd', 'éf', 'cd'])} | {rng.choice(WORDS)}" if rng.random() < 0.4
            else " ".join(rng.choice(WORDS) for _ in range(4)) for i in range(3000)]
    h = TextHandle("\n".join(rows))
    for pattern, group in ((r"kind=(\S+)", 1), (r"kind=[ac]", 0), (r"(x1)|needle", 1)):
        ref = Counter((m.group(group) or "") for line in rows if (m := re.search(pattern, line)))
        got = h.grep(pattern, max_matches=max_matches).tally()
        assert got == dict(ref) and list(got.values()) == sorted(got.values(), reverse=True), pattern
    assert h.grep(r"KIND=(\S+)", ignore_case=True, max_matches=max_matches).tally() == h.grep(r"kind=(\S+)").tally()
    assert h.grep("no such words").tally() == {}


def test_tally_over_a_corpus_sums_its_documents() -> None:
    """It tallies across every document searched, past max_matches too."""
    from rlm_runtime.context import CorpusHandle

    corpus = CorpusHandle.from_items(["k=a\nk=b\nk=a\n", "k=a\nprose\n"])
    assert corpus.grep(r"k=(\w)", max_matches=1).tally() == corpus.grep(r"k=(\w)").tally() == {"a": 3, "b": 1}


def test_a_result_answers_string_methods_as_its_printed_text() -> None:
    """It answers the str methods small models call on it (split, strip, splitlines) as the text
    it prints, keeps list's own count and index, and names an unknown attribute."""
    h = TextHandle("one\nthe code is K-7\nthree\n")
    hits = h.grep("code")
    assert hits.split(":")[0] == "2" and hits.strip() == "2: the code is K-7" and hits.splitlines() == ["2: the code is K-7"]
    assert hits.count() == 1 and hits.index(hits[0]) == 0 and hits.lines() == ["2: the code is K-7"]
    with pytest.raises(AttributeError, match="no attribute 'tokens'"):
        hits.tokens  # noqa: B018


@pytest.mark.parametrize("pattern", [r"Casey\s+reports\s+nowhere", r"Casey.*nowhere", r"\bCasey\b (reports) nowhere",
                                     r"Casey\s+is\s+boss|Casey\s+leads", r"Casey: (\w+)"])
def test_words_joined_by_regex_glue_are_counted_alone(pattern: str) -> None:
    """It reads the words of a phrase a model wrote as a regex (\\s+, .*, \\b, a group) and suggests the rarest that occurs."""
    hint = repr(TextHandle(HINT_TEXT).grep(pattern))
    assert "single words of it do" in hint and "Try grep('Casey', ignore_case=True)" in hint


def test_an_empty_result_suggests_a_pattern_as_data() -> None:
    """It gives, for an empty grep, the pattern that would match ignoring case (the same, or its rarest word), as data."""
    from rlm_runtime.context import open_context

    handle = open_context("Run the tests before you merge.\nMerge often.\nThe tests pass.\n")
    assert handle.grep("run the tests").suggestion() == "run the tests"
    assert handle.grep("before merging", ignore_case=True).suggestion() == "before"
    assert handle.grep("qqq zzz").suggestion() is None
    assert handle.grep("tests").suggestion() is None  # it found lines: nothing to suggest


def test_a_phrase_whose_words_are_written_together_is_suggested_joined() -> None:
    """It suggests a phrase's words written together when they are (an identifier spelled as
    words: "kiln room" for KilnRoom), before any single word, and only when they match."""
    handle = TextHandle("kiln: KilnRoom\nkiln_room = 3\nroom: the kiln room door\n")
    hint = repr(handle.grep("kiln  ROOM  door"))
    assert "its words written together do" not in hint  # 'kilnroomdoor' is nowhere
    empty = handle.grep("Kiln Rooms")
    assert empty.suggestion() is not None and "written together" not in repr(empty)
    joined = TextHandle("kiln: KilnRoom\nwall: KilnRoomWall\n").grep("kiln room")
    assert joined.suggestion() == "kilnroom" and "its words written together do, ignoring case: 'kilnroom' 2 lines" in repr(joined)
