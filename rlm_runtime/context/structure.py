"""Structure: which lines of a text are records, found from the text itself, with a coverage.

A user's files are formats nobody wrote a reader for. Rather than one reader per format,
this module infers the structure from a sample of the text and says how much of the text
that structure reads (its *coverage*); below ``GATE`` it says the text has no structure it
could read, with the reason, never a guess.

* *Which lines are records*: comment lines (a common leading marker such as ``#``) are set
  aside; the others are one record a line (``lines``), or children of the nearest line above
  with less indentation (``indent``), or of the first line of their blank-line block when
  it differs from the rest (``blocks``). ``Label: value`` lines grouped into records are
  ``records.py``'s blocks reader's, which says its coverage the same way.
* *What a line holds*: a template a level (or a few, ``templates.Forms``), mined from that
  level's lines (``templates.py``).

Every layout is scored by coverage, the share of the sample's non-blank, non-comment lines
read into fields; the one reading most fields a line among those at or over ``GATE`` is
offered. ``read`` applies it to a whole text (and measures the coverage there).

Cost: discovery reads the caller's bounded sample; reading is one pass over the lines, each
matched against its level's one template on at most ``templates.LINE_CAP`` characters; the
indentation and parent stacks push and pop each line once. No loop over lines runs inside
another: linear in the text.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from rlm_runtime.context.templates import LINE_CAP, Forms, Slot, Template, cut, field_name, mine_forms
from rlm_runtime.context.templates import header as header_of

#: A structure is offered only when it parses at least this share of the lines. Four lines in
#: five: the old readers' own "most lines" bar, high enough that prose (whose punctuation
#: differs from line to line) and lines of many forms stay under it, low enough that a few odd
#: lines (a title, a footer, a wrapped value) do not refuse it. A level's lines may be of up
#: to ``templates.MAX_FORMS`` forms, each reading a tenth of them (a log's kinds of event).
GATE = 0.8
#: Levels of indentation told apart; deeper lines share the deepest level's template.
MAX_DEPTH = 16
#: Lines needed to infer anything.
MIN_LINES = 4
#: Leading markers of comment lines.
COMMENT_MARKERS = ("#", "//", "--", ";", "%", "!")



# ------------------------------------------------------------------------ layouts


@dataclass(frozen=True)
class Structure:
    """What ``discover`` found: ``layout`` (``lines``, ``indent``, ``blocks``,
    ``stated``; "" when none passed), a template per level, the comment marker, the header
    line's field names, ``coverage`` on the sample, and ``reason`` when refused."""

    layout: str
    coverage: float
    fields: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()
    levels: tuple[Template | Forms, ...] = ()
    comment: str = ""
    header: tuple[str, ...] = ()
    reason: str = ""
    stated: object = field(default=None, compare=False)  # a stated form (forms.Stated)

    @property
    def ok(self) -> bool:
        return bool(self.layout) and self.coverage >= GATE and not self.reason


def comment_marker(lines: Sequence[str]) -> str:
    """The leading marker of comment lines: the commonest of ``COMMENT_MARKERS`` starting
    under half the non-blank lines (a marker on most lines is the data's own), on two lines
    or more, or on one when a space or nothing follows it ("# note")."""
    counts: Counter[str] = Counter()
    spaced: set[str] = set()
    nonblank = 0
    for line in lines:
        s = line.lstrip()
        if not s:
            continue
        nonblank += 1
        marker = next((m for m in COMMENT_MARKERS if s.startswith(m)), "")
        if marker:
            counts[marker] += 1
            if s[len(marker):len(marker) + 1] in ("", " ", "\t"):
                spaced.add(marker)
    if not counts:
        return ""
    marker, n = counts.most_common(1)[0]
    return marker if (n >= 2 or marker in spaced) and n < 0.5 * nonblank else ""


#: A line drawn of these alone (a table's border or rule: ``|---|:--:|``, ``+----+``, ``====``).
_RULE = re.compile(r"^\s*[|:+=-]{3,}[\s|:+=-]*$")


def content(lines: Sequence[str], comment: str) -> list[tuple[int, str]]:
    """(index, line) of the lines that may be records: not blank, not a comment, not a rule."""
    return [(k, line) for k, line in enumerate(lines)
            if line.strip() and not (comment and line.lstrip().startswith(comment)) and not _RULE.match(line)]


def _text(line: str) -> str:
    """A line as its template reads it: without its indentation (the layout's), nor spaces at
    its end; a tab there is kept, the delimiter of an empty last cell."""
    return line.lstrip().rstrip(" \r\n\v\f")


def _indent(line: str) -> int:
    return len(line.expandtabs(8)) - len(line.expandtabs(8).lstrip())


def levels_by_indent(body: list[tuple[int, str]]) -> list[int]:
    """Each line's depth: how many lines above it, each the nearest with less indentation,
    hold it (a stack: each line pushed and popped once)."""
    stack: list[int] = []
    out = []
    for _, line in body:
        w = _indent(line[:LINE_CAP])
        while stack and stack[-1] >= w:
            stack.pop()
        out.append(min(len(stack), MAX_DEPTH))
        stack.append(w)
    return out


def levels_by_block(lines: Sequence[str], body: list[tuple[int, str]]) -> list[int]:
    """0 for the first line of each blank-line block, 1 for the others."""
    out = []
    last = -2
    for k, _ in body:
        out.append(0 if any(not lines[j].strip() for j in range(last + 1, k)) or last < 0 else 1)
        last = k
    return out


