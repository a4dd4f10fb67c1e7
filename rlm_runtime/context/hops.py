"""What the answer checks read from the records: the one field of one record a question asks,
misread, and the count a question asks.

``misread``: a question naming one record and one other field (the glaze of the kiln it
names) read as some other value. The answer gives another record's value of that field (the
most common one, from a tally), or the named record's value of another field, or its name
(the question's own word back); each is a value the records hold that is not the one asked.
Or it gives no value the records hold at all besides the question's own (a number made up
after an error, "the text does not say"), unless it may be a count (``counted``): a question
of this form may ask how many records share the value. A record whose name ``find()`` would
read as ``field=value`` is none: the notes' code finds it by ``find``.

``asked_count``: the count a question asks when it names one value the records hold, of the
records holding it or of the records the one it names holds.

Nothing here knows a wording: fields and names are the records' own, matched in the question
as ``about.py`` matches them. Linear in the records and the answer. (The chains through a
linking field, which the ``follow_link`` assist followed, were removed with it on 2026-12-06.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rlm_runtime.context import about as _about
from rlm_runtime.context import records as _records

#: The most characters of a cell's output searched for a value.
SHOWN_CHARS = 20_000
#: An output longer than this is a listing: the target printed somewhere in it is not the
#: model's own second hop (it dumped records, or about()'s account, and did not read it).
SHORT_OUTPUT = 300
_DIGIT = re.compile(r"\d")
#: A number standing alone ("3", "1,204"), not the digits of a name ("north-3", "DW-1645").
_NUMBER = re.compile(r"(?<![\w-])\d[\d,.]*(?![\w-])")


@dataclass(frozen=True)
class Hop:
    """``value`` (the ``link`` of ``start``) is the ``name_field`` of the record on ``line``,
    and the question asks that record's ``field``: ``target``. ``own`` is the start's own
    value of that field (an answer one hop short gives it, or ``value``)."""

    start: str
    link: str
    value: str
    name_field: str
    line: int
    field: str
    target: str
    own: str


def printed(value: str, shown: str) -> bool:
    """Whether ``shown`` (casefolded) holds ``value`` as whole words. A value longer than
    ``shown`` is not in it (and is never compiled: a field may hold megabytes)."""
    folded = value.casefold()
    if not folded or len(folded) > len(shown):
        return False
    return re.search(r"(?<!\w)" + re.escape(folded) + r"(?!\w)", shown) is not None


def counted(answer: str, target: str) -> bool:
    """Whether ``answer`` may be a count, not a misread value: it holds a number standing
    alone and the value asked holds no digit (a count of the records sharing it is then the
    question's own answer)."""
    return _NUMBER.search(answer[:_about.QUESTION_CHARS]) is not None and _DIGIT.search(target) is None


def misread(records: _records.Records, question: str, answer: str) -> Hop | None:
    """The read the question asks (the one field it names besides the names, of the one
    record a value of the question names) when ``answer`` does not hold its value and holds
    a value that is another record's of that field, or the named record's of another field
    (its name, the question's own word, among them), or no value but the question's own
    and no count (``counted``):
    as a ``Hop`` of no link (``link`` "", ``value`` the start itself); else None. A question
    whose value is one of the field's own (which kiln has this glaze?) asks no read."""
    fields = _records.fields_of(records)
    if not fields:
        return None
    first, index = fields[0], _records.value_index_of(records)
    named, values = _about.within(question, fields, index)
    asked = [f for f in named if f != first]
    starts = [v for v in values[:_about.MOST_VALUES] if index[v.casefold()].get(first) == 1]
    if len(asked) != 1 or len(starts) != 1 or any(asked[0] in index[v.casefold()] for v in values):
        return None
    field, start = asked[0], starts[0]
    if _records.field_and_value(records, start) is not None:
        return None  # find(start), the note's code, would read it as field=value: another record
    own = _records.named_of(records).get(start.casefold())
    target = _about.scalar(own.get(field)) if own is not None else None
    said = answer[:_about.QUESTION_CHARS].casefold()
    if own is None or not target or printed(target, said):
        return None
    others = {_about.scalar(v) for k, v in own.items() if k != field} - {None, ""}
    held = {str(v).casefold() for v in others}
    _, given = _about.within(said, (), index)
    asked_values = {v.casefold() for v in values}
    misread_value = any(field in index[v.casefold()] or v.casefold() in held for v in given)
    no_value = all(v.casefold() in asked_values for v in given) and not counted(said, target)
    if not misread_value and not no_value:
        return None
    return Hop(start, "", start, first, int(getattr(own, "line", 0) or 0), field, target, target)


@dataclass(frozen=True)
class Count:
    """What a question that counts asks of the records: how many have ``field`` equal to
    ``value`` (``children`` False), or how many the record named ``value`` holds (``children``
    True, ``field`` its name field); ``n`` the count."""

    field: str
    value: str
    n: int
    children: bool


def asked_count(records: _records.Records, question: str) -> Count | None:
    """The count the question asks when it names exactly one value the records hold: of the
    records holding it in the field the question names (or in the one field that holds it),
    or, when it names a record that holds others, of those. None when the question names no
    such value, several, or a value in several fields none of which it names. Nothing here
    knows a wording: the caller says whether the question counts."""
    fields = _records.fields_of(records)
    if not fields:
        return None
    first, index = fields[0], _records.value_index_of(records)
    named, values = _about.within(question, fields, index)
    if len(values) > 1:
        # Other words that happen to be values ("the log file", "a shell script") give way
        # to the one value held in a field the question names.
        values = [v for v in values if any(f != first and f in index[v.casefold()] for f in named)]
    if len(values) != 1:
        return None
    value = values[0]
    held = index[value.casefold()]
    fields_named = [f for f in named if f in held and f != first]
    if len(fields_named) == 1:
        field = fields_named[0]
    elif not fields_named and len(held) == 1:
        field = next(iter(held))
    elif not fields_named and held.get(first) == 1:
        field = first
    else:
        return None
    if field == first:  # a record named so: the question counts what it holds
        own = _records.named_of(records).get(value.casefold())
        kids = own.children if own is not None else None
        return Count(first, value, len(kids), True) if kids else None
    return Count(field, value, held[field], False)
