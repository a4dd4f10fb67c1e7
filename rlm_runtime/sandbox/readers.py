"""The host's readers of the main context: what a ``lookup`` frame may ask of the worker.

An assist reads the text through typed requests (``Sandbox.lookup(reader, **args)``), never
through code run in the model's namespace. Each reader is registered here by name with the
shape of its arguments and of its reply; the worker runs it between cells, and the host
checks the reply against the declared shape before any field is used. The frame itself
(``frames.lookup_reply``) is generic: a reader's name, plain arguments, a plain reply, an
error. So a new reader is a new entry here, and the security-reviewed protocol is unchanged.

Replies are bounded by their shapes (``Text`` in characters, ``Rows`` in rows), and the
frame as a whole by ``frames.LOOKUP_REPLY_MAX`` bytes.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: The most characters of a line (or a tally's key, or a field of a record) a reply holds.
LINE_CHARS = 500
#: The most characters of a document's name in a reply.
NAME_CHARS = 200
#: The most lines a ``lines`` reply holds, and kinds a ``tally`` reply holds.
MAX_LINES = 50
MAX_KINDS = 200
#: The most characters of a text an argument carries (a cell's output, an answer, a pattern).
TEXT_MAX = 20_000
_COUNTER_MAX = 2**63 - 1


class ShapeError(ValueError):
    """A value is not of a reader's declared shape (the message names no value)."""


class Shape(abc.ABC):
    """What a value must be; ``clean`` returns it checked (rows as tuples) or raises ShapeError."""

    @abc.abstractmethod
    def clean(self, value: Any, where: str) -> Any:
        """``value`` checked, or ShapeError naming ``where``."""


@dataclass(frozen=True)
class Int(Shape):
    """A whole number in [low, high]."""

    low: int = 0
    high: int = _COUNTER_MAX

    def clean(self, value: Any, where: str) -> Any:
        if type(value) is not int or not self.low <= value <= self.high:
            raise ShapeError(f"{where}: an int in range expected, {type(value).__name__} found")
        return value


@dataclass(frozen=True)
class Bool(Shape):
    def clean(self, value: Any, where: str) -> Any:
        if type(value) is not bool:
            raise ShapeError(f"{where}: a bool expected, {type(value).__name__} found")
        return value


@dataclass(frozen=True)
class Text(Shape):
    """A str of at most ``most`` characters."""

    most: int

    def clean(self, value: Any, where: str) -> Any:
        if type(value) is not str:
            raise ShapeError(f"{where}: a str expected, {type(value).__name__} found")
        if len(value) > self.most:
            raise ShapeError(f"{where}: {len(value)} characters, over {self.most}")
        return value


@dataclass(frozen=True)
class Rows(Shape):
    """At most ``most`` rows, each a list of values of ``columns`` (returned as tuples)."""

    columns: tuple[Shape, ...]
    most: int

    def clean(self, value: Any, where: str) -> Any:
        if type(value) is not list or len(value) > self.most:
            raise ShapeError(f"{where}: at most {self.most} rows expected")
        rows = []
        for row in value:
            if type(row) not in (list, tuple) or len(row) != len(self.columns):
                raise ShapeError(f"{where}: a row of {len(self.columns)} values expected")
            rows.append(tuple(c.clean(v, where) for c, v in zip(self.columns, row, strict=True)))
        return rows


@dataclass(frozen=True)
class Fields(Shape):
    """A map of exactly ``fields`` (name -> shape); with ``optional``, an empty map is None."""

    fields: Mapping[str, Shape]
    optional: bool = False

    def clean(self, value: Any, where: str) -> Any:
        if self.optional and (value is None or value == {}):
            return None
        if type(value) is not dict or value.keys() != self.fields.keys():
            raise ShapeError(f"{where}: a map of {', '.join(self.fields)} expected")
        return {k: s.clean(value[k], f"{where}.{k}") for k, s in self.fields.items()}


@dataclass(frozen=True)
class Reader:
    """One reader: its arguments' shape, its reply's shape (a ``Fields``), ``read(handle,
    args)``, run in the worker over its main context (imported there only), and the values of
    arguments a caller may leave out."""

    args: Fields
    reply: Fields
    read: Callable[[Any, dict[str, Any]], dict[str, Any]]
    defaults: Mapping[str, Any] = field(default_factory=dict)


