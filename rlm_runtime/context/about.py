"""Which words of a phrase are the records' field names and which are values they hold.

``Records.find`` given a phrase that is no value whole (``the status of db-07``) matches it
here: the field names it says and the values it holds, over an index of the records' values.
Matching ignores case and the phrase's punctuation around words ("Kamir's" is "Kamir"); a
value is matched whole, longest first, never across a field name; a field name also matches
in the plural. Nothing here knows a wording: the fields and values are the text's.

Bounded: the phrase is cut to ``QUESTION_CHARS``, only the first ``MOST_FIELDS`` field names
are matched, values longer than ``VALUE_WORDS`` words are not indexed, and the index is one
pass over the records. Every field name and value a note says is the document's and is shown
by ``quoting.quoted``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rlm_runtime.quoting import quoted

#: The longest question read, and the most words a value may have to be matched.
QUESTION_CHARS = 2_000
VALUE_WORDS = 6
#: Items of a list value a note shows, at most.
MOST_VALUES = 8
#: Field names matched against the question: the first this many (records of a text whose
#: every line names new keys would otherwise make matching fields x words).
MOST_FIELDS = 200

#: Words of a question that say how it is asked; never taken as a value alone.
_GRAMMAR = frozenset("""a an the of is are was were be been to in on at by for from with as and or not no
what which who whom whose how many much does do did have has had its it this that these those there
give gives given tell me list name find count number value values record records""".split())
_EDGE = "?!.,;:\"'()[]{}<>`"


def _words(text: str) -> list[str]:
    out = []
    for raw in text.split():
        word = raw.strip(_EDGE)
        if word.lower().endswith(("'s", "\u2019s")):
            word = word[:-2]
        if word:
            out.append(word)
    return out


def _key(words: Sequence[str]) -> str:
    return " ".join(words).casefold()


def value_index(records: Iterable[Mapping[str, Any]]) -> dict[str, Counter[str]]:
    """value (casefolded) -> how many records hold it in each field (scalars and list items;
    values of more than ``VALUE_WORDS`` words left out)."""
    index: dict[str, Counter[str]] = {}
    for r in records:
        for field, value in r.items():
            if type(value) is str:  # the common case, without a set: one value is one record
                key = _indexed(value)
                if key:
                    held = index.get(key)
                    if held is None:
                        index[key] = Counter({field: 1})
                    else:
                        held[field] = held.get(field, 0) + 1
                continue
            keys: set[str] = set()  # a list holding a value twice is one record, as count() sees it
            for v in value if isinstance(value, list) else [value]:
                if not isinstance(v, (dict, list)) and v is not None:
                    keys.add(_indexed(str(v)))
            keys.discard("")
            for key in keys:
                index.setdefault(key, Counter())[field] += 1
    return index


def _indexed(value: str) -> str:
    """A value as the index keys it (casefolded, stripped), or "" when it is not indexed. A
    text of ``2 * VALUE_WORDS`` characters cannot hold more words than that: no split."""
    text = value.strip()
    return text.casefold() if text and (len(text) <= 2 * VALUE_WORDS or len(text.split()) <= VALUE_WORDS) else ""


def scalar(value: Any) -> str | None:
    """A field's value as text, stripped; None for a list, a map or nothing."""
    return None if value is None or isinstance(value, (list, dict)) else str(value).strip()


def _field_spans(words: list[str], fields: Sequence[str]) -> tuple[list[str], set[int]]:
    """The fields named in the question (in field order) and the word positions they take."""
    keys = {f: _key(_words(f)) for f in fields}
    found: list[str] = []
    taken: set[int] = set()
    lowered = [w.casefold() for w in words]
    for field, key in keys.items():
        size = len(key.split())
        if not key:
            continue
        for i in range(len(words) - size + 1):
            gram = " ".join(lowered[i:i + size])
            if gram in (key, key + "s", key + "es") or (size == 1 and key.endswith("y") and gram == key[:-1] + "ies"):
                if field not in found:
                    found.append(field)
                taken.update(range(i, i + size))
    return found, taken


def _value_spans(words: list[str], taken: set[int], index: Mapping[str, Counter[str]]) -> list[str]:
    """The question's values, longest match first at each position, left to right."""
    out: list[str] = []
    i = 0
    while i < len(words):
        for size in range(min(VALUE_WORDS, len(words) - i), 0, -1):
            span = range(i, i + size)
            if any(j in taken for j in span):
                continue
            key = _key(words[i:i + size])
            if key in index and not (size == 1 and key in _GRAMMAR):
                out.append(" ".join(words[i:i + size]))
                i += size
                break
        else:
            i += 1
    return out


def within(text: str, fields: Sequence[str], index: Mapping[str, Counter[str]]) -> tuple[list[str], list[str]]:
    """The field names ``text`` names (in field order) and the values it holds (left to right,
    each once), matched as the module docstring says."""
    words = _words(str(text)[:QUESTION_CHARS])
    named, taken = _field_spans(words, list(fields)[:MOST_FIELDS])
    values: list[str] = []
    for value in _value_spans(words, taken, index):  # a value asked about twice is said once
        if value.casefold() not in {v.casefold() for v in values}:
            values.append(value)
    return named, values


def where_held(value: str, index: Mapping[str, Counter[str]], first: str) -> str:
    """"the host of 1 record, the owner of 2 records": the fields holding ``value``, the
    field that names records (``first``) first, then the most common."""
    order = sorted(index[value.casefold()].items(), key=lambda kv: (kv[0] != first, -kv[1]))
    return ", ".join(f"the {quoted(f)} of {n} record{'s' if n != 1 else ''}" for f, n in order[:3])
