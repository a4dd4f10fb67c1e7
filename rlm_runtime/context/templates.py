"""Templates: the constant skeleton of a text's lines and the fields between, mined Drain-style.

A line is cut into *slots* (runs of words joined by single spaces or by punctuation inside a
word: ``db-07``, ``3.5``, ``12:01``) and the *separators* between them (other punctuation,
tabs, runs of spaces). Lines are clustered by their separators into a ``Template``; a
template may end in a slot that runs to the line's end (free text, whatever its
punctuation). Within a template, a slot whose value is the same on every line is a label,
and a slot whose lines all have the same number of words is cut at the words every line
shares (``host db-07 status up``: ``host`` and ``status`` name the values after them).
Fields are named by the text's own labels (a constant word before a value, ``key=value``,
a header row over a delimited or fixed-width table), otherwise ``field 1``, ``field 2``...

``mine`` chooses, among the commonest exact separators and the commonest leading ones, the
template reading most varying fields a line; it runs on a bounded sample. ``Template.read``
cuts at most ``LINE_CAP`` characters of a line: reading a text is linear in its size.
``structure.py`` decides which lines are records and calls these per level.
"""

from __future__ import annotations

import bisect
import csv
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

#: Characters of a line the miner looks at; a longer line's last field keeps the rest.
LINE_CAP = 400
#: Slots of a line told apart; past them the line's tail is one free-text field.
MAX_SLOTS = 16
#: Lines of a template needed before a value the same on all of them is taken as a label.
MIN_CONSTANT = 5
#: Words of a slot cut apart at its shared words, at most.
MAX_SPLIT_WORDS = 12
#: A line whose only field is the whole line is a name in a hierarchy when it has at most
#: this many words (median of its level): longer ones are prose.
NAME_WORDS = 8

# A slot: words joined by single spaces or by punctuation inside a word ("db-07", "3.5",
# "don't", "a/b", "12:01", "1,200"). Each joiner is one non-word character between word
# runs, so matching is linear.
_SLOT = re.compile(r"\w+(?:(?: (?!\w+=)|[-.'/@+#]|(?<=\d)[:,](?=\d))\w+)*")
_SPACES = re.compile(r"\s+")
#: Grammar words: never a field's name on their own ("the owner of" names "owner").
_GRAMMAR = frozenset("""a an the of is are was were be been being has have had its it it's their his her this that
these those by in on at to for from with and or as called named which who whose there here 's also""".split())


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
    and ``rest`` when the last slot runs to the line's end (free text); or, with ``delimiter``,
    cells between one character (``a;;b;c``), as many on every line, any of them empty."""

    seps: tuple[str, ...]
    slots: tuple[Slot, ...]
    rest: bool
    delimiter: str = ""
    #: Where each slot starts, when the slots are columns (cells two spaces or more apart, each
    #: starting at the same place on the rows): a row with empty cells is read by place.
    columns: tuple[int, ...] = ()

    def cells(self, line: str, c: Cut | None = None) -> list[str] | None:
        """The text of each slot of ``line`` (a delimited line's cells, a cut line's slots
        when its separators are the template's), or None."""
        if self.delimiter:
            cells = split(line, self.delimiter)
            return cells if len(cells) == len(self.slots) else None
        c = c or cut(line)
        return [line[a:b] for a, b in c.spans] if c.seps == self.seps and not c.more else None

    def read(self, line: str, c: Cut | None = None) -> list[tuple[str, str]] | None:
        """The fields of ``line``, or None when the line is not of this form."""
        if self.delimiter:
            return self._read_cells(line)
        c = c or cut(line)
        n = len(self.slots)
        if self.rest:
            if len(c.spans) < n or c.seps[:n] != self.seps:
                return None
        elif c.more or c.seps != self.seps:
            return self._read_columns(line, c) if self.columns and not c.more else None
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

    def _read_columns(self, line: str, c: Cut) -> list[tuple[str, str]] | None:
        """A row of a column-aligned table that the separators do not read (an empty cell, a
        cell with punctuation): each column's text from its start to its last slot, each
        column's first slot starting where the column does, two spaces or more after the
        column before; None when a slot starts elsewhere."""
        cells: dict[int, list[int]] = {}
        for k, (a, b) in enumerate(c.spans):
            i = bisect.bisect_right(self.columns, a) - 1
            if i in cells:
                cells[i][1] = b
            elif i < 0 or a != self.columns[i] or (k and c.seps[k] != "  "):
                return None
            else:
                cells[i] = [a, b]
        return [(self.slots[i].name, line[a:b]) for i, (a, b) in sorted(cells.items())]

    def _read_cells(self, line: str) -> list[tuple[str, str]] | None:
        cells = self.cells(line)
        if cells is None:
            return None
        out: list[tuple[str, str]] = []
        for slot, cell in zip(self.slots, cells, strict=True):
            value = cell.strip()
            if slot.const is not None:
                if value != slot.const:
                    return None
            elif value:  # an empty cell is a field the line does not have
                out.append((slot.name, value))
        return out

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(n for s in self.slots for n in ((s.name,) if s.name else s.names))


@dataclass(frozen=True)
class Forms:
    """Several forms of one level's lines, tried in order (a log's kinds of event, a file's
    kinds of directive): a line is read by the first that reads it."""

    forms: tuple[Template, ...]

    def read(self, line: str, c: Cut | None = None) -> list[tuple[str, str]] | None:
        c = c or cut(line)
        return next((got for t in self.forms if (got := t.read(line, c)) is not None), None)

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(f for t in self.forms for f in t.fields))


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
    kept = [w for w in words if w.lower() not in _GRAMMAR]
    return field_name(" ".join(kept[-3:])) if kept and _labelled(" ".join(kept[-3:])) else ""


