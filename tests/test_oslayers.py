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
import re
import select
import shutil
import signal
import socket
import stat
import struct
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

from rlm_runtime.sandbox import oslayers, seccomp

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

F_SETOWN, F_SETSIG, F_GETFL = 8, 10, 3
FIOSETOWN, FIONREAD = 0x8901, 0x541B
PRIO_PGRP = 1


def cpu_clock_of(pid: int) -> int:
    """The clock id of another process's CPU time (MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED))."""
    return (~pid << 3) | 2


@pytest.fixture(scope="module")
def seccomp_outcomes() -> dict[str, Any]:
    """What a child can still do after apply_seccomp (one child for all checks)."""
    if not ON_LINUX:
        pytest.skip("Linux only")
    import resource

    def body():
        me, parent = os.getpid(), os.getppid()
        signal.signal(signal.SIGUSR1, lambda *_: None)
        description = oslayers.apply_seccomp(me)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        kill_nr = KILL_NR[os.uname().machine]
        wide_self = ctypes.c_long((1 << 32) | me)
        read_fd, write_fd = os.pipe()
        callback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(lambda x: x + 1)
        return {
            "description": description,
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
            "prctl": libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0),
            "read_file": outcome(lambda: read_file(os.__file__)),
            "pipe": outcome(os.pipe),
            "prlimit_self": outcome(lambda: resource.prlimit(me, resource.RLIMIT_CPU)),
            "prlimit_zero": outcome(lambda: resource.getrlimit(resource.RLIMIT_NOFILE)),
            "prlimit_parent": outcome(lambda: resource.prlimit(parent, resource.RLIMIT_CPU)),
            "setpriority_self": outcome(lambda: os.setpriority(os.PRIO_PROCESS, 0, os.getpriority(os.PRIO_PROCESS, 0))),
            "setpriority_parent": outcome(lambda: os.setpriority(os.PRIO_PROCESS, parent, 19)),
            "setpriority_group": outcome(lambda: os.setpriority(PRIO_PGRP, 0, 19)),
            "affinity_self": outcome(lambda: os.sched_getaffinity(0)),
            "affinity_parent": outcome(lambda: os.sched_setaffinity(parent, {0})),
            "getpgid_parent": outcome(lambda: os.getpgid(parent)),
            "fcntl_getfl": outcome(lambda: fcntl_call(read_fd, F_GETFL, 0)),
            "fcntl_setown": outcome(lambda: fcntl_call(read_fd, F_SETOWN, parent)),
            "fcntl_setsig": outcome(lambda: fcntl_call(read_fd, F_SETSIG, signal.SIGKILL)),
            "ioctl_fionread": outcome(lambda: ioctl_int(read_fd, FIONREAD, 0)),
            "ioctl_fiosetown": outcome(lambda: ioctl_int(read_fd, FIOSETOWN, parent)),
            "clock_own_cpu": outcome(time.process_time),
            "clock_parent_cpu": outcome(lambda: time.clock_gettime(cpu_clock_of(parent))),
            "sleep": outcome(lambda: time.sleep(0.001)),
            "urandom": outcome(lambda: os.urandom(16)),
            "cpu_count": os.cpu_count(),
            "ctypes_callback": callback(41),
            "write_pipe": os.write(write_fd, b"x"),
        }

    return in_child(body)


def fcntl_call(fd: int, command: int, arg: int) -> int:
    import fcntl

    return fcntl.fcntl(fd, command, arg)


def ioctl_int(fd: int, request: int, value: int) -> int:
    import fcntl

    return fcntl.ioctl(fd, request, ctypes.c_int(value))


def test_seccomp_reports_an_allow_list(seccomp_outcomes):
    """It describes itself as an allow-list with pid-scoped calls."""
    assert seccomp_outcomes["description"].startswith("allow-list of ")
    assert seccomp_outcomes["description"].endswith(" syscalls, pid-scoped calls only on self")


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


@pytest.mark.parametrize(
    "action",
    ["prlimit_parent", "setpriority_parent", "setpriority_group", "affinity_parent", "getpgid_parent", "clock_parent_cpu"],
)
def test_seccomp_denies_pid_scoped_calls_on_others(seccomp_outcomes, action):
    """It denies prlimit, setpriority, sched_setaffinity, getpgid and CPU clocks aimed at another process."""
    assert seccomp_outcomes[action] == "PermissionError"


