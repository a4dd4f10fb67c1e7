"""Line-oriented regex search over a TextBuffer with RE2 (linear time, on bytes, no copy).

A pattern RE2 cannot run (a backreference, a lookaround) gets a ContextError naming the
feature; there is no fallback to a backtracking engine, because a backtracking engine on a
hostile pattern and a 1 GB context is a denial of service.
"""

from __future__ import annotations

import re

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


class GrepMatch:
    """One matching line: its 1-based number, its text, and surrounding lines if asked."""

    __slots__ = ("line_no", "line", "before", "after", "doc")

    def __init__(self, line_no: int, line: str, before: list[str], after: list[str], doc: str | None = None) -> None:
        self.line_no = line_no
        self.line = line
        self.before = before
        self.after = after
        self.doc = doc

    def __repr__(self) -> str:
        prefix = f"{self.doc}:" if self.doc else ""
        if not self.before and not self.after:
            return f"{prefix}{self.line_no}: {self.line}"
        rows = [f"{prefix}{self.line_no - len(self.before) + k}- {t}" for k, t in enumerate(self.before)]
        rows.append(f"{prefix}{self.line_no}: {self.line}")
        rows += [f"{prefix}{self.line_no + 1 + k}- {t}" for k, t in enumerate(self.after)]
        return "\n".join(rows)

    __str__ = __repr__

    def to_dict(self) -> dict[str, object]:
        return {"doc": self.doc, "line_no": self.line_no, "line": self.line, "before": self.before, "after": self.after}


class GrepResult(list[GrepMatch]):
    """The matches, in order. ``complete`` is False when ``max_matches`` stopped the scan."""

    def __init__(self, matches: list[GrepMatch], pattern: str, complete: bool) -> None:
        super().__init__(matches)
        self.pattern = pattern
        self.complete = complete

    def __repr__(self) -> str:
        if not self:
            return f"(no lines match /{self.pattern}/)"
        body = "\n".join(repr(m) for m in self)
        more = "" if self.complete else f"\n... (stopped after {len(self)} matching lines; raise max_matches or narrow the pattern)"
        return body + more

    __str__ = __repr__


def compile_pattern(pattern: str, ignore_case: bool = False) -> re2._Regexp:
    """Compile for line-oriented search on UTF-8 bytes, or raise ContextError saying why."""
    if not isinstance(pattern, str):
        raise ContextError(f"grep pattern must be a str, not {type(pattern).__name__}")
    if not pattern:
        raise ContextError("grep pattern is empty")
    if len(pattern) > _MAX_PATTERN:
        raise ContextError(f"grep pattern is {len(pattern)} characters; the limit is {_MAX_PATTERN}")
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


def grep_buffer(
    buf: TextBuffer,
    pattern: str,
    *,
    context_lines: int = 0,
    max_matches: int = 100,
    ignore_case: bool = False,
    doc: str | None = None,
) -> GrepResult:
    """Lines of ``buf`` matching ``pattern``, one entry per line, in order."""
    regex = compile_pattern(pattern, ignore_case)
    if max_matches < 1:
        raise ContextError("max_matches must be at least 1")
    context_lines = max(0, min(int(context_lines), 50))
    view = buf.view
    matches: list[GrepMatch] = []
    pos = 0
    hint: tuple[int, int] | None = None
    while pos < buf.nbytes:
        m = regex.search(view, pos)
        if m is None or m.start() >= buf.nbytes:  # past the last line's newline: no line there
            return GrepResult(matches, pattern, True)
        start, end = buf.line_span(m.start())
        line_no = buf.line_of(start, hint)
        hint = (start, line_no)
        if len(matches) >= max_matches:
            return GrepResult(matches, pattern, False)
        before = buf.lines(line_no - context_lines, line_no - 1) if context_lines else []
        after = buf.lines(line_no + 1, line_no + context_lines) if context_lines else []
        matches.append(GrepMatch(line_no, buf.decode(start, end).rstrip("\r"), before, after, doc))
        pos = end + 1
    return GrepResult(matches, pattern, True)


def count_matching_lines(buf: TextBuffer, pattern: str, ignore_case: bool = False) -> int:
    """How many lines match (like ``grep -c``), scanning the whole buffer."""
    regex = compile_pattern(pattern, ignore_case)
    view = buf.view
    count = pos = 0
    while pos < buf.nbytes:
        m = regex.search(view, pos)
        if m is None or m.start() >= buf.nbytes:
            break
        count += 1
        nl = buf.find(b"\n", m.end())
        if nl < 0:
            break
        pos = nl + 1
    return count


def re2_escape(text: str) -> str:
    """``text`` as a literal RE2 pattern."""
    return re.escape(text)
