"""The one place trace files are read: ``read_trace(path) -> Trace``.

Files of schema 2 start with ``trace_start``; lines before any ``trace_start`` (a whole
file, for the format written before it) are schema 1 and are mapped onto the same models,
missing fields defaulted. A file appended to by several writers holds several parts, each
with its own ``trace_start``. A ``trace_start`` with a schema newer than ours stops the
read with a ``ConfigError`` naming the rlm_runtime that wrote it; an event of a type we do
not know is kept as an ``UnknownEvent`` (the renderers skip it and say so).

Broken lines: a line that is not a JSON object is a ``ConfigError`` naming its line,
except the last line of a file that does not end with a newline, which is what a crash in
the middle of a write leaves behind: it is skipped, with a note in ``Trace.notes`` that the
renderers show.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from rlm_runtime import strictjson
from rlm_runtime.errors import ConfigError
from rlm_runtime.trajectory.events import (
    SCHEMA_VERSION,
    Iteration,
    Record,
    RunEnd,
    RunRecord,
    RunStart,
    TraceStart,
    UnknownEvent,
    package_version,
    parse_event,
)

R = TypeVar("R", bound=Record)

#: Lists and objects inside one another that a trace line may hold. The writer's events hold
#: plain data from the sandbox (at most 32 levels, ``sandbox.protocol.PLAIN_MAX_DEPTH``) a
#: few levels down; pydantic and the renderers recurse, so a deeper line is refused.
MAX_NESTING = 64

#: The event types schema 1 wrote; each belongs to a run.
_V1_RUN_TYPES = {"run_start", "iteration", "sub_call", "run_end"}


@dataclass(eq=False)
class Run:
    """One run of a trace: its own events, and its child runs (``rlm_query``)."""

    run_id: str
    parent_id: str | None
    first: int  # index in Trace.events of the run's first event
    start: RunStart | None = None
    end: RunEnd | None = None
    events: list[Record] = field(default_factory=list)
    children: list[Run] = field(default_factory=list)

    _at: list[int] = field(default_factory=list, repr=False)  # index in Trace.events of each of ``events``

    @property
    def depth(self) -> int:
        if self.start is not None:
            return self.start.depth
        return int(getattr(self.events[0], "depth", 0) or 0) if self.events else 0

    def items(self) -> list[Record | Run]:
        """The run's own events and its child runs, in the order they began, except that
        what happened during a turn (``turn_of``) follows that turn's ``iteration`` event:
        it was written while the turn ran, before the turn's own event."""
        pairs: list[tuple[int, Record | Run]] = [*zip(self._at, self.events, strict=True), *((c.first, c) for c in self.children)]
        began = [x for _, x in sorted(pairs, key=lambda pair: pair[0])]
        turns = {e.iteration for e in self.events if isinstance(e, Iteration)}
        held: dict[int, list[Record | Run]] = {}
        shown: set[int] = set()
        out: list[Record | Run] = []
        for x in began:
            n = self.turn_of(x)
            if n is not None and n in turns and n not in shown:
                held.setdefault(n, []).append(x)
                continue
            out.append(x)
            if isinstance(x, Iteration):
                shown.add(x.iteration)
                out.extend(held.pop(x.iteration, ()))
        for rest in held.values():  # a turn whose event came first after all: in the order they began
            out.extend(rest)
        return out

    @staticmethod
    def turn_of(item: Record | Run) -> int | None:
        """The turn ``item`` happened during (None: not one of a turn's events, or a trace
        too old to say): a child run's parent turn, an event's ``iteration``."""
        if isinstance(item, Run):
            return item.start.parent_iteration if item.start is not None else None
        if isinstance(item, Iteration) or not isinstance(item, RunRecord):
            return None
        return item.iteration


@dataclass
class Trace:
    """A trace file read back: its events as typed records, and its runs as a tree.

    ``schema`` is the newest schema among the file's parts (1 for a file without
    ``trace_start``); ``notes`` says what was skipped while reading.
    """

    events: list[Record]
    schema: int
    path: Path | None = None
    notes: list[str] = field(default_factory=list)

    @classmethod
    def from_dicts(cls, events: Iterable[dict[str, Any]], path: Path | None = None) -> Trace:
        """A trace from event dicts (``read_events``, or events collected from ``on_event``)."""
        records, schema = _parse(enumerate(events, 1), lambda n: f"event {n}")
        return cls(records, schema, path)

    @property
    def headers(self) -> list[TraceStart]:
        return self.of_type(TraceStart)

    @property
    def header(self) -> TraceStart | None:
        """The first ``trace_start`` (None in a schema 1 file)."""
        heads = self.headers
        return heads[0] if heads else None

    def of_type(self, kind: type[R]) -> list[R]:
        return [e for e in self.events if isinstance(e, kind)]

    @property
    def unknown(self) -> list[UnknownEvent]:
        """Events of types this version does not know."""
        return self.of_type(UnknownEvent)

    @cached_property
    def runs(self) -> dict[str, Run]:
        """Every run by id, in the order each first appears; children linked to parents."""
        runs: dict[str, Run] = {}
        for k, e in enumerate(self.events):
            rid = getattr(e, "run_id", None)
            if not isinstance(rid, str):
                continue
            run = runs.get(rid)
            if run is None:
                parent = getattr(e, "parent_id", None)
                run = runs[rid] = Run(rid, parent if isinstance(parent, str) else None, k)
            run.events.append(e)
            run._at.append(k)
            if isinstance(e, RunStart) and run.start is None:
                run.start = e
                run.parent_id = e.parent_id
            elif isinstance(e, RunEnd):
                run.end = e
        for run in runs.values():
            parent = runs.get(run.parent_id) if run.parent_id else None
            # A parent begins before its child; requiring it also keeps a crafted file's
            # parent links from making a cycle.
            if parent is not None and parent.first < run.first:
                parent.children.append(run)
        return runs

    @property
    def roots(self) -> list[Run]:
        """Runs without a parent in this trace, in order."""
        linked = {id(c) for r in self.runs.values() for c in r.children}
        return [r for r in self.runs.values() if id(r) not in linked]

    def children(self, run_id: str) -> list[Run]:
        run = self.runs.get(run_id)
        return list(run.children) if run else []

    def top_level(self) -> list[Record | Run]:
        """Root runs and the events outside any run (trace_start, a person's cells between
        questions, session_end...), in the order they began."""
        firsts = {r.first: r for r in self.roots}
        out: list[Record | Run] = []
        for k, e in enumerate(self.events):
            if k in firsts:
                out.append(firsts[k])
            elif not isinstance(getattr(e, "run_id", None), str):
                out.append(e)
        return out

    def to_dicts(self) -> list[dict[str, Any]]:
        return [e.to_dict() for e in self.events]


