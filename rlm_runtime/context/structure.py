"""Structure: a text's record structure inferred from the text itself, with its coverage.

A user's files are formats nobody wrote a reader for. Rather than one reader per format,
this module infers the structure from a sample of the text, the way log-template miners
(Drain) do, and says how much of the text that structure reads (its *coverage*); below
``GATE`` it says the text has no structure it could read, with the reason, never a guess.

What is inferred (``discover``, on the sample's lines):

* *which lines are records*: comment lines (a common leading marker such as ``#``) are set
  aside; the remaining lines are one record a line (``lines``), or children of the nearest
  line above with less indentation (``indent``), or of the first line of their blank-line
  block (``blocks``), or ``Label: value`` lines grouped into stanzas by blank lines or by
  their first label coming round again (``stanzas``);
* *which parts of a line are constant*: a line is cut into *slots* (runs of words joined by
  single spaces or by punctuation inside a word: ``db-07``, ``3.5``, ``12:01``) and the
  *separators* between them (other punctuation, tabs, runs of spaces). Lines are clustered by
  their separators (a template), one template a level; a template may end in a slot that
  runs to the line's end (free text). Within a template, a slot whose value is the same on
  every line is a label, and a slot whose lines all have the same number of words is cut at
  the words every line shares (``host db-07 status up``: ``host`` and ``status`` name
  the values after them);
* *field names*: the text's own labels (a constant word before a value, ``key=value``,
  ``Label: value``, a header row over a delimited table), otherwise ``field 1``,
  ``field 2``... with an example value each.

Every choice is scored by coverage: the share of the sample's non-blank, non-comment lines
the structure parses into fields. The layout offered is the one reading most fields per line
among those at or over ``GATE``.

Cost: discovery reads a bounded sample (the caller's) and at most ``LINE_CAP`` characters of
a line; parsing (``read``) makes one pass over the lines, each matched against its level's
one template by cutting at most ``LINE_CAP`` characters: linear in the text, with no loop
over lines inside another. The indentation stack pushes and pops each line at most once.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from rlm_runtime.context.facts import grammar_word

#: A structure is offered only when it parses at least this share of the lines. Four lines in
#: five: the old readers' own "most lines" bar, high enough that two formats half and half
#: (at most one half read) and prose (whose punctuation differs from line to line) stay under
#: it, low enough that a few odd lines (a title, a footer, a wrapped value) do not refuse it.
GATE = 0.8
#: Characters of a line the miner looks at; a longer line's last field keeps the rest.
LINE_CAP = 400
#: Slots of a line told apart; past them the line's tail is one free-text field.
MAX_SLOTS = 16
#: Levels of indentation told apart; deeper lines share the deepest level's template.
MAX_DEPTH = 16
#: Lines needed to infer anything.
MIN_LINES = 4
#: Lines of a template needed before a value the same on all of them is taken as a label.
MIN_CONSTANT = 5
#: Words of a slot cut apart at its shared words, at most.
MAX_SPLIT_WORDS = 12
#: A line whose only field is the whole line is a name in a hierarchy when it has at most
#: this many words (median of its level): longer ones are prose.
NAME_WORDS = 8
#: Leading markers of comment lines.
COMMENT_MARKERS = ("#", "//", "--", ";", "%", "!")

# A slot: words joined by single spaces or by punctuation inside a word ("db-07", "3.5",
# "don't", "a/b", "12:01", "1,200"). Each joiner is one non-word character between word
# runs, so matching is linear.
_SLOT = re.compile(r"\w+(?:(?: |[-.'/@+#]|(?<=\d)[:,](?=\d))\w+)*")
_SPACES = re.compile(r"\s+")
_LABEL_LINE = re.compile(r"^([^\W\d_][\w .'/()&-]{0,39}?)\s*[:=](?:\s+(.*))?$", re.S)


def _sep(text: str) -> str:
    """A separator with its spaces made comparable: a tab, a column gap (2+ spaces), one space."""
    return _SPACES.sub(lambda m: "\t" if "\t" in m.group() else "  " if len(m.group()) > 1 else " ", text)


@dataclass(frozen=True)
class Cut:
    """A line cut into slots: ``seps[i]`` comes before slot ``i`` (the last after the last
    slot); ``spans`` are the slots' (start, end); ``more`` when the line goes on past what
    was cut (over ``LINE_CAP`` characters or ``MAX_SLOTS`` slots)."""

    seps: tuple[str, ...]
    spans: tuple[tuple[int, int], ...]
    more: bool


def cut(line: str) -> Cut:
    head = line[:LINE_CAP]
    seps: list[str] = []
    spans: list[tuple[int, int]] = []
    end = 0
    more = len(line) > LINE_CAP
    for m in _SLOT.finditer(head):
        if len(spans) == MAX_SLOTS:
            more = True
            break
        seps.append(_sep(head[end:m.start()]))
        spans.append(m.span())
        end = m.end()
    seps.append(_sep(head[end:]) if not more else "")
    return Cut(tuple(seps), tuple(spans), more)


# ------------------------------------------------------------------------ templates


@dataclass(frozen=True)
class Slot:
    """What one slot of a template holds: ``name`` (a field), or ``const`` (a label, the same
    on every line), or ``words`` (the slot cut into words: each a constant word or None for a
    value, and ``names`` the fields of its runs of values)."""

    name: str = ""
    const: str | None = None
    words: tuple[str | None, ...] = ()
    names: tuple[str, ...] = ()


@dataclass(frozen=True)
class Template:
    """One line form: its separators (``seps[i]`` before slot ``i``), what each slot holds,
    and ``rest`` when the last slot runs to the line's end (free text)."""

    seps: tuple[str, ...]
    slots: tuple[Slot, ...]
    rest: bool

    def read(self, line: str, c: Cut | None = None) -> list[tuple[str, str]] | None:
        """The fields of ``line``, or None when the line is not of this form."""
        c = c or cut(line)
        n = len(self.slots)
        if self.rest:
            if len(c.spans) < n or c.seps[:n] != self.seps:
                return None
        elif c.more or c.seps != self.seps:
            return None
        out: list[tuple[str, str]] = []
        for i, slot in enumerate(self.slots):
            a, b = c.spans[i]
            value = line[a:].strip() if self.rest and i == n - 1 else line[a:b]
            if slot.const is not None:
                if value != slot.const:
                    return None
                continue
            if slot.words:
                words = value.split(" ")
                if len(words) != len(slot.words):
                    return None
                run: list[str] = []
                k = 0
                for word, want in zip(words, [*slot.words], strict=True):
                    if want is None:
                        run.append(word)
                        continue
                    if word != want:
                        return None
                    if run:
                        out.append((slot.names[k], " ".join(run)))
                        k, run = k + 1, []
                if run:
                    out.append((slot.names[k], " ".join(run)))
                continue
            out.append((slot.name, value))
        return out

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(n for s in self.slots for n in ((s.name,) if s.name else s.names))


