"""Records: a text's structure as data, so code can filter, group and count it.

Small coding models write good short Python over lists and dicts and poor regular
expressions over text they cannot see. ``records()`` in the sandbox turns the text into a
list of records (dicts of field -> value) whatever its shape, and the probe brief says
which shape it found, so "how many X have Y" is ``len(recs.where("y", "..."))`` and a
chain of facts is two ``find`` calls.

Shapes. JSON (a document, a window of one, or JSON lines) checks itself by parsing and comes
first (``nested.py``: values keep their JSON types). Every other reader, run on the first
``SNIFF_LINES`` non-blank lines, says its *coverage*, the share of the sample's non-blank,
non-comment lines it reads into fields (not into ``text``), and the best at or over ``GATE``
is offered (on a tie, the earlier in this list). Under the gate the text has no fields, and
says why: a structure that is wrong is worse than none.

* ``json``: the objects of JSON, each holding values a record, knowing its parent;
* ``blocks``: ``key: value`` lines (bullets allowed) grouped into records by blank lines,
  by markdown headings, or by the record's first field coming round again; indented lines
  continue the field above; other lines go to the field ``text``;
* ``structure``: a structure found in the text itself (``structure.py``: records one a
  line, nested by indentation or in blocks under a title, their fields from
  line templates mined from the sample, ``templates.py``: a table's cells named by its
  header row), each record knowing its parent and children; or a form the model states
  (``forms.py``, ``records(template=...)``);
* ``paragraphs``: no fields it could read: one record per blank-line-separated paragraph
  (or line), with the single field ``text`` (code must search it).

Field names are lower case with single spaces (``Home Port`` -> ``home port``); a record
also answers to ``r["home_port"]`` and ``r["Home Port"]``. Text values are stripped strings.
Every record knows the line it starts on (``r.line``) and, in a corpus, its document
(``r.doc``). Parsing is linear: one pass over the lines with patterns bounded per line.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import html
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from rlm_runtime.context import about as _about
from rlm_runtime.context import forms as _forms
from rlm_runtime.context import nested as _nested
from rlm_runtime.context import structure as _structure
from rlm_runtime.errors import ContextError
from rlm_runtime.quoting import VALUE_CHARS, quoted

#: Non-blank lines read to decide a text's shape.
SNIFF_LINES = 200
#: The most text ``records()`` parses at once (bytes of UTF-8); past it, narrow with grep first.
MAX_PARSE_BYTES = 16 * 1024 * 1024
#: The most records one call returns.
MAX_RECORDS = 250_000
#: Characters of a line the field patterns look at (a longer line keeps its whole value).
_LINE_HEAD = 2000
#: Records a printed ``Records`` shows before saying how many more there are.
SHOWN = 5
#: Records printed whole when a result is this short.
SHOWN_ALL = 20

_HEADING = re.compile(r"^\s{0,3}(?:#{1,6}\s+(\S(?:.*\S)?)|\[([^\[\]]{1,200})\])\s*$")  # markdown or INI; linear
_BULLET_STARTS = frozenset("-*+\u2022")
_BULLET = re.compile(r"^\s*(?:[-*+\u2022]|\d{1,3}[.)])\s+")
# A field: a short name starting with a letter, then ":" or "=", then the value. The name's
# class excludes both separators, so the match is bounded by the name's 48 characters.
_FIELD = re.compile(r"^\s*([A-Za-z][\w .'/()&-]{0,47}?)\s*[:=]\s?(.*)$", re.S)
_URLISH = re.compile(r"^[a-z][a-z0-9+.-]*://")
# XML, one element a line: a leaf <status>up</status> is a field; <host name="x"> (or <host>)
# opens a record, with its attributes as fields, and </host> closes it; <host a="1"/> is one.
_XML_LEAF = re.compile(r"^\s*<([A-Za-z_][\w.-]{0,47})(?:\s[^<>]*)?>([^<]*)</\1>\s*$")
_XML_OPEN = re.compile(r"^\s*<([A-Za-z_][\w.-]{0,47})((?:\s[^<>]*?)?)(/?)>\s*$")
_XML_ATTR = re.compile(r"([A-Za-z_][\w.:-]{0,47})\s*=\s*(?:\"([^\"]*)\"|'([^']*)')")
_XML_CLOSE = re.compile(r"^\s*</([A-Za-z_][\w.-]{0,47})\s*>\s*$")

SHAPE_TEXT = {
    "blocks": "records of key: value lines",
    "structure": "records found in the text's own layout",
    "json": "a JSON document: a record an object that holds values, its key first; the objects it holds are its children "
            "(recs.children_of(name), recs.parent_of(name))",
    "paragraphs": "no fields it could read (a record a paragraph, only its text: search it)",
    "mixed": "documents of several shapes",
}
#: The shapes whose records have fields of their own to filter and look up.
FIELDED_SHAPES = frozenset({"blocks", "structure", "json"})
#: What a shape whose records are written inside others adds.
_NESTED_TEXT = "; a record written inside another is its child (recs.children_of(name), recs.parent_of(name))"
#: How a found structure whose fields a header row names is said.
_TABLE_TEXT = "a table with a header row"
#: How each layout of a found structure is said.
_LAYOUT_TEXT = {
    "lines": "one record a line",
    "indent": "records nested by indentation, each knowing its parent and children (recs.children_of(name), "
              "recs.parent_of(name))",
    "blocks": "blocks of lines, each block's first line holding the others as its children (recs.children_of(name))",
    "stated": "one record a line, read by the form given",
}


@functools.lru_cache(maxsize=4096)
def _norm(key: str) -> str:
    return " ".join(str(key).replace("_", " ").split()).lower()


class Record(dict[str, Any]):
    """One record: field -> value. ``line`` is where it starts (1-based); ``doc`` names its
    document in a corpus (None for one text). Looking a field up ignores case, spaces and
    underscores; a missing field raises KeyError naming the fields there are."""

    __slots__ = ("line", "doc", "parent", "_children")
    line: int
    doc: str | None
    #: The record holding this one (the line above with less indentation, the head of its
    #: block), or None.
    parent: Record | None

    def __init__(self, fields: Iterable[tuple[str, Any]] = (), line: int = 0, doc: str | None = None) -> None:
        super().__init__(fields)
        self.line = line
        self.doc = doc
        self.parent = None
        self._children: list[Record] | None = None

    @property
    def children(self) -> Records:
        """The records this one holds (indented under it, or the rest of its block)."""
        return Records(self._children or ())

    def __missing__(self, key: Any) -> Any:
        wanted = _norm(key)
        for name in self:
            if _norm(name) == wanted:
                return dict.__getitem__(self, name)
        raise KeyError(f"{_q(key)}: this record has no such field; its fields are "
                       f"{', '.join(map(quoted, list(self)[:_FIELDS_SAID])) or '(none)'}")

    def get(self, key: Any, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) or (isinstance(key, str) and any(_norm(k) == _norm(key) for k in self))


def _q(text: Any) -> str:
    """A value the model gave, as a note says it back: ``quoting.quoted``, cut to ``VALUE_CHARS``."""
    return quoted(text, VALUE_CHARS)


def _same(value: Any, wanted: Any) -> bool:
    """``value`` equals ``wanted`` ignoring case and outer spaces (a list: any of its items)."""
    if isinstance(value, list):
        return any(_same(v, wanted) for v in value)
    if isinstance(value, str) or isinstance(wanted, str):
        return str(value).strip().casefold() == (_folded(wanted) if isinstance(wanted, str) else str(wanted).strip().casefold())
    return bool(value == wanted)


@functools.lru_cache(maxsize=4)
def _folded(text: str) -> str:
    """``text`` as ``_same`` compares it, once a lookup: a wanted value of megabytes is folded
    once, not once a record (a string keeps its hash, so the cache finds it at no cost)."""
    return text.strip().casefold()


def _show(r: Record) -> str:
    """A record as a list of records prints it: ``line 12: {...}``, its document's name
    ``quoted``, and where it sits among the others."""
    where = f"line {r.line}{f' of {quoted(r.doc)}' if r.doc else ''}"
    family = ""
    if r.parent is not None or r._children:
        up = f"under {quoted(str(next(iter(r.parent.values()), '')), VALUE_CHARS)} (line {r.parent.line})" \
            if r.parent is not None else ""
        down = f"{len(r._children)} children" if r._children else ""
        family = f" ({'; '.join(x for x in (up, down) if x)})"
    return f"{where}: {dict.__repr__(r)}{family}"


#: Parents looked through to tell whether a record is under another (a bound, not a depth limit).
_ANCESTORS_SEEN = 64


def _under_any(r: Record, ids: set[int]) -> bool:
    """Whether one of the records ``ids`` holds ``r`` (looking ``_ANCESTORS_SEEN`` parents up)."""
    up = r.parent
    for _ in range(_ANCESTORS_SEEN):
        if up is None:
            return False
        if id(up) in ids:
            return True
        up = up.parent
    return False


class Records(list[Record]):
    """A list of records with the three operations counting and lookups need.

    ``where(field, value)`` keeps the records whose field equals the value (any case);
    ``tally(field)`` counts each value, most common first; ``find(value)`` gives the records
    holding the value in any field, those named by it (their first field) first. Printing
    shows how many there are, their fields and the first few. Indexed by a field name, the
    list reads that field of its first record (``find(name)["city"]``)."""

    shape: str

    def __init__(self, items: Iterable[Record] = (), shape: str = "", note: str = "", of: int | None = None,
                 *, note_only: bool = False) -> None:
        super().__init__(items)
        self.shape = shape
        self._note = note
        self._of = of  # a slice: how many records the list it was cut from held
        # An empty list whose note is what was asked for prints the note alone, not "0 records: ..."
        # (a small model read "0 records" and went on as if nothing was found).
        self._note_only = note_only and not self
        self._tables: dict[str, Any] = {}  # about()'s index and the lookups' tables, made on first use
        #: The share of the text's lines read into fields (None: not measured).
        self.coverage: float | None = None

    def _derived(self, items: Iterable[Record], note: str, of: int | None = None, *, note_only: bool = False) -> Records:
        return Records(items, self.shape, note, of, note_only=note_only)

    def fresh(self) -> Records:
        """A copy whose records (and their values, however nested) code may change without touching this one;
        parents and children link the copies (a link out of the list is dropped)."""
        copies = {id(r): Record(((k, v if isinstance(v, _SCALARS) else copy.deepcopy(v)) for k, v in r.items()), r.line, r.doc)
                  for r in self}
        for r in self:
            if r.parent is not None or r._children:
                c = copies[id(r)]
                c.parent = copies.get(id(r.parent))
                c._children = [copies[id(k)] for k in r._children or () if id(k) in copies] or None
        out = Records(copies.values(), self.shape, self._note)
        out.coverage = self.coverage
        return out

    def _named(self, name: Any) -> list[Record]:
        """The records named ``name`` (their first field), else those holding it in any field,
        else those whose values make it."""
        named = [r for r in self if r and _same(next(iter(r.values())), name)]
        named = named or [r for r in self if any(_same(v, name) for v in r.values())]
        # A line's whole text ("drill part 1" of a line read as 'field 1' drill, 'part' 1).
        named = named or [r for r in self if _same(" ".join(str(v) for v in r.values() if not isinstance(v, list)), name)]
        # Of a record and those under it sharing its name ("saw", "saw part 1"), the outermost.
        ids = {id(r) for r in named}
        return [r for r in named if not _under_any(r, ids)]

    def children_of(self, name: Any) -> Records:
        """The records directly under the record named ``name`` (indented under it, or the rest
        of its block): ``len(recs.children_of(name))`` counts them."""
        holders = self._named(name)
        if not holders:
            return _kept_if_empty(self._derived([], f"no record is named {_q(name)}" + self._named_in(str(name))))
        kids = [k for r in holders for k in r._children or ()]
        note = (f"{len(holders)} records are named {_q(name)}; these are the children of all of them" if len(holders) > 1
                else "")
        if not kids:
            note = f"the record named {_q(name)} (line {holders[0].line}) has nothing under it"
        return _kept_if_empty(self._derived(kids, note))

    def parent_of(self, name: Any) -> Records:
        """The record holding the record named ``name`` (the nearest line above it with less
        indentation, or the head of its block): ``recs.parent_of(name)[0]``."""
        holders = self._named(name)
        if not holders:
            return _kept_if_empty(self._derived([], f"no record is named {_q(name)}" + self._named_in(str(name))))
        parents = list({id(r.parent): r.parent for r in holders if r.parent is not None}.values())
        note = "" if parents else f"the record named {_q(name)} (line {holders[0].line}) is at the top: nothing holds it"
        return _kept_if_empty(self._derived(parents, note))

    @property
    def fields(self) -> list[str]:
        """Every field name, in the order first seen."""
        seen: dict[str, None] = {}
        for r in self:
            seen.update(dict.fromkeys(r))
        return list(seen)

    def count(self, *args: Any) -> int:  # type: ignore[override]
        """``count(field, value)``: how many records have ``field`` equal to ``value`` (as
        ``len(where(field, value))``); ``count(value)``: how many hold ``value`` (as
        ``len(find(value))``, so ``count("field: value")`` works too); ``count()``: how many
        records there are. A ``Record`` argument counts its equals, as ``list.count`` does."""
        if len(args) == 2:
            return len(self.where(*args))
        if not args:
            return len(self)
        if len(args) == 1 and not isinstance(args[0], dict):
            return len(self.find(args[0]))
        return list.count(self, *args)

    def where(self, field: str, value: Any) -> Records:
        """The records whose ``field`` equals ``value``, ignoring case."""
        kept = [r for r in self if _same(r.get(field), value)]
        note = ""
        if not kept:
            values = self.tally(field)
            if not values:
                note = f"no record has a field {_q(field)}; the fields are {', '.join(map(quoted, self.fields[:_FIELDS_SAID]))}"
            else:
                top = ", ".join(f"{quoted(v, VALUE_CHARS)} ({n})" for v, n in list(values.items())[:12])
                note = f"no record has {quoted(field)} = {_q(value)}; its values are {top}" + self._held_in(value)
        return _kept_if_empty(self._derived(kept, note))

    def _held_in(self, value: Any) -> str:
        """Where ``value`` is a whole field value after all (the question's word for the field
        was not the text's): "; 'x' is the host of 1 record: find('x')"."""
        holders: Counter[str] = Counter()
        for r in self:
            holders.update(k for k, v in r.items() if _same(v, value))
            if sum(holders.values()) >= _HELD_IN_MOST:
                break
        if not holders:
            return ""
        where = ", ".join(f"the {quoted(k)} of {n} record{'s' if n != 1 else ''}" for k, n in holders.most_common(3))
        return f"; {_q(value)} is {where}: find({_q(value)}) gives {'it' if sum(holders.values()) == 1 else 'them'}"

    def tally(self, field: str) -> dict[str, int]:
        """How many records have each value of ``field``, most common first; values that
        differ only in case count as one (spelled as first seen), as ``where`` matches them."""
        counts: Counter[str] = Counter()
        spelling: dict[str, str] = {}
        for r in self:
            value = r.get(field)
            if value is None:
                continue
            for v in value if isinstance(value, list) else [value]:
                text = str(v).strip()
                counts[spelling.setdefault(text.casefold(), text)] += 1
        return dict(counts.most_common())

    def find(self, value: Any, *more: Any) -> Records:
        """The records with ``value`` in any field (ignoring case), those whose first field is
        ``value`` first: ``find(name)[0]`` is the record of that name when there is one. When
        no field is ``value`` whole, those holding it as words of a field (a part of a name).
        ``find(field, value)`` and ``find("field: value")`` (or ``field=value``, for a field
        the records have) are ``where(field, value)``."""
        if more:
            return self.where(value, more[0])
        pair = field_and_value(self, value)
        if pair is not None:
            return self.where(*pair)
        named, mentioning = [], []
        for r in self:
            items = list(r.values())
            if items and _same(items[0], value):
                named.append(r)
            elif any(_same(v, value) for v in items[1:]):
                mentioning.append(r)
        if named:
            return self._derived(named + mentioning, "")
        if mentioning:
            # No record is named so: say which field holds the value (a release date found
            # by find() is the release of these records, not a record of its own).
            held = Counter(k for r in mentioning[:_HELD_IN_MOST] for k, v in list(r.items())[1:] if _same(v, value))
            where = " or ".join(f"the {quoted(k)}" for k, _ in held.most_common(3))
            # Said as what the value is, not what it is not: a small model read "no record is
            # named 'salt'" as "salt is not in the text".
            return self._derived(mentioning, f"{_q(value)} is {where} of each of these {len(mentioning)} records")
        # No whole value: the records holding it as words of a value (a part of a name).
        phrase = str(value).strip()
        words = re.compile(r"(?<!\w)" + re.escape(phrase.casefold()) + r"(?!\w)") if 0 < len(phrase) <= _PART_CHARS else None
        partial = [r for r in self if words is not None and any(
            words.search(str(v).casefold()) for v in (x for val in r.values() for x in (val if isinstance(val, list) else [val])))]
        if isinstance(value, str) and _norm(value) in {_norm(f) for f in self.fields}:
            # A field's name given as a value ("find('department')" for "which department is
            # most common"): say so, with what the field holds, even where a few records hold
            # the word within a text (a small model counted those as the field's records).
            field = next(f for f in self.fields if _norm(f) == _norm(value))
            field_code = quoted(field)
            counts = list(self.tally(field).items())
            top = ", ".join(f"{quoted(v, VALUE_CHARS)}: {n}" for v, n in counts[:_TALLY_SHOWN])
            top += ", ..." if len(counts) > _TALLY_SHOWN else ""
            tied = [quoted(v, VALUE_CHARS) for v, n in counts if n == counts[0][1]] if counts else []
            most = (f" The most common {field_code} is {tied[0]} ({counts[0][1]} records)." if len(tied) == 1 else
                    f" The most common {field_code} values are {', '.join(tied[:8])} ({counts[0][1]} records each)."
                    if tied else "")
            return _kept_if_empty(self._derived(
                [], f"{_q(value)} is a field of the records, not a value. Its values, most common first "
                    f"(recs.tally({field_code})): {{{top}}}.{most} recs.count({field_code}, value) counts the records "
                    f"of one value; recs.where({field_code}, value) keeps them.", note_only=True))
        if not partial and isinstance(value, str):
            found = self._by_named_value(value)
            if found is not None:
                return found
        said = quoted(value, VALUE_CHARS)
        # Said as what was found first: a small model read "no record has ..." above the
        # records holding it and answered that there were none.
        note = (f"{len(partial)} record{'s hold' if len(partial) != 1 else ' holds'} {said} within a value (no field is "
                f"{said} whole)" if partial else f"no record has {said} as a whole field value"
                + (self._named_in(value) if isinstance(value, str) else "; grep for part of it"))
        return _kept_if_empty(self._derived(partial, note))

    def _by_named_value(self, phrase: str) -> Records | None:
        """The records of the one value a phrase names (``find("keys of type 'd'")``): those
        whose field (the one the phrase names, else the one holding it most) is that value,
        said so; None when the phrase names no value, several, or a record's name (first
        field). A small model handed "0 records" with the count in a note answered 0."""
        index = value_index_of(self)
        fields, values = _about.within(phrase, self.fields, index)
        if len(values) != 1:
            return None
        held = index[values[0].casefold()]
        if held.get(next(iter(self.fields), "")):
            return None  # a record's name: the note says how to read the fields the phrase names
        field = next((f for f in fields if held.get(f)), None) or held.most_common(1)[0][0]
        kept = [r for r in self if _same(r.get(field), values[0])]
        shown = quoted(values[0], VALUE_CHARS)
        return self._derived(kept, f"no field is {_q(phrase)} whole; it names {shown}, the {quoted(field)} of these "
                                   f"{len(kept)} record{'s' if len(kept) != 1 else ''}: recs.where({quoted(field)}, {shown})")

    def _named_in(self, phrase: str) -> str:
        """What a phrase given to ``find`` names, when it is no value (``find("failover of
        db-07")``): the values it holds, where they are, and the fields it names, as the
        code that reads them; "; grep for part of it" when it names no value."""
        index = value_index_of(self)
        named, values = _about.within(phrase, self.fields, index)
        if not values:
            return "; grep for part of it"
        first = next(iter(self.fields), "")
        said = "; ".join(f"{shown} ({_about.where_held(v, index, first)}): find({shown})"
                         for v in values[:_about.MOST_VALUES] for shown in [quoted(v, VALUE_CHARS)])
        # The value that names a record, to read the named fields from.
        lead = next((v for v in values if index[v.casefold()].get(first)), None)
        fields = [f for f in named if f != first][:3]
        record = named_of(self).get(lead.casefold()) if lead is not None else None
        # With what each read gives: a small model told only the code ran its own phrase
        # again, three turns running, and never read the record.
        reads = ", ".join(f"find({quoted(lead, VALUE_CHARS)})[0][{quoted(f)}]{_gives(record, f)}"
                          for f in fields) if lead is not None else ""
        return f". It names {said}" + (f"; and the field{'s' if len(fields) > 1 else ''} {', '.join(map(quoted, fields))}: "
                                       f"{reads}" if reads else "")

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, str):
            # records.find(name)["city"]: a small model's way of reading the first record's field
            if not self:
                raise IndexError(f"there are no records, so no {_q(index)} to read: {self._note or 'the list is empty'}")
            return list.__getitem__(self, 0)[index]
        if isinstance(index, slice):
            # An empty list's note (why nothing matched) survives the slice a model prints.
            return self._derived(list.__getitem__(self, index), "" if self else self._note, of=len(self))
        if not self and isinstance(index, int):
            raise IndexError(f"there are no records, so there is no [{index}]: {self._note or 'the list is empty'}")
        return list.__getitem__(self, index)

    def __repr__(self) -> str:
        if not self:
            if self._note_only:
                return self._note
            return f"0 records: {self._note}" if self._note else "0 records"
        shape = SHAPE_TEXT.get(self.shape, self.shape)
        # A slice says what it was cut from: small models count the records they see printed.
        size = f"{len(self)} records" if self._of is None or self._of == len(self) else f"{len(self)} of {self._of} records"
        # A found or stated structure says how much of the text it reads (the others read
        # what they were written for, or were not offered).
        read = f", reading {self.coverage:.0%} of the lines" if self.coverage is not None and self.shape == "structure" else ""
        head = f"{size}{f' ({shape}{read})' if shape else ''}; fields: {', '.join(map(quoted, self.fields[:_FIELDS_SAID]))}"
        if self._note:
            head += f"\nnote: {self._note}"
        shown = self if len(self) <= SHOWN_ALL else self[:SHOWN]
        rows = [_show(r) for r in shown]
        if len(shown) < len(self):
            rows.append(f"... {len(self) - len(shown)} more; len() counts them, .where(field, value) filters, "
                        ".tally(field) counts each value")
        return "\n".join([head, *rows])

    __str__ = __repr__


