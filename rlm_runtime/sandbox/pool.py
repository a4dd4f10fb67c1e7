"""The worker pool: a process-wide cap on how many sandbox workers live at once.

Each worker costs up to its memory cap, so the number of live workers is what decides
whether a machine (an 8 GB laptop, say) swaps. A ``WorkerPool`` has ``size`` slots; every
``Sandbox`` holds one slot while it has a live worker: it takes the slot just before its
worker is forked and gives it back once the worker is gone (closed, interrupted, failed to
start, or the sandbox dropped without ``close``). Restarting a worker after a timeout or a
crash keeps the slot: the new worker is forked before anyone else can take it.

Call trees. An RLM's ``rlm_query`` runs a child RLM, with a worker of its own, while the
parent's worker waits for the answer: a child waiting for a slot held by its ancestors
would wait forever. So every acquire names its call tree (``key``, shared by a session's
root and all its descendants), and when every slot is held by the requester's own tree the
pool refuses at once (``WorkersBusy``) rather than deadlock. Otherwise the requester queues
(first come, first served) until a slot frees up or its timeout passes.

``default_pool()`` is the pool sandboxes use unless given one: sized on first use from this
machine's free memory (``Governor.from_system().max_workers``), replaceable with
``set_default_pool`` (tests, programs that know better).
"""

from __future__ import annotations

import gc
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any

from rlm_runtime.errors import SandboxError, WorkersBusy
from rlm_runtime.governor import Governor
from rlm_runtime.sandbox.cleanup import hold_interrupts

__all__ = ["Lease", "WaitInfo", "WorkerPool", "default_pool", "set_default_pool"]

#: What ``on_wait`` receives: plain data (see ``WorkerPool.acquire``).
WaitInfo = dict[str, Any]
#: A waiter re-checks ``cancelled`` at least this often.
_POLL_S = 0.1


class Lease:
    """One slot of a pool, held until ``release()``. Thread-safe, idempotent.

    A lease dropped without ``release()`` gives its slot back when it is garbage-collected,
    so an exception between taking a slot and recording it cannot leak the slot for good.
    """

    __slots__ = ("__weakref__", "_finalizer", "key", "pool")

    def __init__(self, pool: WorkerPool, key: Hashable) -> None:
        self.pool = pool
        self.key = key
        self._finalizer = weakref.finalize(self, pool._give_back, key)
        self._finalizer.atexit = False

    @property
    def held(self) -> bool:
        return self._finalizer.alive

    def release(self) -> None:
        """Give the slot back (a second call does nothing)."""
        self._finalizer()


