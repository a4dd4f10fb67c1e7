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


class RunUsage:
    """Registered contexts of a session (``track``), and the events of its current question."""

    def __init__(self) -> None:
        self._ids: dict[int, str] = {}  # id(handle) -> registry id; the session keeps its handles alive
        self._stores: list[str] = []  # registered memory stores
        self._run_id: str | None = None
        self._rows: list[dict[str, Any]] = []
        self._searches = 0

    @property
    def tracked(self) -> bool:
        return bool(self._ids or self._stores)

    def track(self, handle: Any, context_id: str) -> None:
        self._ids[id(handle)] = context_id

    def track_store(self, context_id: str) -> None:
        if context_id not in self._stores:
            self._stores.append(context_id)

    def begin(self, run_id: str) -> None:
        """A question's root run starts."""
        self._run_id, self._rows, self._searches = run_id, [], 0

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