#: Why each ``find`` or ``where`` since the worker last emptied this (before each cell) found
#: nothing: code that tests ``if found:`` never prints it, so the worker adds it as a note, as
#: it does for grep. The text, made when the lookup returns (the list itself is the code's to
#: change). At most ``EMPTY_KEPT``; nothing else reads it.
EMPTY_FINDS: list[str] = []
EMPTY_KEPT = 3


def _gives(record: Record | None, field: str) -> str:
    """" is 'x'" for a record's scalar value of ``field`` as the code reads it (a JSON number
    stays a number; text ``quoted``, a longer one said to begin so), or ""."""
    value = record.get(field) if record is not None else None
    if isinstance(value, (bool, int, float)):
        return f" is {value!r}"
    value = _about.scalar(value)
    if not value:
        return ""
    return f" {'is' if len(value) <= VALUE_CHARS else 'begins'} {quoted(value, VALUE_CHARS)}"


def value_index_of(records: Records) -> dict[str, Counter[str]]:
    """``about.value_index`` of ``records``, made on first use and kept on the list."""
    return _table(records, "values", lambda: _about.value_index(records))


#: The longest text ``find`` looks for as words within a value (a phrase, not a passage).
_PART_CHARS = 1_000


def field_and_value(records: Records, value: Any) -> tuple[str, str] | None:
    """The field and value ``find(value)`` reads ``value`` as (``"status=closed"``, a field of
    the records then a value), or None when it is a value to find whole."""
    split = _FIELD.match(value) if isinstance(value, str) else None
    if split is None or not split.group(2).strip() or _norm(split.group(1).strip()) not in {_norm(f) for f in records.fields}:
        return None
    return split.group(1).strip(), split.group(2).strip()


