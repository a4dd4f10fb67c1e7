"""``RunUsage``: what one question of a session did with its registered contexts, counted on
the host from the session's own events, and recorded in the registry when it ends.

The worker runs ``peek``, ``grep`` and ``chunk`` itself; the host sees them only in the
``context_stats`` event each run emits at its end (the worker's counts for that run, one row
per context in the order of the sandbox's contexts). So: ``loads`` is 1 for each registered
context of the session per question; ``peeks``, ``greps`` and ``chunks`` come from the root
run's ``context_stats`` row of the context (child runs of ``rlm_query`` read through their own
sandboxes and are not counted); ``searches`` counts the question's ``search_chunks`` calls,
each of which searched every context. A registered memory store counts loads and searches.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rlm_runtime.registry import leads as _leads

#: Cells of a question read for its leads (a run has at most max_iterations turns of a few).
_CELLS_KEPT = 200


class RunUsage:
    """Registered contexts of a session (``track``), and the events of its current question."""

    def __init__(self) -> None:
        self._ids: dict[int, str] = {}  # id(handle) -> registry id; the session keeps its handles alive
        self._stores: list[str] = []  # registered memory stores
        self._run_id: str | None = None
        self._rows: list[dict[str, Any]] = []
        self._searches = 0
        self._cells: list[tuple[str, str]] = []
        self._answer: str | None = None

    @property
    def tracked(self) -> bool:
        return bool(self._ids or self._stores)

    def track(self, handle: Any, context_id: str) -> None:
        self._ids[id(handle)] = context_id

    def registry_id(self, handle: Any) -> str | None:
        """The registry id of a tracked context handle, or None."""
        return self._ids.get(id(handle))

    def track_store(self, context_id: str) -> None:
        if context_id not in self._stores:
            self._stores.append(context_id)

    def begin(self, run_id: str) -> None:
        """A question's root run starts."""
        self._run_id, self._rows, self._searches = run_id, [], 0
        self._cells, self._answer = [], None

    def observe(self, event: dict[str, Any]) -> None:
        """Called with every event of the session."""
        if self._run_id is None:
            return
        kind = event.get("type")
        if kind == "context_stats" and event.get("run_id") == self._run_id:
            rows = event.get("contexts")
            self._rows = [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []
        elif kind == "tool_call" and event.get("name") == "search_chunks":
            self._searches += 1
        elif kind == "iteration" and event.get("run_id") == self._run_id and len(self._cells) < _CELLS_KEPT:
            blocks, outputs = event.get("code_blocks"), event.get("outputs")
            if isinstance(blocks, list) and isinstance(outputs, list):
                self._cells += [(code, out.get("stdout") or "") for code, out in zip(blocks, outputs, strict=False)
                                if isinstance(code, str) and isinstance(out, dict) and isinstance(out.get("stdout") or "", str)]
        elif kind == "run_end" and event.get("run_id") == self._run_id:
            answer = event.get("answer")
            self._answer = answer if isinstance(answer, str) else None

    def leads(self, handles: Sequence[Any]) -> dict[str, list[str]]:
        """``{registry id: [probe, ...]}``: the probes that found the question's answer
        (``leads.py``), for the main context (the one probes read by default) when it is registered."""
        key = self._ids.get(id(handles[0])) if handles else None
        if key is None:
            return {}
        found = _leads.leads(self._cells, self._answer)
        return {key: found} if found else {}

    def counts(self, handles: Sequence[Any]) -> dict[str, dict[str, int]]:
        """``{registry id: {op: n}}`` of the question just run, over the session's ``handles``."""
        out: dict[str, dict[str, int]] = {}
        for k, handle in enumerate(handles):
            key = self._ids.get(id(handle))
            if key is None:
                continue
            row = self._rows[k] if k < len(self._rows) else {}
            counted = out.setdefault(key, {"loads": 0, "peeks": 0, "greps": 0, "chunks": 0, "searches": 0})
            counted["loads"] = 1
            counted["searches"] = self._searches
            for op in ("peeks", "greps", "chunks"):
                value = row.get(op, 0)
                counted[op] += value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
        for key in self._stores:
            out.setdefault(key, {"loads": 1, "searches": self._searches})
        return out

    def end(self) -> str | None:
        """The question ended: its run id (None when none began)."""
        run_id, self._run_id = self._run_id, None
        return run_id