def parents(levels: list[int]) -> list[int]:
    """Each line's parent (an index into the lines, -1 for none): the nearest line above at
    a lower level."""
    stack: list[int] = []  # indexes, levels increasing
    out = []
    for i, lv in enumerate(levels):
        while stack and levels[stack[-1]] >= lv:
            stack.pop()
        out.append(stack[-1] if stack else -1)
        stack.append(i)
    return out


def _levelled(layout: str, body: list[tuple[int, str]], levels: list[int], comment: str) -> Structure | None:
    """Templates a level over ``body`` (``lines`` when every level is 0)."""
    cuts = [(t, cut(t)) for _, line in body for t in [_text(line)]]
    depth = max(levels) + 1
    if layout != "lines":
        if depth < 2 or sum(lv > 0 for lv in levels) < 0.1 * len(levels) or sum(lv == 0 for lv in levels) < 2:
            return None
    templates: list[Template | Forms] = []
    read = 0
    for lv in range(depth):
        rows = [cuts[i] for i, x in enumerate(levels) if x == lv]
        found = mine_forms(rows, whole_ok=layout != "lines", bar=GATE) if rows else None
        if found is None:
            if rows:
                return None
            templates.append(Template((), (), True))
            continue
        templates.append(found[0])
        read += found[1]
    if layout == "lines" and len(templates[0].fields) < 2:
        return None
    one = templates[0]
    if layout == "blocks":
        heads = [cuts[i] for i, x in enumerate(levels) if x == 0]
        if sum(templates[1].read(ln, c) is not None for ln, c in heads) >= GATE * len(heads):
            return None  # rows of one form with blank lines between groups: the first row heads nothing
    header: tuple[str, ...] = ()
    if layout == "lines" and len(cuts) >= 2 and isinstance(one, Template):
        header = header_of(one, cuts[0], cuts[1:]) or ()
        if header:
            templates[0] = dataclasses.replace(one, slots=tuple(Slot(name=h) for h in header))
    fields: dict[str, str] = {}
    for (line, c), lv in list(zip(cuts, levels, strict=True))[1 if header else 0:]:
        got = templates[lv].read(line, c)
        for name, value in got or ():
            if value and name not in fields:
                fields[name] = value
    return Structure(layout, read / len(body), tuple(fields), tuple(fields.values()), tuple(templates), comment, header)


def discover(lines: Sequence[str]) -> Structure:
    """The structure of the sample ``lines`` (raw lines, blank ones included): the layout
    reading most fields a line among those over ``GATE``, else a refusal with its reason."""
    lines = [line.rstrip("\r\n") for line in lines]
    comment = comment_marker(lines)
    body = content(lines, comment)
    if len(body) < MIN_LINES:
        # A few rows under a header row: the header names what the rows hold.
        table = _levelled("lines", body, [0] * len(body), comment) if len(body) >= 2 else None
        if table is not None and table.header and table.coverage >= GATE:
            return table
        return Structure("", 0.0, reason=f"too few lines ({len(body)}) to tell constant parts from fields")
    found: list[Structure] = []
    flat = _levelled("lines", body, [0] * len(body), comment)
    found += [flat] if flat else []
    indent = _levelled("indent", body, levels_by_indent(body), comment)
    found += [indent] if indent else []
    blocks = _levelled("blocks", body, levels_by_block(lines, body), comment)
    found += [blocks] if blocks else []
    passing = [s for s in found if s.coverage >= GATE]
    if passing:
        # Most fields read a line; a hierarchy wins a tie (indentation is data too).
        return max(passing, key=lambda s: (round(s.coverage * max(len(s.fields), 1), 3), s.layout != "lines"))
    best = max(found, key=lambda s: s.coverage, default=None)
    if best is None:
        return Structure("", 0.0, reason="no two lines share a form with two fields or more")
    return Structure("", best.coverage, reason=f"the best form read {best.coverage:.0%} of the lines, under the "
                                               f"{GATE:.0%} needed")


# ------------------------------------------------------------------------ reading

#: What ``read`` gives a line: (index of its first line, its fields, the index of
#: its parent among the items, -1 for none).
Item = tuple[int, list[tuple[str, str]], int]


def read(lines: Sequence[str], s: Structure) -> tuple[list[Item], float]:
    """The items of ``lines`` in structure ``s`` (a line no template reads is an item with only
    ``text``) and the share of the non-blank, non-comment lines read into fields."""
    body = content(lines, s.comment)
    if not body:
        return [], 0.0
    levels = (levels_by_indent(body) if s.layout == "indent" else levels_by_block(lines, body) if s.layout == "blocks"
              else [0] * len(body))
    par = parents(levels)
    items: list[Item] = []
    n_read = 0
    start = 0
    head = s.levels[0] if s.header and s.levels else None
    first = head.cells(_text(body[0][1])) if isinstance(head, Template) else None
    if first is not None and len(first) == len(s.header) and all(
            not x.strip() or field_name(x.strip()) == h for x, h in zip(first, s.header, strict=True)):
        start, n_read = 1, 1  # the header row: read, as the fields' names
    for i in range(start, len(body)):
        k, line = body[i]
        text = _text(line)
        if s.stated is not None:
            got = s.stated.read(line)  # type: ignore[attr-defined]
        else:
            got = s.levels[min(levels[i], len(s.levels) - 1)].read(text) if s.levels else None
        n_read += got is not None
        items.append((k, got or [("text", text)], par[i] - start if par[i] >= start else -1))
    return items, n_read / len(body)
