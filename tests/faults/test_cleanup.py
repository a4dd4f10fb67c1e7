"""What a host leaves on the machine: worker processes, temp dirs, and its own dumpable flag.

Hosts run in subprocesses here, so they can be SIGKILLed (nothing of theirs runs after
that: the zygote alone must clean up) or started afresh (the sweep of dead hosts' dirs).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from rlm_runtime.sandbox import CellLimits, Sandbox, cleanup, load_policy
from rlm_runtime.sandbox.zygote import Zygote

ROOT = Path(__file__).resolve().parents[2]
LINUX = sys.platform.startswith("linux")

#: A host that opens two sandboxes, runs a cell in each, reports what it made, then waits.
HOST = """\
import json, sys
from rlm_runtime.sandbox import Sandbox, zygote
boxes = [Sandbox("default"), Sandbox("default")]
outputs = [sb.execute("print(6 * 7)").stdout for sb in boxes]
z = zygote.current_shared()
print(json.dumps({"outputs": outputs, "scratch": z.scratch, "zygote": z.process.pid,
                  "workers": [sb._worker.pid for sb in boxes], "dirs": [sb._worker.tmpdir for sb in boxes]}), flush=True)
sys.stdin.read()
"""


def host(code: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)


def gone(pid: int) -> bool:
    """The process no longer runs (a zombie waiting for its reaper counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def wait_until(condition: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return bool(condition())  # type: ignore[operator]


def started_host() -> tuple[subprocess.Popen[str], dict[str, object]]:
    proc = host(HOST)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, proc.stderr.read() if proc.stderr else ""
    info = json.loads(line)
    assert info["outputs"] == ["42\n", "42\n"]
    return proc, info


def test_sigkilled_host_leaves_no_worker_and_no_temp_dir() -> None:
    """It removes every worker and temp dir within 3 s of the host being SIGKILLed."""
    proc, info = started_host()
    scratch, dirs, workers = str(info["scratch"]), list(info["dirs"]), list(info["workers"])  # type: ignore[call-overload]
    assert all(os.path.isdir(d) and d.startswith(scratch + os.sep) for d in dirs)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert wait_until(lambda: not os.path.exists(scratch), 3.0), os.listdir(scratch)
    assert all(gone(pid) for pid in workers), workers
    assert wait_until(lambda: gone(int(info["zygote"])), 3.0)  # type: ignore[call-overload]


def test_host_exiting_without_close_leaves_nothing() -> None:
    """It removes workers and temp dirs when the host exits without closing its sandboxes."""
    proc, info = started_host()
    assert proc.stdin is not None
    proc.stdin.close()  # the host's stdin.read() returns, and it exits normally
    assert proc.wait(timeout=30) == 0
    assert wait_until(lambda: not os.path.exists(str(info["scratch"])), 3.0)
    assert all(gone(pid) for pid in info["workers"])  # type: ignore[attr-defined]


def plant(name: str, marker: dict[str, object] | None, mtime: float | None = None) -> Path:
    """A scratch dir as a host would leave it, with one worker dir holding a file."""
    path = Path(tempfile.gettempdir()) / name
    (path / "rlm-worker-planted").mkdir(parents=True)
    (path / "rlm-worker-planted" / "notes.txt").write_text("left behind")
    if marker is not None:
        (path / cleanup.MARKER).write_text(json.dumps(marker))
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def reaped_pid() -> int:
    """The pid of a process that ended and was reaped."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_stale_dirs_of_dead_hosts_are_swept_at_the_next_start() -> None:
    """It sweeps scratch dirs of dead hosts (and of a reused pid) when a new host starts, and keeps the rest."""
    me = psutil.Process()
    ns = os.readlink("/proc/self/ns/pid") if LINUX else None
    dead = reaped_pid()
    old = time.time() - 2 * 3600
    swept = {
        "dead host": plant(f"rlm-{dead}-plantdea", {"pid": dead, "start": 1_000_000.0, "pidns": ns}),
        "reused pid": plant(f"rlm-{os.getpid()}-plantreu", {"pid": os.getpid(), "start": me.create_time() - 3600, "pidns": ns}),
        "old, no marker": plant(f"rlm-{dead}-plantnom", None, mtime=old),
    }
    kept = {
        "live host": plant(f"rlm-{os.getpid()}-plantliv", {"pid": os.getpid(), "start": me.create_time(), "pidns": ns}),
        "other pid namespace": plant(f"rlm-{dead}-plantons", {"pid": dead, "start": 1.0, "pidns": "pid:[1]"}),
        "recent, no marker": plant(f"rlm-{dead}-plantnew", None),
        "not a scratch name": plant(f"rlm-x{dead}-plantoth", {"pid": dead, "start": 1.0, "pidns": ns}),
    }
    try:
        proc, _info = started_host()
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)
        assert [what for what, path in swept.items() if path.exists()] == []
        assert [what for what, path in kept.items() if not path.exists()] == []
    finally:
        for path in [*swept.values(), *kept.values()]:
            cleanup.remove_tree(str(path))


def test_closed_zygote_removes_its_scratch_dir() -> None:
    """It removes a zygote's scratch dir, worker dirs included, when the zygote is closed."""
    z = Zygote(list(load_policy("default").allowed_imports))
    sb = Sandbox("default", CellLimits(cell_timeout_s=2), zygote=z)
    assert sb.execute("print(1)").stdout == "1\n"
    assert len(os.listdir(z.scratch)) == 2  # the marker and one worker dir
    z.close()
    assert not os.path.exists(z.scratch)
    sb.close()


def test_remove_tree_takes_dirs_user_code_locked() -> None:
    """It removes a temp dir whose sub-dirs user code made unreadable."""
    base = Path(tempfile.mkdtemp(prefix="rlm-test-locked-"))
    inner = base / "a" / "b"
    inner.mkdir(parents=True)
    (inner / "f").write_text("x")
    os.chmod(base / "a", 0)
    assert cleanup.remove_tree(str(base))
    assert not base.exists()


# -------------------------------------------------------------- dumpable host

DUMPABLE = """\
import ctypes, json
from rlm_runtime.sandbox import Sandbox
prctl = ctypes.CDLL(None).prctl
report = {}
with Sandbox("default", protect_host=False) as sb:
    report["cell"] = sb.execute("print(1)").stdout
    report["opted_out"] = prctl(3, 0, 0, 0, 0)
    report["layer"] = sb.host_layers["host_not_dumpable"]
with Sandbox("default") as sb:
    sb.execute("1")
    report["default"] = prctl(3, 0, 0, 0, 0)
print(json.dumps(report))
"""


@pytest.mark.skipif(not LINUX, reason="PR_GET_DUMPABLE is Linux-only")
def test_protect_host_false_keeps_the_host_dumpable() -> None:
    """It leaves PR_GET_DUMPABLE at 1 with protect_host=False, says so in host_layers, and sets 0 by default."""
    proc = host(DUMPABLE)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    report = json.loads(out)
    assert report["cell"] == "1\n"
    assert report["opted_out"] == 1
    assert report["layer"]["active"] is False and "protect_host=False" in report["layer"]["detail"]
    assert report["default"] == 0
