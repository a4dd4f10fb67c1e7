"""Nested documents read as records: a JSON document's objects, each knowing its parent.

A JSON-lines text (one document a line) is read as the list of its lines' documents; a line
that does not parse is left out of the coverage.

A document that parses verifies its own structure, so it needs no coverage gate: every
object that holds a value of its own (a string, a number, a list of them) is a record of
those values, its key first (``key``: the name it sits under in its parent, when it sits
under one); an object or list that only holds others is no record, and what it holds
belongs to the record around it. So "which X holds Y" is the parent of Y's record, and
"how many Y under X" its children, whatever the document's schema.

Each record starts on the line of its object's first key, found by one forward scan of the
text in document order (objects open in the order the walk visits them), so reading is
linear in the text; a key the scan does not find as written (other escapes) ends the scan,
and the records after it keep the last line found. Values stay as JSON typed them.
"""

from __future__ import annotations

import json
from typing import Any

#: An item: (0-based line the record starts on, its fields, the index of its parent item or -1).
Item = tuple[int, list[tuple[str, Any]], int]
#: What a document gives: its items, and the share of the text's non-blank lines they come
#: from (a window's last value, cut short, is not read).
Read = tuple[list[Item], float]

#: The field that holds the name an object sits under in its parent object.
KEY = "key"
_SCALARS = (str, int, float, bool, type(None))


def read_json(text: str, *, most: int) -> Read | None:
    """The records of ``text`` when it is one JSON document (an object or an array), a window
    of one, or JSON lines, holding at least one object with a value of its own, with the share
    of lines read; None otherwise (not JSON, a scalar, nesting deeper than the parser takes).
    ``most``: the most records made (more raise ValueError, as the caller's own limit)."""
    parsed = _document(text)
    if parsed is None:
        return None
    document, read = parsed
    items: list[Item] = []
    cursor, line, searching = 0, 0, True
    # (value, the key it sits under or None, the index of the record around it or -1)
    stack: list[tuple[Any, str | None, int]] = [(document, None, -1)]
    while stack:
        value, key, parent = stack.pop()
        if isinstance(value, list):
            # An item of a list is named by nothing: the list's key names the list.
            stack.extend((v, None, parent) for v in reversed(value) if isinstance(v, (dict, list)))
            continue
        if not isinstance(value, dict):
            continue
        own = [(k, v) for k, v in value.items() if _plain(v)]
        here = parent
        if own:
            found = _where(text, key if key is not None else next(iter(value)), cursor) if searching else -1
            if found >= 0:
                line += text.count("\n", cursor, found)
                cursor = found + 1  # the next object's key is after this one's
            else:  # a key written with other escapes: later records keep this line (no scan per record)
                searching = False
            items.append((line, ([(KEY, key)] if key is not None and KEY not in value else []) + own, parent))
            if len(items) > most:
                raise ValueError(f"more than {most} records")
            here = len(items) - 1
        stack.extend((v, k, here) for k, v in reversed(list(value.items())) if isinstance(v, (dict, list)))
    if not items:
        return None
    return items, read / max(1, _lines(text, len(text)))


def _lines(text: str, end: int) -> int:
    """Non-blank lines of ``text[:end]`` (a line cut at ``end`` counts)."""
    return sum(1 for line in text[:end].split("\n") if line.strip())


def _document(text: str) -> tuple[Any, int] | None:
    """``text`` parsed as one JSON document, as JSON lines, or as the window of a document it
    may be (a chunk, a file cut short): its first key's object opened, its last complete
    value's brackets closed; with the non-blank lines it reads. None when none parses."""
    head = text.lstrip()[:1]
    if head not in ("{", "[", '"'):
        return None
    try:
        return json.loads(text), _lines(text, len(text))
    except (ValueError, RecursionError):
        pass
    if head == "{" and (lines := _json_lines(text)) is not None:
        return lines
    opened = "{" if head == '"' else ""
    mended = _mended(opened + text)
    if mended is None:
        return None
    try:
        return json.loads(mended[0]), _lines(text, mended[1] - len(opened))
    except (ValueError, RecursionError):
        return None


