"""``Sandbox``: the host side of one session's worker.

The host checks each cell against the policy, sends it to the worker, serves the worker's
host-function calls, enforces the wall-clock limit (killing the worker's whole process group
and starting a fresh worker) and watches the worker's memory with psutil, which is the only
memory cap macOS honours. Every frame the worker sends is checked (``frames``) before it is
used: a worker is untrusted, and a broken frame costs the worker its life, never the host.
"""

from __future__ import annotations

import atexit
import os
import select
import signal
import socket
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import psutil

from rlm_runtime import hostwrites
from rlm_runtime.config import tiktoken_cache_dir
from rlm_runtime.errors import ContextError, HostCallError, ProtocolError, SandboxError
from rlm_runtime.redact import Redactor
from rlm_runtime.sandbox import cleanup, contexts, frames, protocol, readers
from rlm_runtime.sandbox.limits import CellLimits
from rlm_runtime.sandbox.oslayers import worker_uid
from rlm_runtime.sandbox.policy import Policy, check, load_policy
from rlm_runtime.sandbox.pool import Lease, WaitInfo, WorkerPool, default_pool
from rlm_runtime.sandbox.worker import RESERVED_BASE, stdlib_paths
from rlm_runtime.sandbox.zygote import Zygote, shared_zygote

_WATCH_INTERVAL_S = 0.05
_RESTART_NOTE = "The worker was restarted: every variable of this session was lost."
_CLOSED = "this sandbox is closed"
_CLOSED_WHILE_RUNNING = "the sandbox was closed while this cell was running; its worker was killed"
#: Seconds a worker has to answer ``stats``, and ``attach`` (plus _ATTACH_PER_FD_S a descriptor).
_CONTROL_TIMEOUT_S = 10.0
#: Seconds a worker has to answer a ``lookup`` (a full scan of a large context with RE2).
_LOOKUP_TIMEOUT_S = 60.0
_ATTACH_PER_FD_S = 0.002


def _empty(fields: Any) -> dict[str, Any]:
    """What a failed lookup's ``fields`` hold (an empty list, 0, or None for a reader's map):
    new lists each call, so a caller that changes one changes no later failed lookup."""
    fresh: dict[str, Any] = {"lines": [], "count": 0, "tally": []}
    return {k: fresh.get(k) for k in fields}


@dataclass(frozen=True)
class CellResult:
    """What one cell did. ``error`` is text fit to show a model; ``final`` is set by FINAL."""

    stdout: str = ""
    error: str | None = None
    error_type: str | None = None
    final: Any = None
    has_final: bool = False
    duration_s: float = 0.0
    truncated: bool = False
    worker_restarted: bool = False
    warnings: list[str] = field(default_factory=list)
    #: The greps of the cell that found nothing (at most 3): ``pattern``, ``ignore_case`` and
    #: ``hint``, the pattern that would match ignoring case ("" for none), as data.
    empty_greps: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


HostFunction = Callable[..., Any]
_T = TypeVar("_T")


class _WorkerHandle:
    """One worker: its process, channel and temp dir."""

    def __init__(self, pid: int, sock: socket.socket, zygote: Zygote) -> None:
        self.pid = pid
        self.sock = sock
        self.zygote = zygote
        self.tmpdir = ""
        self.layers: dict[str, dict[str, Any]] = {}
        self.as_limit = 0
        #: How many contexts this worker has mapped: the first n of ``Sandbox.contexts``.
        self.n_contexts = 0
        self._killed = False
        self._kill_lock = threading.Lock()
        self.poller = select.poll()
        self.poller.register(sock, select.POLLIN)
        try:
            self.proc: psutil.Process | None = psutil.Process(pid)
        except psutil.Error:
            self.proc = None

    def kill(self) -> None:
        """SIGKILL the worker's process group, once, and wake whoever waits on the channel."""
        with self._kill_lock:
            if self._killed:
                return
            self._killed = True
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            # shutdown, not close: another thread may be polling this fd, and a closed
            # number can be reused by an unrelated file before that thread looks again.
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def pending(self) -> str | None:
        """What waits on the channel between cells: None, "data" (a frame) or "eof"."""
        if not self.poller.poll(0):
            return None
        try:
            data = self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return None
        except OSError:
            return "eof"
        return "data" if data else "eof"

    def near_memory_limit(self) -> bool:
        """Whether the address space is within 8 MB of the worker's RLIMIT_AS (Linux)."""
        if not self.as_limit or not sys.platform.startswith("linux"):
            return False
        try:
            with open(f"/proc/{self.pid}/status", "rb") as f:
                for line in f:
                    if line.startswith(b"VmSize:"):
                        return int(line.split()[1]) * 1024 >= self.as_limit - (8 << 20)
        except (OSError, ValueError, IndexError):
            pass
        return False

    def rss(self) -> int:
        """Anonymous resident memory where the OS tells it apart (Linux), else all of RSS.

        Mapped context pages are page cache, not the worker's allocation: counting them
        would kill a worker for grepping a big file.
        """
        if sys.platform.startswith("linux"):
            try:
                with open(f"/proc/{self.pid}/status", "rb") as f:
                    for line in f:
                        if line.startswith(b"RssAnon:"):
                            return int(line.split()[1]) * 1024
            except (OSError, ValueError, IndexError):
                return 0
        if self.proc is None:
            return 0
        try:
            return int(self.proc.memory_info().rss)
        except psutil.Error:
            return 0