def _words_of(values: list[str]) -> tuple[str | None, ...] | None:
    """A slot's words, each constant (the word every value has there) or None (a value), when
    every value has the same number of words and at least one is constant and one varies."""
    counts = {v.count(" ") for v in values}
    if len(counts) != 1 or len(values) < MIN_CONSTANT:
        return None
    n = counts.pop() + 1
    if not 2 <= n <= MAX_SPLIT_WORDS:
        return None
    split = [v.split(" ") for v in values]
    words = tuple(split[0][i] if all(s[i] == split[0][i] for s in split) else None for i in range(n))
    if all(w is None for w in words) or all(w is not None for w in words):
        return None
    return words


def _labelled(text: str) -> bool:
    """Text that can name a field: a few words, a letter first."""
    return bool(text) and text[0].isalpha() and len(text.split()) <= 4 and len(text) <= 40


def _label(words: list[str]) -> str:
    """The name constant words give the value after them, grammar left out ("the owner of"
    -> "owner"); "" when nothing is left."""
    kept = [w for w in words if not grammar_word(w.lower())]
    return field_name(" ".join(kept[-3:])) if kept and _labelled(" ".join(kept[-3:])) else ""


def field_name(text: str) -> str:
    """A field's name as records spell them: lower case, single spaces."""
    return " ".join(text.replace("_", " ").split()).lower()