@pytest.mark.parametrize("action", ["prlimit_self", "prlimit_zero", "setpriority_self", "affinity_self", "clock_own_cpu"])
def test_seccomp_allows_pid_scoped_calls_on_self(seccomp_outcomes, action):
    """It allows the same calls on the process itself (by pid or as 0)."""
    assert seccomp_outcomes[action] == "ok"


def test_seccomp_denies_descriptor_owners(seccomp_outcomes):
    """It denies F_SETOWN, F_SETSIG and FIOSETOWN, which would aim SIGIO at another pid."""
    assert seccomp_outcomes["fcntl_setown"] == "PermissionError"
    assert seccomp_outcomes["fcntl_setsig"] == "PermissionError"
    assert seccomp_outcomes["ioctl_fiosetown"] == "PermissionError"
    assert seccomp_outcomes["fcntl_getfl"] == "ok"
    assert seccomp_outcomes["ioctl_fionread"] == "ok"


def test_seccomp_denies_threads(seccomp_outcomes):
    """It denies starting a thread (clone3 gets EPERM, so glibc does not fall back)."""
    assert seccomp_outcomes["thread"] == "RuntimeError"


def test_seccomp_denies_unshare_and_prctl(seccomp_outcomes):
    """It denies unshare, even to root, and prctl."""
    assert seccomp_outcomes["unshare"] == -1
    assert seccomp_outcomes["prctl"] == -1


def test_seccomp_allows_ordinary_work(seccomp_outcomes):
    """It allows reading files, pipes, sleeping, randomness, cpu_count and ctypes callbacks."""
    for action in ("read_file", "pipe", "sleep", "urandom"):
        assert seccomp_outcomes[action] == "ok", action
    assert seccomp_outcomes["cpu_count"] >= 1
    assert seccomp_outcomes["ctypes_callback"] == 42
    assert seccomp_outcomes["write_pipe"] == 1


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


# --- the seccomp program, run by a classic-BPF interpreter (both architectures, any host)

SELF_PID = 4242
MACHINES = ["x86_64", "aarch64"]


def run_filter(program: list[seccomp.Insn], machine: str, nr: int, *args: int) -> int:
    """What the kernel would decide: the filter run on one struct seccomp_data."""
    full = [a & 0xFFFFFFFFFFFFFFFF for a in (*args, 0, 0, 0, 0, 0, 0)[:6]]
    data = struct.pack("<iIQ6Q", nr, seccomp.AUDIT_ARCH[machine], 0, *full)
    acc, pc = 0, 0
    for _ in range(len(program)):  # jumps go forward only: never more steps than instructions
        insn = program[pc]
        pc += 1
        if insn.code == seccomp.BPF_LD_W_ABS:
            acc = struct.unpack_from("<I", data, insn.k)[0]
        elif insn.code == seccomp.BPF_JA:
            pc += insn.k
        elif insn.code == seccomp.BPF_JEQ_K:
            pc += insn.jt if acc == insn.k else insn.jf
        elif insn.code == seccomp.BPF_JGE_K:
            pc += insn.jt if acc >= insn.k else insn.jf
        elif insn.code == seccomp.BPF_RET_K:
            return insn.k
        else:
            raise AssertionError(f"unknown opcode {insn.code:#x}")
    raise AssertionError("ran off the program")


@pytest.fixture(scope="module", params=MACHINES)
def program(request) -> tuple[str, list[seccomp.Insn]]:
    return request.param, seccomp.build_filter(request.param, SELF_PID)


def test_seccomp_program_fits_bpf_limits(program):
    """It builds a program for both architectures within BPF's size and jump limits."""
    machine, insns = program
    assert len(insns) < 4096
    for i, insn in enumerate(insns):
        if insn.code == seccomp.BPF_JA:
            assert i + 1 + insn.k < len(insns)
        elif insn.code & 0x07 == 0x05:  # a conditional jump lands inside the program
            assert i + 1 + max(insn.jt, insn.jf) < len(insns)
    assert insns[-1].code == seccomp.BPF_RET_K


