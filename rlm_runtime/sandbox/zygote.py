"""The zygote: a pre-warmed, single-threaded interpreter that forks workers on request.

Forking from the host would copy whatever threads and secrets the host holds, and forking
after a thread started is unsafe. So the host starts one zygote per process with an empty
environment, ``/`` as cwd and no inherited descriptors but its control socket; the zygote
imports everything a worker needs and keeps one spare worker forked and waiting. Asking for
a worker hands over the spare's channel (SCM_RIGHTS) and forks the next spare.

Control frames (host -> zygote): ``spawn`` -> ``spawned {pid}`` with the channel attached;
``reap {pid}`` -> ``status {pid, exit}``. EOF on the control socket (the host closed it, or
died, even by SIGKILL) kills every worker, waits for them, and removes the zygote's scratch
dir, where all its workers' temp dirs live (see ``cleanup``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

from rlm_runtime.errors import SandboxError
from rlm_runtime.sandbox import cleanup, protocol

_BOOT = (
    "import sys, json; sys.path[:] = json.loads(sys.argv[1]); "
    "from rlm_runtime.sandbox.zygote import zygote_main; zygote_main(int(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4])"
)
_MACOS_PROFILE = Path(__file__).with_name("macos.sb")


# ----------------------------------------------------------------------- zygote side


def zygote_main(ctl_fd: int, preload_modules: list[str], scratch: str = "") -> None:
    """Run the zygote loop on ``ctl_fd`` until the host goes away, then clean up ``scratch``."""
    from rlm_runtime.sandbox import guards, lockdown, worker  # noqa: F401 - warm imports

    guards.preload(set(preload_modules))
    if sys.platform.startswith("linux"):
        from rlm_runtime.sandbox import oslayers

        try:
            oslayers.set_dumpable(False)
        except OSError:
            pass
    ctl = socket.socket(fileno=ctl_fd)
    children: set[int] = set()
    statuses: dict[int, str] = {}
    spare = _fork_spare(ctl, children)
    try:
        while True:
            try:
                msg = protocol.recv(ctl)
            except (EOFError, OSError, protocol.ProtocolError):
                break
            _reap(children, statuses)
            if msg["op"] == "spawn":
                pid, chan = spare
                protocol.send_with_fds(ctl, {"op": "spawned", "pid": pid}, [chan.fileno()])
                chan.close()
                spare = _fork_spare(ctl, children)
            elif msg["op"] == "reap":
                pid = int(msg["pid"])
                protocol.send(ctl, {"op": "status", "pid": pid, "exit": _wait_for(pid, children, statuses)})
    finally:
        _end_children(children)
        if scratch:
            # After the workers are dead: none can write into its dir while it is removed.
            cleanup.remove_tree(scratch)
        os._exit(0)


def _end_children(children: set[int], timeout: float = 2.0) -> None:
    """SIGKILL every worker (its whole process group) and reap it, for ``timeout`` at most."""
    import time

    for pid in children:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        try:  # a spare that has not called setsid yet is not its own group
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    deadline = time.monotonic() + timeout
    while children and time.monotonic() < deadline:
        _reap(children, {})
        if children:
            time.sleep(0.005)


def _fork_spare(ctl: socket.socket, children: set[int]) -> tuple[int, socket.socket]:
    host_end, worker_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:
        from rlm_runtime.sandbox.worker import spare_main

        try:
            ctl.close()
            host_end.close()
        finally:
            spare_main(worker_end)
    worker_end.close()
    children.add(pid)
    return pid, host_end


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        return f"killed by {name}"
    return f"exited with code {os.WEXITSTATUS(status)}"


def _reap(children: set[int], statuses: dict[int, str]) -> None:
    for pid in list(children):
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            children.discard(pid)
            continue
        if done:
            children.discard(pid)
            statuses[pid] = _describe(status)
    while len(statuses) > 256:
        statuses.pop(next(iter(statuses)))


def _wait_for(pid: int, children: set[int], statuses: dict[int, str]) -> str:
    import time

    deadline = time.monotonic() + 2.0
    while pid in children and time.monotonic() < deadline:
        _reap(children, statuses)
        if pid in children:
            time.sleep(0.005)
    return statuses.pop(pid, "still running" if pid in children else "unknown")


# ------------------------------------------------------------------------ host side


def _macos_params() -> list[str]:
    """The -D parameters of macos.sb: the Python installation, our package, the temp dir."""
    import sysconfig
    import tempfile

    paths = sysconfig.get_paths()
    params = {
        "PYTHON": os.path.realpath(sys.executable),
        "PY_PREFIX": os.path.realpath(sys.prefix),
        "PY_BASE_PREFIX": os.path.realpath(sys.base_prefix),
        "PY_PURELIB": os.path.realpath(paths["purelib"]),
        "PY_PLATLIB": os.path.realpath(paths["platlib"]),
        "PKG_ROOT": str(Path(__file__).resolve().parents[2]),
        "TMPDIR": os.path.realpath(tempfile.gettempdir()),
    }
    return [arg for key, value in params.items() for arg in ("-D", f"{key}={value}")]


class Zygote:
    """Host-side handle on a zygote process. Thread-safe.

    ``scratch`` is the zygote's scratch dir: workers' temp dirs go inside it, and it goes
    when the zygote ends (``close``, or the host's death). Starting a zygote first sweeps
    scratch dirs left by dead hosts.
    """

    def __init__(self, preload_modules: list[str]) -> None:
        self._lock = threading.Lock()
        #: What workers of this zygote can import (see ``shared_zygote``).
        self.preloaded = frozenset(preload_modules)
        self._abandoned = False
        with cleanup.hold_interrupts():  # a scratch dir or a zygote must not exist unrecorded
            cleanup.sweep_stale()
            self.scratch = cleanup.make_scratch()
            host_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            argv = [sys.executable, "-I", "-c", _BOOT, json.dumps(sys.path), str(child_end.fileno()),
                    json.dumps(sorted(preload_modules)), self.scratch]
            if sys.platform == "darwin" and shutil.which("sandbox-exec") and _MACOS_PROFILE.is_file():
                argv = ["sandbox-exec", "-f", str(_MACOS_PROFILE), *_macos_params(), *argv]
            try:
                self.process = subprocess.Popen(
                    argv, env={}, cwd="/", pass_fds=[child_end.fileno()], close_fds=True,
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            except OSError as e:
                host_end.close()
                cleanup.remove_tree(self.scratch)
                raise SandboxError(f"cannot start the sandbox zygote: {e}") from e
            finally:
                child_end.close()
            self._ctl = host_end

    def alive(self) -> bool:
        return not self._abandoned and self.process.poll() is None

    def spawn(self) -> tuple[int, socket.socket]:
        """A fresh spare worker: its pid and the host end of its channel.

        Ctrl-C is held back during the request, so the control channel stays in step. A
        caller that must not lose the worker to a Ctrl-C right after this returns holds
        interrupts around the call and its own bookkeeping (``cleanup.hold_interrupts``).
        """
        with cleanup.hold_interrupts(), self._lock:
            try:
                protocol.send(self._ctl, {"op": "spawn"})
                msg, fds = protocol.recv_with_fds(self._ctl)
            except (EOFError, OSError, protocol.ProtocolError) as e:
                raise SandboxError(f"the sandbox zygote is not answering: {e}") from e
            except BaseException:
                self._abandon()
                raise
        pid = msg.get("pid")
        if msg.get("op") != "spawned" or len(fds) != 1 or type(pid) is not int or pid <= 0:
            for fd in fds:
                os.close(fd)
            raise SandboxError(f"unexpected answer from the zygote: {str(msg.get('op'))[:40]}")
        return pid, socket.socket(fileno=fds[0])

    def reap(self, pid: int) -> str:
        """How a worker ended ("killed by SIGKILL", "exited with code 1", ...)."""
        with cleanup.hold_interrupts(), self._lock:
            try:
                protocol.send(self._ctl, {"op": "reap", "pid": pid})
                msg = protocol.recv(self._ctl)
            except (EOFError, OSError, protocol.ProtocolError):
                return "unknown"
            except BaseException:
                self._abandon()
                raise
        return str(msg.get("exit", "unknown"))[:200]

    def _abandon(self) -> None:
        # Something other than Ctrl-C (held back above) broke into a request: its answer may
        # still come and would be taken for the next one's. Let this zygote go (it kills its
        # workers and removes its scratch dir); the next worker comes from a new one.
        self._abandoned = True
        try:
            self._ctl.close()
        except OSError:
            pass

    def close(self) -> None:
        """End the zygote and every worker it forked; remove its scratch dir."""
        with self._lock:
            self._abandon()
        try:
            self.process.wait(timeout=3)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        cleanup.remove_tree(self.scratch)  # the zygote does it too, unless it was killed


_shared: Zygote | None = None
#: Zygotes replaced by one that preloads more modules: still serving the workers they forked.
_retired: list[Zygote] = []
_shared_lock = threading.Lock()


def shared_zygote(preload_modules: list[str]) -> Zygote:
    """The process-wide zygote, started on first use and restarted if it died.

    Workers cannot import what their zygote did not (after lock-down they may not read the
    files, and as another uid not even reach them), so the zygote preloads every module of
    the reviewed surface plus the ones asked for. A later policy that needs a module the
    running zygote lacks gets a new zygote preloading both sets; the old one keeps serving
    the workers it forked until the process ends.
    """
    global _shared
    from rlm_runtime.sandbox.surface import REVIEWED

    wanted = set(preload_modules) | set(REVIEWED)
    with _shared_lock:
        if _shared is not None and not _shared.alive():
            _shared.close()  # dead already: this reaps it and removes its scratch dir
            _shared = None
        if _shared is not None and not wanted <= _shared.preloaded:
            _retired.append(_shared)
            wanted |= _shared.preloaded
            _shared = None
        if _shared is None:
            _shared = Zygote(sorted(wanted))
        return _shared


def current_shared() -> Zygote | None:
    """The process-wide zygote as it is (dead or alive), without starting one."""
    return _shared


def shutdown_shared() -> None:
    global _shared
    with _shared_lock:
        for zygote in [*_retired, *([_shared] if _shared is not None else [])]:
            zygote.close()
        _retired.clear()
        _shared = None
