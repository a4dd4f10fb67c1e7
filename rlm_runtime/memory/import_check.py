"""Checking one line of a memory import before any of it reaches the store.

An export file may come from anyone (``rlm memory import``), so each line is read with bounds
and checked against what ``transfer.records`` writes: at most ``MAX_LINE_CHARS`` characters,
UTF-8 text, JSON without NaN or Infinity, integers of at most 19 digits, nesting no deeper
than the interpreter allows, and then every field of its record type of the type the export
gives it (an id an integer in SQLite's range, a time a finite number, tags a list of strings,
no lone surrogates in a string). A line that fails is a ``StoreError`` naming the line and
what is wrong; the import, one transaction, then stores nothing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from typing import IO, Any

from rlm_runtime import strictjson
from rlm_runtime.memory.edits import MAX_VERSION, MAX_VERSIONS
from rlm_runtime.memory.errors import StoreError
from rlm_runtime.memory.value_check import MAX_JSON_DEPTH

#: Longest line read (characters): a chunk's text is a few KB; an export line holds one record.
MAX_LINE_CHARS = 16 << 20
_INT_DIGITS = 19  # SQLite integers are 64-bit
#: Nesting of a whole line: a record is shallow but for its meta (at most MAX_JSON_DEPTH, checked with
#: the field, so its error names it); anything deeper is refused as the line is parsed.
_LINE_DEPTH = 4 * MAX_JSON_DEPTH
_INT64 = 2**63


def lines(fh: IO[str]) -> Iterator[tuple[int, str]]:
    """(number, line) of each non-blank line of ``fh``, each at most ``MAX_LINE_CHARS``."""
    number = 0
    while True:
        number += 1
        try:
            line = fh.readline(MAX_LINE_CHARS + 1)
        except UnicodeDecodeError as e:
            raise StoreError(f"line {number} (or the one after it) is not UTF-8 text ({e.reason}); nothing was imported") from e
        if not line:
            return
        if len(line) > MAX_LINE_CHARS:
            raise StoreError(f"line {number} is longer than {MAX_LINE_CHARS:,} characters; nothing was imported")
        if line.strip():
            yield number, line


def parse(number: int, line: str) -> dict[str, Any]:
    """The JSON object on line ``number``, parsed with the bounds above."""
    try:
        line.encode("utf-8")
    except UnicodeEncodeError as e:  # undecodable bytes, kept as surrogates by the reader
        raise StoreError(f"line {number} is not UTF-8 text; nothing was imported") from e
    try:
        # Strings are checked field by field below (a lone surrogate names its field).
        value = strictjson.loads(line, max_depth=_LINE_DEPTH, max_int_digits=_INT_DIGITS, strings=False)
    except ValueError as e:
        said = f" is {e}" if str(e).startswith("not JSON") else f": {e}"
        raise StoreError(f"line {number}{said}; nothing was imported") from e
    if not isinstance(value, dict):
        raise StoreError(f"line {number} is a JSON {type(value).__name__}, not a record (an object); nothing was imported")
    return value


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -_INT64 <= v < _INT64


def _is_id(v: Any) -> bool:
    return _is_int(v) and v >= 1


def _is_version(v: Any) -> bool:
    return _is_int(v) and 1 <= v <= MAX_VERSION


def _is_num(v: Any) -> bool:
    return (isinstance(v, float) and math.isfinite(v)) or _is_int(v)


def _is_text(v: Any) -> bool:
    if not isinstance(v, str):
        return False
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a \ud800 escape
        return False
    return True


def _opt(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: v is None or check(v)


def _texts(v: Any) -> bool:
    return isinstance(v, list) and all(_is_text(t) for t in v)


def _meta(v: Any) -> bool:
    if v is None:
        return True
    # An imported meta is read back by Python on every search: keep it shallow (MAX_JSON_DEPTH).
    if not isinstance(v, dict) or strictjson.nests_deeper(v, MAX_JSON_DEPTH):
        return False
    try:
        json.dumps(v, ensure_ascii=False).encode("utf-8")
    except (UnicodeEncodeError, RecursionError, ValueError):
        return False
    return True


def _trace_chunks(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(c, list) and len(c) == 3 and _is_int(c[0]) and _is_id(c[1])
                                       and (c[2] is None or _is_num(c[2])) for c in v)


_STATS: dict[str, Callable[[Any], bool]] = {
    "recall_count": _is_int, "last_recall": _opt(_is_num), "strength": _is_num, "strength_at": _is_num,
    "tier": lambda v: v in ("working", "long_term"), "pinned": lambda v: isinstance(v, bool) or v in (0, 1),
    "expires_at": _opt(_is_num),
}

_FIELDS: dict[str, dict[str, Callable[[Any], bool]]] = {
    "source": {"id": _is_id, "kind": _is_text, "path": _is_text, "size": _opt(_is_int), "mtime_ns": _opt(_is_int),
               "hash": _opt(_is_text), "state": _is_text, "note": _opt(_is_text), "created": _is_num, "updated": _is_num},
    "chunk": {"id": _is_id, "source_id": _is_id, "seq": _is_int, "text": _is_text, "start_byte": _is_int, "end_byte": _is_int,
              "start_line": _is_int, "end_line": _is_int, "tokens": _is_int, "kind": _is_text, "hash": _is_text,
              "run_id": _opt(_is_text), "meta": _meta, "created": _is_num, "modified": _is_num, "accessed": _opt(_is_num),
              "stats": lambda v: isinstance(v, dict) and all(k in v and ok(v[k]) for k, ok in _STATS.items()),
              "tags": _texts},
    "link": {"src": _is_id, "dst": _is_id, "link_type": _is_text, "strength": _is_num, "count": _is_int, "created": _is_num,
             "updated": _is_num},
    "trace": {"id": _is_id, "at": _is_num, "op": _is_text, "query": _opt(_is_text), "run_id": _opt(_is_text),
              "chunks": _trace_chunks},
}
def _confidence(v: Any) -> bool:
    return v is None or (_is_num(v) and 0 <= v <= 1)


def _versions(v: Any) -> bool:
    """An edited chunk's earlier states (``edits.py``): each a text, kind, tags, summary,
    confidence, and the times it began and ended; at most ``MAX_VERSIONS``."""
    fields = {"version": _is_version, "text": _is_text, "kind": _is_text, "tags": _texts, "summary": _opt(_is_text),
              "confidence": _confidence, "since": _is_num, "replaced": _is_num}
    return isinstance(v, list) and len(v) <= MAX_VERSIONS and all(
        isinstance(x, dict) and all(k in x and ok(x[k]) for k, ok in fields.items()) for x in v)


#: Fields an older export may lack.
_OPTIONAL = {"chunk": {"terms": _texts, "summary": _opt(_is_text), "confidence": _confidence, "versions": _versions}}


def check_record(number: int, rec: dict[str, Any]) -> str:
    """The type of record ``rec`` (line ``number``) after checking its fields."""
    given = rec.get("type")
    kind = given if isinstance(given, str) else ""
    fields = _FIELDS.get(kind)
    if fields is None:
        shown = repr(given)[:60] if isinstance(given, (str, int, float, type(None))) else f"a {type(given).__name__}"
        raise StoreError(f"line {number}: unknown record type {shown}; nothing was imported")
    for name, ok in fields.items():
        if name not in rec:
            raise StoreError(f"line {number}: the {kind} record has no {name!r}; nothing was imported")
        if not ok(rec[name]):
            raise StoreError(f"line {number}: the {kind} record's {name!r} is not {_what(name)}; nothing was imported")
    for name, ok in _OPTIONAL.get(kind, {}).items():
        if name in rec and not ok(rec[name]):
            raise StoreError(f"line {number}: the {kind} record's {name!r} is not {_what(name)}; nothing was imported")
    return kind


def check_header(rec: dict[str, Any]) -> int:
    """The format version of an export's header line (its first)."""
    version = rec.get("version", 0)
    if not _is_int(version):
        raise StoreError("not a memory store export: its header's version is not an integer")
    return int(version)


def _what(name: str) -> str:
    if name in ("tags", "terms"):
        return "a list of strings"
    if name == "meta":
        return f"an object or null (nested at most {MAX_JSON_DEPTH} deep)"
    if name == "stats":
        return "an object of the chunk's statistics"
    if name == "chunks":
        return "a list of [rank, chunk id, score]"
    if name in ("created", "updated", "modified", "accessed", "at", "strength"):
        return "a finite number"
    if name in ("id", "source_id", "src", "dst"):
        return "a positive integer"
    if name == "versions":
        return (f"a list of at most {MAX_VERSIONS} earlier states (version 1 to {MAX_VERSION:,}, text, kind, tags, "
                "summary, confidence, since, replaced)")
    if name == "confidence":
        return "a number from 0 to 1, or null"
    if name in ("seq", "start_byte", "end_byte", "start_line", "end_line", "tokens", "count", "size", "mtime_ns"):
        return "an integer"
    return "a string (valid text)"