def fields_of(records: Records) -> list[str]:
    """``records.fields``, made on first use and kept on the list (the list's own property
    reads every record each time)."""
    return _table(records, "fields", lambda: records.fields)


def named_of(records: Records) -> dict[str, Record]:
    """The records by their name (the value of the list's first field, casefolded), for the
    names that one record alone holds there; made on first use and kept on the list."""
    def make() -> dict[str, Record]:
        fields, index = fields_of(records), value_index_of(records)
        first = fields[0] if fields else ""
        out: dict[str, Record] = {}
        for r in records:
            name = (_about.scalar(r.get(first)) or "").casefold()
            if name and index.get(name, Counter()).get(first) == 1:
                out[name] = r
        return out
    return _table(records, "named", make)


def _table(records: Records, name: str, make: Callable[[], Any]) -> Any:
    # Kept tables describe the list as it was when made: the handle's own parsed list is never
    # changed (code gets copies), and a copy changed after about() keeps its first index.
    if name not in records._tables:
        records._tables[name] = make()
    return records._tables[name]


def _kept_if_empty(found: Records) -> Records:
    if not found and len(EMPTY_FINDS) < EMPTY_KEPT:
        EMPTY_FINDS.append(Records.__repr__(found))
    return found


#: Characters of a field name the shape's description shows, and of the whole description
#: (more only when its first field's name alone passes it).
_NAME_SHOWN = 40
_DESCRIBED_CHARS = 240
#: Field names a note or a printed list says, at most.
_FIELDS_SAID = 30
#: Values of a field a note shows with their counts, most common first (a question's value is
#: rarely the most common: eight hid the one asked about).
_TALLY_SHOWN = 20
#: ``where``'s note names the fields of at most this many records holding the value elsewhere.
_HELD_IN_MOST = 1000
#: Values ``fresh`` hands out as they are (immutable); lists and JSON objects are copied whole.
_SCALARS = (str, int, float, bool, type(None))