def _lines(handle: Any, args: dict[str, Any]) -> dict[str, Any]:
    from rlm_runtime.sandbox import contexts

    found = contexts.grep_lookup(handle, "lines", args["pattern"], args["ignore_case"], args["max_lines"])
    return {"lines": found["lines"], "count": found["count"]}


def _count(handle: Any, args: dict[str, Any]) -> dict[str, Any]:
    from rlm_runtime.sandbox import contexts

    return {"count": contexts.grep_lookup(handle, "count", args["pattern"], args["ignore_case"], 0)["count"]}


def _tally(handle: Any, args: dict[str, Any]) -> dict[str, Any]:
    from rlm_runtime.sandbox import contexts

    found = contexts.grep_lookup(handle, "tally", args["pattern"], args["ignore_case"], 0)
    return {"tally": found["tally"], "count": found["count"]}


def _read(handle: Any, args: dict[str, Any]) -> dict[str, Any]:
    from rlm_runtime.sandbox import contexts

    return {"hop": contexts.read_lookup(handle, args["question"], args["text"]) or {}}


_PATTERN = Fields({"pattern": Text(TEXT_MAX), "ignore_case": Bool()})
_GREP = Fields({**_PATTERN.fields, "max_lines": Int(0, MAX_LINES)})
_LINES = Rows((Text(NAME_CHARS), Int(1), Text(LINE_CHARS)), MAX_LINES)
_TALLY = Rows((Text(LINE_CHARS), Int()), MAX_KINDS)
#: A step through the records the model's code read (``context/hops.py``): strings but ``line``.
_HOP = Fields({"start": Text(LINE_CHARS), "link": Text(LINE_CHARS), "value": Text(LINE_CHARS),
               "name_field": Text(LINE_CHARS), "line": Int(), "field": Text(LINE_CHARS), "target": Text(LINE_CHARS),
               "own": Text(LINE_CHARS)}, optional=True)
_QUESTION = Fields({"question": Text(TEXT_MAX), "text": Text(TEXT_MAX)})
#: A count a question asks of the records (``hops.asked_count``).
_COUNT = Fields({"field": Text(LINE_CHARS), "value": Text(LINE_CHARS), "n": Int(), "children": Bool()}, optional=True)


def _asked_count(handle: Any, args: dict[str, Any]) -> dict[str, Any]:
    from rlm_runtime.sandbox import contexts

    return {"asked": contexts.count_lookup(handle, args["question"]) or {}}

#: Every reader by name. ``lines``: the first ``max_lines`` matching lines (document or "",
#: number, text) and how many match; ``count``: how many lines match; ``tally``: matching
#: lines per text the pattern's first group captures, most common first, and how many
#: texts; over the records the model's code already read, with ``question`` a question:
#: ``read`` (the one field of the one record it asks, when ``text``, an answer, gave another
#: value); ``asked_count``: the count the question asks of the records
#: (parsed for it when the model's code has not and the text is small).
READERS: dict[str, Reader] = {
    "lines": Reader(_GREP, Fields({"lines": _LINES, "count": Int()}), _lines, {"ignore_case": False, "max_lines": 20}),
    "count": Reader(_PATTERN, Fields({"count": Int()}), _count, {"ignore_case": False}),
    "tally": Reader(_PATTERN, Fields({"tally": _TALLY, "count": Int()}), _tally, {"ignore_case": False}),
    "read": Reader(_QUESTION, Fields({"hop": _HOP}), _read, {"text": ""}),
    "asked_count": Reader(Fields({"question": Text(TEXT_MAX)}), Fields({"asked": _COUNT}), _asked_count),
}


def reader(name: str) -> Reader:
    """The reader named ``name``; ValueError naming the known ones otherwise."""
    found = READERS.get(name) if type(name) is str else None
    if found is None:
        raise ValueError(f"no reader named {str(name)[:40]!r}; readers: {', '.join(READERS)}")
    return found