def _build(seps: tuple[str, ...], rest: bool, rows: list[tuple[str, Cut]]) -> Template:
    """The template of separators ``seps`` over the lines ``rows`` (all of that form): which
    slots are labels, which are cut into words, and every field's name."""
    n = len(seps) if rest else len(seps) - 1
    values = [[(line[c.spans[i][0]:].strip() if rest and i == n - 1 else line[c.spans[i][0]:c.spans[i][1]])
               for line, c in rows] for i in range(n)]
    slots: list[Slot] = []
    label = ""  # a label just read, naming the next value
    position = 0
    for i in range(n):
        vals = values[i]
        last = i == n - 1
        if len(vals) >= MIN_CONSTANT and len(set(vals)) == 1 and _labelled(vals[0]) and not last:
            slots.append(Slot(const=vals[0]))
            label = _label(vals[0].split())
            continue
        words = None if (rest and last) else _words_of(vals)
        if words is not None:
            names: list[str] = []
            constant: list[str] = [label] if label else []
            in_value = False
            for w in words:
                if w is None:
                    if not in_value:  # a run of value words is one field
                        position += 1
                        names.append(_label(constant) or f"field {position}")
                        constant = []
                    in_value = True
                else:
                    constant.append(w)
                    in_value = False
            label = _label(constant)
            slots.append(Slot(words=words, names=tuple(names)))
            continue
        position += 1
        slots.append(Slot(name=label or f"field {position}"))
        label = ""
    return Template(seps[:n] if rest else seps, tuple(_unique(slots)), rest)


def _unique(slots: list[Slot]) -> Iterable[Slot]:
    """The slots with a name said twice made distinct ("status", "status 2")."""
    seen: Counter[str] = Counter()

    def one(name: str) -> str:
        seen[name] += 1
        return name if seen[name] == 1 else f"{name} {seen[name]}"

    for s in slots:
        if s.name:
            yield Slot(name=one(s.name))
        elif s.names:
            yield Slot(words=s.words, names=tuple(one(n) for n in s.names))
        else:
            yield s


def _header(template: Template, first: tuple[str, Cut], rows: list[tuple[str, Cut]]) -> tuple[str, ...] | None:
    """Field names from a first line of the same separators over a table of plain fields: each
    cell a label-like text, none of them found in its column below, and the row unlike the
    rows below (a number or date column under a word, or another letter case)."""
    line, c = first
    if template.rest or c.seps != template.seps or any(s.name == "" for s in template.slots):
        return None
    rows = [(ln, d) for ln, d in rows if d.seps == template.seps and not d.more]
    cells = [line[a:b] for a, b in c.spans]
    if len(rows) < 2 or len(set(cells)) != len(cells) or not all(_labelled(x) for x in cells):
        return None
    unlike = 0
    for i, cell in enumerate(cells):
        column = [ln[d.spans[i][0]:d.spans[i][1]] for ln, d in rows]
        if cell in column:
            return None
        lead = sum(not v[:1].isalpha() for v in column)
        unlike += lead >= 0.8 * len(column) or sum(_case(v) != _case(cell) for v in column) >= 0.8 * len(column)
    return tuple(field_name(x) for x in cells) if 2 * unlike >= len(cells) else None


def _case(text: str) -> str:
    return "upper" if text.isupper() else "title" if text[:1].isupper() else "lower"


def mine(rows: list[tuple[str, Cut]], *, whole_ok: bool) -> tuple[Template, int] | None:
    """The template reading most fields per line over ``rows``, and how many rows it reads;
    ``whole_ok`` lets a line's one field be the whole line (a name in a hierarchy). Candidates
    are the commonest exact separators and, for each number of leading slots, the commonest
    leading separators with the rest of the line one field."""
    if not rows:
        return None
    exact: Counter[tuple[str, ...]] = Counter()
    lead: Counter[tuple[str, ...]] = Counter()
    for _, c in rows:
        if not c.more:
            exact[c.seps] += 1
        for j in range(1, len(c.spans) + 1):
            lead[c.seps[:j]] += 1
    by_length: dict[int, tuple[tuple[str, ...], int]] = {}
    for seps, n in lead.items():
        if n > by_length.get(len(seps), ((), 0))[1]:
            by_length[len(seps)] = (seps, n)
    candidates = [(seps, False, n) for seps, n in exact.most_common(3)]
    candidates += [(seps, True, n) for seps, n in by_length.values()]
    best: tuple[float, int, Template] | None = None
    for seps, rest, _ in candidates:
        n = len(seps) if rest else len(seps) - 1
        mine_rows = [(ln, c) for ln, c in rows if (len(c.spans) >= n and c.seps[:n] == seps) if rest
                     ] if rest else [(ln, c) for ln, c in rows if not c.more and c.seps == seps]
        if not mine_rows or n == 0:
            continue
        t = _build(seps, rest, mine_rows)
        got = [r for ln, c in rows if (r := t.read(ln, c)) is not None]
        read = len(got)
        # A field is one whose value varies: the same words on every line are text, not data.
        seen: dict[str, set[str]] = {}
        for r in got:
            for name, value in r:
                if len(seen.setdefault(name, set())) < 2:
                    seen[name].add(value)
        fields = sum(len(v) > 1 for v in seen.values()) if read >= MIN_CONSTANT else len(t.fields)
        if whole_ok and t.fields:
            fields = max(fields, 1)  # a node of a hierarchy may say the same on every line ("spare parts")
        if fields < (1 if whole_ok else 2):
            continue
        if len(t.fields) == 1 and _median_words([v for r in got for _, v in r]) > NAME_WORDS:
            continue  # a long line alone is prose, not a name
        if _prose(t, rows):
            continue
        score = (read * fields / len(rows), read)
        if best is None or score > best[:2]:
            best = (score[0], read, t)
    return (best[2], best[1]) if best else None