def test_seccomp_program_allows_exactly_the_allow_list(program):
    """It allows every listed syscall without argument rules, and denies every other number up to 1023."""
    machine, insns = program
    table = seccomp._TABLES[machine]
    plain = {table[name] for name in seccomp.allowed_names(machine) if name not in seccomp._ARG_RULES}
    for nr in range(1024):
        expected = seccomp.SECCOMP_RET_ALLOW if nr in plain else seccomp.RET_EPERM
        if nr in {table[name] for name in seccomp._ARG_RULES if name in table}:
            continue  # the argument rules are checked below
        assert run_filter(insns, machine, nr) == expected, nr
    # A negative number is in the x32 range's test on x86_64 (killed), a plain unknown on aarch64.
    beyond = seccomp.SECCOMP_RET_KILL_PROCESS if machine == "x86_64" else seccomp.RET_EPERM
    assert run_filter(insns, machine, -1) == beyond


def test_seccomp_program_kills_other_architectures(program):
    """It kills a syscall made under another audit arch, and x32 numbers on x86_64."""
    machine, insns = program
    data_nr = seccomp._TABLES[machine]["getpid"]
    other = next(a for m, a in seccomp.AUDIT_ARCH.items() if m != machine)
    packed = struct.pack("<iIQ6Q", data_nr, other, 0, 0, 0, 0, 0, 0, 0)
    assert insns[0] == seccomp.Insn(seccomp.BPF_LD_W_ABS, 0, 0, 4)
    assert struct.unpack_from("<I", packed, 4)[0] != insns[1].k
    assert insns[2] == seccomp.Insn(seccomp.BPF_RET_K, 0, 0, seccomp.SECCOMP_RET_KILL_PROCESS)
    if machine == "x86_64":
        assert run_filter(insns, machine, seccomp.X32_SYSCALL_BIT | data_nr) == seccomp.SECCOMP_RET_KILL_PROCESS


OTHER = 31337
DENY_HIGH = (1 << 32) | SELF_PID


@pytest.mark.parametrize(
    ("name", "allowed", "denied"),
    [
        ("kill", [(SELF_PID, 9)], [(OTHER, 9), (0, 9), (-1, 9), (-SELF_PID, 9), (DENY_HIGH, 9)]),
        ("tkill", [(SELF_PID, 9)], [(OTHER, 9), (DENY_HIGH, 9)]),
        ("tgkill", [(SELF_PID, SELF_PID, 6)], [(OTHER, OTHER, 9), (SELF_PID, OTHER, 9), (OTHER, SELF_PID, 9)]),
        ("rt_sigqueueinfo", [(SELF_PID, 10, 0)], [(OTHER, 10, 0), (0, 10, 0)]),
        ("rt_tgsigqueueinfo", [(SELF_PID, SELF_PID, 10, 0)], [(OTHER, OTHER, 10, 0), (SELF_PID, OTHER, 10, 0)]),
        ("prlimit64", [(0, 0), (SELF_PID, 0)], [(OTHER, 0), (1, 0), (DENY_HIGH, 0), (1 << 32, 0)]),
        ("sched_setaffinity", [(0, 8), (SELF_PID, 8)], [(OTHER, 8), (1, 8)]),
        ("sched_getaffinity", [(0, 128), (SELF_PID, 128)], [(OTHER, 128)]),
        ("sched_getparam", [(0,), (SELF_PID,)], [(OTHER,)]),
        ("sched_getscheduler", [(0,), (SELF_PID,)], [(OTHER,)]),
        ("getpgid", [(0,), (SELF_PID,)], [(OTHER,)]),
        ("getsid", [(0,), (SELF_PID,)], [(OTHER,)]),
        ("setpriority", [(0, 0, 19), (0, SELF_PID, 19)], [(0, OTHER, 19), (1, 0, 19), (2, 0, 19), (1 << 32, 0, 19)]),
        ("getpriority", [(0, 0), (0, SELF_PID)], [(0, OTHER), (1, 0), (2, 1000)]),
        ("fcntl", [(3, 1, 1), (3, 3, 0), (3, 4, 0x800), (3, 1030, 3)], [(3, 8, OTHER), (3, 10, 9), (3, 15, 0), (3, 1024, 1)]),
        ("ioctl", [(0, 0x5401, 0), (3, 0x5451, 0)], [(3, 0x8901, 0), (3, 0x8902, 0), (0, 0x5412, 0)]),
        ("clock_gettime", [(0, 0), (2, 0), (3, 0), (11, 0)], [(12, 0), (cpu_clock_of(OTHER), 0), (-1, 0)]),
        ("clock_getres", [(1, 0)], [(cpu_clock_of(OTHER), 0)]),
    ],
)
def test_seccomp_program_scopes_arguments(program, name, allowed, denied):
    """It allows pid-taking calls only on the worker itself (or 0 for the caller), fcntl/ioctl only on the descriptor."""
    machine, insns = program
    nr = seccomp._TABLES[machine][name]
    for args in allowed:
        assert run_filter(insns, machine, nr, *args) == seccomp.SECCOMP_RET_ALLOW, (name, args)
    for args in denied:
        assert run_filter(insns, machine, nr, *args) == seccomp.RET_EPERM, (name, args)


