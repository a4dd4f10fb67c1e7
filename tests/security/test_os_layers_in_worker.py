"""The worker's OS layers, tested as if the Python guards had already been escaped.

RestrictedPython and the guards should stop every attempt before it reaches the OS, so
these tests use a test-only policy (``ESCAPED_POLICY`` in hostile.py) that lets the cell
import os, socket, subprocess, ctypes, signal, threading, pathlib and io: what stops the
attempts below is the process boundary and its layers (empty environment, Landlock,
seccomp, rlimits, dropped privileges, the host's wall-clock kill), nothing else.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostile import Attacker

from rlm_runtime.sandbox import CellLimits, Sandbox, oslayers, protocol

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Linux layers (Landlock, seccomp)")

HOST_PID = os.getpid()


def _read(path_expression: str) -> str:
    """A cell that reads the file named by ``path_expression`` with os.open/os.read and prints it."""
    return f"import os\nfd = os.open({path_expression}, os.O_RDONLY)\nprint(os.read(fd, 1 << 20))"


def test_environment_is_empty(escaped: Attacker) -> None:
    """It denies the worker the host's environment: os.environ is empty."""
    r = escaped.run(f"import os\nprint(len(os.environ), os.environ.get({escaped.secret['env']!r}), len(os.environb))")
    assert r.error is None and r.stdout == "0 None 0\n", r
    assert os.environ[escaped.secret["env"]] == escaped.secret["value"]  # it was planted


@pytest.mark.parametrize(
    "path",
    ["/proc/self/environ", "/proc/{ppid}/environ", "/proc/1/environ", f"/proc/{HOST_PID}/environ", f"/proc/{HOST_PID}/mem",
     "/proc/{ppid}/cmdline", "/etc/passwd"],
    ids=["self", "parent", "init", "host", "host-memory", "parent-cmdline", "etc-passwd"],
)
def test_reading_proc_and_system_files(escaped: Attacker, path: str) -> None:
    """It denies reading /proc/<pid>/environ of itself, its parent, init and the host, and files outside the stdlib."""
    escaped.refused(_read(f"{path!r}.replace('{{ppid}}', str(os.getppid()))"), "PermissionError")


def test_reading_the_secret_file(escaped: Attacker) -> None:
    """It denies reading the host's secret file with os, io and pathlib."""
    path = escaped.secret["path"]
    escaped.refused(_read(repr(path)), "PermissionError")
    escaped.refused(f"import io\nprint(io.open({path!r}).read())", "PermissionError")
    escaped.refused(f"import pathlib\nprint(pathlib.Path({path!r}).read_text())", "PermissionError")


def test_listing_proc_and_the_file_system(escaped: Attacker) -> None:
    """It denies listing /proc, / and the host's temp dirs."""
    escaped.refused("import os\nprint(os.listdir('/proc'))", "PermissionError")
    escaped.refused("import os\nprint(os.listdir('/'))", "PermissionError")
    escaped.refused(f"import os\nprint(os.listdir({os.path.dirname(escaped.secret['path'])!r}))", "PermissionError")


def test_writing_outside_the_private_dir(escaped: Attacker, tmp_path: Path) -> None:
    """It denies writing a file outside the worker's private temp dir (it may write inside it)."""
    target = tmp_path / "escaped.txt"
    code = f"import os\nfd = os.open({str(target)!r}, os.O_WRONLY | os.O_CREAT, 0o644)\nos.write(fd, b'x')"
    escaped.refused(code, "PermissionError")
    escaped.refused("import os\nfd = os.open('/tmp/rlm-escaped.txt', os.O_WRONLY | os.O_CREAT, 0o644)", "PermissionError")
    assert not target.exists() and not os.path.exists("/tmp/rlm-escaped.txt")
    r = escaped.run("import os\nfd = os.open('inside.txt', os.O_WRONLY | os.O_CREAT, 0o644)\nos.write(fd, b'ok')\n"
                    "os.close(fd)\nprint(os.listdir('.'))")
    assert r.error is None and r.stdout == "['inside.txt']\n", r


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A TCP listener on 127.0.0.1 in the host, which the worker must not reach."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        s.settimeout(0.2)
        yield s


@pytest.mark.parametrize(
    "code",
    [
        "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\ns.connect(('127.0.0.1', {port}))\ns.sendall(b'hello')",
        "import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=1)",
        "import socket\ns = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)",
        "import socket\ns = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)",
    ],
    ids=["tcp-connect", "create-connection", "udp6", "unix"],
)
def test_network(escaped: Attacker, listener: socket.socket, code: str) -> None:
    """It denies creating sockets and connecting to a listener the host runs on 127.0.0.1."""
    port = listener.getsockname()[1]
    escaped.refused(code.format(port=port), "PermissionError", "OSError")
    with pytest.raises(TimeoutError):
        listener.accept()