class Sandbox:
    """One session: a persistent namespace in an isolated worker process.

    Args:
        policy: a ``Policy``, a policy name (``"default"``, ``"strict"``) or a TOML path.
        limits: replaces the policy's limits when given.
        host_functions: name -> callable, exposed to user code; see ``register``.
        contexts: context sources or handles (see ``rlm_runtime.context.open_context``),
            mapped read-only into the worker before it locks down.
        zygote: the zygote to fork workers from (default: the process-wide one).
        protect_host: make the whole host process non-dumpable (Linux ``PR_SET_DUMPABLE=0``)
            so that a worker that escaped cannot read the host's memory or
            ``/proc/<pid>/environ``. This is a side effect on the calling program: debuggers,
            profilers (py-spy, perf) and core dumps stop working for it, for good. ``False``
            leaves the host as it is; ``host_layers`` (and ``rlm sandbox doctor``) report it.
        pool: the ``WorkerPool`` whose slot the live worker holds (None: ``default_pool()``,
            looked up when a worker starts).
        pool_key: the call tree this sandbox belongs to: a session's root RLM and all its
            child RLMs pass the same key (any hashable). None: a tree of its own. When every
            slot of the pool is held by this sandbox's own tree, starting a worker raises
            ``WorkersBusy`` at once (its ancestors wait for it: waiting would never end).
        pool_timeout_s: how long starting a worker may wait for a slot held by other trees
            before ``WorkersBusy``.
        on_wait: called once per wait for a slot, when it begins, with plain data
            (``pool_size``, ``in_use``, ``held_by_this_tree``, ``waiting``, ``timeout_s``,
            ``waited_s``, ``detail``: see ``WorkerPool.acquire``); the loop turns it into a
            trajectory event. An exception it raises is ignored.

    Use as a context manager, or call ``start()`` and ``close()``. ``execute`` returns a
    ``CellResult`` for anything user code does, a worker that breaks the protocol included;
    it raises ``SandboxError`` only when no worker can be started at all or the sandbox is
    (or gets) closed.

    Worker slots: the sandbox takes a slot of its pool just before it forks a worker (so
    ``start``, and ``execute`` after an interruption, may wait, or raise ``WorkersBusy``) and
    gives it back once that worker is gone: ``close`` (any thread), an interruption of
    ``execute`` (Ctrl-C), a worker that cannot start, the sandbox collected unclosed, the
    host's exit. Replacing a worker after a timeout, a crash or a protocol breach keeps the
    slot. ``execute`` never touches the pool while a worker is live.

    Sessions that outlive one question: ``add_context`` maps a new context into the live
    worker between cells, keeping every variable; ``context_stats`` reports how each context
    was read; ``lookup`` greps, counts or tallies the main context for the host (an assist),
    as typed data, outside the namespace and the access counts.

    Threads: a Sandbox may be shared by threads. ``execute`` runs one cell at a time (a lock
    serialises callers, and each gets its own cell's result); a host function must not call
    ``execute`` on its own sandbox (SandboxError). ``close`` may be called from any thread at
    any time: a running cell's worker is killed and that ``execute`` raises SandboxError.
    ``interrupt`` may come from any thread too: the running cell ends with a
    ``KeyboardInterrupt`` error, its worker and variables kept (or killed after
    ``kill_grace_s`` if the cell ignores it).
    ``Zygote`` is thread-safe too. After ``close`` returns, no worker process and no temp
    dir of this sandbox remain, whatever was interrupted.
    """

    def __init__(
        self,
        policy: Policy | str | Path = "default",
        limits: CellLimits | None = None,
        *,
        host_functions: dict[str, HostFunction] | None = None,
        contexts: Sequence[Any] | None = None,
        zygote: Zygote | None = None,
        protect_host: bool = True,
        pool: WorkerPool | None = None,
        pool_key: Hashable | None = None,
        pool_timeout_s: float = 600.0,
        on_wait: Callable[[WaitInfo], None] | None = None,
    ) -> None:
        from rlm_runtime.context import open_context

        self.policy = load_policy(policy)
        #: Handles user code sees as ``context`` (the first) and ``contexts`` (all).
        self.contexts = [open_context(c) for c in (contexts or [])]
        if limits is not None:
            self.policy = self.policy.model_copy(update={"limits": limits})
        self.limits = self.policy.limits
        self._functions: dict[str, HostFunction] = {}
        self._unbound: list[str] = []
        self._zygote = zygote
        self._protect_host = protect_host
        self._pool = pool
        self._pool_key: Hashable = pool_key if pool_key is not None else object()
        self._pool_timeout_s = pool_timeout_s
        self._on_wait = on_wait
        #: The pool slot of the live worker (none or one), taken in _new_worker; a list so
        #: that the finalizer below can give it back without holding the sandbox.
        self._slot: list[Lease] = []
        self._starting = False  # _new_worker runs: it gives the slot back if it fails
        self._waiting_on: WorkerPool | None = None  # the pool a start waits on
        self._worker: _WorkerHandle | None = None
        self._had_worker = False  # a worker existed, so a missing one means variables were lost
        self._lost: str | None = None  # why a worker was replaced between cells, for the next cell
        self._cells = 0
        self._seq = 0  # numbers exec frames; the worker echoes it in every frame of that cell
        self._closed = False
        #: One caller at a time. Re-entrant so ``start``/``layers``/``close`` work from a host
        #: function. Whoever holds it may be polling a worker's channel, so only the holder
        #: closes channels: a closed fd number can be handed to an unrelated file at once.
        self._lock = threading.RLock()
        self._owner: int | None = None  # the thread running a cell
        #: The worker whose cell runs now (set by _drive), and when interrupt() asked it to stop.
        self._running: _WorkerHandle | None = None
        self._interrupted_at: float | None = None
        #: interrupt() came while a cell was on its way to the worker: it is not sent.
        self._interrupt_pending = False
        #: Guards ``_worker``, ``_owned`` and ``_closed``; held for a few lines, never a cell.
        self._state = threading.Lock()
        #: Every worker from the moment it exists until it is fully discarded.
        self._owned: set[_WorkerHandle] = set()
        # Dropped without close(): its workers die and its slot comes back when collected.
        weakref.finalize(self, _reclaim, self._owned, self._slot)
        for name, fn in (host_functions or {}).items():
            self.register(name, fn)

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Get a worker ready. Idempotent."""
        with self._lock:
            try:
                self._ensure_worker()
            finally:
                self._release_if_closed()

    def _release_if_closed(self) -> None:
        """Close what close() could not (it found the lock held); called by the lock's holder."""
        if self._closed:
            owned = list(self._owned)
            for worker in owned:
                self._discard(worker)
            self._free_slot(owned)

    def _ensure_worker(self) -> _WorkerHandle:
        if self._closed:
            raise SandboxError(_CLOSED)
        if self._protect_host:
            _protect_host()
        return self._worker or self._new_worker()

    @property
    def host_layers(self) -> dict[str, dict[str, Any]]:
        """What the host does for isolation (see ``layers`` for the worker's own)."""
        if self._protect_host:
            return dict(_host_layers)
        other = _host_layers.get("host_not_dumpable", {}).get("active", False)
        detail = ("protect_host=False, but another Sandbox of this process already made it non-dumpable" if other
                  else "off by request (Sandbox(protect_host=False)): debuggers and profilers can attach to the host")
        return {"host_not_dumpable": {"active": bool(other), "detail": detail}}

    def close(self) -> None:
        """Kill the worker and remove its temp dir. Idempotent; any thread, at any time.

        A cell running meanwhile ends at once: its ``execute`` raises SandboxError.
        """
        with self._state:
            self._closed = True
            self._worker = None
            owned = list(self._owned)
            starting = self._starting
        _open_sandboxes.discard(self)
        for worker in owned:  # processes and temp dirs go now, whoever holds the lock
            self._discard(worker, release=False)
        if not starting:  # else the starting thread gives the slot back, after its worker
            self._free_slot(owned)
        pool = self._waiting_on
        if pool is not None:
            pool.wake()  # a start waiting for a slot ends now
        # A caller inside the sandbox sees the kill at once and leaves (unless a host function
        # still runs): then the channels are closed here, else by that caller on its way out.
        if self._lock.acquire(timeout=0.25):
            try:
                self._release_if_closed()
            finally:
                self._lock.release()

    @property
    def layers(self) -> dict[str, dict[str, Any]]:
        """Isolation layers of the current worker: name -> {active, detail}."""
        with self._lock:
            try:
                return dict(self._ensure_worker().layers)
            finally:
                self._release_if_closed()

    # ------------------------------------------------------------ host functions

    def register(self, name: str, fn: HostFunction) -> None:
        """Expose ``fn`` to user code as ``name``. It receives and returns plain data only.

        Exceptions it raises reach user code as ``HostCallError`` with their message.
        """
        if not name.isidentifier() or name.startswith("_") or name in RESERVED_BASE:
            raise ValueError(f"invalid host function name {name!r}")
        if not callable(fn):
            raise TypeError(f"host function {name!r} is not callable")
        with self._state:
            self._functions[name] = fn
            self._unbound.append(name)

    # ------------------------------------------------------ contexts of a session

    def add_context(self, source: Any) -> int:
        """Add a context to the session; return its index in ``contexts``.

        ``source`` is anything ``open_context`` takes (or a handle). Before the worker starts,
        the handle is only appended. With a live worker, the host exports it (descriptors,
        as at start) and the worker maps it between cells and appends it to its ``contexts``
        (binding ``context``, ``peek``, ``grep``... if it is the first), keeping every variable.
        Callers in several threads take turns with ``execute``.

        A context mapped this way counts against the worker's limits, unlike those mapped
        before lock-down: its address-space cap (``memory_mb``, Linux) and its open files
        (``open_files``: CPython's mmap keeps one descriptor per mapped file or document, so a
        corpus of more documents than that is too many). One the worker cannot map raises
        ContextError and is not added; the worker and its variables stay (to have it anyway,
        close the sandbox and open one with every context: they are mapped at start). A worker
        that answers wrongly, late or out of turn is killed and replaced by one that maps
        every context at start: the context is added, the variables are lost, and the next
        cell's result says so (``worker_restarted`` and a warning).

        Raises:
            ContextError: the source cannot be opened, or the worker could not map it.
            SandboxError: the sandbox is closed, or this is called from one of its own host
                functions (a cell is running).
        """
        from rlm_runtime.context import open_context

        handle = open_context(source)
        with self._between_cells("add_context"):
            worker = self._worker
            index = len(self.contexts)
            if worker is None:
                self.contexts.append(handle)
                return index
            problem = _idle_problem(worker)
            if problem is None:
                problem = self._attach(worker, handle)
            if problem is not None:
                self.contexts.append(handle)
                self._lose(worker, problem)  # the new worker maps every context, this one too
            return index

    def replace_context(self, index: int, source: Any) -> None:
        """Put a new handle in place of ``contexts[index]`` (the same file or folder read again
        after it changed), keeping every variable: the live worker maps it between cells and
        binds it where the old one was (``context`` too, for index 0). A variable that holds
        the old handle keeps it. As ``add_context``: a context the worker cannot map raises
        ContextError and changes nothing; a worker that answers wrongly is replaced by one
        that maps every context at start (its variables lost, the next cell says so).

        Raises:
            ContextError: no context at ``index``, the source cannot be opened, or the worker
                could not map it.
            SandboxError: the sandbox is closed, or a cell is running in this thread.
        """
        from rlm_runtime.context import open_context

        handle = open_context(source)
        with self._between_cells("replace_context"):
            if not 0 <= index < len(self.contexts):
                raise ContextError(f"no context at place {index} (the session has {len(self.contexts)})")
            worker = self._worker
            if worker is None:
                self.contexts[index] = handle
                return
            problem = _idle_problem(worker)
            if problem is None and worker.n_contexts != len(self.contexts):
                problem = "it had contexts still to map"  # handles appended directly: a new worker maps them all
            if problem is None:
                problem = self._attach(worker, handle, at=index)
            if problem is not None:
                self.contexts[index] = handle
                self._lose(worker, problem)

    def _attach(self, worker: _WorkerHandle, handle: Any, *, at: int | None = None) -> str | None:
        """Send ``handle`` to the live worker; None once it is mapped and appended (or, with
        ``at``, bound in place of the context at that place).

        Returns why the worker must be replaced instead (it broke the protocol); raises
        ContextError when the worker reports it cannot map the context.
        """
        # With it go any handles appended to ``contexts`` directly since the worker started.
        new = [handle] if at is not None else [*self.contexts[worker.n_contexts :], handle]
        specs, fds, _mapped = contexts.export(new)  # ContextError: nothing was sent
        self._seq += 1
        seq = self._seq
        sock = worker.sock
        deadline = time.monotonic() + _CONTROL_TIMEOUT_S + _ATTACH_PER_FD_S * len(fds)
        frame: dict[str, Any] = {"op": "attach", "seq": seq, "contexts": specs, "fds": len(fds)}
        if at is not None:
            frame["at"] = at
        try:
            protocol.send(sock, frame, deadline=deadline)
            for k in range(0, len(fds), frames.ATTACH_FDS_PER_FRAME):
                part = fds[k : k + frames.ATTACH_FDS_PER_FRAME]
                protocol.send_with_fds(sock, {"op": "fds", "n": len(part)}, part, deadline=deadline)
            _close_fds(fds)
            reply = protocol.recv(sock, deadline=deadline, max_bytes=frames.ATTACH_REPLY_MAX)
            refused = frames.attach_reply(reply, seq, worker.n_contexts + (0 if at is not None else len(new)))
        except (EOFError, ConnectionError) as e:
            return f"its channel closed during add_context ({e})"
        except TimeoutError:
            return "it did not answer add_context in time"
        except (ProtocolError, OSError) as e:
            return f"it broke the protocol in add_context ({e})"
        except BaseException:  # interrupted: the worker is somewhere in the exchange
            self._drop(worker)
            raise
        finally:
            _close_fds(fds)
            _reset_timeout(sock)
        if refused is not None:
            raise ContextError(f"the running worker could not map context {handle.name!r}: {refused}. A context added "
                               "to a running worker counts against its memory_mb and open_files; contexts given when "
                               "the sandbox starts do not")
        if at is not None:
            self.contexts[at] = handle
            return None
        worker.n_contexts += len(new)
        self.contexts.append(handle)
        return None

    def context_stats(self) -> list[dict[str, Any]]:
        """How user code read each context in the live worker: one dict per context.

        Each holds ``name`` and the counters of ``AccessStats``: ``peeks``, ``greps``,
        ``chunks``, ``slices``, ``lines``, ``full_loads``, ``chars_returned``, and
        ``load_to_peek_ratio`` (computed here). Plain data. The counts accumulate over the
        worker's life and start again at zero in a new worker (after a restart, an
        interruption, or ``add_context``'s replacement of a misbehaving worker). ``[]`` when
        there is no live worker (not started, closed) or no context, or when the worker
        answered wrongly: it is then killed and replaced (the next cell's result says the
        variables were lost).

        The worker's answer is checked strictly (types, ranges, one entry per context, a
        small size cap read before anything is allocated); names come from the host.
        """
        with self._between_cells("context_stats", closed_ok=True):
            worker = self._worker
            if worker is None or self._closed or not worker.n_contexts:
                return []
            n = worker.n_contexts
            rows, problem = self._request(worker, "context_stats", {"op": "stats"}, _CONTROL_TIMEOUT_S,
                                          frames.stats_reply_max(n), lambda reply, seq: frames.stats_reply(reply, seq, n))
            if rows is None:
                if not self._closed:  # else close() killed it: nothing to replace
                    self._lose(worker, problem)
                return []
            handles = self.contexts[:n]
        out = []
        for handle, row in zip(handles, rows, strict=True):
            probes = row["peeks"] + row["greps"] + row["chunks"] + row["slices"] + row["lines"]
            ratio = row["full_loads"] / probes if probes else float(row["full_loads"])
            out.append({"name": str(handle.name), **row, "load_to_peek_ratio": ratio})
        return out

    def lookup(self, reader: str, **args: Any) -> dict[str, Any]:
        """The host's own reading of the main context in the live worker, between cells, by
        the reader named ``reader`` (``readers.READERS`` lists them, each with the shape of
        its arguments and of its reply).

        Returns the reader's reply (its declared fields, checked) and ``error``: "" or why
        the reader could not read (a pattern RE2 refuses; no worker or no context), the
        fields then empty. It starts no worker, runs no user code, and leaves the model's
        namespace and access counters as they were. A worker that answers wrongly (a reply
        not of the declared shape included) or late is replaced (the next cell's result says
        the variables were lost), as for ``context_stats``. Raises ValueError for an unknown
        reader or arguments not of its shape.
        """
        found = readers.reader(reader)
        args = found.args.clean({**found.defaults, **args}, f"{reader}()")
        empty: dict[str, Any] = {**_empty(found.reply.fields), "error": ""}
        with self._between_cells("lookup", closed_ok=True):
            worker = self._worker
            if worker is None or self._closed or not worker.n_contexts:
                return {**empty, "error": "no live worker with a context"}
            request = {"op": "lookup", "reader": reader, "args": args}
            answer, problem = self._request(worker, "a lookup", request, _LOOKUP_TIMEOUT_S, frames.LOOKUP_REPLY_MAX,
                                            frames.lookup_reply)
            if answer is not None:
                reply, error = answer
                if error:
                    return {**empty, "error": error}
                try:
                    return {**found.reply.clean(reply, f"the {reader} reply"), "error": ""}
                except readers.ShapeError as e:
                    problem = f"a lookup reply not of its reader's shape ({e})"
            if not self._closed:
                self._lose(worker, problem)
            return {**empty, "error": problem}

    def _request(self, worker: _WorkerHandle, what: str, msg: dict[str, Any], timeout: float, max_bytes: int,
                 check: Callable[[dict[str, Any], int], _T]) -> tuple[_T | None, str]:
        """One request between cells to the idle ``worker`` (under ``_between_cells``), and
        its one answer, checked by ``check(answer, seq)``: (the checked answer, "") or
        (None, why the worker must be replaced). An interruption drops the worker."""
        problem = _idle_problem(worker)
        if problem is not None:
            return None, problem
        self._seq += 1
        seq = self._seq
        deadline = time.monotonic() + timeout
        try:
            protocol.send(worker.sock, {**msg, "seq": seq}, deadline=deadline)
            reply = protocol.recv(worker.sock, deadline=deadline, max_bytes=max_bytes)
            return check(reply, seq), ""
        except (EOFError, ConnectionError) as e:
            return None, f"its channel closed during {what} ({e})"
        except TimeoutError:
            return None, f"it did not answer {what} in time"
        except (ProtocolError, OSError) as e:
            return None, f"it broke the protocol in {what} ({e})"
        except BaseException:
            self._drop(worker)
            raise
        finally:
            _reset_timeout(worker.sock)

    @contextmanager
    def _between_cells(self, what: str, closed_ok: bool = False) -> Iterator[None]:
        """Hold the lock that ``execute`` holds, for a request between cells."""
        if self._closed and not closed_ok:
            raise SandboxError(_CLOSED)
        if self._owner == threading.get_ident():
            raise SandboxError(f"{what}() called from a host function of the same sandbox: it runs between cells")
        with self._lock:
            try:
                if self._closed and not closed_ok:
                    raise SandboxError(_CLOSED)
                yield
            finally:
                self._release_if_closed()

    def _lose(self, worker: _WorkerHandle, why: str) -> None:
        """Replace a worker that broke the protocol between cells; the next cell says so."""
        if self._closed:
            raise SandboxError(_CLOSED)
        self._discard(worker)
        worker.zygote.reap(worker.pid)
        self._lost = f"{why}, so it was killed"
        self._replace_worker(worker)  # keeps the slot

    def _drop(self, worker: _WorkerHandle) -> None:
        """Discard a worker whose exchange was interrupted, and its slot (see ``_run``)."""
        with self._state:
            if self._worker is worker:
                self._worker = None
        self._discard(worker)
        self._free_slot([worker])

    # ---------------------------------------------------------------- execution

    def execute(self, code: str | bytes) -> CellResult:
        """Check and run one cell in the session's namespace. Callers in several threads take turns."""
        if self._closed:
            raise SandboxError(_CLOSED)
        me = threading.get_ident()
        if self._owner == me:
            raise SandboxError("execute() called from a host function of the same sandbox: it runs one cell at a time")
        with self._lock:
            try:
                self._owner = me
                return self._execute(code)
            finally:
                with self._state:
                    self._owner = None
                    self._interrupt_pending = False
                self._release_if_closed()

    def variables(self) -> str:
        """What ``SHOW_VARS`` prints of the model's variables (one cell run); "" when there
        are none or the cell failed."""
        result = self.execute("SHOW_VARS()")
        text = (result.stdout or "").strip()
        return "" if not result.ok or text == "(no variables)" else text

    def worker_rss(self) -> int | None:
        """The live worker's resident memory in bytes (None: no worker, or not measurable)."""
        with self._state:
            worker = self._worker
        if worker is None:
            return None
        try:
            return worker.rss()
        except Exception:  # psutil.Error, or the process just ended
            return None

    def interrupt(self) -> bool:
        """Stop the cell running now, from any thread; True if one was running.

        The worker gets SIGUSR1, which raises inside the cell (or, during a host call, as
        soon as the call returns); the cell ends with a ``KeyboardInterrupt`` error and the
        variables are kept. Code that swallows it is killed ``kill_grace_s`` later, like a
        cell past its timeout, and the worker replaced (``worker_restarted``).
        """
        with self._state:
            worker = self._running
            if self._closed:
                return False
            if worker is None:
                if self._owner is None:
                    return False
                self._interrupt_pending = True  # a cell is being checked or its worker started
                return True
            if self._interrupted_at is None:  # asked again: the grace period still runs from the first
                self._interrupted_at = time.monotonic()
        try:
            os.kill(worker.pid, signal.SIGUSR1)
        except OSError:  # it has just ended; the cell's own result stands
            return False
        return True

    def _execute(self, code: str | bytes) -> CellResult:
        if self._closed:  # closed while this caller waited for its turn
            raise SandboxError(_CLOSED)
        report = check(code, self.policy, reserved=frozenset(self._functions))
        warnings = [str(w) for w in report.warnings]
        if not report.ok:
            return CellResult(error=report.text(), error_type="PolicyViolation", warnings=warnings)
        restarted = self._worker is None and self._had_worker  # lost to a kill or an interrupt
        worker = self._ensure_worker()
        lost, self._lost = self._lost, None  # a worker replaced between cells (add_context, context_stats)
        self._cells += 1
        self._seq += 1
        text = code if isinstance(code, str) else code.decode("utf-8")
        frame = {"op": "exec", "seq": self._seq, "code": report.compiled, "source": text,
                 "filename": f"<cell-{self._cells}>", "timeout": self.limits.cell_timeout_s}
        result = self._run(worker, frame)
        if (restarted or lost) and not result.worker_restarted:
            why = f"the worker was replaced before this cell ({lost}): " if lost else \
                "the worker was replaced after an interruption before this cell: "
            result = replace(result, worker_restarted=True, warnings=[why + _RESTART_NOTE, *result.warnings])
        return replace(result, warnings=warnings + result.warnings) if warnings else result

    def _run(self, worker: _WorkerHandle, frame: dict[str, Any]) -> CellResult:
        try:
            return self._drive(worker, frame)
        except BaseException:
            # Interrupted on the host (Ctrl-C), by a host function, or closed: the worker may
            # still be running the cell and would answer the next one with this one's result.
            # Replace it (the next execute() starts a new one and says so).
            self._drop(worker)
            raise

    def _drive(self, worker: _WorkerHandle, frame: dict[str, Any]) -> CellResult:
        with self._state:
            if self._interrupt_pending:
                self._interrupt_pending = False
                return CellResult(error="KeyboardInterrupt: the cell was interrupted before it started",
                                  error_type="KeyboardInterrupt")
            self._running, self._interrupted_at = worker, None
        try:
            return self._drive_cell(worker, frame)
        finally:
            with self._state:
                self._running = self._interrupted_at = None

    def _drive_cell(self, worker: _WorkerHandle, frame: dict[str, Any]) -> CellResult:
        start = time.monotonic()
        final: list[Any] = []
        seq = frame["seq"]
        waiting = worker.pending()
        if waiting == "data":
            return self._kill(worker, final, start, "ProtocolError",
                              "ProtocolError: the worker sent a frame between cells, when nothing was asked of it, "
                              "so it was killed and this cell was not run. " + _RESTART_NOTE)
        try:
            if waiting == "eof":
                raise ConnectionResetError("the worker closed its channel between cells")
            self._bind_pending(worker)
            protocol.send(worker.sock, frame)
        except OSError:
            return self._crashed(worker, final, start)
        hard_deadline = start + self.limits.cell_timeout_s + self.limits.kill_grace_s
        memory_cap = (self.limits.memory_mb + 64) * 1024 * 1024
        output_chars = self.limits.output_chars
        poller = worker.poller
        while True:
            if self._closed:
                raise SandboxError(_CLOSED_WHILE_RUNNING)
            now = time.monotonic()
            if now >= hard_deadline:
                if worker.near_memory_limit():
                    return self._kill(worker, final, start, "MemoryError",
                                      f"MemoryError: the worker reached its {self.limits.memory_mb} MB memory cap and stopped "
                                      "responding, so it was killed. " + _RESTART_NOTE)
                return self._kill(worker, final, start, "TimeoutError",
                                  f"TimeoutError: the cell ran longer than {self.limits.cell_timeout_s:g}s "
                                  "and did not stop when asked, so the worker was killed. " + _RESTART_NOTE)
            interrupted = self._interrupted_at
            if interrupted is not None and now >= interrupted + self.limits.kill_grace_s:
                return self._kill(worker, final, start, "KeyboardInterrupt",
                                  "KeyboardInterrupt: the cell was interrupted and did not stop, "
                                  "so the worker was killed. " + _RESTART_NOTE)
            wait = min(_WATCH_INTERVAL_S, hard_deadline - now)
            if not poller.poll(wait * 1000):
                if worker.rss() > memory_cap:
                    return self._kill(worker, final, start, "MemoryError",
                                      f"MemoryError: the worker went over its {self.limits.memory_mb} MB "
                                      "memory cap and was killed. " + _RESTART_NOTE)
                continue
            try:
                msg = protocol.recv(worker.sock, deadline=max(hard_deadline, time.monotonic() + 0.5))
                op = frames.cell_frame(msg, seq, output_chars)
            except (EOFError, ConnectionError):
                return self._crashed(worker, final, start)
            except (ProtocolError, TimeoutError, OSError) as e:
                return self._kill(worker, final, start, "ProtocolError",
                                  f"ProtocolError: the worker broke the protocol ({e}), so it was killed. " + _RESTART_NOTE)
            finally:
                try:
                    worker.sock.settimeout(None)
                except OSError:  # the channel was closed by a kill above
                    pass
            if op == "done":
                return _done(msg, final)
            if op == "final":
                final[:] = [msg["value"]]
            else:  # "call"
                began = time.monotonic()
                reply = self._dispatch(msg)  # KeyboardInterrupt/SystemExit: see _run
                hard_deadline += time.monotonic() - began
                try:
                    try:
                        protocol.send(worker.sock, reply, deadline=max(hard_deadline, time.monotonic() + 0.5))
                    except ProtocolError as e:  # too large for a frame (found before a byte was sent): tell the cell
                        protocol.send(worker.sock, {"op": "error", "message": f"{msg['name']}() returned a value too large "
                                                    f"to pass into the sandbox: {e}"},
                                      deadline=max(hard_deadline, time.monotonic() + 0.5))
                except TimeoutError:
                    return self._kill(worker, final, start, "ProtocolError",
                                      "ProtocolError: the worker did not read a host function's reply in time, "
                                      "so it was killed. " + _RESTART_NOTE)
                except OSError:
                    return self._crashed(worker, final, start)

    def _dispatch(self, msg: dict[str, Any]) -> dict[str, Any]:
        # frames.cell_frame checked the name, and that args and kwargs are plain data.
        name = msg["name"]
        fn = self._functions.get(name)
        if fn is None:
            return {"op": "error", "message": f"no host function named {name!r}"}
        # Everything that crosses into the worker is redacted (``redact``): an error may quote a
        # URL's password or a provider's echo of the key; a value, a key the host knows.
        try:
            value = protocol.check_plain(fn(*msg["args"], **msg["kwargs"]), f"value returned by {name}()")
        except HostCallError as e:
            return {"op": "error", "message": hostwrites.host_error(str(e))}
        except Exception as e:  # a host function's own failure is shown to user code, briefly
            return {"op": "error", "message": hostwrites.host_error(f"{name}() failed: {type(e).__name__}: {e}")}
        return {"op": "return", "value": Redactor().value(value)}

    # ------------------------------------------------------------- worker control

    def _new_worker(self) -> _WorkerHandle:
        """Start a worker and make it the current one (SandboxError if none can start).

        Takes a pool slot first, unless the sandbox holds one (a restart keeps its slot);
        gives it back when no worker comes of it.
        """
        started: list[_WorkerHandle] = []
        try:
            self._take_slot()
            with self._state:
                self._starting = True
            return self._start_worker(started)
        except BaseException:
            self._free_slot(started)  # no worker is left: _start_worker discarded it
            raise
        finally:
            with self._state:
                self._starting = False
            if self._closed:  # close() left the slot to this thread
                self._free_slot(started)

    def _take_slot(self) -> None:
        """Hold a slot of the pool (waiting for one if need be), unless one is held already."""
        if self._slot:
            return
        pool = self._pool or default_pool()
        self._waiting_on = pool
        try:
            lease = pool.acquire(self._pool_key, timeout=self._pool_timeout_s, on_wait=self._on_wait,
                                 cancelled=lambda: self._closed)
        finally:
            self._waiting_on = None
        with self._state:
            if not self._closed:
                self._slot.append(lease)
                return
        lease.release()
        raise SandboxError(_CLOSED_WHILE_RUNNING if self._owner else _CLOSED)

    def _free_slot(self, workers: Sequence[_WorkerHandle]) -> None:
        """Give the pool slot back once ``workers`` (killed already) have ended."""
        if not self._slot:
            return
        with cleanup.hold_interrupts():
            for worker in workers:
                cleanup.wait_gone(worker.pid, 2.0)
            with self._state:
                leases = list(self._slot)
                self._slot.clear()
            for lease in leases:
                lease.release()

    def _start_worker(self, started: list[_WorkerHandle]) -> _WorkerHandle:
        zygote = self._zygote or shared_zygote(list(self.policy.allowed_imports))
        if not zygote.alive():
            zygote = shared_zygote(list(self.policy.allowed_imports))
        n_contexts = len(self.contexts)
        specs, fds, _mapped = contexts.export(self.contexts[:n_contexts])
        try:
            # From fork to record, nothing may be left unrecorded by a Ctrl-C: close() and
            # the error paths below clean up only what _owned holds.
            with cleanup.hold_interrupts():
                pid, sock = zygote.spawn()
                worker = _WorkerHandle(pid, sock, zygote)
                started.append(worker)
                self._own(worker)
                tmpdir = worker.tmpdir = tempfile.mkdtemp(prefix="rlm-worker-", dir=zygote.scratch)
        except BaseException:
            _close_fds(fds)
            raise
        try:
            if os.geteuid() == 0:
                os.chown(tmpdir, worker_uid(pid), worker_uid(pid))  # the worker drops to its own uid
            cache = tiktoken_cache_dir()
            with self._state:  # a name registered from now on is bound by a later "bind"
                names = list(self._functions)
                self._unbound.clear()
            init = {
                "op": "init",
                "tmpdir": tmpdir,
                "limits": self.limits.model_dump(),
                "allowed_imports": list(self.policy.allowed_imports),
                "denied_attributes": list(self.policy.denied_attributes),
                "host_functions": names,
                "read_paths": stdlib_paths() + ([cache] if cache else []),
                "tiktoken_cache_dir": cache,
                "contexts": specs,
            }
            for k in range(0, len(fds), contexts.FDS_PER_FRAME):
                protocol.send_with_fds(sock, {"op": "attach"}, fds[k : k + contexts.FDS_PER_FRAME])
            _close_fds(fds)
            protocol.send(sock, init)
            worker.layers, worker.as_limit = frames.ready_frame(protocol.recv(sock, deadline=time.monotonic() + 10))
            sock.settimeout(None)
            worker.n_contexts = n_contexts
            self._install(worker)
        except BaseException as e:
            _close_fds(fds)
            self._discard(worker)
            if isinstance(e, (OSError, EOFError, ProtocolError)):
                raise SandboxError(f"the sandbox worker did not start: {e}") from e
            raise
        return worker

    def _own(self, worker: _WorkerHandle) -> None:
        with self._state:
            if not self._closed:
                self._owned.add(worker)
                _open_sandboxes.add(self)
                return
        self._discard(worker)
        raise SandboxError(_CLOSED_WHILE_RUNNING if self._owner else _CLOSED)

    def _install(self, worker: _WorkerHandle) -> None:
        with self._state:
            if not self._closed:
                self._worker = worker
                self._had_worker = True
                return
        self._discard(worker)
        raise SandboxError(_CLOSED_WHILE_RUNNING if self._owner else _CLOSED)

    def _bind_pending(self, worker: _WorkerHandle) -> None:
        if self._unbound:
            with self._state:
                names, self._unbound = self._unbound, []
            protocol.send(worker.sock, {"op": "bind", "names": names})

    def _discard(self, worker: _WorkerHandle, *, release: bool = True) -> None:
        """Kill ``worker`` and remove its temp dir; with ``release``, close its channel too.

        Idempotent and safe from any thread; ``release`` only by the holder of ``_lock``.
        """
        with cleanup.hold_interrupts():
            worker.kill()
            if worker.tmpdir and not cleanup.remove_tree(worker.tmpdir):
                # It may have been writing there as SIGKILL landed: once it is gone, again.
                cleanup.wait_gone(worker.pid, 2.0)
                cleanup.remove_tree(worker.tmpdir)
            if release:
                worker.sock.close()
                with self._state:
                    self._owned.discard(worker)

    def _replace_worker(self, old: _WorkerHandle) -> None:
        with self._state:
            if self._worker is old:
                self._worker = None
        if self._closed:
            raise SandboxError(_CLOSED_WHILE_RUNNING)
        try:
            self._new_worker()
        except SandboxError:
            if self._closed:
                raise
            # None could be started now: the next execute() tries again, or says why not.

    def _kill(self, worker: _WorkerHandle, final: list[Any], start: float, kind: str, message: str) -> CellResult:
        if self._closed:  # the kill was close()'s, not the cell's fault
            raise SandboxError(_CLOSED_WHILE_RUNNING)
        self._discard(worker)
        worker.zygote.reap(worker.pid)
        self._replace_worker(worker)
        return CellResult(error=message, error_type=kind, final=final[0] if final else None,
                          has_final=bool(final), duration_s=time.monotonic() - start, worker_restarted=True)

    def _crashed(self, worker: _WorkerHandle, final: list[Any], start: float) -> CellResult:
        if self._closed:
            raise SandboxError(_CLOSED_WHILE_RUNNING)
        zygote = worker.zygote
        how = zygote.reap(worker.pid) if zygote.alive() else "died with the sandbox's zygote process"
        if how == "unknown":
            how = "ended for an unknown reason"
        self._discard(worker)
        hint = " (the CPU time limit)" if "SIGXCPU" in how else ""
        message = f"WorkerCrashed: the worker process {how}{hint}. " + _RESTART_NOTE
        self._replace_worker(worker)
        return CellResult(error=message, error_type="WorkerCrashed", final=final[0] if final else None,
                          has_final=bool(final), duration_s=time.monotonic() - start, worker_restarted=True)