def _median_words(values: list[str]) -> int:
    counts = sorted(v.count(" ") + 1 for v in values)
    return counts[len(counts) // 2] if counts else 0


def _prose(t: Template, rows: list[tuple[str, Cut]]) -> bool:
    """Sentences split at their punctuation are not fields: every field of many words, or a
    template whose only separators are a sentence's (", ", ". ") around long values."""
    read = [r for ln, c in rows if (r := t.read(ln, c))]
    if not read or len(t.fields) < 2:
        return False
    long = sum(_median_words([r[i][1] for r in read if i < len(r)]) > 4 for i in range(len(t.fields)))
    sentence_seps = all(s.strip() in ("", ",", ".", ";", "!", "?") for s in t.seps)
    return long >= len(t.fields) - (0 if sentence_seps else 1) and long >= 2


# ------------------------------------------------------------------------ layouts


@dataclass(frozen=True)
class Structure:
    """What ``discover`` found: ``layout`` (``lines``, ``indent``, ``blocks``, ``stanzas``,
    ``stated``; "" when none passed), a template per level, the comment marker, the header
    line's field names, ``coverage`` on the sample, and ``reason`` when refused."""

    layout: str
    coverage: float
    fields: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()
    levels: tuple[Template, ...] = ()
    comment: str = ""
    header: tuple[str, ...] = ()
    reason: str = ""
    stated: object = field(default=None, compare=False)  # a stated template (templates.Stated)

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


def content(lines: Sequence[str], comment: str) -> list[tuple[int, str]]:
    """(index, line) of the non-blank, non-comment lines."""
    return [(k, line) for k, line in enumerate(lines)
            if line.strip() and not (comment and line.lstrip().startswith(comment))]


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
    cuts = [(line.strip(), cut(line.strip())) for _, line in body]
    depth = max(levels) + 1
    if layout != "lines":
        if depth < 2 or sum(lv > 0 for lv in levels) < 0.1 * len(levels) or sum(lv == 0 for lv in levels) < 2:
            return None
    templates: list[Template] = []
    read = 0
    for lv in range(depth):
        rows = [cuts[i] for i, x in enumerate(levels) if x == lv]
        found = mine(rows, whole_ok=layout != "lines") if rows else None
        if found is None:
            if rows:
                return None
            templates.append(Template((), (), True))
            continue
        templates.append(found[0])
        read += found[1]
    if layout == "lines" and len(templates[0].fields) < 2:
        return None
    if layout == "blocks" and templates[0].seps == templates[1].seps and templates[0].rest == templates[1].rest:
        return None  # rows of one form with blank lines between groups: the first row heads nothing
    header: tuple[str, ...] = ()
    if layout == "lines" and len(cuts) > 2:
        header = _header(templates[0], cuts[0], cuts[1:]) or ()
        if header:
            t = templates[0]
            templates[0] = Template(t.seps, tuple(Slot(name=h) for h in header), t.rest)
    fields: dict[str, str] = {}
    for (line, c), lv in list(zip(cuts, levels, strict=True))[1 if header else 0:]:
        got = templates[lv].read(line, c)
        for name, value in got or ():
            if value and name not in fields:
                fields[name] = value
    return Structure(layout, read / len(body), tuple(fields), tuple(fields.values()), tuple(templates), comment, header)


def _stanzas(lines: Sequence[str], body: list[tuple[int, str]], comment: str) -> Structure | None:
    """``Label: value`` lines, a record each blank-line block (or each time the first label
    comes round again); an indented line after a label continues its value. Labels must come
    round again: a label on only one line is a value, not a field's name."""
    labels: Counter[str] = Counter()
    read = 0
    after_label = False
    for _, line in body:
        m = _LABEL_LINE.match(line.strip()[:LINE_CAP])
        if m and len(m.group(1).split()) <= 4 and not line[:1].isspace():
            labels[field_name(m.group(1))] += 1
            read += 1
            after_label = True
        elif after_label and line[:1].isspace():
            read += 1
        else:
            after_label = False
    if not labels or sum(labels.values()) < 2 * len(labels) or labels.most_common(1)[0][1] < 3:
        return None
    fields = tuple(name for name, _ in labels.most_common())
    return Structure("stanzas", read / len(body), fields, (), (), comment)


def discover(lines: Sequence[str]) -> Structure:
    """The structure of the sample ``lines`` (raw lines, blank ones included): the layout
    reading most fields a line among those over ``GATE``, else a refusal with its reason."""
    lines = [line.rstrip("\r\n") for line in lines]
    comment = comment_marker(lines)
    body = content(lines, comment)
    if len(body) < MIN_LINES:
        return Structure("", 0.0, reason=f"too few lines ({len(body)}) to tell constant parts from fields")
    found: list[Structure] = []
    flat = _levelled("lines", body, [0] * len(body), comment)
    found += [flat] if flat else []
    indent = _levelled("indent", body, levels_by_indent(body), comment)
    found += [indent] if indent else []
    blocks = _levelled("blocks", body, levels_by_block(lines, body), comment)
    found += [blocks] if blocks else []
    stanzas = _stanzas(lines, body, comment)
    found += [stanzas] if stanzas else []
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

#: What ``read`` gives a line or stanza: (index of its first line, its fields, the index of
#: its parent among the items, -1 for none).
Item = tuple[int, list[tuple[str, str]], int]


def read(lines: Sequence[str], s: Structure) -> tuple[list[Item], float]:
    """The items of ``lines`` in structure ``s`` (a line no template reads is an item with only
    ``text``) and the share of the non-blank, non-comment lines read into fields."""
    if s.layout == "stanzas":
        return _read_stanzas(lines, s)
    body = content(lines, s.comment)
    if not body:
        return [], 0.0
    levels = (levels_by_indent(body) if s.layout == "indent" else levels_by_block(lines, body) if s.layout == "blocks"
              else [0] * len(body))
    par = parents(levels)
    items: list[Item] = []
    n_read = 0
    start = 0
    first = cut(body[0][1].strip())
    if s.header and tuple(field_name(body[0][1].strip()[a:b]) for a, b in first.spans) == s.header:
        start, n_read = 1, 1  # the header row: read, as the fields' names
    for i in range(start, len(body)):
        k, line = body[i]
        text = line.strip()
        if s.stated is not None:
            got = s.stated.read(line)  # type: ignore[attr-defined]
        else:
            got = s.levels[min(levels[i], len(s.levels) - 1)].read(text) if s.levels else None
        n_read += got is not None
        items.append((k, got or [("text", text)], par[i] - start if par[i] >= start else -1))
    return items, n_read / len(body)


def _read_stanzas(lines: Sequence[str], s: Structure) -> tuple[list[Item], float]:
    items: list[Item] = []
    fields: list[tuple[str, str]] = []
    first = ""
    begun = -1
    n_body = n_read = 0
    last_label = False

    def close() -> None:
        if fields:
            items.append((begun, list(fields), -1))
        fields.clear()

    for k, raw in enumerate(lines):
        if not raw.strip():
            close()
            last_label = False
            continue
        if s.comment and raw.lstrip().startswith(s.comment):
            continue
        n_body += 1
        m = _LABEL_LINE.match(raw.strip()[:LINE_CAP]) if not raw[:1].isspace() else None
        if m and len(m.group(1).split()) <= 4:
            label = field_name(m.group(1))
            value = (raw.strip()[m.start(2):] if m.group(2) is not None else "").strip()
            if fields and label == first:
                close()
            if not fields:
                begun, first = k, label
            fields.append((label, value))
            n_read += 1
            last_label = True
        elif last_label and raw[:1].isspace() and fields:
            label, value = fields[-1]
            fields[-1] = (label, f"{value} {raw.strip()}".strip())
            n_read += 1
        else:
            if not fields:
                begun, first = k, ""
            fields.append(("text", raw.strip()))
            last_label = False
    close()
    return items, n_read / n_body if n_body else 0.0
