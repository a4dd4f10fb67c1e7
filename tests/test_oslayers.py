"""Tests of the Linux lock-down layers in ``rlm_runtime.sandbox.oslayers``.

Every layer is irrevocable, so each test applies it in a forked child, which runs its
checks, reports a JSON dict back through a pipe and exits. A child that takes longer than
``CHILD_TIMEOUT_S`` is killed and the test fails.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rlm_runtime.sandbox import oslayers

ON_LINUX = sys.platform.startswith("linux")
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
linux_only = pytest.mark.skipif(not ON_LINUX, reason="Linux only")
root_only = pytest.mark.skipif(not IS_ROOT, reason="needs root")

CHILD_TIMEOUT_S = 20.0
STDLIB_DIR = os.path.dirname(os.__file__)
PR_GET_PDEATHSIG = 2
PR_GET_DUMPABLE = 3
KILL_NR = {"x86_64": 62, "aarch64": 129}


# --- running a body in a forked child


def run_child(body: Callable[[], dict[str, Any]]) -> tuple[dict[str, Any] | None, int]:
    """Fork, run ``body`` in the child; return what it reported and its wait status."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_fd)
            try:
                report = body()
            except BaseException:  # noqa: BLE001 (the parent shows the traceback)
                report = {"__error__": traceback.format_exc()}
            os.write(write_fd, json.dumps(report).encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    data = read_with_deadline(read_fd, pid)
    _, status = os.waitpid(pid, 0)
    return (json.loads(data) if data else None), status


def read_with_deadline(fd: int, pid: int) -> bytes:
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    chunks: list[bytes] = []
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                pytest.fail(f"child did not finish within {CHILD_TIMEOUT_S}s")
            chunk = os.read(fd, 65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


def in_child(body: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Like ``run_child``, but the child must report normally."""
    report, status = run_child(body)
    assert report is not None, f"child died without a report (status {status:#x})"
    if "__error__" in report:
        pytest.fail(f"child raised:\n{report['__error__']}")
    return report


def outcome(action: Callable[[], object]) -> str:
    """'ok', or the name of the exception ``action`` raised."""
    try:
        action()
    except Exception as e:  # noqa: BLE001 (the name is the result)
        return type(e).__name__
    return "ok"


def read_file(path: str | Path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def write_file(path: str | Path) -> None:
    with open(path, "w") as f:
        f.write("x")


def prctl_get(option: int) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    value = ctypes.c_int(0)
    result = libc.prctl(option, ctypes.byref(value), 0, 0, 0)
    return value.value if option == PR_GET_PDEATHSIG else result


@pytest.fixture
def tcp_server() -> Iterator[tuple[str, int]]:
    """A listening TCP socket on 127.0.0.1 in the parent (connects complete via backlog)."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    try:
        yield server.getsockname()
    finally:
        server.close()


def connect(address: tuple[str, int]) -> None:
    with socket.create_connection(address, timeout=2):
        pass


# --- process flags


@linux_only
def test_no_new_privs_is_set():
    """It sets no_new_privs, as /proc shows."""

    def body():
        oslayers.set_no_new_privs()
        return {"status": read_file("/proc/self/status").decode()}

    assert "NoNewPrivs:\t1" in in_child(body)["status"]


@linux_only
def test_dumpable_is_cleared():
    """It makes the process non-dumpable."""

    def body():
        oslayers.set_dumpable(False)
        return {"dumpable": prctl_get(PR_GET_DUMPABLE)}

    assert in_child(body)["dumpable"] == 0


@linux_only
def test_parent_death_signal_is_set():
    """It sets the parent death signal."""

    def body():
        oslayers.set_parent_death_signal(signal.SIGKILL)
        return {"sig": prctl_get(PR_GET_PDEATHSIG)}

    assert in_child(body)["sig"] == signal.SIGKILL


# --- seccomp


@pytest.fixture(scope="module")
def seccomp_outcomes() -> dict[str, Any]:
    """What a child can still do after apply_seccomp (one child for all checks)."""
    if not ON_LINUX:
        pytest.skip("Linux only")

    def body():
        me, parent = os.getpid(), os.getppid()
        signal.signal(signal.SIGUSR1, lambda *_: None)
        oslayers.apply_seccomp(me)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        kill_nr = KILL_NR[os.uname().machine]
        wide_self = ctypes.c_long((1 << 32) | me)
        return {
            "fork": outcome(os.fork),
            "socket_inet": outcome(lambda: socket.socket(socket.AF_INET)),
            "socket_unix": outcome(lambda: socket.socket(socket.AF_UNIX)),
            "kill_parent": outcome(lambda: os.kill(parent, 0)),
            "kill_group": outcome(lambda: os.kill(0, 0)),
            "kill_self": outcome(lambda: os.kill(me, 0)),
            "raise_self": outcome(lambda: signal.raise_signal(signal.SIGUSR1)),
            "kill_wide_self": libc.syscall(ctypes.c_long(kill_nr), wide_self, 0),
            "execv": outcome(lambda: os.execv("/bin/true", ["true"])),
            "subprocess": outcome(lambda: subprocess.run(["true"], check=False)),
            "thread": outcome(lambda: threading.Thread(target=lambda: None).start()),
            "setuid": outcome(lambda: os.setuid(os.getuid())),
            "unshare": libc.unshare(0x40000000),
            "read_file": outcome(lambda: read_file(os.__file__)),
            "pipe": outcome(os.pipe),
        }

    return in_child(body)


@pytest.mark.parametrize(
    "action",
    ["fork", "socket_inet", "socket_unix", "execv", "subprocess", "setuid"],
)
def test_seccomp_denies(seccomp_outcomes, action):
    """It denies creating processes, sockets, exec and credential changes with EPERM."""
    assert seccomp_outcomes[action] == "PermissionError"


def test_seccomp_denies_signals_to_other_processes(seccomp_outcomes):
    """It denies kill of the parent and of the process group."""
    assert seccomp_outcomes["kill_parent"] == "PermissionError"
    assert seccomp_outcomes["kill_group"] == "PermissionError"


def test_seccomp_allows_signals_to_self(seccomp_outcomes):
    """It allows kill and raise on the worker itself."""
    assert seccomp_outcomes["kill_self"] == "ok"
    assert seccomp_outcomes["raise_self"] == "ok"


def test_seccomp_compares_the_whole_64_bit_kill_target(seccomp_outcomes):
    """It denies kill whose target is the own pid plus high bits the kernel would drop."""
    assert seccomp_outcomes["kill_wide_self"] == -1


def test_seccomp_denies_threads(seccomp_outcomes):
    """It denies starting a thread (clone3 gets EPERM, so glibc does not fall back)."""
    assert seccomp_outcomes["thread"] == "RuntimeError"


def test_seccomp_denies_unshare(seccomp_outcomes):
    """It denies unshare, even to root."""
    assert seccomp_outcomes["unshare"] == -1


def test_seccomp_allows_ordinary_work(seccomp_outcomes):
    """It allows reading files and making pipes."""
    assert seccomp_outcomes["read_file"] == "ok"
    assert seccomp_outcomes["pipe"] == "ok"


@linux_only
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="x32 is an x86_64 ABI")
def test_seccomp_kills_x32_syscalls():
    """It kills the process on a syscall through the x32 ABI."""

    def body():
        oslayers.apply_seccomp(os.getpid())
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall(ctypes.c_long(0x40000000 | 39))  # x32 getpid
        return {"survived": True}

    report, status = run_child(body)
    assert report is None
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGSYS


def i386_getpid() -> Callable[[], int]:
    """getpid through ``int 0x80`` (the i386 ABI), as a callable of executable memory."""
    code = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    code.write(bytes([0xB8, 20, 0, 0, 0, 0xCD, 0x80, 0xC3]))  # mov eax,20; int 0x80; ret
    address = ctypes.addressof(ctypes.c_char.from_buffer(code))
    function = ctypes.CFUNCTYPE(ctypes.c_long)(address)
    function.keep_alive = code  # type: ignore[attr-defined]
    return function


@linux_only
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="i386 ABI on x86_64 only")
def test_seccomp_kills_i386_syscalls():
    """It kills the process on a syscall through the i386 ABI (the arch check)."""

    def body(filtered: bool):
        getpid = i386_getpid()
        if filtered:
            oslayers.apply_seccomp(os.getpid())
        return {"same_pid": getpid() == os.getpid()}

    control, _ = run_child(lambda: body(filtered=False))
    if not (control and control.get("same_pid")):
        pytest.skip("this kernel runs no i386 syscalls")
    report, status = run_child(lambda: body(filtered=True))
    assert report is None
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGSYS


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_seccomp_program_fits_bpf_limits(machine):
    """It builds a program for both architectures within BPF's size and jump limits."""
    arch = oslayers._ARCHES[machine]
    program = oslayers._build_filter(arch, 4242)
    assert len(program) < 4096
    for i, insn in enumerate(program):
        if insn.code & 0x07 == 0x05:  # a jump lands inside the program
            assert i + 1 + max(insn.jt, insn.jf) < len(program)
    assert program[-1].k == oslayers.SECCOMP_RET_ALLOW


def test_syscall_tables_differ_only_by_x86_only_syscalls():
    """It lists the same syscalls on aarch64 except those x86_64 alone has."""
    only_x86 = set(oslayers._X86_64) - set(oslayers._AARCH64)
    assert only_x86 == {"fork", "vfork", "mknod", "ioperm", "iopl"}
    assert set(oslayers._AARCH64) <= set(oslayers._X86_64)


# --- Landlock


@linux_only
def test_landlock_confines_files_tcp_and_signals(tmp_path, tcp_server):
    """It allows the granted trees, denies other files, TCP and signals to the parent."""
    rw, secret = tmp_path / "rw", tmp_path / "secret"
    rw.mkdir()
    secret.mkdir()
    (secret / "key").write_text("hunter2")
    (secret / "granted").write_text("fine")
    parent = os.getpid()

    def body():
        read_only = [STDLIB_DIR, str(secret / "granted"), str(tmp_path / "missing")]
        try:
            abi = oslayers.apply_landlock(read_only=read_only, read_write=[str(rw)])
        except oslayers.LayerUnavailable as e:
            return {"unavailable": str(e)}
        return {
            "abi": abi,
            "write_rw": outcome(lambda: write_file(rw / "new.txt")),
            "read_rw": outcome(lambda: read_file(rw / "new.txt")),
            "read_stdlib": outcome(lambda: read_file(os.__file__)),
            "read_granted_file": outcome(lambda: read_file(secret / "granted")),
            "write_granted_file": outcome(lambda: write_file(secret / "granted")),
            "read_secret": outcome(lambda: read_file(secret / "key")),
            "write_outside": outcome(lambda: write_file(tmp_path / "outside.txt")),
            "list_root": outcome(lambda: os.listdir("/")),
            "connect": outcome(lambda: connect(tcp_server)),
            "kill_parent": outcome(lambda: os.kill(parent, 0)),
            "kill_self": outcome(lambda: os.kill(os.getpid(), 0)),
        }

    report = in_child(body)
    if "unavailable" in report:
        pytest.skip(report["unavailable"])
    assert report["abi"] >= 1
    allowed = ("write_rw", "read_rw", "read_stdlib", "read_granted_file", "kill_self")
    denied = ("write_granted_file", "read_secret", "write_outside", "list_root")
    assert {key: report[key] for key in allowed} == dict.fromkeys(allowed, "ok")
    assert {key: report[key] for key in denied} == dict.fromkeys(denied, "PermissionError")
    if report["abi"] >= 4:
        assert report["connect"] == "PermissionError"
    if report["abi"] >= 6:
        assert report["kill_parent"] == "PermissionError"
    assert not (tmp_path / "outside.txt").exists()


# --- network namespace


@linux_only
def test_unshare_network_leaves_only_loopback(tcp_server):
    """It leaves the child an empty network: only lo, and the parent's server unreachable."""

    def body():
        before = outcome(lambda: connect(tcp_server))
        oslayers.unshare_network()
        return {
            "before": before,
            "interfaces": [name for _, name in socket.if_nameindex()],
            "after": outcome(lambda: connect(tcp_server)),
        }

    report = in_child(body)
    assert report["before"] == "ok"
    assert report["interfaces"] == ["lo"]
    assert report["after"] != "ok"


@linux_only
@root_only
def test_unshare_network_falls_back_to_a_user_namespace_without_root(tcp_server):
    """It uses a user namespace when not root, keeping the uid mapped to itself."""

    def body():
        os.setgroups([])
        os.setresgid(1000, 1000, 1000)
        os.setresuid(1000, 1000, 1000)
        try:
            oslayers.unshare_network()
        except oslayers.LayerUnavailable as e:
            return {"unavailable": str(e)}
        return {
            "uid": os.getuid(),
            "uid_map": read_file("/proc/self/uid_map").decode().split(),
            "after": outcome(lambda: connect(tcp_server)),
        }

    report = in_child(body)
    if "unavailable" in report:
        pytest.skip(report["unavailable"])
    assert report["uid"] == 1000
    assert report["uid_map"] == ["1000", "1000", "1"]
    assert report["after"] != "ok"


# --- credentials


@pytest.fixture
def traversable_dir() -> Iterator[Path]:
    """A 0755 directory, so only file modes decide what another uid may read."""
    path = Path(tempfile.mkdtemp(prefix="oslayers-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


@linux_only
@root_only
def test_drop_privileges_becomes_nobody(traversable_dir):
    """It switches to uid/gid 65534 for good, keeping the parent death signal."""
    secret, public = traversable_dir / "secret", traversable_dir / "public"
    secret.write_text("root only")
    secret.chmod(stat.S_IRUSR | stat.S_IWUSR)
    public.write_text("anyone")
    public.chmod(0o644)

    def body():
        oslayers.set_parent_death_signal(signal.SIGTERM)
        dropped = oslayers.drop_privileges()
        return {
            "dropped": dropped,
            "ids": [os.geteuid(), os.getegid(), os.getgroups()],
            "pdeathsig": prctl_get(PR_GET_PDEATHSIG),
            "read_secret": outcome(lambda: read_file(secret)),
            "read_public": outcome(lambda: read_file(public)),
            "regain_root": outcome(lambda: os.setuid(0)),
        }

    report = in_child(body)
    assert report["dropped"] is True
    assert report["ids"] == [65534, 65534, []]
    assert report["pdeathsig"] == signal.SIGTERM
    assert report["read_secret"] == "PermissionError"
    assert report["read_public"] == "ok"
    assert report["regain_root"] == "PermissionError"


@linux_only
def test_drop_privileges_without_root_does_nothing():
    """It returns False when there is no root to drop."""

    def body():
        if os.geteuid() == 0:
            os.setresuid(1000, 1000, 1000)
        return {"dropped": oslayers.drop_privileges(), "euid": os.geteuid()}

    expected_euid = 1000 if IS_ROOT else os.geteuid()
    assert in_child(body) == {"dropped": False, "euid": expected_euid}


# --- probe


def test_probe_reports_every_layer():
    """It reports a status for every layer and never raises."""
    statuses = oslayers.probe()
    assert set(statuses) == {
        "no_new_privs",
        "dumpable",
        "network_namespace",
        "landlock",
        "seccomp",
        "drop_privileges",
    }
    for name, status in statuses.items():
        assert isinstance(status, oslayers.LayerStatus)
        assert status.name == name and status.detail


def kernel_landlock_abi() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc.syscall(ctypes.c_long(444), None, ctypes.c_long(0), ctypes.c_long(1))


@linux_only
def test_probe_finds_the_layers_this_kernel_offers():
    """It reports seccomp, and Landlock and network namespaces where the kernel has them."""
    statuses = oslayers.probe()
    assert statuses["seccomp"].active, statuses["seccomp"].detail
    assert statuses["no_new_privs"].active
    abi = kernel_landlock_abi()
    assert statuses["landlock"].active == (abi >= 1), statuses["landlock"].detail
    if abi >= 1:
        assert statuses["landlock"].detail == f"Landlock ABI {abi}"
    if IS_ROOT:
        netns = statuses["network_namespace"]
        assert netns.active, netns.detail
        assert statuses["drop_privileges"].active
    else:
        assert statuses["drop_privileges"].detail == "not root: nothing to drop"


def test_other_operating_systems_get_no_layers(monkeypatch):
    """It reports every layer inactive off Linux, and the layers refuse to run."""
    monkeypatch.setattr(sys, "platform", "darwin")
    statuses = oslayers.probe()
    assert all(not s.active and s.detail == "not Linux" for s in statuses.values())
    with pytest.raises(oslayers.LayerUnavailable):
        oslayers.apply_seccomp(os.getpid())
    with pytest.raises(oslayers.LayerUnavailable):
        oslayers.apply_landlock([], [])
    with pytest.raises(oslayers.LayerUnavailable):
        oslayers.unshare_network()
