"""Schemas of the frames a worker sends to the host, checked before any field is used.

User code runs in the worker, and code that got past the Python guards can write frames of
its own on the channel. So the host trusts nothing it reads there: a frame must be a map
with a known ``op``, exactly that op's fields, each of the right type and within its size,
and, during a cell, the sequence number of the cell the host is running. Anything else is a
``ProtocolError``; the supervisor then replaces the worker.

The checks are plain ``type()`` tests, not a validation library: a warm cell round trip
costs about 100 µs, and checking its ``done`` frame about 1 µs. Messages name the field
and the type or size found, never the value (which is the attacker's text).
"""

from __future__ import annotations

import math
from typing import Any

from rlm_runtime.errors import ProtocolError
from rlm_runtime.sandbox.protocol import plain_problem

#: Room for the worker's "[output truncated: ...]" marker on top of ``output_chars``.
OUTPUT_SLACK = 200
#: The worker cuts a cell's error text to this many characters, its type name to TYPE_MAX.
ERROR_MAX = 20_000
TYPE_MAX = 200
#: At most this many notes (renamed runtime names) per cell, each at most NOTE_MAX long.
NOTES_MAX = 20
NOTE_MAX = 500
#: Host function names are identifiers the host registered; nothing longer is ever valid.
NAME_MAX = 200

_CALL_KEYS = frozenset({"op", "seq", "name", "args", "kwargs"})
_FINAL_KEYS = frozenset({"op", "seq", "value"})
_DONE_KEYS = frozenset({"op", "seq", "stdout", "truncated", "error", "error_type", "duration_s", "notes", "empty_greps"})
#: A cell's empty greps the worker reports (``contexts.EMPTY_GREPS`` keeps 3), and the most
#: characters of a pattern (grep refuses longer ones) or of its hint.
EMPTY_GREPS_MAX = 3
PATTERN_MAX = 4096
_EMPTY_GREP_KEYS = frozenset({"pattern", "ignore_case", "hint"})


def _bad(op: str, problem: str) -> ProtocolError:
    return ProtocolError(f"'{op}' frame: {problem}")


def _kind(value: Any) -> str:
    return type(value).__name__


def cell_frame(msg: dict[str, Any], seq: int, output_chars: int) -> str:
    """Check one frame read while cell ``seq`` runs; return its op.

    ``msg`` is what ``protocol.recv`` returned: a dict with a str ``op``. Raises
    ProtocolError naming the first problem found.
    """
    op = msg["op"]
    if op == "done":
        keys = _DONE_KEYS
    elif op == "call":
        keys = _CALL_KEYS
    elif op == "final":
        keys = _FINAL_KEYS
    else:
        shown = op if len(op) <= 40 else op[:40] + "..."
        raise ProtocolError(f"unexpected frame {shown!r} during a cell")
    if len(msg) != len(keys):
        raise _fields(op, msg, keys)
    try:  # every field of the op is read below: same count and all present is the exact set
        got = msg["seq"]
        if type(got) is not int:
            raise _bad(op, f"sequence number of type {_kind(got)}")
        if op == "done":
            _check_done(msg, output_chars)
        elif op == "call":
            _check_call(msg)
        else:
            problem = plain_problem(msg["value"], "the FINAL answer")
            if problem:
                raise _bad(op, problem)
    except KeyError:
        raise _fields(op, msg, keys) from None
    # After the field checks, so a forged frame is reported for what is wrong with it.
    if got != seq:
        raise _bad(op, f"sequence number {got} while cell {seq} runs (a frame of another cell, or forged)")
    return op


def _fields(op: str, msg: dict[str, Any], keys: frozenset[str]) -> ProtocolError:
    extra = sorted(k[:40] for k in msg if k not in keys)
    missing = sorted(keys - msg.keys())
    return _bad(op, f"fields {', '.join(extra[:5])} not allowed" if extra else f"missing {', '.join(missing)}")