# ------------------------------------------------------------------- shape detection


@dataclass(frozen=True)
class Shape:
    """How a text is laid out: ``kind`` (a key of ``SHAPE_TEXT``), the field names seen in
    the sample, and for paragraphs whether each line is one (``by_line``)."""

    kind: str
    fields: tuple[str, ...] = ()
    by_line: bool = False
    #: The share of the text's lines this shape reads into fields (None: not measured).
    coverage: float | None = None
    #: A structure found in the text (``structure.py``) or stated (``forms.py``).
    structure: _structure.Structure | None = field(default=None, compare=False)
    #: Why no shape with fields was offered (``paragraphs``).
    reason: str = ""
    #: A structure's items already read from the whole text (``parse`` reads them once).
    items: list[_structure.Item] | None = field(default=None, compare=False, repr=False)
    #: Records of the sample are written inside others (nested XML elements): they know them.
    nested: bool = False

    def describe(self) -> str:
        """The shape and its first 20 fields for a prompt; a field name is the text's own words
        (a sentence form, a header), so each is ``quoted`` and cut to ``_NAME_SHOWN``
        characters, and whole names stop before the line passes ``_DESCRIBED_CHARS`` (the first
        is always said). A found structure's fields each show an example value; the share of
        lines read ends it."""
        text = SHAPE_TEXT[self.kind]
        if self.structure is not None:
            text = _TABLE_TEXT if self.structure.header else _LAYOUT_TEXT.get(self.structure.layout, text)
        if self.kind == "paragraphs":
            return f"{text}; {self.reason}" if self.reason else text
        if self.nested:
            text += _NESTED_TEXT
        examples = self.structure.examples if self.structure is not None else ()
        names: list[str] = []
        read = f" (reads {self.coverage:.0%} of lines)" if self.coverage is not None else ""
        room = _DESCRIBED_CHARS - len(text) - len("; fields: ") - len(", ...") - len(read)
        for k, f in enumerate(self.fields[:20]):
            name = quoted(f, _NAME_SHOWN)
            if k < len(examples) and examples[k] and f.startswith("field "):
                # A field named by its place says what it holds by an example.
                name += f" (e.g. {quoted(examples[k], VALUE_CHARS)})"
            if names and sum(len(n) + 2 for n in names) + len(name) > room:
                names.append("...")
                break
            names.append(name)
        return f"{text}; fields: {', '.join(names)}{read}" if names else f"{text}{read}"