@pytest.mark.parametrize(
    ("code", "error_type"),
    [
        ("import os\npid = os.fork()", "PermissionError"),
        ("import os, subprocess\nprint(subprocess.run(['cat', '/proc/{ppid}/environ'], capture_output=True))", "PermissionError"),
        ("import os\nos.execv('/bin/sh', ['sh', '-c', 'cat /proc/{ppid}/environ'])", "PermissionError"),
        ("import os\nos.posix_spawn('/bin/true', ['true'], {{}})", "PermissionError"),
        ("import threading\nt = threading.Thread(target=print)\nt.start()", "RuntimeError"),
    ],
    ids=["fork", "subprocess", "exec", "posix-spawn", "thread"],
)
def test_new_processes_and_threads(escaped: Attacker, code: str, error_type: str) -> None:
    """It denies fork, exec, subprocess, posix_spawn and new threads."""
    escaped.refused(code.format(ppid="'+str(os.getppid())+'"), error_type)


@pytest.mark.parametrize(
    "code",
    [
        "import os\nos.kill(os.getppid(), 9)",
        f"import os\nos.kill({HOST_PID}, 9)",
        f"import os\nos.killpg({os.getpgid(0)}, 9)",
        "import os\nos.killpg(os.getpgid(os.getppid()), 9)",
        "import os\nos.kill(-1, 9)",
    ],
    ids=["parent", "host", "host-group", "parent-group", "everyone"],
)
def test_killing_the_host(escaped: Attacker, code: str) -> None:
    """It denies signals to the zygote, the host, their process groups and every process (kill -1)."""
    escaped.refused(code, "PermissionError", "ProcessLookupError", "OSError")
    os.kill(HOST_PID, 0)  # still here


def test_privileges(escaped: Attacker) -> None:
    """It denies setuid(0), and a root host's worker runs as its own uid (worker_uid of its pid), not root or nobody."""
    r = escaped.run("import os\nprint(os.getuid(), os.geteuid(), os.getgid(), os.getpid())")
    uid, euid, gid, pid = (int(x) for x in r.stdout.split())
    if os.geteuid() == 0:
        assert uid == euid == gid == oslayers.worker_uid(pid), r.stdout
    else:
        assert uid == euid == os.geteuid(), r.stdout
    escaped.refused("import os\nos.setuid(0)", "PermissionError")
    escaped.refused("import os\nos.setresuid(0, 0, 0)", "PermissionError")


@pytest.mark.parametrize(
    ("call", "what"),
    [
        (f"libc.ptrace(16, {HOST_PID}, 0, 0)", "ptrace attach to the host"),
        ("libc.unshare(0x10000000)", "new user namespace"),
        ("libc.prctl(4, 1, 0, 0, 0) + libc.ptrace(16, os.getppid(), 0, 0)", "dumpable again, then ptrace"),
        (f"libc.syscall(434, {HOST_PID}, 0)", "pidfd_open of the host"),
        (f"libc.syscall(234 if os.uname().machine == 'x86_64' else 131, {HOST_PID}, {HOST_PID}, 9)", "tgkill of the host"),
    ],
    ids=["ptrace", "unshare", "prctl-ptrace", "pidfd", "tgkill"],
)
def test_native_calls(escaped: Attacker, call: str, what: str) -> None:
    """It denies ptrace, unshare and pidfd_open made directly through ctypes."""
    r = escaped.run(f"import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nprint({call}, ctypes.get_errno())")
    assert r.error is None, r
    result, errno_ = (int(x) for x in r.stdout.split())
    assert result < 0 and errno_ != 0, f"{what} succeeded: {r.stdout}"
    escaped.still_works()


def test_disabling_the_cell_timer(escaped_policy: Path, secret: dict[str, str]) -> None:
    """It denies an endless cell that ignores its timeout signal: the host kills the process group."""
    with Sandbox(escaped_policy, CellLimits(cell_timeout_s=0.5, kill_grace_s=0.3, memory_mb=256)) as sb:
        attacker = Attacker(sb, secret)
        code = "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nsignal.setitimer(signal.ITIMER_REAL, 0)\nwhile True:\n    pass"
        r = attacker.refused(code, "TimeoutError")
        assert r.worker_restarted


def _channel(frame: bytes) -> str:
    """A cell that finds the worker's channel to the host and writes ``frame`` to it."""
    return (
        "import os\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        "        if os.fstat(fd).st_mode & 0o170000 == 0o140000:\n"
        "            channel = fd\n"
        "    except OSError:\n"
        "        pass\n"
        f"os.write(channel, {frame!r})\n"
        "import signal\nsignal.pause()"
    )



@pytest.mark.parametrize(
    "frame",
    [
        pytest.param(b"\xff\xff\xff\xff", id="oversized"),
        pytest.param(protocol.HEADER.pack(3) + b"\xc1\xc1\xc1", id="undecodable"),
        pytest.param(protocol.encode({"op": "spawn"}), id="unknown-op"),
    ],
)
def test_forged_frames_on_the_channel(escaped: Attacker, frame: bytes) -> None:
    """It denies a worker writing malformed frames straight to its channel: the host kills and replaces it."""
    r = escaped.refused(_channel(frame), "ProtocolError")
    assert r.worker_restarted


def test_worker_that_aborts_itself(escaped: Attacker) -> None:
    """It denies a worker that dies mid-cell (os.abort) taking the host's execute() down with it."""
    r = escaped.refused("import os\nos.abort()", "WorkerCrashed")
    assert r.worker_restarted