@pytest.mark.parametrize(
    "name",
    ["ptrace", "process_vm_readv", "process_vm_writev", "pidfd_open", "pidfd_send_signal", "pidfd_getfd", "kcmp",
     "process_madvise", "ioprio_set", "ioprio_get", "sched_setscheduler", "sched_setparam", "clone", "clone3",
     "execve", "socket", "unshare", "setuid", "prctl", "shmget", "msgget", "semget", "memfd_create", "sendmsg"],
)
def test_seccomp_program_denies_calls_that_reach_other_processes(name):
    """It leaves out ptrace, process_vm_*, pidfd_*, kcmp, ioprio, scheduler setters, SysV IPC and process creation."""
    assert all(name not in seccomp.allowed_names(machine) for machine in MACHINES)


@linux_only
def test_seccomp_prepared_ahead_is_the_same_program():
    """It installs, after prepare_seccomp, exactly the program build_filter makes for that pid."""
    machine = os.uname().machine
    if machine not in ("x86_64", "aarch64"):
        pytest.skip(f"no table for {machine}")
    seccomp.prepare_seccomp(SELF_PID)
    packed = seccomp._prepared[SELF_PID]
    assert packed == b"".join(struct.pack("=HBBI", *insn) for insn in seccomp.build_filter(machine, SELF_PID))

    def body():
        seccomp.prepare_seccomp(os.getpid())
        oslayers.apply_seccomp(os.getpid())
        return {"kill_self": outcome(lambda: os.kill(os.getpid(), 0)), "kill_parent": outcome(lambda: os.kill(os.getppid(), 0)),
                "left": len(seccomp._prepared)}

    assert in_child(body) == {"kill_self": "ok", "kill_parent": "PermissionError", "left": 0}
    seccomp._prepared.clear()


# --- the syscall tables, against the kernel headers when they are installed

X86_HEADER = Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h")
GENERIC_HEADER = Path("/usr/include/asm-generic/unistd.h")


def header_numbers(path: Path) -> dict[str, int]:
    """__NR_ numbers of a unistd header, with asm-generic's 64-bit __NR3264_ aliases resolved."""
    text = path.read_text()
    numbers = {m[1]: int(m[2]) for m in re.finditer(r"#define __NR(?:3264)?_(\w+)\s+(\d+)", text)}
    for m in re.finditer(r"#define __NR_(\w+)\s+__NR3264_(\w+)", text):
        if m[2] in numbers and not m[1].endswith("64"):  # fcntl64 and friends are the 32-bit names
            numbers[m[1]] = numbers[m[2]]
    return numbers


@pytest.mark.skipif(not X86_HEADER.is_file(), reason="no x86_64 kernel headers")
def test_x86_64_table_matches_the_kernel_headers():
    """It numbers every x86_64 syscall as asm/unistd_64.h does."""
    numbers = header_numbers(X86_HEADER)
    assert {name: numbers.get(name) for name in seccomp._X86_64} == seccomp._X86_64


@pytest.mark.skipif(not GENERIC_HEADER.is_file(), reason="no asm-generic kernel headers")
def test_aarch64_table_matches_asm_generic():
    """It numbers every aarch64 syscall as asm-generic/unistd.h does (the table arm64 uses)."""
    numbers = header_numbers(GENERIC_HEADER)
    assert {name: numbers.get(name) for name in seccomp._AARCH64} == seccomp._AARCH64


