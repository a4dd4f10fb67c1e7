"""The results file of a run (``DIR/results.jsonl``) and the configuration hash resume uses.

One JSON object per finished (task, method), appended as each ends: written with one
``write`` on an ``O_APPEND`` descriptor, then ``fsync``, so a ``kill -9`` loses only the tasks in
flight and never leaves half a line behind a whole one (a torn last line, if a disk ever
leaves one, is skipped on reading).

The configuration hash covers the model, the sub-model, the method, the profile, the limits
(and the window for direct and rag) and the task itself (every field of its line): a task is
done when a record with its hash exists and did not end in an error worth retrying
(``RETRY_ERRORS``: the model server was unreachable, the run was cancelled, the model could
not be set up: an unknown name, a model not installed, a missing key).

A results file may have been edited, or come from someone else's run: ``load_results`` reads
each line strictly (``jsonlines.py``) and validates it as a ``Record`` (types, finite numbers in
range, bounded names); a line that fails is skipped with a message naming its line and field,
never an exception.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rlm_runtime import private
from rlm_runtime.eval.jsonlines import parse_line, read_lines
from rlm_runtime.eval.tasks import MAX_LENGTH, Task

#: Record format version.
SCHEMA = 1
#: Errors that do not make a task done: --resume runs it again.
RETRY_ERRORS = frozenset({"ModelUnavailable", "Cancelled", "KeyboardInterrupt", "WorkersBusy",
                          "ConfigError", "UnknownModel", "MissingAPIKey"})


class Record(BaseModel):
    """The fields of a results line that the runner and the report use, checked (other
    fields are kept as they are)."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    task_id: str = Field(min_length=1, max_length=200)
    method: str = Field(min_length=1, max_length=100)
    config_hash: str | None = Field(None, max_length=100)
    model: str | None = Field(None, max_length=500)
    family: str | None = Field(None, max_length=200)
    length: int | None = Field(None, ge=0, le=MAX_LENGTH)
    score: float = Field(0.0, ge=0, le=1)
    correct: bool = False
    input_tokens: int = Field(0, ge=0, le=MAX_LENGTH)
    output_tokens: int = Field(0, ge=0, le=MAX_LENGTH)
    cost_usd: float = Field(0.0, ge=0)
    wall_s: float = Field(0.0, ge=0)
    trajectory: str | None = Field(None, max_length=4096)
    error: str | None = None
    error_type: str | None = Field(None, max_length=200)
    window: int | None = Field(None, ge=0, le=MAX_LENGTH)
    extra: dict[str, Any] = Field(default_factory=dict)
    load_all_tokens: int | None = Field(None, ge=0, le=1 << 50, strict=True)  # true is no count
    probe_s: float | None = Field(None, ge=0, allow_inf_nan=False, strict=True)


def config_hash(task: Task, method: str, config: dict[str, Any]) -> str:
    """The hash of everything that decides a result (``config``: model, sub_model, profile,
    limits, window...)."""
    data = {"task": task.model_dump(mode="json"), "method": method, "config": config}
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]


class ResultsFile:
    """Append-only ``results.jsonl``; thread-safe."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def append(self, record: dict[str, Any]) -> None:
        """Write ``record`` as one line and make it durable before returning."""
        # A model's answer may hold an unpaired surrogate: written as "?", never an exception
        # that would stop the batch.
        line = (json.dumps({"schema": SCHEMA, **record}, ensure_ascii=False, default=str) + "\n").encode("utf-8", "replace")
        with self._lock:
            private.make_dir(self.path.parent)
            # Answers quote the contexts, which may be private: the file is the user's alone.
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
                         | getattr(os, "O_NOFOLLOW", 0), private.FILE_MODE)
            try:
                view = memoryview(line)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
                os.fsync(fd)
            finally:
                os.close(fd)

    def read(self) -> list[dict[str, Any]]:
        return read_results(self.path)


def load_results(path: str | Path) -> tuple[list[dict[str, Any]], list[str]]:
    """(every valid record of a results file, in order; one message per bad line). A torn
    last line or a blank one is skipped silently; a missing file is empty.

    Raises:
        OSError: the file exists but cannot be read.
        SourceRefused: it is no regular file (a FIFO, a device).
    """
    path = Path(path)
    if not path.exists():
        return [], []
    out: list[dict[str, Any]] = []
    bad: list[str] = []
    lines = list(read_lines(path, regular=True))
    for number, line, why in lines:
        if line is not None and not line.strip():
            continue
        try:
            if line is None:
                raise ValueError(why)
            value = parse_line(line)
            if not isinstance(value, dict):
                raise ValueError(f"expected a JSON object, got {type(value).__name__}")
            out.append(Record.model_validate(value).model_dump())
        except ValidationError as e:
            first = e.errors()[0]
            field = ".".join(str(part) for part in first["loc"]) or "(record)"
            bad.append(f"line {number}: {field}: {first['msg']}")
        except ValueError as e:
            if number == len(lines) and line is not None and not line.endswith("\n"):
                continue  # the torn last line of a killed run
            bad.append(f"line {number}: {e}")
    return out, bad


def read_results(path: str | Path) -> list[dict[str, Any]]:
    """Every valid record of a results file, in order (``load_results`` without the messages)."""
    return load_results(path)[0]


def done_hashes(records: list[dict[str, Any]]) -> set[str]:
    """Configuration hashes of the records that count as done."""
    return {str(r.get("config_hash")) for r in records if r.get("error_type") not in RETRY_ERRORS}


def latest(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per (task, method, configuration): the last written."""
    seen: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in records:
        seen[(str(r.get("task_id")), str(r.get("method")), str(r.get("config_hash")))] = r
    return list(seen.values())
