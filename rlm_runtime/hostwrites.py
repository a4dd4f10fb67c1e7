"""The one place that bounds what sandboxed code can make the host write to disk.

Sandboxed code cannot write a host file, but every host function it calls leaves a trace:
a ``tool_call`` or ``sub_call`` event in the trajectory, a recall trace (with its query) in
the memory store, a remembered answer, an index of a context. Left whole, a few calls with
a large argument or error fill the disk under ``$RLM_HOME``. The caps, all here:

* ``FIELD_CHARS``: characters of any one string in a trajectory event (an error, a reply,
  a cell's output); longer ones are cut with a note saying how much.
* ``HOST_ERROR_CHARS``: characters of a host function's error message, as sandboxed code
  reads it and as an event records it.
* ``RUN_CALL_EVENT_BYTES``: bytes of ``tool_call`` and ``sub_call`` events one run writes
  (the events a loop in a cell can multiply); ``RUN_EVENT_BYTES``: bytes of all the events
  of one run but its ``run_start`` and ``run_end``. Past a cap, events are dropped and
  counted: the run's ``run_end`` says how many (``dropped_events``, ``dropped_bytes``).
  ``TREE_CALL_EVENT_BYTES`` and ``TREE_EVENT_BYTES`` are the same caps for a question's
  whole call tree (a run and its ``rlm_query`` children, grandchildren...): without them a
  cell starting child runs in a loop multiplies a run's caps by the runs the budget allows.
* ``STORED_QUERY_CHARS``: characters of a ``search_chunks`` query kept in the memory
  store's recall traces; ``SEARCH_QUERY_CHARS``: characters of a query searched at all;
  ``RUN_RECORDED_SEARCHES``: searches of one run recorded as recalls (a trace row, a row per
  hit, reinforcement, links) in the memory store, which outlives the run: a cell looping on
  ``search_chunks`` grew it without end. Later searches answer, unrecorded.
* ``REMEMBERED_QUESTION_CHARS``, ``REMEMBERED_ANSWER_CHARS``, ``REMEMBERED_CELLS_CHARS``:
  what ``remember`` stores of a run; ``REMEMBERED_READ_IDS``: the distinct memory chunks a
  run read that its remembered chunks name (in each one's ``meta``) and link to (every
  search's hits were kept, repeats and all, in every chunk's ``meta``).
* Indexes: an index of a text context (not a file) lives as long as the session that made
  it (removed at close; one left by a process that died is removed by the next session that
  searches); an index of a file is reused and removed after ``PATH_INDEX_MAX_AGE_S``
  unused.

Every text cut here is redacted first (``redact``): a secret straddling the cut does not
leave its prefix behind.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from rlm_runtime.redact import Redactor

FIELD_CHARS = 16_000
HOST_ERROR_CHARS = 4_000
RUN_CALL_EVENT_BYTES = 4 * 1024 * 1024
RUN_EVENT_BYTES = 32 * 1024 * 1024
TREE_CALL_EVENT_BYTES = 16 * 1024 * 1024
TREE_EVENT_BYTES = 64 * 1024 * 1024
STORED_QUERY_CHARS = 1_000
SEARCH_QUERY_CHARS = 4_000
RUN_RECORDED_SEARCHES = 200
REMEMBERED_QUESTION_CHARS = 8_000
REMEMBERED_ANSWER_CHARS = 64_000
REMEMBERED_CELLS_CHARS = 64_000
REMEMBERED_READ_IDS = 1_000
PATH_INDEX_MAX_AGE_S = 30 * 24 * 3600.0

#: Events sandboxed code can multiply by calling host functions in a loop.
CALL_EVENTS = frozenset({"tool_call", "sub_call", "worker_wait"})
#: Events always written (their fields capped): a run's frame, and a file's.
KEPT_EVENTS = frozenset({"trace_start", "run_start", "run_end", "session_end", "models"})


def cut_note(cut: int) -> str:
    return f" ... [{cut:,} characters not kept]"


def clip(text: str, limit: int, redactor: Redactor | None = None) -> str:
    """``text`` redacted and cut to ``limit`` characters (a note says how many were cut)."""
    return (redactor or Redactor()).clipped(text, limit, cut_note(len(text) - limit) if len(text) > limit else "")


def host_error(text: str) -> str:
    """A host function's error message as sandboxed code and the trajectory get it."""
    return clip(text, HOST_ERROR_CHARS)


def capped_event(data: dict[str, Any], redactor: Redactor | None = None) -> dict[str, Any]:
    """``data`` (a JSON-ready event) with every string longer than ``FIELD_CHARS`` cut (and
    redacted before the cut). The writer redacts the whole line it writes."""
    r = redactor or Redactor()
    return _capped(data, r)


def _capped(value: Any, r: Redactor) -> Any:
    if isinstance(value, str):
        return value if len(value) <= FIELD_CHARS else clip(value, FIELD_CHARS, r)
    if isinstance(value, list):
        return [_capped(v, r) for v in value]
    if isinstance(value, dict):
        return {k if not isinstance(k, str) or len(k) <= 200 else clip(k, 200, r): _capped(v, r) for k, v in value.items()}
    return value


class RunBudgets:
    """How many bytes each run, and each call tree, has written to one trajectory; what was
    dropped. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: dict[str, int] = {}
        self._all: dict[str, int] = {}
        self._dropped: dict[str, tuple[int, int]] = {}
        self._roots: dict[str, str] = {}  # run id -> the id of its tree's root run, while the run is open

    def _root(self, run_id: str, parent_id: Any) -> str:
        root = self._roots.get(run_id)
        if root is None:
            # A child's first event (its run_start) names its parent, open while the child runs.
            root = self._roots.get(parent_id, parent_id) if isinstance(parent_id, str) else run_id
            self._roots[run_id] = root
        return root

    def admit(self, data: Mapping[str, Any], size: int) -> bool:
        """Whether an event of ``size`` bytes may be written (False: count it as dropped)."""
        kind = data.get("type")
        run_id = data.get("run_id")
        if not isinstance(run_id, str):
            return True
        with self._lock:
            root = self._root(run_id, data.get("parent_id"))
            if kind in KEPT_EVENTS:
                return True
            call = size if kind in CALL_EVENTS else 0
            tree = "tree:" + root  # a tree's counts, beside its runs' (run ids never start so)
            used = (self._all.get(run_id, 0) + size, self._calls.get(run_id, 0) + call,
                    self._all.get(tree, 0) + size, self._calls.get(tree, 0) + call)
            if (used[0] > RUN_EVENT_BYTES or used[1] > RUN_CALL_EVENT_BYTES
                    or used[2] > TREE_EVENT_BYTES or used[3] > TREE_CALL_EVENT_BYTES):
                events, nbytes = self._dropped.get(run_id, (0, 0))
                self._dropped[run_id] = (events + 1, nbytes + size)
                return False
            self._all[run_id], self._calls[run_id], self._all[tree], self._calls[tree] = used
            return True

    def end(self, run_id: str) -> tuple[int, int]:
        """(events, bytes) dropped of ``run_id``, forgotten with the run's counts (and its
        tree's, when it is the root)."""
        with self._lock:
            self._all.pop(run_id, None)
            self._calls.pop(run_id, None)
            if self._roots.pop(run_id, run_id) == run_id:
                self._all.pop("tree:" + run_id, None)
                self._calls.pop("tree:" + run_id, None)
            return self._dropped.pop(run_id, (0, 0))