def _json_lines(text: str) -> tuple[list[Any], int] | None:
    """The objects of a text of one JSON object a line (as a list), with the number of lines
    read; None when under half the non-blank lines are objects or fewer than two are (a
    pretty-printed document's lines do not parse one by one). A line not ending in ``}`` is
    no object and is not parsed, and the reading stops once half the lines have failed: a
    text of lines that each fail costs no more than a glance."""
    lines = [line for line in text.split("\n") if line.strip()]
    values: list[Any] = []
    failed = 0
    for line in lines:
        value = None
        if line.rstrip().endswith("}"):
            try:
                value = json.loads(line)
            except (ValueError, RecursionError):
                pass
        if isinstance(value, dict):
            values.append(value)
        else:
            failed += 1
            if 2 * failed > len(lines):
                return None
    return (values, len(values)) if len(values) >= 2 else None


#: The deepest nesting ``_mended`` follows (deeper, it gives up: no window is mended).
_MENDED_DEPTH = 200
_CLOSE = {"{": "}", "[": "]"}


def _mended(text: str) -> tuple[str, int] | None:
    """``text`` as a whole document: cut after its last closed value and closed there (the
    brackets open at that point closed in order), and opened before its start where it climbs
    out of the level it started in (a closing bracket with none open, or more items after its
    first value). One pass over the text (strings skipped whole); None when its brackets do
    not match or nest deeper than ``_MENDED_DEPTH``. With it, how much of ``text`` it keeps."""
    stack: list[str] = []
    prefix = ""
    cut, closers = -1, ""
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            i = _string_end(text, i)
        elif ch in "{[":
            stack.append(ch)
            if len(stack) > _MENDED_DEPTH:
                return None
        elif ch in "}]":
            if not stack:  # the level the window started in ends: open it before the start
                prefix = ('{"": ' if ch == "}" else "[") + prefix
            elif _CLOSE[stack.pop()] != ch:
                return None
            cut, closers = i + 1, "".join(_CLOSE[b] for b in reversed(stack))
        elif ch == "," and not stack:  # more after the first value, at a level opened before the window
            opener = "{" if _member_next(text, i + 1) else "["
            prefix = ('{"": ' if opener == "{" else "[") + prefix
            stack.insert(0, opener)
        i += 1
    return (prefix + text[:cut] + closers, cut) if cut > 0 else None


def _string_end(text: str, i: int) -> int:
    """The index of the quote that ends the string opening at ``i`` (or the text's end)."""
    i += 1
    while i < len(text):
        found = text.find('"', i)
        if found < 0:
            return len(text)
        backslashes = 0
        while found - 1 - backslashes >= 0 and text[found - 1 - backslashes] == "\\":
            backslashes += 1
        if backslashes % 2 == 0:
            return found
        i = found + 1
    return len(text)


def _member_next(text: str, i: int) -> bool:
    """Whether what follows ``i`` (spaces aside) is an object's member (``"key":``)."""
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    if i >= len(text) or text[i] != '"':
        return False
    j = _string_end(text, i) + 1
    while j < len(text) and text[j] in " \t\r\n":
        j += 1
    return j < len(text) and text[j] == ":"


#: Lists inside a list value, at most (a value nested deeper is dropped: code that matches,
#: copies or prints a record recurses into its values).
_LIST_DEPTH = 20


def _plain(value: Any) -> bool:
    """A value of the object's own: a scalar, or a list holding no object (lists of lists of
    scalars, ``_LIST_DEPTH`` deep at most), walked without recursion."""
    stack = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, dict) or depth > _LIST_DEPTH:
            return False
        if isinstance(v, list):
            stack.extend((x, depth + 1) for x in v)
    return True


def _where(text: str, key: str, cursor: int) -> int:
    """Where ``key`` is next written as a JSON string from ``cursor`` (-1 when it is not, as
    written with other escapes): the object's line."""
    found = text.find(json.dumps(key, ensure_ascii=False), cursor)
    return found if found >= 0 else text.find(json.dumps(key), cursor)