class TraceEvents(list[dict[str, Any]]):
    """What ``read_events`` returns: the event dicts, plus the ``Trace`` they came from, so
    the renderers use it as it is (notes included) instead of parsing the dicts again."""

    trace: Trace


def read_trace(path: str | Path) -> Trace:
    """Read a trace file of any schema this version knows.

    Raises:
        ConfigError: the file is missing or unreadable, a line (other than a truncated last
            one) is not a JSON object or not a valid event, or the file was written in a
            newer schema.
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError as e:
        raise ConfigError(f"trace file not found: {p}") from e
    except OSError as e:
        raise ConfigError(f"cannot read trace {p}: {e.strerror or e}") from e
    notes: list[str] = []
    records, schema = _parse(_lines(p, data, notes), lambda n: f"{p}:{n}")
    return Trace(records, schema, p, notes)


def read_events(path: str | Path) -> TraceEvents:
    """The events of a trace file as JSON-ready dicts, in schema 2 (see ``read_trace``)."""
    trace = read_trace(path)
    events = TraceEvents(trace.to_dicts())
    events.trace = trace
    return events


def _lines(p: Path, data: bytes, notes: list[str]) -> Iterator[tuple[int, Any]]:
    rows = data.split(b"\n")
    last = len(rows)  # the piece after the final newline ("" when the file ends with one)
    for n, raw in enumerate(rows, 1):
        if not raw.strip():
            continue
        try:
            value: Any = json.loads(raw.decode("utf-8"))
        except RecursionError:  # json's C parser stops cleanly at the interpreter's limit
            value = _TOO_DEEP
        except ValueError as e:  # not UTF-8, not JSON, or an int of more digits than Python converts
            if n == last:
                notes.append(f"line {n} was cut short (the writer was probably killed mid-write) and is skipped")
                return
            reason = (e.msg if isinstance(e, json.JSONDecodeError) else
                      "not UTF-8" if isinstance(e, UnicodeDecodeError) else "a number too long to read")
            raise ConfigError(f"{p}:{n}: not a trace event ({reason})") from e
        if value is _TOO_DEEP or strictjson.nests_deeper(value, MAX_NESTING):
            notes.append(f"line {n} is nested more than {MAX_NESTING} levels deep and is skipped")
            continue
        yield n, value


_TOO_DEEP = object()


def _parse(items: Iterable[tuple[int, Any]], where: Callable[[int], str]) -> tuple[list[Record], int]:
    records: list[Record] = []
    part = 1  # the schema of the lines being read: 1 until a trace_start says otherwise
    seen: set[int] = set()
    for n, value in items:
        if not isinstance(value, dict) or not isinstance(value.get("type"), str):
            continue  # not an event (schema 1 readers skipped these too)
        if value["type"] == "trace_start":
            part = _schema_of(value, where(n))
        elif part == 1:
            value = _from_v1(value)
        seen.add(part)
        try:
            records.append(parse_event(value))
        except ValidationError as e:
            err = e.errors()[0]
            at = ".".join(str(x) for x in err["loc"])
            raise ConfigError(f"{where(n)}: invalid {value['type']} event: {at + ': ' if at else ''}{err['msg']}") from e
    return records, max(seen, default=1)


def _schema_of(header: dict[str, Any], where: str) -> int:
    schema = header.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool) or schema < 1:
        raise ConfigError(f"{where}: trace_start has no valid schema number ({schema!r:.40})")
    if schema > SCHEMA_VERSION:
        by = header.get("version")
        writer = f"rlm_runtime {by}" if isinstance(by, str) and by else "a newer rlm_runtime"
        raise ConfigError(f"{where}: this trace was written by {writer} in trace schema {schema}; "
                          f"rlm_runtime {package_version()} reads schemas 1 to {SCHEMA_VERSION}: upgrade rlm_runtime to read it")
    return schema


def _from_v1(event: dict[str, Any]) -> dict[str, Any]:
    """A schema 1 event as schema 2: its fields kept, missing ones defaulted by the models
    (``contexts`` as names becomes a list of contexts by the model's own validator)."""
    if event["type"] not in _V1_RUN_TYPES:
        return event
    rid = event.get("run_id")
    if isinstance(rid, str):
        return event
    return {**event, "run_id": "?" if rid is None else str(rid)}
