"""Line-oriented regex search over a TextBuffer with RE2 (linear time, on bytes, no copy).

A pattern RE2 cannot run (a backreference, a lookaround) gets a ContextError naming the
feature; there is no fallback to a backtracking engine, because a backtracking engine on a
hostile pattern and a 1 GB context is a denial of service.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import re2

from rlm_runtime.context.buffer import TextBuffer
from rlm_runtime.errors import ContextError

_UNSUPPORTED = (
    (re.compile(r"\\[1-9]|\(\?P=|\\k<"), "backreferences"),
    (re.compile(r"\(\?<?[=!]"), "lookahead and lookbehind assertions"),
    (re.compile(r"\(\?>"), "atomic groups"),
    (re.compile(r"[*+?}]\+"), "possessive quantifiers"),
    (re.compile(r"\(\?\("), "conditional groups"),
    (re.compile(r"\\[GZ]"), "the \\G and \\Z anchors (use \\z or $)"),
)
_MAX_PATTERN = 4096


class GrepMatch(str):
    """One matching line: its 1-based number, its text, and surrounding lines if asked.

    It is also the text it prints (``"12: the line"``, with the context lines around it when
    asked), so the string methods small models reach for (``hit.split(": ")``, ``"x" in
    hit``, ``re.search(p, hit)``) work on it; ``line`` is the line alone.
    """

    line_no: int
    line: str
    before: list[str]
    after: list[str]
    doc: str | None

    def __new__(cls, line_no: int, line: str, before: list[str], after: list[str], doc: str | None = None) -> GrepMatch:
        self = super().__new__(cls, _render(line_no, line, before, after, doc))
        self.line_no = line_no
        self.line = line
        self.before = before
        self.after = after
        self.doc = doc
        return self

    def __getnewargs__(self) -> tuple[Any, ...]:  # type: ignore[override]
        return (self.line_no, self.line, self.before, self.after, self.doc)

    def __repr__(self) -> str:
        return str.__str__(self)

    def __str__(self) -> str:
        return str.__str__(self)

    def to_dict(self) -> dict[str, object]:
        return {"doc": self.doc, "line_no": self.line_no, "line": self.line, "before": self.before, "after": self.after}

    # The names small models give these fields: grep's results print as "line_number: line",
    # and hits[0].line_number was the error they made most often.
    @property
    def line_number(self) -> int:
        return self.line_no

    lineno = line_number

    @property
    def text(self) -> str:
        return self.line

    def __getattr__(self, name: str) -> Any:
        # Called only for names neither str nor a match has: say what a match has.
        raise AttributeError(f"a grep match has no attribute {name!r}: it has .line_no (its line number), .line (its "
                             f"text), .before and .after (the lines around it, with context_lines=), and str's methods")


def _render(line_no: int, line: str, before: list[str], after: list[str], doc: str | None) -> str:
    prefix = f"{doc}:" if doc else ""
    if not before and not after:
        return f"{prefix}{line_no}: {line}"
    rows = [f"{prefix}{line_no - len(before) + k}- {t}" for k, t in enumerate(before)]
    rows.append(f"{prefix}{line_no}: {line}")
    rows += [f"{prefix}{line_no + 1 + k}- {t}" for k, t in enumerate(after)]
    return "\n".join(rows)


#: A printed result of at least this many lines ends with their number.
_SUMMED_FROM = 5


#: str methods a grep result answers as the text it prints (none that a list has: count, index).
_TEXT_METHODS = frozenset({"split", "rsplit", "splitlines", "strip", "lstrip", "rstrip", "lower", "upper", "find",
                           "rfind", "startswith", "endswith", "partition", "rpartition", "replace"})


class GrepResult(list[GrepMatch]):
    """The matches, in order. ``complete`` is False when ``max_matches`` stopped the scan."""

    def __init__(self, matches: list[GrepMatch], pattern: str, complete: bool,
                 counter: Callable[[], int] | None = None, prober: Callable[[str], int] | None = None,
                 ignore_case: bool = False, tallier: Callable[[], dict[str, int]] | None = None) -> None:
        super().__init__(matches)
        self.pattern = pattern
        self.complete = complete
        self._counter = counter
        self._tallier = tallier  # tallies the whole context; None: the matches kept are all there are
        self._prober = prober  # counts the lines a pattern matches ignoring case: hints for an empty result
        self._ignore_case = ignore_case

    def __getitem__(self, index: Any) -> Any:
        if not self and isinstance(index, int):
            # hits[0] of an empty result: say why there is nothing, not just "index out of range"
            raise IndexError(f"grep found no lines, so there is no [{index}]: {self._empty_hint()}")
        return super().__getitem__(index)

    def count(self, *value: object) -> int:  # type: ignore[override]
        """With no argument: how many lines of the whole context match (not only those
        kept under max_matches). With an argument: list.count."""
        if value:
            return super().count(*value)  # type: ignore[arg-type]
        if self.complete or self._counter is None:
            return len(self)
        return self._counter()

    def lines(self) -> list[str]:
        """The matches as the plain strings they print (``"12: the line"``)."""
        return [str(m) for m in self]

    def tally(self) -> dict[str, int]:
        """How many matching lines of the whole context (not only those kept under
        max_matches) capture each different text in the pattern's first group ``(...)``, or
        match each different text when it has no group: most common first."""
        if self._tallier is not None:
            return self._tallier()
        regex = compile_pattern(self.pattern, self._ignore_case)
        counts: Counter[str] = Counter()
        for m in self:
            found = regex.search(str.encode(m.line, "utf-8", "replace"))
            if found is not None:
                counts[_captured(found, regex.groups)] += 1
        return dict(counts.most_common())

    def __repr__(self) -> str:
        if not self:
            return self._empty_hint()
        body = "\n".join(repr(m) for m in self)
        if not self.complete:
            total = self.count()
            of = f" of {total}" if total > len(self) else ""
            return body + (f"\n... (stopped after {len(self)}{of} matching lines; raise max_matches or narrow the pattern. "
                           f"{total} lines match in all)")
        if len(self) >= _SUMMED_FROM:
            # The total at the end: a long listing is cut in the middle when shown to a model,
            # and small models answer "how many" with the last line number they saw.
            return body + f"\n({len(self)} lines match /{self.pattern}/ in all)"
        return body

    __str__ = __repr__

    def __getattr__(self, name: str) -> Any:
        # Called only for names a list lacks: the string methods small models call on a grep
        # result as on the text it prints (grep(...).split(":"), .strip(), .splitlines()).
        if name in _TEXT_METHODS:
            return getattr(str(self), name)
        raise AttributeError(f"'GrepResult' object has no attribute {name!r}")

    def suggestion(self) -> str | None:
        """For an empty result, the pattern that would match, ignoring case: the same one
        (when only case stopped it), its words written together (``TableName`` for "table
        name"), or the rarest of its words that occurs; None when there is none (or nothing to
        count with). Counted over the whole context once, then kept."""
        if self or self._prober is None:
            return None
        if not hasattr(self, "_suggested"):
            self._hint_counts: list[tuple[int, str]] = []
            self._suggested: str | None = None
            words = _hint_words(self.pattern, most=_JOINED_MOST, ordered=True)
            joined = "".join(words) if len(words) >= 2 else ""
            if not self._ignore_case and (n := self._prober(self.pattern)):
                self._hint_counts = [(n, self.pattern)]
                self._suggested = self.pattern
            elif joined and (n := self._prober(re2_escape(joined))):
                self._hint_counts = [(n, joined)]
                self._suggested = self._joined = joined
            else:
                self._hint_counts = [(n, w) for w in _hint_words(self.pattern) if (n := self._prober(re2_escape(w)))]
                self._suggested = min(self._hint_counts)[1] if self._hint_counts else None
        return self._suggested

    def _empty_hint(self) -> str:
        """Why nothing matched, and what would: a nudge for small models, which tend to grep
        for a whole phrase from the question, case and all. Computed only when shown."""
        if self._prober is None:
            return f"(no lines match /{self.pattern}/; try fewer or other words, or ignore_case=True)"
        suggested = self.suggestion()
        if suggested is None:
            return f"(no lines match /{self.pattern}/; try fewer or other words)"
        if suggested == self.pattern and not self._ignore_case:
            n = self._hint_counts[0][0]
            return (f"(no lines match /{self.pattern}/ as written, but {n} line{'s' if n != 1 else ''} match it ignoring case: "
                    f"use grep({self.pattern!r}, ignore_case=True))")
        if suggested == getattr(self, "_joined", None):
            n = self._hint_counts[0][0]
            return (f"(no lines match /{self.pattern}/; its words written together do, ignoring case: {suggested!r} {n} "
                    f"line{'s' if n != 1 else ''}. Try grep({suggested!r}, ignore_case=True))")
        counts = ", ".join(f"{w!r} {n} line{'s' if n != 1 else ''}" for n, w in self._hint_counts)
        return (f"(no lines match /{self.pattern}/; single words of it do, ignoring case: {counts}. "
                f"Try grep({suggested!r}, ignore_case=True))")


_WORD = re.compile(r"[^\W_]{3,}")


#: The regex glue a phrase's words are joined with (``\\s+``, ``.*``, ``\\b``, a group, an
#: alternative): it stands between words, never inside one.
_GLUE = re.compile(r"\\[sSwWbB][*+?]?|\.[*+?]|[()^$*+?|]")


#: The most words of a phrase tried written together.
_JOINED_MOST = 4


def _hint_words(pattern: str, most: int = 3, *, ordered: bool = False) -> list[str]:
    """Up to ``most`` words of a multi-word pattern worth grepping alone: names first
    (capitalised), then the longest; or, ``ordered``, the pattern's words in its order (none
    past ``most``). A pattern may join its words with regex glue (``train\\s+left\\s+late``,
    ``tea.*green``, alternatives ``a b|c d``); one with anything else (a class, a count,
    another escape) says nothing about its words: none."""
    plain = _GLUE.sub(" ", pattern)
    if re.search(r"[\\\[\]{}|*+?.]", plain):
        return []
    words = list(dict.fromkeys(_WORD.findall(plain)))
    if len(words) < (2 if plain == pattern else 1):  # one plain word that matched nothing matches nothing alone
        return []
    if ordered:
        return words if len(words) <= most and "|" not in pattern else []
    words.sort(key=lambda w: (not w[0].isupper(), -len(w)))
    return words[:most]


def compile_pattern(pattern: str, ignore_case: bool = False) -> re2._Regexp:
    """Compile for line-oriented search on UTF-8 bytes, or raise ContextError saying why."""
    if not isinstance(pattern, str):
        raise ContextError(f"grep pattern must be a str, not {type(pattern).__name__}")
    if not pattern:
        raise ContextError("grep pattern is empty")
    if len(pattern) > _MAX_PATTERN:
        raise ContextError(f"grep pattern is {len(pattern)} characters; the limit is {_MAX_PATTERN}")
    try:
        str.encode(pattern, "utf-8")
    except UnicodeEncodeError as e:
        raise ContextError(f"grep pattern {pattern!r} is not valid text (a lone surrogate at {e.start})") from e
    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = not ignore_case
    options.never_nl = True  # a match never spans lines, as in grep
    options.max_mem = 64 << 20
    try:
        # (?m): ^ and $ match at every line, as a grep user expects.
        return re2.compile(b"(?m)" + _crlf_dollar(pattern).encode("utf-8"), options)
    except re2.error as e:
        for finder, feature in _UNSUPPORTED:
            if finder.search(pattern):
                raise ContextError(
                    f"grep pattern uses {feature}, which RE2 (the linear-time regex engine) does not support; "
                    "rewrite the pattern without it, or grep for a simpler pattern and filter the lines in Python"
                ) from e
        detail = e.args[0].decode("utf-8", "replace") if e.args and isinstance(e.args[0], bytes) else str(e)
        detail = detail.replace("(?m)", "")  # our prefix, not the user's
        raise ContextError(f"invalid grep pattern /{pattern}/: {detail}") from e


def _crlf_dollar(pattern: str) -> str:
    """Let an end-of-line ``$`` also match before the ``\r`` of a CRLF line."""
    out = []
    i = 0
    in_class = False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if ch == "[" and not in_class:
            in_class = True
        elif ch == "]" and in_class:
            in_class = False
        elif ch == "$" and not in_class:
            ch = "(?:\r?$)"
        out.append(ch)
        i += 1
    return "".join(out)


_REPEAT = re.compile(r"\{(\d+)(?:,(\d*))?\}")
_CLASS_ESCAPES = frozenset("wWdDsSbBAz")  # escapes that stand for no particular character


def _class_end(p: str, i: int) -> int | None:
    """Index just past the character class opening at ``p[i] == "["``."""
    j = i + 1
    if p[j:j + 1] == "^":
        j += 1
    if p[j:j + 1] == "]":  # a leading ] is a member
        j += 1
    while j < len(p):
        if p[j] == "\\":
            j += 2
        elif p.startswith("[:", j):
            k = p.find(":]", j + 2)
            if k < 0:
                return None
            j = k + 2
        elif p[j] == "]":
            return j + 1
        else:
            j += 1
    return None


def _group_end(p: str, i: int) -> int | None:
    """Index just past the group opening at ``p[i] == "("``."""
    depth, j = 0, i
    while j < len(p):
        c = p[j]
        if c == "\\":
            j += 2
            continue
        if c == "[":
            k = _class_end(p, j)
            if k is None:
                return None
            j = k
            continue
        depth += (c == "(") - (c == ")")
        j += 1
        if depth == 0:
            return j
    return None


def required_literal(pattern: str, ignore_case: bool = False) -> bytes | None:
    """The longest run of characters every match of ``pattern`` contains, or None.

    Conservative: any construct it does not follow (an alternation at the top level, flags,
    \\x, \\p, \\Q, ...) gives None, and the caller then lets RE2 scan everything.
    """
    if ignore_case or "(?" in pattern.replace("(?:", "").replace("(?P<", ""):
        return None
    runs: list[str] = []
    run = ""
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        char: str | None = None  # the literal character this atom stands for, if any
        j: int | None
        if c in "|)*+?{":
            return None  # a top-level alternative, or a repeat of nothing
        if c == "(":
            j = _group_end(pattern, i)
        elif c == "[":
            j = _class_end(pattern, i)
        elif c == "\\":
            nxt = pattern[i + 1:i + 2]
            if nxt.isascii() and nxt and not nxt.isalnum():
                char = nxt  # an escaped punctuation character: itself
            elif nxt not in _CLASS_ESCAPES or not nxt:
                return None
            j = i + 2
        elif c in ".^$":
            j = i + 1
        else:
            char, j = c, i + 1
        if j is None:
            return None
        low = 1  # how many times the atom must occur
        if j < n and pattern[j] in "*+?{":
            if pattern[j] == "{":
                m = _REPEAT.match(pattern, j)
                if m is None:
                    return None
                low, j = int(m.group(1)), m.end()
            else:
                low, j = (0 if pattern[j] in "*?" else 1), j + 1
            if j < n and pattern[j] == "?":  # non-greedy
                j += 1
            if char is not None and low >= 1:
                run += char  # present at least once, right after the run
            runs.append(run)
            run = ""
        elif char is not None:
            run += char
        else:
            runs.append(run)
            run = ""
        i = j
    runs.append(run)
    best = max(runs, key=lambda r: len(r.encode("utf-8")))
    return best.encode("utf-8") or None


def _prefilter(pattern: str, ignore_case: bool) -> bytes | None:
    """A literal to find before running RE2, when RE2 would not find it as fast by itself."""
    literal = required_literal(pattern, ignore_case)
    if literal is None or pattern.encode("utf-8").startswith(literal):
        return None  # RE2 accelerates a literal prefix itself (memchr on its first byte)
    return literal


def _matching_lines(buf: TextBuffer, regex: re2._Regexp, literal: bytes | None) -> Iterator[tuple[int, int]]:
    """Byte spans (start, end) of the lines ``regex`` matches, newline excluded, in order.

    With ``literal`` (which every match contains), candidate lines are found with a C
    substring search and only they are run through RE2; RE2's DFA alone runs at about
    0.5 GB/s on a pattern that starts with a class, while the search skips through text.
    When the literal turns out to be common (more than one line per 4 KB holds it without
    matching), the rest is left to RE2.
    """
    view, n = buf.view, buf.nbytes
    pos = misses = 0
    while pos < n:
        if literal is None:
            m = regex.search(view, pos)
            if m is None or m.start() >= n:  # past the last line's newline: no line there
                return
            start, end = buf.line_span(m.start())
        else:
            k = buf.find(literal, pos)
            if k < 0:
                return
            start = buf.rfind(b"\n", pos, k) + 1 or pos
            nl = buf.find(b"\n", k)
            end = n if nl < 0 else nl
            if regex.search(view, start, end) is None:
                misses += 1
                if misses > 1000 and misses * 4096 > end:
                    literal = None
                pos = end + 1
                continue
        yield start, end
        pos = end + 1


def grep_buffer(buf: TextBuffer, pattern: str, *, context_lines: int = 0, max_matches: int = 100,
                ignore_case: bool = False, doc: str | None = None) -> GrepResult:
    """Lines of ``buf`` matching ``pattern``, one entry per line, in order."""
    regex = compile_pattern(pattern, ignore_case)
    if max_matches < 1:
        raise ContextError("max_matches must be at least 1")
    context_lines = max(0, min(int(context_lines), 50))
    matches: list[GrepMatch] = []
    hint: tuple[int, int] | None = None
    for start, end in _matching_lines(buf, regex, _prefilter(pattern, ignore_case)):
        if len(matches) >= max_matches:
            return GrepResult(matches, pattern, False, lambda: count_matching_lines(buf, pattern, ignore_case),
                              ignore_case=ignore_case, tallier=lambda: tally_matching_lines(buf, pattern, ignore_case))
        line_no = buf.line_of(start, hint)
        hint = (start, line_no)
        before = buf.lines(line_no - context_lines, line_no - 1) if context_lines else []
        after = buf.lines(line_no + 1, line_no + context_lines) if context_lines else []
        matches.append(GrepMatch(line_no, buf.decode(start, end).rstrip("\r"), before, after, doc))
    prober = None if matches else (lambda p: count_matching_lines(buf, p, True))
    return GrepResult(matches, pattern, True, prober=prober, ignore_case=ignore_case)


def not_searchable(what: Any) -> ContextError:
    """The error for a second argument to grep that is neither a context nor text."""
    return ContextError("grep's second argument is what to search: a context handle, a string, or a list of strings "
                        f"(an earlier grep's result), not {type(what).__name__}")


def grep_held(held: Any, pattern: str, *, context_lines: int = 0, max_matches: int = 100,
              ignore_case: bool = False) -> GrepResult:
    """grep over text the code holds instead of a context: a string (its lines, numbered from
    1), or a list of lines, such as an earlier grep's result, whose matches keep their own
    line numbers (``grep("Belpex", grep("lead"))`` narrows a search). ``context_lines`` applies
    to a string; a list's items keep the lines around them they already had."""
    if isinstance(held, str) and not isinstance(held, GrepMatch):
        return grep_buffer(TextBuffer(str.encode(held, "utf-8", "replace")), pattern, context_lines=context_lines,
                           max_matches=max_matches, ignore_case=ignore_case)
    items = [held] if isinstance(held, GrepMatch) else held
    if not isinstance(items, (list, tuple)) or not all(isinstance(x, str) for x in items):
        raise not_searchable(held)
    regex = compile_pattern(pattern, ignore_case)
    if max_matches < 1:
        raise ContextError("max_matches must be at least 1")
    kept: list[GrepMatch] = []
    total = 0  # matches past max_matches are counted, not kept
    for k, item in enumerate(items):
        # str's own methods: a str subclass of the code's own must not run its code in ours
        line = item.line if type(item) is GrepMatch else str.rstrip(item, "\r\n")
        if regex.search(str.encode(str(line), "utf-8", "replace")) is not None:
            total += 1
            if len(kept) < max_matches:
                kept.append(item if type(item) is GrepMatch else GrepMatch(k + 1, line, [], []))
    return GrepResult(kept, pattern, total <= max_matches, lambda: total, ignore_case=ignore_case)


