"""What the sandbox leaves on the machine, and how it is taken away whatever happens.

Every zygote gets one scratch directory, ``<tmp>/rlm-<host pid>-<random>/``, holding a
marker file that names its host (pid, process start time, pid namespace), and every
worker's temp dir lives inside it. Three things remove those directories:

* the ``Sandbox`` removes a worker's dir when it lets the worker go;
* the zygote removes its whole scratch dir when its host goes away, even by SIGKILL: it sees
  EOF on its control socket, kills its workers, waits for them, then deletes;
* the next host that starts a zygote sweeps scratch dirs whose host is dead (the start
  time guards against a reused pid; a host in another pid namespace, say another
  container sharing /tmp, is never judged), for when the zygote was killed as well.

``hold_interrupts`` keeps Ctrl-C from landing between creating a resource and recording
it, or halfway through releasing one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import stat
import sys
import tempfile
import threading
import time
from types import FrameType, TracebackType
from typing import Any

MARKER = "host.json"
_SCRATCH_NAME = re.compile(r"rlm-(\d+)-[A-Za-z0-9_]{1,32}")
#: A scratch dir without a marker (its host died within microseconds of creating it) is
#: swept only once this old, in case its host lives in a pid namespace we cannot see.
_NO_MARKER_AGE_S = 3600


# ------------------------------------------------------------------- scratch dirs


def make_scratch() -> str:
    """Create this host's scratch dir for one zygote, with its marker; return the path."""
    path = tempfile.mkdtemp(prefix=f"rlm-{os.getpid()}-")
    try:
        # Workers may run under other uids: they must pass through (not list) to their own dir.
        os.chmod(path, 0o711)
        with open(os.path.join(path, MARKER), "w") as f:
            json.dump({"pid": os.getpid(), "start": _start_time(os.getpid()), "pidns": _pid_namespace()}, f)
    except BaseException:
        remove_tree(path)
        raise
    return path


def sweep_stale(root: str | None = None) -> list[str]:
    """Remove scratch dirs under ``root`` (the temp dir) whose host is dead; return them.

    Only this user's directories with the exact scratch-dir name are considered. A host is
    alive when its pid runs and started when the marker says (a reused pid does not count).
    """
    root = root or tempfile.gettempdir()
    removed: list[str] = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for entry in entries:
        match = _SCRATCH_NAME.fullmatch(entry.name)
        if not match:
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            continue
        pid, start = int(match.group(1)), None
        try:
            with open(os.path.join(entry.path, MARKER)) as f:
                marker = json.load(f)
            pid, start, pidns = int(marker["pid"]), marker.get("start"), marker.get("pidns")
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            # No marker (or a broken one): judge by the pid in the name, if old enough.
            if time.time() - info.st_mtime < _NO_MARKER_AGE_S:
                continue
        else:
            if pidns != _pid_namespace():
                continue  # its pids are not ours to look up
        if not host_alive(pid, start) and remove_tree(entry.path):
            removed.append(entry.path)
    return removed


def host_alive(pid: int, start: float | None) -> bool:
    """Whether process ``pid`` runs and, when ``start`` is given, is the one that started then."""
    if pid == os.getpid():
        return True
    now = _start_time(pid)
    if now is None:
        return False
    return start is None or abs(now - float(start)) < 1.0


def _pid_namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:  # not Linux
        return None


def _start_time(pid: int) -> float | None:
    import psutil  # host side only: the zygote never sweeps

    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return float(proc.create_time())
    except psutil.Error:
        return None


# ---------------------------------------------------------------- removal


def remove_tree(path: str) -> bool:
    """Delete ``path`` and everything in it, whatever modes user code set; True when gone."""

    def unlock(func: Any, failed: str, exc: Any) -> None:
        # A worker may chmod 000 its own sub-dirs; a non-root host must open them again.
        if not os.path.lexists(failed):
            return
        try:
            if failed != path:
                os.chmod(os.path.dirname(failed), 0o700)
            if os.path.isdir(failed) and not os.path.islink(failed):
                os.chmod(failed, 0o700)
                shutil.rmtree(failed, ignore_errors=True)
            else:
                os.unlink(failed)
        except OSError:
            pass

    if not os.path.lexists(path):
        return True
    try:
        if sys.version_info >= (3, 12):
            shutil.rmtree(path, onexc=unlock)
        else:
            shutil.rmtree(path, onerror=unlock)
    except OSError:
        pass
    return not os.path.lexists(path)


def wait_gone(pid: int, timeout: float) -> bool:
    """Wait until ``pid`` has ended (a zombie counts: it runs no more code); True if it did."""
    import psutil

    deadline = time.monotonic() + timeout
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.Error:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)


# -------------------------------------------------------------- interrupts


class hold_interrupts:  # noqa: N801 - used like a function: ``with hold_interrupts():``
    """Hold back SIGINT's Python handler (KeyboardInterrupt) until the block ends.

    Only the main thread gets KeyboardInterrupt from a signal, so elsewhere this does
    nothing; it does nothing either when SIGINT has no Python handler. An interrupt that
    came meanwhile is raised when the block ends, by the handler that was in place.
    Blocks may nest. Costs two ``signal.signal`` calls, so it guards the rare moments
    (creating and releasing workers), never a whole cell.
    """

    def __enter__(self) -> hold_interrupts:
        self._previous: Any = None
        self._held: tuple[int, FrameType | None] | None = None
        if threading.current_thread() is not threading.main_thread():
            return self
        previous = signal.getsignal(signal.SIGINT)
        if not callable(previous):
            return self
        # Recorded first: once our handler is in, __exit__ must be able to put it back.
        self._previous = previous
        signal.signal(signal.SIGINT, self._hold)
        return self

    def _hold(self, signum: int, frame: FrameType | None) -> None:
        self._held = (signum, frame)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        previous = self._previous
        if previous is None:
            return
        self._previous = None
        signal.signal(signal.SIGINT, previous)
        if self._held is not None:
            previous(*self._held)
