"""What a format of the benchmark is, and the questions of the three families drawn from its parse.

A ``Format`` names real files (installed from Debian or PyPI, never written here), a
reference reader (``parse``: the text into ``Record``s, each with its character span, its
fields and, for nested text, the record that holds it), and the words a question uses for
its records and fields. The reader lives in the benchmark only: the runtime never imports it.

``window`` cuts a context of about ``length`` characters out of the real text at record
boundaries (the file's head kept, when the format has one), and ``questions`` draws, from the
records wholly inside the window, questions whose answers follow from the parse:

* lookup: a field of a named record;
* aggregation: how many records have a field's value, or how many a record holds;
* multi-hop: a field of the record that a record's field names, or of the record that holds
  a named record, or which record holds a named one.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Record:
    """One record as the reference reader read it: its name as the text writes it, its
    fields (name -> value as written), its span ``[start, end)`` in the text, and the name
    of the record that holds it (None: at the top)."""

    name: str
    fields: dict[str, str]
    start: int
    end: int
    parent: str | None = None


@dataclass(frozen=True)
class Field:
    """A field questions may ask about: its key in ``Record.fields``, the words a question
    uses for it ("the bidirectional class"), and whether counting records by its value
    makes a question (a field of a few repeated values, not an identifier)."""

    key: str
    words: str
    count: bool = False


@dataclass(frozen=True)
class Format:
    """A real file format of the benchmark.

    Args:
        name: the format's name in task ids and the README's list.
        split: ``dev`` or ``heldout``.
        source: where its files come from (a Debian package, a PyPI wheel).
        text: how a question names the whole text ("the Unicode character database").
        thing, things: one record and several ("character", "characters").
        fields: the fields questions ask about.
        files: the real files, in order; more than one when one file is short (more of
            the same kind).
        parse: the reference reader: the text to its records.
        link: a field whose value names another record (multi-hop through it): its name,
            or its ``link_key`` field's value.
        link_key: the field of the record a link names that the link's value matches
            (None: the record's name).
        holder, held: for nested text, what a record that holds others is called, and
            what those it holds are ("block", "characters").
        head: how many characters at the start of the text every window keeps (a header
            row), from the text.
    """

    name: str
    split: str
    source: str
    text: str
    thing: str
    things: str
    fields: tuple[Field, ...]
    files: Callable[[], list[Path]]
    parse: Callable[[str], list[Record]]
    link: Field | None = None
    link_key: str | None = None
    holder: str | None = None
    held: str | None = None
    head: Callable[[str], int] = field(default=lambda text: 0)


@dataclass(frozen=True)
class Question:
    family: str
    kind: str
    question: str
    answer: Any
    scorer: str
    options: dict[str, Any] = field(default_factory=dict)


#: Names and values longer than this make no question (they would be the question).
MAX_NAME = 80
#: A count between these makes a question (a count of 1 is a lookup; a count of hundreds is
#: a test of patience, not of the runtime).
MIN_COUNT, MAX_COUNT = 2, 80


def read_text(fmt: Format) -> str:
    """The format's files, one after another, as one text (UTF-8, what does not decode replaced)."""
    import gzip

    parts = []
    for path in fmt.files():
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        parts.append(data.decode("utf-8", errors="replace").rstrip("\n") + "\n")
    if not parts:
        raise FileNotFoundError(f"{fmt.name}: none of its files is installed ({fmt.source})")
    return "".join(parts)


def window(text: str, records: list[Record], length: int, rng: random.Random) -> tuple[str, list[Record]]:
    """About ``length`` characters of ``text`` from a random record boundary on (the whole
    text when it is shorter), and the records wholly inside, their spans made relative to
    the window. The caller's ``head`` is not part of this (see ``context``)."""
    if len(text) <= length or not records:
        return text, list(records)
    starts = [r.start for r in records if r.parent is None] or [r.start for r in records]
    fits = [s for s in starts if s + length <= len(text)] or [starts[0]]
    begin = rng.choice(fits)
    limit = begin + length
    inside = [r for r in records if r.start >= begin and r.end <= limit]
    end = max((r.end for r in inside), default=limit)
    shifted = [Record(r.name, r.fields, r.start - begin, r.end - begin, r.parent) for r in inside]
    return text[begin:end], shifted


def context(fmt: Format, text: str, records: list[Record], length: int, rng: random.Random) -> tuple[str, list[Record]]:
    """The context of one task: the format's head, then a window of the rest."""
    head = fmt.head(text)
    body = [r for r in records if r.start >= head]
    cut, inside = window(text[head:], [Record(r.name, r.fields, r.start - head, r.end - head, r.parent) for r in body],
                         max(1, length - head), rng)
    return text[:head] + cut, inside


def _unique(records: list[Record]) -> dict[str, Record]:
    """Records whose name no other record in the window shares (a question names one record)."""
    counts = Counter(r.name for r in records)
    return {r.name: r for r in records if counts[r.name] == 1 and 0 < len(r.name) <= MAX_NAME}


def _fine(value: str | None) -> bool:
    return bool(value and value.strip()) and len(value or "") <= MAX_NAME


#: Values a sentence says whatever it answers ("no record found", "none of them"): a question
#: whose answer is one of them is scored ``exact``, not by the words an answer contains.
PROSE_WORDS = frozenset({"yes", "no", "true", "false", "none", "on", "off", "all", "any"})


def _scorer(value: str) -> str:
    return "exact" if value.strip().strip(".").lower() in PROSE_WORDS else "contains"


def _quoted(name: str) -> str:
    return f"'{name}'"


def lookup(fmt: Format, records: list[Record], rng: random.Random) -> Question | None:
    named = _unique(records)
    options = [(r, f) for r in named.values() for f in fmt.fields if _fine(r.fields.get(f.key)) and r.fields[f.key] != r.name]
    if not options:
        return None
    record, fld = rng.choice(options)
    return Question("lookup", f"value:{fld.key}",
                    f"In {fmt.text}, what is {fld.words} of the {fmt.thing} {_quoted(record.name)}?",
                    record.fields[fld.key], _scorer(record.fields[fld.key]))


def aggregation(fmt: Format, records: list[Record], rng: random.Random) -> Question | None:
    kinds: list[Callable[[], Question | None]] = []
    countable = [f for f in fmt.fields if f.count]
    if countable:
        kinds.append(lambda: _count_by_value(fmt, records, rng, countable))
    if fmt.holder:
        kinds.append(lambda: _count_held(fmt, records, rng))
    return _first(kinds, rng)


def _first(kinds: list[Callable[[], Question | None]], rng: random.Random) -> Question | None:
    """The question of the first kind, in a random order, that can ask one."""
    rng.shuffle(kinds)
    for kind in kinds:
        q = kind()
        if q is not None:
            return q
    return None


def _count_by_value(fmt: Format, records: list[Record], rng: random.Random, countable: list[Field]) -> Question | None:
    options = []
    for f in countable:
        values = Counter(r.fields[f.key] for r in records if _fine(r.fields.get(f.key)))
        options += [(f, v, n) for v, n in values.items() if MIN_COUNT <= n <= MAX_COUNT]
    if not options:
        return None
    f, value, n = rng.choice(options)
    return Question("aggregation", f"count:{f.key}",
                    f"In {fmt.text}, how many {fmt.things} have {f.words} {_quoted(value)}?", n, "numeric", {"decay": 0.0})


def _count_held(fmt: Format, records: list[Record], rng: random.Random) -> Question | None:
    named = _unique(records)
    held = Counter(r.parent for r in records if r.parent is not None)
    options = [(p, n) for p, n in held.items() if p in named and MIN_COUNT <= n <= MAX_COUNT]
    if not options:
        return None
    parent, n = rng.choice(options)
    return Question("aggregation", "count:held",
                    f"In {fmt.text}, how many {fmt.held} does the {fmt.holder} {_quoted(parent)} hold?", n, "numeric",
                    {"decay": 0.0})


def multihop(fmt: Format, records: list[Record], rng: random.Random) -> Question | None:
    kinds: list[Callable[[], Question | None]] = []
    if fmt.link is not None:
        kinds.append(lambda: _through_link(fmt, records, rng))
    if fmt.holder:
        kinds.append(lambda: _through_holder(fmt, records, rng))
    return _first(kinds, rng)


def _through_link(fmt: Format, records: list[Record], rng: random.Random) -> Question | None:
    assert fmt.link is not None
    named = _unique(records)
    if fmt.link_key is None:
        by_key = named
    else:
        keyed = Counter(r.fields.get(fmt.link_key) for r in records)
        by_key = {r.fields[fmt.link_key]: r for r in records if keyed[r.fields.get(fmt.link_key)] == 1
                  and r.fields.get(fmt.link_key)}
    name = Field("@name", "the name")
    options = []
    for r in named.values():
        target = by_key.get(r.fields.get(fmt.link.key, ""))
        if target is None or target is r:
            continue
        if fmt.link_key is not None and target.name in named and target.name != r.name:
            options.append((r, target, name))  # the link gives a code: the name is a second hop
        for f in fmt.fields:
            value = target.fields.get(f.key)
            # The answer must not be the start's own value of that field (one hop would do).
            if _fine(value) and f.key not in (fmt.link.key, fmt.link_key) and value != r.fields.get(f.key) \
                    and value != r.fields.get(fmt.link.key):
                options.append((r, target, f))
    if not options:
        return None
    start, target, f = rng.choice(options)
    answer = target.name if f is name else target.fields[f.key]
    return Question("multihop", f"link:{f.key}",
                    f"In {fmt.text}, {fmt.link.words} of the {fmt.thing} {_quoted(start.name)} names another "
                    f"{fmt.thing}. What is {f.words} of that {fmt.thing}?", answer, _scorer(answer))


def _through_holder(fmt: Format, records: list[Record], rng: random.Random) -> Question | None:
    named = _unique(records)
    options = [r for r in named.values() if r.parent is not None and r.parent in named and r.parent != r.name]
    if not options:
        return None
    child = rng.choice(options)
    parent = named[child.parent or ""]
    fields = [f for f in fmt.fields if _fine(parent.fields.get(f.key)) and parent.fields[f.key] != child.fields.get(f.key)]
    if fields and rng.random() < 0.5:
        f = rng.choice(fields)
        return Question("multihop", f"holder:{f.key}",
                        f"In {fmt.text}, what is {f.words} of the {fmt.holder} that holds the {fmt.thing} "
                        f"{_quoted(child.name)}?", parent.fields[f.key], _scorer(parent.fields[f.key]))
    return Question("multihop", "holder",
                    f"In {fmt.text}, which {fmt.holder} holds the {fmt.thing} {_quoted(child.name)}? Give its name.",
                    parent.name, "contains")


FAMILIES: dict[str, Callable[[Format, list[Record], random.Random], Question | None]] = {
    "lookup": lookup, "aggregation": aggregation, "multihop": multihop}