def count_matching_lines(buf: TextBuffer, pattern: str, ignore_case: bool = False) -> int:
    """How many lines match (like ``grep -c``), scanning the whole buffer."""
    regex = compile_pattern(pattern, ignore_case)
    return sum(1 for _ in _matching_lines(buf, regex, _prefilter(pattern, ignore_case)))


def tally_matching_lines(buf: TextBuffer, pattern: str, ignore_case: bool = False) -> dict[str, int]:
    """For every line that matches: what the pattern's first group captured (the whole match
    when it has none); how many lines gave each, most common first (a group that took no
    part in a match counts as "")."""
    regex = compile_pattern(pattern, ignore_case)
    counts: Counter[str] = Counter()
    view = buf.view
    for start, end in _matching_lines(buf, regex, _prefilter(pattern, ignore_case)):
        found = regex.search(view, start, end)
        if found is not None:
            a, b = found.span(1 if regex.groups else 0)
            counts["" if a < 0 else buf.decode(a, b)] += 1
    return dict(counts.most_common())


def _captured(found: Any, groups: int) -> str:
    got = found.group(1 if groups else 0)
    return "" if got is None else bytes(got).decode("utf-8", "replace")


def re2_escape(text: str) -> str:
    """``text`` as a literal RE2 pattern."""
    return re.escape(text)