def field_name(text: str) -> str:
    """A field's name as records spell them: lower case, single spaces."""
    return " ".join(text.replace("_", " ").split()).lower()


def _build(seps: tuple[str, ...], rest: bool, rows: list[tuple[str, Cut]], first: int = 0) -> Template:
    """The template of separators ``seps`` over the lines ``rows`` (all of that form): which
    slots are labels, which are cut into words, and every field's name."""
    n = len(seps) if rest else len(seps) - 1
    values = [[(line[c.spans[i][0]:].strip() if rest and i == n - 1 else line[c.spans[i][0]:c.spans[i][1]])
               for line, c in rows] for i in range(n)]
    slots: list[Slot] = []
    label = ""  # a label just read, naming the next value
    position = first  # fields named by place are numbered on from ``first``
    for i in range(n):
        vals = values[i]
        last = i == n - 1
        if len(vals) >= MIN_CONSTANT and len(set(vals)) == 1 and _labelled(vals[0]) and not last:
            slots.append(Slot(const=vals[0]))
            label = _label(vals[0].split())
            continue
        words = None if (rest and last) else _words_of(vals)
        if words is not None and label and words[0] is not None:
            words = None  # words the value starts with, after a label, are the value's ("name: item 5")
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
    kept = tuple(_unique(slots))
    return Template(seps[:n] if rest else seps, kept, rest, columns=() if rest else _columns(seps, kept, rows))


def _columns(seps: tuple[str, ...], slots: tuple[Slot, ...], rows: list[tuple[str, Cut]]) -> tuple[int, ...]:
    """Where each slot starts, when the slots are plain fields two spaces or more apart, each
    starting at one place on nine rows in ten; else ()."""
    if len(slots) < 2 or seps[0] or any(s != "  " for s in seps[1:-1]) or any(not s.name for s in slots):
        return ()
    starts: list[int] = []
    for i in range(len(slots)):
        place, n = Counter(c.spans[i][0] for _, c in rows).most_common(1)[0]
        if n < 0.9 * len(rows):
            return ()
        starts.append(place)
    return tuple(starts)


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