def _heading_text(heading: re.Match[str]) -> str:
    return heading.group(1) if heading.group(1) is not None else heading.group(2)


def _field(line: str) -> tuple[str, str] | None:
    """``(name, value)`` of a ``name: value`` line (bullets allowed), or None."""
    text = line[:_LINE_HEAD]
    first = text.lstrip()[:1]
    if first == "<":
        leaf = _XML_LEAF.match(text)
        return (_norm(leaf.group(1)), html.unescape(leaf.group(2).strip())) if leaf else None
    if not first.isalpha():
        if first not in _BULLET_STARTS and not first.isdigit():
            return None  # a field name starts with a letter, after a bullet at most
        text = _BULLET.sub("", text, count=1)
    if "://" in text and _URLISH.match(text.lstrip()):
        return None
    m = _FIELD.match(text)
    if m is None:
        return None
    name, value = m.group(1).strip(), m.group(2).strip()
    if len(name.split()) > 5:
        return None
    if len(line) > _LINE_HEAD:
        value = (value + line[_LINE_HEAD:]).strip()
    return _norm(name), value


def sniff(lines: Iterable[str]) -> Shape:
    """The shape of a text from its first lines (any iterable of lines; reads at most
    ``SNIFF_LINES`` non-blank ones)."""
    sample, raw = [], []
    for line in lines:
        raw.append(line.rstrip("\r\n"))
        if line.strip():
            sample.append(raw[-1])
            if len(sample) >= SNIFF_LINES:
                break
    if not sample:
        return Shape("paragraphs")
    # Every reader says the share of the sample's lines it reads into fields; at or over the
    # gate, one naming its fields by the text's own labels beats one naming them by place, then
    # the most read is offered (on a tie, the earlier: the specific readers before the
    # discovered structure); under the gate the text has no fields.
    candidates = [c for c in _candidates(sample, raw) if c.coverage is not None]
    passing = [c for c in candidates if c.coverage is not None and c.coverage >= GATE]
    if passing:
        return max(passing, key=lambda c: (any(not f.startswith("field ") for f in c.fields), round(c.coverage or 0.0, 3), len(c.fields)))
    best = max(candidates, key=lambda c: c.coverage or 0.0, default=None)
    found = _structure.discover(raw)  # said even when another reader came closer
    reason = (f"the best reading ({SHAPE_TEXT[best.kind].split(',')[0]}) reads {best.coverage:.0%} of lines, under the "
              f"{GATE:.0%} needed" if best is not None and best.coverage else found.reason)
    # Text with no blank lines between its lines: each line is a record (not all one).
    return Shape("paragraphs", by_line=len(raw) - len(sample) < 2 and len(sample) > 1, reason=reason)