class WorkerPool:
    """``size`` slots for live workers, shared by every ``Sandbox`` that uses this pool.

    Args:
        size: how many workers may live at once (1 or more).

    Thread-safe. ``in_use`` and ``peak`` are for reports and tests.
    """

    def __init__(self, size: int) -> None:
        if type(size) is not int or size < 1:
            raise ValueError(f"a worker pool needs at least one slot, got {size!r}")
        self.size = size
        self.in_use = 0
        self.peak = 0
        # Re-entrant: a lease (or a sandbox) collected by the garbage collector gives its slot
        # back from whatever code triggered the collection, this pool's own included.
        self._cond = threading.Condition(threading.RLock())
        self._held: dict[Hashable, int] = {}  # call tree -> slots it holds
        self._queue: deque[object] = deque()  # waiters, first come first served

    def __repr__(self) -> str:
        return f"WorkerPool(size={self.size}, in_use={self.in_use}, waiting={len(self._queue)})"

    def held_by(self, key: Hashable) -> int:
        """Slots the call tree ``key`` holds now."""
        with self._cond:
            return self._held.get(key, 0)

    def acquire(self, key: Hashable, *, timeout: float = 600.0, on_wait: Callable[[WaitInfo], None] | None = None,
                cancelled: Callable[[], bool] | None = None) -> Lease:
        """Take a slot for call tree ``key``; wait for one if the pool is full.

        Args:
            key: the call tree (a session's root and its child RLMs share it). Any hashable.
            timeout: seconds to wait at most (0: do not wait).
            on_wait: called once, when the wait begins, with plain data: ``pool_size``,
                ``in_use``, ``held_by_this_tree``, ``waiting`` (requesters queued ahead, this one
                included), ``timeout_s``, ``waited_s`` (so far: about 0) and ``detail`` (a
                sentence for people). An exception it raises is ignored.
            cancelled: polled while waiting (at least every 0.1 s); True ends the wait with
                SandboxError. ``wake()`` makes waiters poll it at once.

        Returns:
            A ``Lease``; its ``release()`` gives the slot back.

        Raises:
            WorkersBusy: every slot is held by ``key``'s own tree (waiting could only end when
                that tree finishes, and it may be waiting for this very call: raised at once,
                also if it becomes so during the wait), or ``timeout`` passed.
            SandboxError: ``cancelled()`` turned True.

        A KeyboardInterrupt during the wait leaves the pool as it was.
        """
        ticket = object()
        began = time.monotonic()
        deadline = began + max(0.0, timeout)
        notified = collected = False
        try:
            # Queued inside the try: a Ctrl-C landing right after the append must still take
            # the ticket out, or it would stand at the head of the queue and block every waiter.
            with self._cond:
                self._queue.append(ticket)
            while True:
                with self._cond:
                    if self._queue[0] is ticket and self.in_use < self.size:
                        with hold_interrupts():  # no Ctrl-C between counting the slot and its lease
                            self._queue.popleft()
                            self._take(key)
                            lease = Lease(self, key)
                        self._cond.notify_all()  # the next in line may have a slot too
                        return lease
                    if self.in_use >= self.size and self._held.get(key, 0) >= self.size:
                        raise WorkersBusy(
                            f"every one of the {self.size} sandbox worker slots is held by this call tree itself "
                            "(its ancestors wait for this call), so waiting would never end; raise the pool size "
                            "or lower the recursion depth", pool_size=self.size)
                    left = deadline - time.monotonic()
                    if left <= 0 and collected:
                        raise WorkersBusy(f"no sandbox worker slot came free within {timeout:g}s (all {self.size} "
                                          "are in use by other sessions)", pool_size=self.size)
                    if cancelled is not None and cancelled():
                        raise SandboxError("the sandbox was closed while it waited for a worker slot")
                    if notified and collected:
                        self._cond.wait(min(left, _POLL_S))
                        continue
                    mine, ahead = self._held.get(key, 0), self._queue.index(ticket)
                    info: WaitInfo = {
                        "pool_size": self.size, "in_use": self.in_use, "held_by_this_tree": mine,
                        "waiting": ahead + 1, "timeout_s": float(timeout), "waited_s": time.monotonic() - began,
                        "detail": (f"all {self.size} sandbox worker slots are in use ({mine} by this call tree); "
                                   f"waiting up to {timeout:g}s" + (f" behind {ahead} other requests" if ahead else "")),
                    }
                # Outside the lock: slots of sandboxes dropped without close() come back when they
                # are collected, and the callback may take its time.
                if not collected:
                    collected = True
                    gc.collect()
                    continue
                notified = True
                if on_wait is not None:
                    try:
                        on_wait(info)
                    except Exception:  # a display callback must not cost the caller its worker
                        pass
        finally:
            with self._cond:
                try:
                    self._queue.remove(ticket)
                except ValueError:
                    pass  # served
                self._cond.notify_all()

    def wake(self) -> None:
        """Make every waiter re-check its ``cancelled`` now (a sandbox was closed)."""
        with self._cond:
            self._cond.notify_all()

    def _take(self, key: Hashable) -> None:
        self.in_use += 1
        self.peak = max(self.peak, self.in_use)
        self._held[key] = self._held.get(key, 0) + 1

    def _give_back(self, key: Hashable) -> None:
        with self._cond:
            self.in_use -= 1
            left = self._held.get(key, 0) - 1
            if left > 0:
                self._held[key] = left
            else:
                self._held.pop(key, None)
            self._cond.notify_all()


_default: WorkerPool | None = None
_default_lock = threading.Lock()


def default_pool() -> WorkerPool:
    """The process-wide pool, sized on first use from free memory (``Governor.max_workers``)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = WorkerPool(Governor.from_system().max_workers)
        return _default


def set_default_pool(pool: WorkerPool | None) -> WorkerPool | None:
    """Make ``pool`` the process-wide pool (None: size a new one on next use); return the old one.

    Sandboxes that hold a slot of the old pool keep it and give it back there.
    """
    global _default
    with _default_lock:
        old, _default = _default, pool
        return old