def _check_done(msg: dict[str, Any], output_chars: int) -> None:
    stdout = msg["stdout"]
    if type(stdout) is not str:
        raise _bad("done", f"stdout of type {_kind(stdout)}")
    if len(stdout) > output_chars + OUTPUT_SLACK:
        raise _bad("done", f"stdout of {len(stdout)} characters, over the {output_chars}-character output cap")
    if type(msg["truncated"]) is not bool:
        raise _bad("done", f"truncated of type {_kind(msg['truncated'])}")
    error = msg["error"]
    if error is not None and (type(error) is not str or len(error) > ERROR_MAX + OUTPUT_SLACK):
        raise _bad("done", f"error of type {_kind(error)}" if type(error) is not str else f"error of {len(error)} characters")
    error_type = msg["error_type"]
    if error_type is not None and (type(error_type) is not str or len(error_type) > TYPE_MAX):
        raise _bad("done", f"error_type of type {_kind(error_type)}" if type(error_type) is not str
                   else f"error_type of {len(error_type)} characters")
    duration = msg["duration_s"]
    if type(duration) not in (float, int) or not (0.0 <= duration < math.inf):
        raise _bad("done", f"duration_s of type {_kind(duration)}" if type(duration) not in (float, int)
                   else "duration_s is negative or not finite")
    notes = msg["notes"]
    if type(notes) is not list or len(notes) > NOTES_MAX:
        raise _bad("done", f"notes of type {_kind(notes)}" if type(notes) is not list else f"{len(notes)} notes")
    for note in notes:
        if type(note) is not str or len(note) > NOTE_MAX:
            raise _bad("done", f"a note of type {_kind(note)}" if type(note) is not str else f"a note of {len(note)} characters")
    empties = msg["empty_greps"]
    if type(empties) is not list or len(empties) > EMPTY_GREPS_MAX:
        raise _bad("done", f"empty_greps of type {_kind(empties)}" if type(empties) is not list else f"{len(empties)} empty greps")
    for grep in empties:
        if (type(grep) is not dict or grep.keys() != _EMPTY_GREP_KEYS or type(grep["pattern"]) is not str
                or len(grep["pattern"]) > PATTERN_MAX or type(grep["ignore_case"]) is not bool
                or type(grep["hint"]) is not str or len(grep["hint"]) > PATTERN_MAX):
            raise _bad("done", "an empty grep that is not {pattern, ignore_case, hint} within bounds")


def _check_call(msg: dict[str, Any]) -> None:
    name = msg["name"]
    if type(name) is not str or not name.isidentifier() or len(name) > NAME_MAX:
        raise _bad("call", f"function name of type {_kind(name)}" if type(name) is not str else "function name is not an identifier")
    args, kwargs = msg["args"], msg["kwargs"]
    if type(args) is not list or type(kwargs) is not dict:
        raise _bad("call", f"args of type {_kind(args)} and kwargs of type {_kind(kwargs)} (a list and a map expected)")
    # The worker checked both before sending; failing here means the frame was not its own.
    problem = plain_problem(args, "the arguments") or plain_problem(kwargs, "the keyword arguments")
    if problem:
        raise _bad("call", f"{name}(): {problem}")


def ready_frame(msg: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], int]:
    """Check a worker's answer to ``init``; return (layers, address-space limit).

    Raises ProtocolError for anything but a well-formed ``ready`` (``init_failed`` included:
    its message is passed on).
    """
    op = msg["op"]
    if op == "init_failed":
        message = msg.get("message")
        raise ProtocolError(message[:2000] if type(message) is str else "init failed")
    if op != "ready":
        raise ProtocolError(f"expected 'ready', got {op[:40]!r}")
    layers, as_limit = msg.get("layers"), msg.get("as_limit", 0)
    if type(layers) is not dict or len(layers) > 64 or plain_problem(layers, "layers", max_depth=3):
        raise _bad("ready", "layers is not a small map of plain data")
    clean: dict[str, dict[str, Any]] = {}
    for name, info in layers.items():
        if type(info) is not dict or type(info.get("active")) is not bool or type(info.get("detail")) is not str:
            raise _bad("ready", "a layer without a bool 'active' and a str 'detail'")
        clean[name[:100]] = {"active": info["active"], "detail": info["detail"][:500]}
    if type(as_limit) is not int or as_limit < 0:
        raise _bad("ready", f"as_limit of type {_kind(as_limit)}")
    return clean, as_limit


# ------------------------------------------------------- between cells: attach and stats

#: Descriptors per ``fds`` frame of a live attach: few, because they arrive under the
#: worker's RLIMIT_NOFILE (``CellLimits.open_files``, 16 at least); the worker maps each
#: one before it reads the next frame.
ATTACH_FDS_PER_FRAME = 8
#: Largest answer to ``attach`` the host reads (a failure message is cut to MESSAGE_MAX).
ATTACH_REPLY_MAX = 4096
MESSAGE_MAX = 1000
#: The counters of ``AccessStats`` a worker reports per context, in this order.
STAT_COUNTERS = ("peeks", "greps", "chunks", "slices", "lines", "full_loads", "records", "chars_returned")
_STAT_KEYS = frozenset(STAT_COUNTERS)
_COUNTER_MAX = 2**63 - 1
#: Bytes of a ``stats`` answer per context (eight small msgpack ints are ~100).
_STATS_BYTES_PER_CONTEXT = 256

_ATTACHED_KEYS = frozenset({"op", "seq", "count"})
_ATTACH_FAILED_KEYS = frozenset({"op", "seq", "message"})
_STATS_KEYS = frozenset({"op", "seq", "contexts"})


def stats_reply_max(n_contexts: int) -> int:
    """Largest ``stats`` answer the host reads for ``n_contexts`` contexts."""
    return 256 + _STATS_BYTES_PER_CONTEXT * n_contexts