_host_layers: dict[str, dict[str, Any]] = {}


def _protect_host() -> None:
    """Make the host non-dumpable (Linux), once per process.

    Otherwise any process of the same user, a worker that escaped included, could read the
    host's memory and /proc/<pid>/environ, where API keys live. The flag stays for the life
    of the process: debuggers, profilers and core dumps stop working for the whole program
    (``Sandbox(protect_host=False)`` opts out).
    """
    if _host_layers:
        return
    if not sys.platform.startswith("linux"):
        _host_layers["host_not_dumpable"] = {"active": False, "detail": "not Linux"}
        return
    from rlm_runtime.sandbox import oslayers

    try:
        oslayers.set_dumpable(False)
        _host_layers["host_not_dumpable"] = {"active": True, "detail": "PR_SET_DUMPABLE=0 on the host"}
    except OSError as e:
        _host_layers["host_not_dumpable"] = {"active": False, "detail": str(e)}


_open_sandboxes: weakref.WeakSet[Sandbox] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """Kill live workers and remove their temp dirs when the host exits without closing."""
    for sandbox in list(_open_sandboxes):
        sandbox.close()


def _idle_problem(worker: _WorkerHandle) -> str | None:
    """Why a worker cannot be asked anything between cells (it spoke out of turn or left), or None."""
    waiting = worker.pending()
    if waiting == "data":
        return "it sent a frame between cells, when nothing was asked of it"
    if waiting == "eof":
        return "it closed its channel between cells"
    return None


def _reset_timeout(sock: socket.socket) -> None:
    try:
        sock.settimeout(None)
    except OSError:  # closed by a kill
        pass


def _reclaim(owned: set[_WorkerHandle], slot: list[Lease]) -> None:
    """Finalizer of a Sandbox collected without close(): kill its workers, give its slot back."""
    for worker in list(owned):
        worker.kill()
        if worker.tmpdir:
            cleanup.remove_tree(worker.tmpdir)
    for lease in list(slot):
        lease.release()
    slot.clear()


def _close_fds(fds: list[int]) -> None:
    """Close the context descriptors once sent (or not to be sent), each exactly once."""
    while fds:
        try:
            os.close(fds.pop())
        except OSError:
            pass


def _done(msg: dict[str, Any], final: list[Any]) -> CellResult:
    # frames.cell_frame checked every field's type and size.
    return CellResult(
        stdout=msg["stdout"],
        error=msg["error"],
        error_type=msg["error_type"],
        final=final[0] if final else None,
        has_final=bool(final),
        duration_s=float(msg["duration_s"]),
        truncated=msg["truncated"],
        warnings=msg["notes"],
        empty_greps=[dict(g) for g in msg["empty_greps"]],
    )
