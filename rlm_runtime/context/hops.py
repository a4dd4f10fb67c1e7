"""The next hop of a question's chain that a cell's output has reached.

A question through a link ("the office of Kamir's manager") is two lookups over records: the
record the question names gives a value of one field (the manager, ``Lund``), and that value
names a record of its own, whose other field is the answer (Lund's office). A small model
often prints the first value and stops there, or answers it. ``next_hop`` finds, in what a
cell printed, such a value:

* a field the question names, read from the one record named by a value of the question;
* which is itself the name (first field) of exactly one record;
* whose record holds another field the question names, not printed yet.

Nothing here knows a wording: fields and names are the records' own, matched in the question
as ``about.py`` matches them. Linear in the records and the output; the output is cut to
``SHOWN_CHARS``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rlm_runtime.context import about as _about

#: The most characters of a cell's output searched for a value.
SHOWN_CHARS = 20_000


@dataclass(frozen=True)
class Hop:
    """``value`` (the ``link`` of ``start``) is the ``name_field`` of the record on ``line``,
    and the question asks that record's ``field``."""

    start: str
    link: str
    value: str
    name_field: str
    line: int
    field: str


def _scalar(value: Any) -> str | None:
    return None if value is None or isinstance(value, (list, dict)) else str(value).strip()


def _named(records: Sequence[Mapping[str, Any]], first: str, folded: str) -> Mapping[str, Any] | None:
    return next((r for r in records if (_scalar(r.get(first)) or "").casefold() == folded), None)


def _printed(value: str, shown: str) -> bool:
    """Whether ``shown`` (casefolded) holds ``value`` as whole words."""
    folded = value.casefold()
    return bool(folded) and re.search(r"(?<!\w)" + re.escape(folded) + r"(?!\w)", shown) is not None


def next_hop(records: Sequence[Mapping[str, Any]], fields: Sequence[str], index: Mapping[str, Counter[str]],
             question: str, shown: str) -> Hop | None:
    """The first hop (see the module docstring) that ``shown`` has reached and not taken, or
    None. ``index`` is ``about.value_index(records)``."""
    if not fields:
        return None
    first = fields[0]
    shown = shown[:SHOWN_CHARS].casefold()
    named, values = _about.within(question, fields, index)
    asked = [f for f in named if f != first]
    if len(asked) < 2:
        return None
    for start in values:
        if index[start.casefold()].get(first) != 1:
            continue
        own = _named(records, first, start.casefold())
        if own is None:
            continue
        for link in asked:
            value = _scalar(own.get(link))
            if not value or index.get(value.casefold(), Counter()).get(first) != 1 or not _printed(value, shown):
                continue
            other = _named(records, first, value.casefold())
            if other is None:
                continue
            for field in asked:
                wanted = _scalar(other.get(field))
                if field != link and wanted and not _printed(wanted, shown):
                    return Hop(start, link, value, first, int(getattr(other, "line", 0) or 0), field)
    return None
