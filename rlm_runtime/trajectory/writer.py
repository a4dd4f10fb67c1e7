"""The one place trace events are written: validated, one JSON object per line, flushed.

``TraceWriter.emit`` takes a record (``events``) or a dict, and returns the JSON-ready dict
it wrote, which is what ``on_event`` callbacks (the live view) should receive. A
writer writes ``trace_start`` before its first event unless that event is one, so every
file, and every writer's part of a file appended to, starts with one.

Cost (CPU time, 2-core box): a typical iteration event (a 2 KB line) takes ~27 µs to emit
as a record, ~36 µs as a dict (validated first), ~50 µs when its text is not ASCII; ~10 µs
without a file. The loop's own overhead is ~0.6 ms per turn.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from pydantic import ValidationError

from rlm_runtime import hostwrites, private
from rlm_runtime.redact import Redactor
from rlm_runtime.trajectory.events import EVENT_TYPES, InvalidEvent, Record, RunEnd, RunStart, TraceStart, UnknownEvent

#: What json.dumps(ensure_ascii=False) leaves raw but a trace must not hold: DEL and C1
#: controls and bidi overrides act on a terminal that cats the file; U+2028, U+2029 and NEL
#: end a line for ``str.splitlines``; a lone surrogate (a cell can print one) cannot be
#: encoded as UTF-8 at all. Each is only ever inside a JSON string, where a ``\uXXXX``
#: escape means the same character.
_RAW_IN_JSON = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


#: The first byte of each of them in UTF-8 (a lead byte, or DEL): a line holding none of
#: these needs no scan. (Single bytes: a one-byte search is a memchr, ~5 times faster.)
_RAW_LEADS = (b"\x7f", b"\xc2", b"\xe2", b"\xed")


def _json_line(event: Mapping[str, Any]) -> str:
    line = json.dumps(event, default=str, ensure_ascii=False)
    # The regex scan costs ~10 µs per KB; the checks before it ~3 µs per KB, and most lines
    # (ASCII, or text without those characters' lead bytes) stop there.
    if line.isascii():
        return line.replace("\x7f", "\\u007f") if "\x7f" in line else line
    raw = line.encode("utf-8", "surrogatepass")
    if not any(lead in raw for lead in _RAW_LEADS):
        return line
    return _RAW_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", line)


def to_record(event: Record | Mapping[str, Any], *, strict: bool = False) -> Record:
    """The typed record of ``event``; a dict is validated against its type's model.

    An invalid dict gives an ``InvalidEvent`` holding it and the errors, or (``strict``)
    raises pydantic's ``ValidationError``. Why record rather than raise by default: a trace
    observes a run, and a wrong field in an event (a bug in whatever emitted it) must not
    cost the user the run's answer; writing the dict as given would hand every reader a
    record that lies about its shape. An ``invalid_event`` line is honest and visible:
    ``rlm trace`` shows it as a warning. Tests pass ``strict=True`` so such bugs fail there.
    """
    if isinstance(event, Record):
        return event
    data = dict(event)
    kind = data.get("type")
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    try:
        if cls is not None:
            return cls.model_validate(data)
        if isinstance(kind, str):  # a type this version does not know: kept as it is
            return UnknownEvent.model_validate(data)
        if strict:
            raise ValueError(f"a trace event needs a str 'type', got {data!r:.200}")
        return InvalidEvent(of_type=None, errors=["a trace event needs a str 'type'"], event=_jsonable(data))
    except ValidationError as e:
        if strict:
            raise
        errors = [f"{'.'.join(str(p) for p in err['loc']) or '(event)'}: {err['msg']}" for err in e.errors()]
        return InvalidEvent(of_type=kind if isinstance(kind, str) else None, errors=errors, event=_jsonable(data),
                            t=data.get("t") if isinstance(data.get("t"), (int, float)) else None)


def _jsonable(data: dict[str, Any]) -> dict[str, Any]:
    value = json.loads(json.dumps(data, default=str))
    return value if isinstance(value, dict) else {"value": value}


def event_dict(event: Record | Mapping[str, Any], *, strict: bool = False) -> dict[str, Any]:
    """``event`` as the JSON-ready dict a writer writes (validated; ``t`` filled in)."""
    return _stamped(to_record(event, strict=strict))


def _stamped(record: Record) -> dict[str, Any]:
    data = record.to_dict()
    if data.get("t") is None:
        data["t"] = time.time()
    return data


class TraceWriter:
    """Appends events to a JSONL file; thread-safe; every event is flushed.

    Args:
        path: the file (appended to; its folder is made). None writes nothing, but ``emit``
            still returns each event's dict, for ``on_event`` callbacks.
        session_id, model, sub_model: what the ``trace_start`` the writer writes itself
            says (model and sub-model default to those of the first ``run_start``).
        strict: raise on an invalid event instead of recording it (see ``to_record``).

    What is written is bounded (``hostwrites``) and redacted (``redact``): every string cut
    to ``FIELD_CHARS``; every line without the secrets the runtime knows or credential
    shapes; a run's events past its byte caps dropped, and counted in its ``run_end``
    (``dropped_events``, ``dropped_bytes``). The file is created 0600 (its folder 0700 when
    the writer makes it).

    Lifecycle: ``emit`` any number of times, then ``close`` (also on exit of ``with``);
    events emitted after ``close`` are not written.
    """

    def __init__(self, path: str | Path | None, *, session_id: str | None = None, model: str | None = None,
                 sub_model: str | None = None, strict: bool = False) -> None:
        self.path = Path(path) if path else None
        self.session_id = session_id
        self.model = model
        self.sub_model = sub_model
        self.strict = strict
        self._lock = threading.Lock()
        self._started = False
        self._file: IO[str] | None = None
        self._budgets = hostwrites.RunBudgets()
        if self.path is not None:
            # Private whatever the umask: a trajectory holds the contexts' text.
            private.make_dir(self.path.parent)
            self._file = private.open_append(self.path)

    def emit(self, event: Record | Mapping[str, Any]) -> dict[str, Any]:
        """Write ``event`` (a record, or a dict validated against its type) as one line.

        Returns the JSON-ready dict written, ``t`` included.
        """
        record = to_record(event, strict=self.strict)
        # Sandboxed code decides much of what an event holds (a tool's error, a sub-call's
        # reply): redacted, and cut to the caps of ``hostwrites``, before anyone sees it.
        redactor = Redactor()
        data = _stamped(record)
        line = _json_line(data)
        if len(line) > hostwrites.FIELD_CHARS:  # else no string in it can be longer
            data = hostwrites.capped_event(data, redactor)
            line = _json_line(data)
        if self._file is None:
            return data
        line = redactor.json_line(line)
        with self._lock:
            if self._file is None:  # closed meanwhile
                return data
            if not self._budgets.admit(data, len(line)):
                return data
            if isinstance(record, RunEnd):
                dropped, dropped_bytes = self._budgets.end(record.run_id)
                if dropped:
                    data.update(dropped_events=dropped, dropped_bytes=dropped_bytes)
                    line = redactor.json_line(_json_line(data))
            if not self._started:
                self._started = True
                if not isinstance(record, TraceStart):
                    self._file.write(_json_line(self._header(record, data["t"])) + "\n")
            self._file.write(line + "\n")
            self._file.flush()
        return data

    def _header(self, first: Record, t: float) -> dict[str, Any]:
        model, sub_model = self.model, self.sub_model
        if isinstance(first, RunStart):
            model = model or first.model
            sub_model = sub_model or first.sub_model
        return TraceStart(t=t, session_id=self.session_id, model=model, sub_model=sub_model).to_dict()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