#: The share of lines a shape must read into fields to be offered (``structure.GATE``).
GATE = _structure.GATE


def _candidates(sample: list[str], raw: list[str]) -> Iterator[Shape]:
    """Each reader's shape of the sample with its coverage: the share of the sample's
    non-blank, non-comment lines it reads into labelled fields (not into ``text``)."""
    marker = _structure.comment_marker(sample)
    n = max(1, len(sample) - (sum(line.lstrip().startswith(marker) for line in sample) if marker else 0))
    singles, headings = [], 0
    pairs: list[tuple[str, str] | None] = []
    label: int | None = None
    for line in sample:
        heading = _HEADING.match(line)
        pair = _field(_heading_text(heading)) if heading else _field(line)
        if heading is None and _continues(line, label):
            pair = None  # a wrapped value's line, whatever it looks like
        else:
            label = _label_column(line) if pair is not None and pair[1] and heading is None else None
        headings += heading is not None
        pairs.append(pair if heading is None else None)
        if pair is not None:
            singles.append(pair)
        elif line.lstrip()[:1] == "<" and (opened := _XML_OPEN.match(line[:_LINE_HEAD])):
            singles += [(_norm(name), v1 or v2) for name, v1, v2 in _XML_ATTR.findall(opened.group(2))]
    if singles:
        nested = any(r.parent is not None for r in _blocks(sample, Shape("blocks")))
        yield Shape("blocks", _fields_of([k] for k, _ in singles), coverage=_blocks_coverage(sample, pairs, n), nested=nested)
    found = _structure.discover(raw)
    if found.ok:
        yield Shape("structure", found.fields, coverage=found.coverage, structure=found)


#: A sample with at most this many different labels may be one record's fields, each said once.
_ONE_RECORD_FIELDS = 12


#: Another ``label: value`` pair after a separator: a line of several fields, which a block's
#: field line is not (the template miner reads those lines).
_MORE_PAIRS = re.compile(r"(?:\s[|;]\s*|\t|,\s+)[A-Za-z][\w.-]{0,47}\s*[:=]")


def _blocks_coverage(sample: list[str], pairs: list[tuple[str, str] | None], n: int) -> float:
    """The share of the sample's lines the blocks reader reads into fields: a heading, an
    element opened or closed, a declaration, a ``label: value`` line whose label comes round
    again (a label said once is a value, not a field's name: "ash: a tree" one term a line;
    unless the sample has only a record's worth of labels, or the line is a title over a
    field, "name:" over "  key: value") and has no parenthesis left open ("ash (part of:
    elm)"), or a line indented under a field with a value or a recurring label (its value
    goes on). A line ending in a colon over indented lines that are no fields (a block of
    code, "if x:") is no title; a line of several pairs (``a=1 | b=2``) is not read."""
    said = Counter(pair[0] for pair in pairs if pair is not None)
    read = 0
    after = False
    for k, (line, pair) in enumerate(zip(sample, pairs, strict=True)):
        head = line[:_LINE_HEAD]
        markup = line.lstrip()[:2] in ("<?", "<!") or bool(_XML_CLOSE.match(head) or _XML_OPEN.match(head))
        titles = pair is not None and not pair[1] and k + 1 < len(pairs) and pairs[k + 1] is not None
        labelled = (pair is not None and (said[pair[0]] >= 2 or titles or len(said) <= _ONE_RECORD_FIELDS)
                    and pair[0].count("(") == pair[0].count(")") and not _MORE_PAIRS.search(pair[1][:_LINE_HEAD]))
        this = labelled or markup or (pair is None and _HEADING.match(line) is not None)
        indented = line[:1] in (" ", "\t")
        read += this or (after and indented)
        after = (labelled and (bool(pair and pair[1]) or said[pair[0] if pair else ""] >= 2)) or markup or (
            after and indented and not this)
    return min(1.0, read / n)


