"""The results file of a run (``DIR/results.jsonl``) and the configuration hash resume uses.

One JSON object per finished (task, method), appended as each ends: written with one
``write`` on an ``O_APPEND`` descriptor, then ``fsync``, so a ``kill -9`` loses only the tasks in
flight and never leaves half a line behind a whole one (a torn last line, if a disk ever
leaves one, is skipped on reading).

The configuration hash covers the model, the sub-model, the method, the profile, the limits
(and the window for direct and rag) and the task itself (every field of its line): a task is
done when a record with its hash exists and did not end in an error worth retrying
(``RETRY_ERRORS``: the model server was unreachable, the run was cancelled).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any

from rlm_runtime.eval.tasks import Task

#: Record format version.
SCHEMA = 1
#: Errors that do not make a task done: --resume runs it again.
RETRY_ERRORS = frozenset({"ModelUnavailable", "Cancelled", "KeyboardInterrupt", "WorkersBusy"})


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
        line = (json.dumps({"schema": SCHEMA, **record}, ensure_ascii=False, default=str) + "\n").encode("utf-8")
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
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


def read_results(path: str | Path) -> list[dict[str, Any]]:
    """Every whole record of a results file, in order (torn or foreign lines skipped)."""
    path = Path(path)
    if not path.exists():
        return []
    out: list[dict[str, Any]] = []
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict) and "task_id" in value and "method" in value:
                out.append(value)
    return out


def done_hashes(records: list[dict[str, Any]]) -> set[str]:
    """Configuration hashes of the records that count as done."""
    return {str(r.get("config_hash")) for r in records if r.get("error_type") not in RETRY_ERRORS}


def latest(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per (task, method, configuration): the last written."""
    seen: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in records:
        seen[(str(r.get("task_id")), str(r.get("method")), str(r.get("config_hash")))] = r
    return list(seen.values())
