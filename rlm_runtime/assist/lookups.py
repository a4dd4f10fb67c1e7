"""An assist's own reading of the text: typed requests to the run's worker
(``Sandbox.lookup``), never code run in the model's namespace with its output parsed back.

A lookup leaves the model's variables and access counts as they were. Each helper returns
plain data, or an empty result when the lookup failed (a pattern RE2 refuses, no worker):
an assist then says nothing.
"""

from __future__ import annotations

from typing import Any

from rlm_runtime import harness
from rlm_runtime.assist.base import Host
from rlm_runtime.quoting import NAME_CHARS, VALUE_CHARS, quoted
from rlm_runtime.sandbox.readers import LINE_CHARS, MAX_LINES, READERS, TEXT_MAX


def _lookup(host: Host, reader: str, **args: Any) -> dict[str, Any]:
    """``host.lookup`` by ``reader``; arguments it refuses (a pattern over ``TEXT_MAX``) are a
    failed lookup, as a pattern RE2 refuses is."""
    try:
        return host.lookup(reader, **args)
    except ValueError as e:
        empty = {"lines": [], "count": 0, "tally": []}
        return {**{k: empty.get(k) for k in READERS[reader].reply.fields}, "error": str(e)[:200]}


def _render(doc: str, number: int, line: str) -> str:
    # As a grep match prints (``12: text``, ``'doc':12: text``); a line break inside the line
    # is shown escaped, so a document's line cannot pose as a line of the runtime's note, and
    # the document's name is ``quoted``, as a note shows every name a document supplies.
    return f"{quoted(doc) + ':' if doc else ''}{number}: {harness.newlines_only(line)}"


def lines(host: Host, pattern: str, *, ignore_case: bool = False, most: int = 20) -> tuple[list[str], int]:
    """The first ``most`` lines matching ``pattern``, printed as grep prints them, and how
    many lines match in all (([], 0) when none do or the lookup failed)."""
    found = _lookup(host, "lines", pattern=pattern, ignore_case=ignore_case, max_lines=min(most, MAX_LINES))
    host.note_lookup(f"lines /{pattern}/{'i' if ignore_case else ''}: {found['count']}")
    if found["error"]:
        return [], 0
    return [_render(*row) for row in found["lines"]], int(found["count"])


def count(host: Host, pattern: str, *, ignore_case: bool = False) -> int | None:
    """How many lines match ``pattern`` (None when the lookup failed)."""
    found = _lookup(host, "count", pattern=pattern, ignore_case=ignore_case)
    host.note_lookup(f"count /{pattern}/{'i' if ignore_case else ''}: {found['count']}")
    return None if found["error"] else int(found["count"])


def tally(host: Host, pattern: str, *, ignore_case: bool = False) -> tuple[dict[str, int], int]:
    """Matching lines per text the pattern's first group captures, most common first (at
    most the worker's cap of kinds), and how many kinds there are in all."""
    found = _lookup(host, "tally", pattern=pattern, ignore_case=ignore_case)
    host.note_lookup(f"tally /{pattern}/{'i' if ignore_case else ''}: {found['count']} kinds")
    if found["error"]:
        return {}, 0
    return dict(found["tally"]), int(found["count"])


def misread(host: Host, answer: str) -> dict[str, object] | None:
    """The one field of the one record the question asks, when ``answer`` gave another value
    the records hold (``hops.misread``: a hop of no link, ``target`` the value asked); None
    when the answer is not such a misreading or the lookup failed. With ``answer`` "", the
    read the question asks, if it asks one."""
    found = _lookup(host, "read", question=host.query[:TEXT_MAX], text=answer[:TEXT_MAX])
    shown = _whole(found["hop"])
    host.note_lookup(f"read: {shown['start']!s} -> {shown['field']!s}" if shown else "read: none")
    return None if found["error"] else shown


#: The hop's strings a note shows, and the most characters each may have to be shown whole
#: (``quoting.quoted``): a name's, a value's.
_SHOWN = {"link": NAME_CHARS, "name_field": NAME_CHARS, "field": NAME_CHARS,
          "start": VALUE_CHARS, "value": VALUE_CHARS, "target": VALUE_CHARS}


def _whole(hop: dict[str, Any] | None) -> dict[str, Any] | None:
    """``hop``, or None when one of its values may have been cut by the lookup's bounds, or
    one a note shows is longer than a note shows whole (``quoting.quoted``): a note must not tell
    the model that code prints a value it does not (nor read a cut name), and a document's
    string longer than that is a passage, not a name or a value a note may repeat."""
    if hop is None or any(isinstance(v, str) and len(v) >= LINE_CHARS for v in hop.values()):
        return None
    if any(len(str(hop.get(k, ""))) > most for k, most in _SHOWN.items()):
        return None
    return hop


def asked_count(host: Host) -> dict[str, object] | None:
    """The count the question asks of the records (``hops.asked_count``: ``field``,
    ``value``, ``n``, ``children``), or None when it names no such count or the lookup failed."""
    found = _lookup(host, "asked_count", question=host.query[:TEXT_MAX])
    asked = found.get("asked")
    host.note_lookup(f"asked_count: {asked['value']!s} -> {asked['n']!s}" if asked else "asked_count: none")
    if found["error"] or not asked or any(len(str(asked[k])) > VALUE_CHARS for k in ("field", "value")):
        return None
    return dict(asked)