def header(template: Template, first: tuple[str, Cut], rows: list[tuple[str, Cut]]) -> tuple[str, ...] | None:
    """Field names from a first line of the same separators over a table of plain fields: each
    cell a label-like text found nowhere in its column below, and in at least half the columns
    of another ``form`` than most of the column's values (a word over numbers, over codes, over
    names in another letter case) or over a column of a few values said again and again. An empty cell over a column with values is named by its
    place; over an empty column (a bordered table's outer bars) it names nothing."""
    line, c = first
    cells = template.cells(line, c)
    if template.rest or cells is None or any(s.name == "" for s in template.slots):
        return None
    cells = [x.strip() for x in cells]
    named = [x for x in cells if x]
    table = [x for ln, d in rows if (x := template.cells(ln, d)) is not None]
    if not table or len(named) < 2 or len(set(named)) != len(named) or not all(_labelled(x) for x in named):
        return None
    names: list[str] = []
    unlike = 0
    for i, cell in enumerate(cells):
        column = [v for x in table if (v := x[i].strip())]
        if not cell:
            names.append(f"field {i + 1}" if column else "")
            continue
        if cell in column:
            return None
        # Another form than the values below, or a word apart from a column of few values said
        # again and again (``state`` over ``open``, ``closed``).
        unlike += (sum(form(v) != form(cell) for v in column) >= 0.8 * len(column)
                   or (len(column) >= MIN_CONSTANT and 2 * len(set(column)) <= len(column)))
        names.append(field_name(cell))
    return tuple(names) if 2 * unlike >= len(named) else None


def form(text: str) -> str:
    """A value's form: each run of capitals, of small letters or of digits one mark (``A``,
    ``a``, ``0``), other characters kept: "T-12" is "A-0", "Open" is "Aa", "3.5" is "0.0"."""
    out: list[str] = []
    for ch in text[:LINE_CAP]:
        mark = "0" if ch.isdigit() else "A" if ch.isupper() else "a" if ch.isalpha() else ch
        if not out or out[-1] != mark or mark not in "0Aa":
            out.append(mark)
    return "".join(out)