def test_syscall_tables_differ_only_by_x86_only_syscalls():
    """It lists the same syscalls on aarch64 except the legacy ones only x86_64 has."""
    only_x86 = set(seccomp._X86_64) - set(seccomp._AARCH64)
    assert only_x86 == {"open", "stat", "lstat", "access", "pipe", "poll", "select", "dup2", "pause", "alarm", "time",
                        "getpgrp", "readlink", "mkdir", "rmdir", "unlink", "rename"}
    assert set(seccomp._AARCH64) <= set(seccomp._X86_64)
    named = {name for group in seccomp._ALLOWED.values() for name in group} | set(seccomp._ARG_RULES)
    assert named == set(seccomp._X86_64)


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
        with_user = oslayers.unshare_network()
        return {
            "before": before,
            "with_user": with_user,
            "interfaces": [name for _, name in socket.if_nameindex()],
            "after": outcome(lambda: connect(tcp_server)),
        }

    report = in_child(body)
    assert report["before"] == "ok"
    assert report["with_user"] is not IS_ROOT  # root needs no user namespace
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
            with_user = oslayers.unshare_network()
        except oslayers.LayerUnavailable as e:
            return {"unavailable": str(e)}
        return {
            "with_user": with_user,
            "uid": os.getuid(),
            "uid_map": read_file("/proc/self/uid_map").decode().split(),
            "after": outcome(lambda: connect(tcp_server)),
        }

    report = in_child(body)
    if "unavailable" in report:
        pytest.skip(report["unavailable"])
    assert report["with_user"] is True
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


@linux_only
@root_only
def test_drop_privileges_to_a_worker_uid_leaves_other_workers_unreachable():
    """It gives two workers different uids, so one cannot even kill(pid, 0) the other by uid."""

    def body():
        me = os.getpid()
        uid = oslayers.worker_uid(me)
        oslayers.drop_privileges(uid, uid)
        return {"ids": list(os.getresuid()) + list(os.getresgid()), "kill_parent": outcome(lambda: os.kill(os.getppid(), 0))}

    report = in_child(body)
    uid = report["ids"][0]
    assert oslayers.WORKER_UID_BASE < uid <= oslayers.WORKER_UID_BASE + (1 << 22)
    assert report["ids"] == [uid] * 6
    assert report["kill_parent"] == "PermissionError"  # the parent is root: a different uid


def test_worker_uid_is_one_per_pid_in_a_reserved_range():
    """It maps every possible pid to its own uid above the normal and container ranges, below 2**31."""
    assert oslayers.worker_uid(1) == oslayers.WORKER_UID_BASE + 1
    assert oslayers.worker_uid(1 << 22) < 2147352576 < 2**31  # below systemd's foreign-uid range
    assert oslayers.WORKER_UID_BASE > 1879048191  # above systemd's container uid ranges
    assert oslayers.worker_uid(4242) != oslayers.worker_uid(4243)
    for bad in (0, -1, (1 << 22) + 1):
        with pytest.raises(ValueError):
            oslayers.worker_uid(bad)


# --- probe


def test_probe_reports_every_layer():
    """It reports a status for every layer and never raises."""
    statuses = oslayers.probe()
    assert set(statuses) == {
        "no_new_privs",
        "dumpable",
        "network_namespace",
        "user_namespace",
        "landlock",
        "landlock_signal_scope",
        "seccomp",
        "drop_privileges",
        "uid_separation",
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
    assert statuses["landlock_signal_scope"].active == (abi >= 6), statuses["landlock_signal_scope"].detail
    assert "pid-scoped calls only on self" in statuses["seccomp"].detail
    if IS_ROOT:
        netns = statuses["network_namespace"]
        assert netns.active, netns.detail
        assert statuses["drop_privileges"].active
        assert "per-worker uid 19" in statuses["drop_privileges"].detail
        assert statuses["uid_separation"].active
        assert not statuses["user_namespace"].active
    else:
        assert statuses["drop_privileges"].detail == "not root: nothing to drop"
        assert not statuses["uid_separation"].active


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
