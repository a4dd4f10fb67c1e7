"""``Sandbox``: the host side of one session's worker.

The host checks each cell against the policy, sends it to the worker, serves the worker's
host-function calls, enforces the wall-clock limit (killing the worker's whole process group
and starting a fresh worker) and watches the worker's memory with psutil, which is the only
memory cap macOS honours.
"""

from __future__ import annotations

import atexit
import os
import select
import shutil
import signal
import socket
import sys
import tempfile
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

from rlm_runtime.config import tiktoken_cache_dir
from rlm_runtime.errors import HostCallError, ProtocolError, SandboxError
from rlm_runtime.sandbox import contexts, protocol
from rlm_runtime.sandbox.limits import Limits
from rlm_runtime.sandbox.policy import Policy, check, load_policy
from rlm_runtime.sandbox.worker import RESERVED_BASE, stdlib_paths
from rlm_runtime.sandbox.zygote import Zygote, current_shared, shared_zygote

_WATCH_INTERVAL_S = 0.05
_NOBODY = 65534
_RESTART_NOTE = "The worker was restarted: every variable of this session was lost."


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

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


HostFunction = Callable[..., Any]


class _WorkerHandle:
    def __init__(self, pid: int, sock: socket.socket, tmpdir: str) -> None:
        self.pid = pid
        self.sock = sock
        self.tmpdir = tmpdir
        self.layers: dict[str, dict[str, Any]] = {}
        self.as_limit = 0
        try:
            self.proc: psutil.Process | None = psutil.Process(pid)
        except psutil.Error:
            self.proc = None

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

    Use as a context manager, or call ``start()`` and ``close()``. ``execute`` returns a
    ``CellResult`` for anything user code does; it raises ``SandboxError`` only when no
    worker can be started at all.
    """

    def __init__(
        self,
        policy: Policy | str | Path = "default",
        limits: Limits | None = None,
        *,
        host_functions: dict[str, HostFunction] | None = None,
        contexts: Sequence[Any] | None = None,
        zygote: Zygote | None = None,
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
        self._worker: _WorkerHandle | None = None
        self._had_worker = False  # a worker existed, so a missing one means variables were lost
        self._cells = 0
        self._closed = False
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
        if self._closed:
            raise SandboxError("this sandbox is closed")
        _protect_host()
        if self._worker is None:
            self._worker = self._new_worker()
            self._had_worker = True
            _open_sandboxes.add(self)

    @property
    def host_layers(self) -> dict[str, dict[str, Any]]:
        """What the host does for isolation (see ``layers`` for the worker's own)."""
        return dict(_host_layers)

    def close(self) -> None:
        """Kill the worker and remove its temp dir. Idempotent."""
        self._closed = True
        _open_sandboxes.discard(self)
        if self._worker is not None:
            self._discard(self._worker)
            self._worker = None

    @property
    def layers(self) -> dict[str, dict[str, Any]]:
        """Isolation layers of the current worker: name -> {active, detail}."""
        self.start()
        assert self._worker is not None
        return dict(self._worker.layers)

    # ------------------------------------------------------------ host functions

    def register(self, name: str, fn: HostFunction) -> None:
        """Expose ``fn`` to user code as ``name``. It receives and returns plain data only.

        Exceptions it raises reach user code as ``HostCallError`` with their message.
        """
        if not name.isidentifier() or name.startswith("_") or name in RESERVED_BASE:
            raise ValueError(f"invalid host function name {name!r}")
        if not callable(fn):
            raise TypeError(f"host function {name!r} is not callable")
        self._functions[name] = fn
        self._unbound.append(name)

    # ---------------------------------------------------------------- execution

    def execute(self, code: str | bytes) -> CellResult:
        """Check and run one cell in the session's namespace."""
        if self._closed:
            raise SandboxError("this sandbox is closed")
        report = check(code, self.policy)
        warnings = [str(w) for w in report.warnings]
        if not report.ok:
            return CellResult(error=report.text(), error_type="PolicyViolation", warnings=warnings)
        restarted = self._worker is None and self._had_worker  # lost to a kill or an interrupt
        self.start()
        self._cells += 1
        assert self._worker is not None
        text = code if isinstance(code, str) else code.decode("utf-8")
        frame = {"op": "exec", "code": report.compiled, "source": text,
                 "filename": f"<cell-{self._cells}>", "timeout": self.limits.cell_timeout_s}
        result = self._run(self._worker, frame)
        if restarted and not result.worker_restarted:
            result = _replace(result, worker_restarted=True, warnings=[
                "the worker was replaced after an interruption before this cell: " + _RESTART_NOTE, *result.warnings])
        return _replace(result, warnings=warnings + result.warnings) if warnings else result

    def _run(self, worker: _WorkerHandle, frame: dict[str, Any]) -> CellResult:
        try:
            return self._drive(worker, frame)
        except BaseException:
            # Interrupted on the host (Ctrl-C) or by a host function: the worker may still be
            # running the cell and would answer the next one with this one's result. Replace it.
            if self._worker is worker:
                self._discard(worker)
                self._worker = None
            raise

    def _drive(self, worker: _WorkerHandle, frame: dict[str, Any]) -> CellResult:
        self._bind_pending(worker)
        start = time.monotonic()
        final: list[Any] = []
        try:
            protocol.send(worker.sock, frame)
        except OSError:
            return self._crashed(worker, final, start)
        hard_deadline = start + self.limits.cell_timeout_s + self.limits.kill_grace_s
        memory_cap = (self.limits.memory_mb + 64) * 1024 * 1024
        poller = select.poll()
        poller.register(worker.sock, select.POLLIN)
        while True:
            now = time.monotonic()
            if now >= hard_deadline:
                if worker.near_memory_limit():
                    return self._kill(worker, final, start, "MemoryError",
                                      f"MemoryError: the worker reached its {self.limits.memory_mb} MB memory cap and stopped "
                                      "responding, so it was killed. " + _RESTART_NOTE)
                return self._kill(worker, final, start, "TimeoutError",
                                  f"TimeoutError: the cell ran longer than {self.limits.cell_timeout_s:g}s "
                                  "and did not stop when asked, so the worker was killed. " + _RESTART_NOTE)
            wait = min(_WATCH_INTERVAL_S, hard_deadline - now)
            if not poller.poll(wait * 1000):
                if worker.rss() > memory_cap:
                    return self._kill(worker, final, start, "MemoryError",
                                      f"MemoryError: the worker went over its {self.limits.memory_mb} MB "
                                      "memory cap and was killed. " + _RESTART_NOTE)
                continue
            try:
                worker.sock.settimeout(max(hard_deadline - time.monotonic(), 0.5))
                msg = protocol.recv(worker.sock)
            except (EOFError, ConnectionError):
                return self._crashed(worker, final, start)
            except (ProtocolError, TimeoutError, OSError) as e:
                return self._kill(worker, final, start, "ProtocolError",
                                  f"ProtocolError: the worker broke the protocol ({e}). " + _RESTART_NOTE)
            finally:
                try:
                    worker.sock.settimeout(None)
                except OSError:  # the channel was closed by a kill above
                    pass
            op = msg["op"]
            if op == "done":
                return _done(msg, final, self.limits.output_chars)
            if op == "final":
                final[:] = [msg.get("value")]
            elif op == "call":
                began = time.monotonic()
                reply = self._dispatch(msg)  # KeyboardInterrupt/SystemExit: see _run
                hard_deadline += time.monotonic() - began
                try:
                    protocol.send(worker.sock, reply)
                except OSError:
                    return self._crashed(worker, final, start)
            else:
                return self._kill(worker, final, start, "ProtocolError",
                                  f"ProtocolError: unexpected frame {op!r} from the worker. " + _RESTART_NOTE)

    def _dispatch(self, msg: dict[str, Any]) -> dict[str, Any]:
        name = msg.get("name")
        fn = self._functions.get(name) if isinstance(name, str) else None
        if fn is None:
            return {"op": "error", "message": f"no host function named {name!r}"}
        try:
            args = protocol.check_plain(msg.get("args", []), f"arguments of {name}()")
            kwargs = protocol.check_plain(msg.get("kwargs", {}), f"keyword arguments of {name}()")
            if not isinstance(args, list) or not isinstance(kwargs, dict):
                raise HostCallError("malformed call frame")
            value = protocol.check_plain(fn(*args, **kwargs), f"value returned by {name}()")
        except HostCallError as e:
            return {"op": "error", "message": str(e)}
        except Exception as e:  # a host function's own failure is shown to user code, briefly
            return {"op": "error", "message": f"{name}() failed: {type(e).__name__}: {e}"}
        return {"op": "return", "value": value}

    # ------------------------------------------------------------- worker control

    def _new_worker(self) -> _WorkerHandle:
        zygote = self._zygote or shared_zygote(list(self.policy.allowed_imports))
        if not zygote.alive():
            zygote = shared_zygote(list(self.policy.allowed_imports))
        specs, fds, _mapped = contexts.export(self.contexts)
        pid, sock = zygote.spawn()
        tmpdir = tempfile.mkdtemp(prefix="rlm-worker-")
        worker = _WorkerHandle(pid, sock, tmpdir)
        if os.geteuid() == 0:
            os.chown(tmpdir, _NOBODY, _NOBODY)  # the worker drops to nobody
        cache = tiktoken_cache_dir()
        init = {
            "op": "init",
            "tmpdir": tmpdir,
            "limits": self.limits.model_dump(),
            "allowed_imports": list(self.policy.allowed_imports),
            "denied_attributes": list(self.policy.denied_attributes),
            "host_functions": list(self._functions),
            "read_paths": stdlib_paths() + ([cache] if cache else []),
            "tiktoken_cache_dir": cache,
            "contexts": specs,
        }
        try:
            try:
                for k in range(0, len(fds), contexts.FDS_PER_FRAME):
                    protocol.send_with_fds(sock, {"op": "attach"}, fds[k : k + contexts.FDS_PER_FRAME])
            finally:
                for fd in fds:
                    os.close(fd)
            protocol.send(sock, init)
            sock.settimeout(10)
            reply = protocol.recv(sock)
            sock.settimeout(None)
        except (OSError, EOFError, ProtocolError) as e:
            self._discard(worker)
            raise SandboxError(f"the sandbox worker did not start: {e}") from e
        if reply.get("op") != "ready":
            self._discard(worker)
            raise SandboxError(f"the sandbox worker did not start: {reply.get('message', reply.get('op'))}")
        worker.layers = dict(reply.get("layers", {}))
        worker.as_limit = int(reply.get("as_limit") or 0)
        self._unbound.clear()
        return worker

    def _bind_pending(self, worker: _WorkerHandle) -> None:
        if self._unbound:
            protocol.send(worker.sock, {"op": "bind", "names": list(self._unbound)})
            self._unbound.clear()

    def _discard(self, worker: _WorkerHandle) -> None:
        try:
            os.killpg(worker.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            worker.sock.close()
        except OSError:
            pass
        shutil.rmtree(worker.tmpdir, ignore_errors=True)

    def _replace_worker(self) -> bool:
        try:
            self._worker = self._new_worker()
            return True
        except SandboxError:
            self._worker = None
            return False

    def _kill(self, worker: _WorkerHandle, final: list[Any], start: float, kind: str, message: str) -> CellResult:
        self._discard(worker)
        zygote = self._zygote or shared_zygote(list(self.policy.allowed_imports))
        zygote.reap(worker.pid)
        self._replace_worker()
        return CellResult(error=message, error_type=kind, final=final[0] if final else None,
                          has_final=bool(final), duration_s=time.monotonic() - start, worker_restarted=True)

    def _crashed(self, worker: _WorkerHandle, final: list[Any], start: float) -> CellResult:
        zygote = self._zygote or current_shared()
        alive = zygote is not None and zygote.alive()
        how = zygote.reap(worker.pid) if zygote is not None and alive else "died with the sandbox's zygote process"
        if how == "unknown":
            how = "ended for an unknown reason"
        self._discard(worker)
        hint = " (the CPU time limit)" if "SIGXCPU" in how else ""
        message = f"WorkerCrashed: the worker process {how}{hint}. " + _RESTART_NOTE
        self._replace_worker()
        return CellResult(error=message, error_type="WorkerCrashed", final=final[0] if final else None,
                          has_final=bool(final), duration_s=time.monotonic() - start, worker_restarted=True)


_host_layers: dict[str, dict[str, Any]] = {}


def _protect_host() -> None:
    """Make the host non-dumpable (Linux), once per process.

    Otherwise any process of the same user, a worker that escaped included, could read the
    host's memory and /proc/<pid>/environ, where API keys live.
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


def _done(msg: dict[str, Any], final: list[Any], cap: int) -> CellResult:
    notes = msg.get("notes") or []
    stdout = msg.get("stdout", "")
    if not isinstance(stdout, str):
        stdout = str(stdout)
    truncated = bool(msg.get("truncated", False))
    # The worker already capped its output; a worker that did not is not trusted.
    limit = cap + 200
    if len(stdout) > limit:
        stdout = stdout[:limit] + f"\n... [output truncated by the host: {len(stdout) - limit} characters cut] ...\n"
        truncated = True
    error = msg.get("error")
    return CellResult(
        stdout=stdout,
        error=error[:20_000] if isinstance(error, str) else (None if error is None else str(error)[:20_000]),
        error_type=msg.get("error_type") if isinstance(msg.get("error_type"), str) else None,
        final=final[0] if final else None,
        has_final=bool(final),
        duration_s=float(msg.get("duration_s", 0.0)),
        truncated=truncated,
        warnings=[str(n)[:500] for n in notes[:20]] if isinstance(notes, list) else [],
    )


def _replace(result: CellResult, **changes: Any) -> CellResult:
    from dataclasses import replace

    return replace(result, **changes)