def mine(rows: list[tuple[str, Cut]], *, whole_ok: bool, bar: float, first: int = 0) -> tuple[Template, int] | None:
    """The template reading most fields per line over ``rows``, and how many rows it reads;
    those reading at least ``bar`` of the rows first (a form of many fields on a few rows
    loses to one of fewer on nearly all). ``whole_ok`` lets a line's one field be the whole
    line (a name in a hierarchy). Candidates
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
    best: tuple[bool, bool, float, int, Template] | None = None
    for t in [*(_template(rows, seps, rest, first) for seps, rest, _ in candidates), _delimited(rows, first)]:
        if t is None:
            continue
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
        # Cells quoted around their delimiter are a CSV's: a form that cuts inside them is wrong.
        score = (read >= bar * len(rows), bool(t.delimiter) and _quoted(rows, t.delimiter), read * fields / len(rows), read)
        if best is None or score > best[:4]:
            best = (*score, t)
    return (best[4], best[3]) if best else None


def _template(rows: list[tuple[str, Cut]], seps: tuple[str, ...], rest: bool, first: int) -> Template | None:
    """The template of separators ``seps`` (the first of them, with ``rest``) built on the rows of that form."""
    n = len(seps) if rest else len(seps) - 1
    mine_rows = [(ln, c) for ln, c in rows if (len(c.spans) >= n and c.seps[:n] == seps) if rest
                 ] if rest else [(ln, c) for ln, c in rows if not c.more and c.seps == seps]
    return _build(seps, rest, mine_rows, first) if mine_rows and n else None


def split(line: str, delimiter: str) -> list[str]:
    """A delimited line's cells; a cell in double quotes may hold the delimiter, as CSV
    quotes it (a line csv cannot read is split plainly)."""
    if '"' not in line:
        return line.split(delimiter)
    try:
        return next(csv.reader([line], delimiter=delimiter), [""])
    except csv.Error:
        return line.split(delimiter)


def _quoted(rows: list[tuple[str, Cut]], delimiter: str) -> bool:
    """Whether a fifth of the rows or more quote a cell holding the delimiter (``"Oslo, Norway"``)."""
    return sum(any(delimiter in cell for cell in split(ln, delimiter)) for ln, _ in rows if '"' in ln) * 5 >= len(rows)


#: Characters that may delimit a line's cells one for one, empty cells allowed ("0041;A;;Lu").
DELIMITERS = (";", "|", "\t", ",")


def _delimited(rows: list[tuple[str, Cut]], first: int) -> Template | None:
    """Cells between one delimiter, as many on most rows (two at least, three between commas,
    which also punctuate sentences): the delimiter with
    the most such rows. Every cell is a field, by position (an empty cell is a value the row
    does not have): a column the same on every row of the sample may differ further on."""
    best: tuple[int, str, int] | None = None
    for d in DELIMITERS:
        counts = Counter(len(split(ln, d)) - 1 if d in ln else 0 for ln, _ in rows)
        k, n = counts.most_common(1)[0]
        if k >= (2 if d == "," else 1) and 2 * n >= len(rows) and (best is None or n > best[0]):
            best = (n, d, k)
    if best is None:
        return None
    _, d, k = best
    return Template((), tuple(Slot(name=f"field {first + i + 1}") for i in range(k + 1)), False, d)


#: Forms a level may have, at most, and the least share (and number) of its rows each must read.
MAX_FORMS = 3
FORM_SHARE = 0.1
FORM_ROWS = 5


def mine_forms(rows: list[tuple[str, Cut]], *, whole_ok: bool, bar: float) -> tuple[Template | Forms, int] | None:
    """The form of ``rows`` (``mine``), or several when the rows are of a few kinds that
    together read at least ``bar`` of them and more fields than the one form does: each the
    form reading most fields of the rows left by those before it, and at least ``FORM_SHARE``
    of all rows and ``FORM_ROWS`` of them; fields named by place are numbered on across them."""
    single = mine(rows, whole_ok=whole_ok, bar=bar)
    forms: list[Template] = []
    left, read, first = rows, 0, 0
    while left and len(forms) < MAX_FORMS:
        found = mine(left, whole_ok=whole_ok, bar=2.0, first=first)  # no bar: the most fields read
        if found is None or found[1] < max(FORM_SHARE * len(rows), FORM_ROWS):
            break
        forms.append(found[0])
        read += found[1]
        first += sum(f.startswith("field ") for f in found[0].fields)
        left = [(ln, c) for ln, c in left if found[0].read(ln, c) is None]
    if len(forms) < 2 or read < bar * len(rows):
        return single
    several = Forms(_aligned(forms))
    if single is not None and _fields_read(single[0], rows) >= _fields_read(several, rows):
        return single
    return several, read


_POSITIONAL = re.compile(r"field \d+")


def _anchors(t: Template) -> list[tuple[str, int] | None]:
    """What stands before each slot of ``t``, to match slots across forms: a delimited cell's
    place, else the separator's punctuation ("^" at the line's start) and how many times it
    stood before an earlier slot; None for spaces alone, which match nothing."""
    if t.delimiter:
        return [(t.delimiter, i) for i in range(len(t.slots))]
    said: Counter[str] = Counter()
    out: list[tuple[str, int] | None] = []
    for i in range(len(t.slots)):
        mark = "^" if i == 0 else t.seps[i].strip()
        out.append((mark, said[mark]) if mark else None)
        said[mark] += 1
    return out


def _aligned(forms: list[Template]) -> tuple[Template, ...]:
    """The forms with one name for one column: a field named by place in a later form takes
    the name of the first form's field in the same place (after the same punctuation said as
    often before it, the same delimited cell), and the names by place left are numbered 1, 2,
    ... across the forms in the order they come."""
    first = forms[0]
    theirs = {a: s.name for a, s in zip(_anchors(first), first.slots, strict=True) if a and _POSITIONAL.fullmatch(s.name)}
    renamed = [first]
    for t in forms[1:]:
        same = bool(t.delimiter) == bool(first.delimiter)
        slots = tuple(Slot(name=theirs[a]) if same and a in theirs and _POSITIONAL.fullmatch(s.name) else s
                      for a, s in zip(_anchors(t), t.slots, strict=True))
        renamed.append(Template(t.seps, slots, t.rest, t.delimiter))
    order: dict[str, str] = {}
    for t in renamed:
        for name in t.fields:
            if _POSITIONAL.fullmatch(name) and name not in order:
                order[name] = f"field {len(order) + 1}"
    return tuple(Template(t.seps, tuple(_renumbered(s, order) for s in t.slots), t.rest, t.delimiter) for t in renamed)


def _renumbered(s: Slot, order: dict[str, str]) -> Slot:
    if s.name:
        return Slot(name=order.get(s.name, s.name))
    if s.names:
        return Slot(words=s.words, names=tuple(order.get(n, n) for n in s.names))
    return s


def _fields_read(t: Template | Forms, rows: list[tuple[str, Cut]]) -> int:
    return sum(len(got) for ln, c in rows if (got := t.read(ln, c)) is not None)


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