def _fields_of(groups: Iterable[Iterable[str]]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for group in groups:
        seen.update(dict.fromkeys(_norm(k) for k in group))
    return tuple(seen)[:50]


# ------------------------------------------------------------------------ parsing


def parse_text(text: str, *, doc: str | None = None) -> Records:
    """The records of a whole text (lines split at ``\\n``, as handles number them)."""
    if len(text) > MAX_PARSE_BYTES:
        raise ContextError(f"records(): the text has {len(text)} characters, over the {MAX_PARSE_BYTES} "
                           "records() reads at once; narrow it first: records(grep(...)) or records(chunk(i))")
    return parse(text.split("\n"), doc=doc)


def json_shape(text: str) -> Shape | None:
    """The shape of a text that is one JSON document, or a window of one (``nested.py``): its
    records read, covering the lines up to its last whole value; None for any other text."""
    try:
        read = _nested.read_json(text, most=MAX_RECORDS)
    except ValueError:
        raise ContextError(f"records(): more than {MAX_RECORDS} records; narrow the text first (records(grep(...)))") from None
    if read is None:
        return None
    items, coverage = read
    if coverage < GATE:  # a window whose last value runs on: what parses is too little of it
        return Shape("paragraphs", by_line=True, coverage=coverage, reason=(
            f"the JSON values that close in it read {coverage:.0%} of its lines, under the {GATE:.0%} needed"))
    return Shape("json", _fields_of([k for k, _ in pairs] for _, pairs, _ in items[:SNIFF_LINES]), coverage=coverage, items=items)


def parse(lines: Iterable[str], shape: Shape | None = None, *, numbers: list[int] | None = None, doc: str | None = None,
          limit: int = MAX_RECORDS) -> Records:
    """The records of ``lines`` (lines without their line ends, numbered 1, 2, ... or by
    ``numbers``), in ``shape`` (when None: JSON's, else sniffed from them)."""
    lines = [line.rstrip("\r\n") for line in lines]
    shape = shape or json_shape("\n".join(lines)) or sniff(lines)
    if shape.kind == "structure" and shape.structure is not None and shape.structure.layout != "stated":
        shape = whole(lines, shape)
    parser = {"blocks": _blocks, "paragraphs": _parse_paragraphs, "structure": _parse_structure,
              "json": _parse_items}[shape.kind]
    out = Records(shape=shape.kind, note=_form_note(shape) or (shape.reason if shape.kind == "paragraphs" else ""))
    out.coverage = shape.coverage
    for record in parser(lines, shape):
        record.line = numbers[record.line - 1] if numbers and record.line <= len(numbers) else record.line
        record.doc = doc
        if record.parent is not None:  # a record joins the children of the one holding it
            if record.parent._children is None:
                record.parent._children = []
            record.parent._children.append(record)
        out.append(record)
        if len(out) >= limit:
            raise ContextError(f"records(): more than {limit} records; narrow the text first (records(grep(...)))")
    return out


def _add(record: Record, key: str, value: Any) -> None:
    """Set a field; a field seen again in the same record keeps every value, as a list."""
    if not dict.__contains__(record, key):
        record[key] = value
        return
    old = dict.__getitem__(record, key)
    record[key] = [*old, value] if isinstance(old, list) else [old, value]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _label_column(line: str) -> int:
    """Where a field line's label starts (after its indentation and bullet)."""
    bullet = _BULLET.match(line)
    return bullet.end() if bullet else _indent(line)


def _continues(line: str, label: int | None) -> bool:
    """Whether ``line`` goes on with the value of the field whose label starts at column
    ``label`` (None: no field with a value is open): indented deeper than that label, and no
    bullet. It does whatever it looks like: a wrapped text's "are met:" is no field."""
    return label is not None and line[:1] in (" ", "\t") and _indent(line) > label and not _BULLET.match(line)


#: Elements open at once that ``_parse_blocks`` keeps track of (deeper ones hold no records),
#: and how many of the innermost it looks through for the record around a new one or for the
#: element a closing tag closes: a bound, so reading stays linear whatever the nesting.
_ELEMENTS_KEPT = 256
_ELEMENTS_LOOKED = 16


def _inside(record: Record, elements: list[list[Any]]) -> None:
    """Mark ``record`` as inside the record of the nearest open element that has fields (it
    joins that record's children when it is read: ``_parse_blocks``)."""
    record.parent = next((e[1] for e in reversed(elements[-_ELEMENTS_LOOKED:]) if e[1]), None)


def _closed(tag: str, elements: list[list[Any]]) -> Record | None:
    """Close the open element ``tag`` (and any left open inside it). An element with no fields
    of its own takes the record of its first child element that has fields of its own (a
    ``<layer>`` whose ``<props>`` name it) until a second child of that tag opens (a list:
    ``_opened``); an element of no attributes holding values alone
    (``<tags><tag>a</tag><tag>b</tag></tags>``) inside an element with a record gives that
    record its values, and is returned (it is no record of its own)."""
    k = next((i for i in range(len(elements) - 1, max(-1, len(elements) - 1 - _ELEMENTS_LOOKED), -1)
              if elements[i][0] == tag), None)
    if k is None:
        return None
    _, record, own, bare, _ = elements[k]
    del elements[k:]
    if not (own and record) or not elements:
        return None
    outer = elements[-1]
    if not outer[1]:
        if outer[2]:
            outer[1:3], outer[4] = [record, False], tag
        return None
    if not bare or record._children:  # children join it as ``parse`` takes each record yielded
        return None
    for key, value in record.items():
        _add(outer[1], key, value)
    return record


def _opened(tag: str, record: Record, elements: list[list[Any]]) -> None:
    """Open the element ``tag`` whose attributes are ``record``, inside the open ones. A second
    child of the tag whose first child's record the element around took makes it a list of
    them: it gives that record back, and the new one is inside no record of it."""
    if elements and elements[-1][4] == tag:
        elements[-1][1], elements[-1][4] = None, None
    _inside(record, elements)
    if len(elements) < _ELEMENTS_KEPT:
        elements.append([tag, record, True, not record, None])


def _blocks(lines: list[str], shape: Shape) -> Iterator[Record]:
    headed = any(_HEADING.match(line) for line in lines[:SNIFF_LINES * 4])
    # Open XML elements: [tag, its record (fields may come later), whether the fields are its
    # own, whether it has no attributes, the tag of the child whose record it took].
    elements: list[list[Any]] = []
    record: Record | None = None
    first_key = last_key = None
    label: int | None = None  # where the label of the last field with a value starts
    for k, raw in enumerate(lines):
        line_no = 1 + k
        if record is not None and last_key is not None and _continues(raw, label):
            value = dict.__getitem__(record, last_key)
            if isinstance(value, str):
                record[last_key] = f"{value} {raw.strip()}".strip()
            continue
        label = None
        heading = _HEADING.match(raw)
        if heading:
            if record and list(record) != ["title"]:  # a heading over headings (a title) is no record
                yield record
            record, last_key = Record(line=line_no), None
            pair = _field(_heading_text(heading))
            key, value = pair if pair else ("title", _heading_text(heading).strip())
            record[key] = value
            first_key = key
            continue
        if not raw.strip():
            if not headed and record:
                yield record
                record, first_key, last_key = None, None, None
            continue
        if raw.lstrip()[:1] == "<":
            if raw.lstrip()[:2] in ("<?", "<!"):
                continue  # an XML declaration, doctype or comment
            opened, closed = _XML_OPEN.match(raw[:_LINE_HEAD]), _XML_CLOSE.match(raw[:_LINE_HEAD])
            if opened or closed:
                if closed and _closed(closed.group(1), elements) is record:
                    record = None  # its values went to the record around it
                if record:
                    yield record
                record, first_key, last_key = None, None, None
                if opened:
                    attrs = Record(((_norm(name), html.unescape(v1 or v2)) for name, v1, v2 in _XML_ATTR.findall(opened.group(2))),
                                   line=line_no)
                    if opened.group(3):  # <host a="1"/>: a whole record
                        _inside(attrs, elements)
                        if attrs:
                            yield attrs
                    else:
                        _opened(opened.group(1), attrs, elements)
                        record, first_key = attrs, next(iter(attrs), None)
                continue
        pair = _field(raw)
        if (pair is not None and not pair[1] and raw[:1] not in (" ", "\t") and k + 1 < len(lines)
                and lines[k + 1][:1] in (" ", "\t") and _field(lines[k + 1]) is not None):
            # "name:" over indented fields (YAML-like): the name heads a record of its own
            if record:
                yield record
            record, last_key = Record([("title", raw.split(":", 1)[0].strip())], line=line_no), None
            first_key = "title"
            continue
        if (pair is not None and _BULLET.match(raw) and k + 1 < len(lines) and _indent(lines[k + 1]) > _indent(raw)
                and not _BULLET.match(lines[k + 1]) and _field(lines[k + 1]) is not None):
            # "- key: value" over fields indented deeper (a YAML list item): a record of its own
            if record and list(record) != ["title"]:
                yield record
            record, first_key, last_key = Record([pair], line=line_no), pair[0], pair[0]
            continue
        if record is not None and last_key is not None and raw[:1] in (" ", "\t") and not _BULLET.match(raw) and pair is None:
            value = dict.__getitem__(record, last_key)
            if isinstance(value, str):
                record[last_key] = f"{value} {raw.strip()}".strip()
            continue
        if pair is not None and record is not None and not headed and pair[0] == first_key:
            yield record  # the record's first field again: a new record without a blank line
            record, last_key = None, None
        if record is None:
            record = Record(line=line_no)
            first_key = pair[0] if pair else "text"
        if pair is None:
            text = dict.get(record, "text")
            record["text"] = f"{text} {raw.strip()}" if text else raw.strip()
            last_key = "text"
        else:
            _add(record, *pair)
            last_key = pair[0]
            label = _label_column(raw) if pair[1] else None
    if record and list(record) != ["title"]:
        yield record


def _parse_paragraphs(lines: list[str], shape: Shape) -> Iterator[Record]:
    if shape.by_line:
        for k, line in enumerate(lines):
            if line.strip():
                yield Record([("text", line.strip())], 1 + k)
        return
    paragraph: list[str] = []
    start = 1
    for k, line in enumerate(lines):
        if line.strip():
            if not paragraph:
                start = 1 + k
            paragraph.append(line.strip())
        elif paragraph:
            yield Record([("text", " ".join(paragraph))], start)
            paragraph = []
    if paragraph:
        yield Record([("text", " ".join(paragraph))], start)


def whole(lines: list[str], shape: Shape) -> Shape:
    """The shape found in the head, measured on the whole text: its coverage there. When the
    whole text falls under the gate (the head was not like the rest), the structure is found
    again from runs of lines spread over the whole text and measured the same way; under the
    gate again, no fields. Blocks are looked at for records inside others in runs of lines
    spread over the whole text (a file's head may nest nothing). Another shape is returned as
    it is."""
    if shape.kind == "blocks" and not shape.nested:
        return dataclasses.replace(shape, nested=any(r.parent is not None for r in _blocks(_spread(lines), shape)))
    if shape.kind != "structure" or shape.structure is None or shape.structure.layout == "stated":
        return shape
    items, coverage = _structure.read(lines, shape.structure)
    if coverage >= GATE:
        return dataclasses.replace(shape, coverage=coverage, items=items)
    again = sniff(_spread(lines))
    if again.kind == "structure" and again.structure is not None:
        items, found = _structure.read(lines, again.structure)
        if found >= GATE:
            return dataclasses.replace(again, coverage=found, items=items)
    return Shape("paragraphs", by_line=True, reason=f"the form found in the first lines reads only {coverage:.0%} "
                                                      f"of the whole text, under the {GATE:.0%} needed")


#: Runs of lines, and lines a run, that ``_spread`` takes across a text.
_RUNS = 10
_RUN_LINES = SNIFF_LINES // _RUNS


def _spread(lines: list[str]) -> list[str]:
    """``_RUNS`` runs of ``_RUN_LINES`` lines evenly spaced over ``lines`` (each run whole, so
    that indentation under a line is seen)."""
    step = max(_RUN_LINES, len(lines) // _RUNS)
    return [line for start in range(0, len(lines), step) for line in lines[start:start + _RUN_LINES]][:SNIFF_LINES]


def _parse_structure(lines: list[str], shape: Shape) -> Iterator[Record]:
    """The records of a found or stated structure, each knowing its parent."""
    assert shape.structure is not None  # sniff makes a structure shape with its structure
    if shape.items is None:
        shape = dataclasses.replace(shape, items=_structure.read(lines, shape.structure)[0])
    return _parse_items(lines, shape)


def _parse_items(lines: list[str], shape: Shape) -> Iterator[Record]:
    """The records of items already read (a structure's, a document's), each knowing its parent."""
    items = shape.items or []
    made: list[Record] = []
    for start, pairs, parent in items:
        record = Record(line=1 + start)
        for key, value in pairs:
            _add(record, key, value)
        record.parent = made[parent] if parent >= 0 else None
        made.append(record)
        yield record


def _form_note(shape: Shape) -> str:
    """What a list read by a stated form says when the form reads too few lines to be trusted."""
    found = shape.structure
    if found is None or found.layout != "stated" or not found.reason:
        return ""
    return f"{found.reason}: the lines it does not read are records with only 'text'"


def stated(lines: list[str], *, template: str | None = None, pattern: str | None = None) -> Shape:
    """The shape of ``lines`` read by a stated form: a ``template`` (``'ID - TITLE (GROUP)'``:
    capital words or ``{name}`` are fields) or a regular ``pattern`` with named groups (RE2).
    Its coverage is said whatever it is: the form was asked for."""
    if (template is None) == (pattern is None):
        raise ContextError("records(): give a template or a pattern, not both")
    form = _forms.from_template(template) if template is not None else _forms.from_pattern(str(pattern))
    found = _forms.apply(lines, form)
    return Shape("structure", found.fields, coverage=found.coverage, structure=found)