def _exact(op: str, msg: dict[str, Any], keys: frozenset[str], seq: int) -> None:
    if msg.keys() != keys:
        raise _fields(op, msg, keys)
    got = msg["seq"]
    if type(got) is not int:
        raise _bad(op, f"sequence number of type {_kind(got)}")
    if got != seq:
        raise _bad(op, f"sequence number {got} in answer to request {seq} (an old answer, or forged)")


def attach_reply(msg: dict[str, Any], seq: int, count: int) -> str | None:
    """Check the worker's answer to ``attach`` ``seq``; None if it mapped the new contexts.

    ``attached`` must report ``count`` contexts in all (the host's own number after the
    attach). ``attach_failed`` returns the worker's reason (a short str): the worker kept
    its namespace and maps nothing new. Anything else raises ProtocolError.
    """
    op = msg["op"]
    if op == "attached":
        _exact(op, msg, _ATTACHED_KEYS, seq)
        got = msg["count"]
        if type(got) is not int or got != count:
            raise _bad(op, f"count of type {_kind(got)}" if type(got) is not int
                       else f"{got} contexts where the host has {count}")
        return None
    if op == "attach_failed":
        _exact(op, msg, _ATTACH_FAILED_KEYS, seq)
        message = msg["message"]
        if type(message) is not str or len(message) > MESSAGE_MAX:
            raise _bad(op, f"message of type {_kind(message)}" if type(message) is not str
                       else f"message of {len(message)} characters")
        return message
    shown = op if len(op) <= 40 else op[:40] + "..."
    raise ProtocolError(f"unexpected frame {shown!r} in answer to attach")


def stats_reply(msg: dict[str, Any], seq: int, count: int) -> list[dict[str, int]]:
    """Check the worker's answer to ``stats`` ``seq``; return one map of counters per context.

    The answer must hold exactly ``count`` maps (the host's number of contexts), each with
    exactly the keys of ``STAT_COUNTERS``, each an int in [0, 2**63). Names are not taken
    from the worker: the host knows them. Raises ProtocolError otherwise.
    """
    op = msg["op"]
    if op != "stats":
        shown = op if len(op) <= 40 else op[:40] + "..."
        raise ProtocolError(f"unexpected frame {shown!r} in answer to stats")
    _exact(op, msg, _STATS_KEYS, seq)
    rows = msg["contexts"]
    if type(rows) is not list or len(rows) != count:
        raise _bad(op, f"contexts of type {_kind(rows)}" if type(rows) is not list
                   else f"{len(rows)} contexts where the host has {count}")
    clean: list[dict[str, int]] = []
    for row in rows:
        if type(row) is not dict or row.keys() != _STAT_KEYS:
            raise _bad(op, f"a context's counters of type {_kind(row)}" if type(row) is not dict
                       else "a context's counters with other keys than " + ", ".join(STAT_COUNTERS))
        for name in STAT_COUNTERS:
            value = row[name]
            if type(value) is not int or not 0 <= value <= _COUNTER_MAX:
                raise _bad(op, f"{name} of type {_kind(value)}" if type(value) is not int else f"{name} out of range")
        clean.append({name: row[name] for name in STAT_COUNTERS})
    return clean


# ------------------------------------------------------- between cells: lookups for the host

#: The largest ``looked_up`` answer the host reads, in bytes. A reader bounds its own reply
#: (``readers.py``); this bounds the frame before any of it is decoded.
LOOKUP_REPLY_MAX = 1024 * 1024
#: Nesting and items of a lookup's reply (a map of rows of values is three deep).
_LOOKUP_DEPTH = 4
_LOOKUP_ITEMS = 20_000
_LOOKED_UP_KEYS = frozenset({"op", "seq", "reply", "error"})


def lookup_reply(msg: dict[str, Any], seq: int) -> tuple[dict[str, Any], str]:
    """Check the worker's answer to ``lookup`` ``seq``: (its reply, a map of plain data, {}
    when it failed; "" or why the reader could not read). The reply's fields are the reader's
    own, checked by the host against the reader's declared shape (``readers.py``) before use.
    Raises ProtocolError for anything else."""
    op = msg["op"]
    if op != "looked_up":
        shown = op if len(op) <= 40 else op[:40] + "..."
        raise ProtocolError(f"unexpected frame {shown!r} in answer to lookup")
    _exact(op, msg, _LOOKED_UP_KEYS, seq)
    reply, error = msg["reply"], msg["error"]
    if type(reply) is not dict:
        raise _bad(op, f"reply of type {_kind(reply)}")
    problem = plain_problem(reply, "the reply", max_depth=_LOOKUP_DEPTH, max_items=_LOOKUP_ITEMS)
    if problem:
        raise _bad(op, problem)
    if type(error) is not str or len(error) > MESSAGE_MAX:
        raise _bad(op, f"error of type {_kind(error)}" if type(error) is not str else f"error of {len(error)} characters")
    return reply, error
