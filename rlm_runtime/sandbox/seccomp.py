"""The worker's seccomp-BPF filter: an allow-list, and calls that take a pid work only on itself.

A worker may make the system calls listed in ``_ALLOWED`` (grouped by what they are for);
every other call fails with EPERM. EPERM rather than killing the process, because CPython
and glibc probe some calls and carry on without them, and a refused attempt must come
back to the cell as an ordinary ``PermissionError`` while the worker keeps serving.

Some allowed calls are allowed only with certain arguments (``_ARG_RULES``):

* calls that take a pid (signals, rlimits, priority, affinity, process group and session
  queries) only on the worker's own pid, or on 0 where 0 means "the caller" (never for
  ``kill``, where 0 is the process group). The filter is built in the worker after the
  fork, so its pid is compiled into the program. Arguments are compared on all 64 bits;
* ``fcntl`` and ``ioctl`` only with commands that act on the descriptor itself:
  ``F_SETOWN``/``F_SETSIG`` and ``FIOSETOWN``/``SIOCSPGRP`` would have the kernel send
  signals to another process whenever the descriptor becomes ready;
* ``clock_gettime``/``clock_getres`` only on the fixed clocks: a negative clock id names
  another process's CPU clock, which the kernel lets anyone read.

Calls that reach other processes and that no worker needs are simply absent: ptrace,
process_vm_readv/writev, pidfd_*, kcmp, process_madvise, ioprio_*, sched_setscheduler and
friends, SysV IPC, sockets other than the inherited channel, fork/clone/exec, namespaces.

How the list was measured: the worker side of the test suite (tests/test_sandbox_basics.py,
tests/faults, tests/context, tests/policy, tests/security, tests/orchestrator, the CLI
tests) ran under ``strace -f -ff``; the calls each worker made after ``PR_SET_SECCOMP``
are: brk, mmap, munmap, mremap, mprotect, madvise, read, write, lseek, close, fcntl,
ioctl (TCGETS), newfstatat, openat, getdents64, getcwd, pipe2, recvfrom, sendto,
clock_gettime (CLOCK_PROCESS_CPUTIME_ID), setitimer, prlimit64 (pid 0), rt_sigaction,
rt_sigprocmask, rt_sigreturn, tgkill (self), sched_getaffinity (pid 0, glibc's
get_nprocs fallback), getpid, gettid, getppid, getuid/geteuid/getgid, getpgid, uname and
pause; and recvmsg, since contexts can be attached to a live worker (its descriptors
arrive over the channel with SCM_RIGHTS; tests/security/test_live_attach.py). The rest
of ``_ALLOWED`` are the same operations under the other names glibc uses for them
(x86_64's legacy calls, the ``*at`` forms, vectored I/O, sleeps), the descriptor-level
and self-only calls an escaped cell may make through ``os``, and process exit. Attacks in
tests/security made the others seen (socket, fork, execve, ptrace, pidfd_open, unshare,
setuid, kill of other pids): all refused.

The tables hold only the calls named here: x86_64 numbers from
arch/x86/entry/syscalls/syscall_64.tbl, aarch64 numbers from
include/uapi/asm-generic/unistd.h (arm64 builds it with __ARCH_WANT_RENAMEAT,
__ARCH_WANT_NEW_STAT and __ARCH_WANT_SET_GET_RLIMIT, and has none of x86_64's legacy
calls). tests/test_oslayers.py checks them against the kernel headers when installed.
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import os
import struct
from typing import NamedTuple

__all__ = ["AUDIT_ARCH", "allowed_names", "apply_seccomp", "build_filter", "describe", "prepare_seccomp"]

# --- what a worker may call (x86_64 names; a name missing from an arch's table is skipped)

_ALLOWED: dict[str, tuple[str, ...]] = {
    # Ending the process (os._exit, a fatal signal) and resuming a call a signal interrupted.
    "exit": ("exit", "exit_group", "restart_syscall"),
    # The worker's own address space: malloc, the context mmaps, ctypes' executable pages.
    # RLIMIT_AS bounds it.
    "memory": ("brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "msync"),
    # I/O on descriptors the worker already holds (its channel, pipes, files it opened).
    "descriptors": ("read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev",
                    "preadv2", "pwritev2", "lseek", "close", "close_range", "dup", "dup2", "dup3",
                    "fcntl", "ioctl", "fstat", "ftruncate", "fsync", "fdatasync", "fadvise64",
                    "getdents64"),
    # The channel to the host, a socketpair inherited from the zygote. socket, socketpair,
    # connect, bind, accept and sendmsg (which could pass descriptors out) are not here.
    # recvmsg takes the descriptors of contexts added to a live session (SCM_RIGHTS): the
    # channel is the worker's only socket and it can make no other, so the host is the only
    # process that can hand it a descriptor.
    "channel": ("recvfrom", "sendto", "recvmsg"),
    # Paths: lazy imports from the stdlib and the worker's own temp dir. Landlock decides
    # which paths; these only name the operations.
    "paths": ("openat", "open", "newfstatat", "stat", "lstat", "statx", "access", "faccessat",
              "faccessat2", "readlink", "readlinkat", "getcwd", "chdir", "fchdir", "mkdir", "mkdirat",
              "rmdir", "unlink", "unlinkat", "rename", "renameat", "renameat2", "umask"),
    # Waiting on the worker's own descriptors.
    "polling": ("pipe", "pipe2", "poll", "ppoll", "select", "pselect6"),
    # Clocks, sleeps and the cell timer (SIGALRM from ITIMER_REAL), CPU accounting of itself.
    "time": ("clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time",
             "setitimer", "getitimer", "alarm", "times", "getrusage"),
    # Signal handling inside the worker; the calls that send a signal are in _ARG_RULES.
    "signals": ("rt_sigaction", "rt_sigprocmask", "rt_sigpending", "rt_sigsuspend", "rt_sigtimedwait",
                "rt_sigreturn", "sigaltstack", "pause", "kill", "tkill", "tgkill", "rt_sigqueueinfo",
                "rt_tgsigqueueinfo"),
    # Who am I, and randomness: read-only, about the worker itself or the machine it sees.
    "identity": ("getpid", "gettid", "getppid", "getuid", "geteuid", "getgid", "getegid", "getresuid",
                 "getresgid", "getgroups", "getpgrp", "getpgid", "getsid", "uname", "getrandom", "getcpu"),
    # Limits, priority and CPU affinity, of the worker itself only (see _ARG_RULES).
    "self_limits": ("prlimit64", "getrlimit", "setrlimit", "sched_getaffinity", "sched_setaffinity",
                    "sched_getparam", "sched_getscheduler", "getpriority", "setpriority", "sched_yield"),
    # Locks (CPython's, glibc's, RE2's). The worker shares no writable memory with anyone:
    # at most a futex could wake a waiter on a read-only context mapping, which nobody uses.
    "futex": ("futex",),
}

_SELF = -1  # in an argument rule: the worker's own pid, compiled in when the filter is built
PRIO_PROCESS = 0
_SELF_OR_ZERO = (0, _SELF)
# fcntl: F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_DUPFD_CLOEXEC. Not F_SETOWN(_EX),
# F_SETSIG, F_SETLEASE or F_NOTIFY, which direct signals at a pid, nor record locks.
_FCNTL_COMMANDS = (0, 1, 2, 3, 4, 1030)
# ioctl (same numbers on x86_64 and arm64, asm-generic/ioctls.h): TCGETS (isatty), TIOCGWINSZ,
# FIONREAD, FIONBIO, FIONCLEX, FIOCLEX, and TCGETS2, which newer glibc tries in isatty.
# Not FIOSETOWN, SIOCSPGRP or TIOCSTI.
_IOCTL_REQUESTS = (0x5401, 0x5413, 0x541B, 0x5421, 0x5450, 0x5451, 0x802C542A)
# CLOCK_REALTIME .. CLOCK_TAI; negative ids are CPU clocks of a pid, or a descriptor's clock.
_FIXED_CLOCKS = 12


@dataclasses.dataclass(frozen=True)
class _Arg:
    """One argument condition: all 64 bits equal one of ``values``, or are below ``below``."""

    index: int
    values: tuple[int, ...] = ()
    below: int = 0


_ARG_RULES: dict[str, tuple[_Arg, ...]] = {
    # Signals: the target is the worker, and (tgkill) its only thread. kill(0) is the group.
    "kill": (_Arg(0, (_SELF,)),),
    "tkill": (_Arg(0, (_SELF,)),),
    "tgkill": (_Arg(0, (_SELF,)), _Arg(1, (_SELF,))),
    "rt_sigqueueinfo": (_Arg(0, (_SELF,)),),
    "rt_tgsigqueueinfo": (_Arg(0, (_SELF,)), _Arg(1, (_SELF,))),
    # Calls whose pid 0 means the caller.
    "prlimit64": (_Arg(0, _SELF_OR_ZERO),),
    "sched_getaffinity": (_Arg(0, _SELF_OR_ZERO),),
    "sched_setaffinity": (_Arg(0, _SELF_OR_ZERO),),
    "sched_getparam": (_Arg(0, _SELF_OR_ZERO),),
    "sched_getscheduler": (_Arg(0, _SELF_OR_ZERO),),
    "getpgid": (_Arg(0, _SELF_OR_ZERO),),
    "getsid": (_Arg(0, _SELF_OR_ZERO),),
    # which == PRIO_PROCESS: a process group or a user would reach other processes.
    "getpriority": (_Arg(0, (PRIO_PROCESS,)), _Arg(1, _SELF_OR_ZERO)),
    "setpriority": (_Arg(0, (PRIO_PROCESS,)), _Arg(1, _SELF_OR_ZERO)),
    "fcntl": (_Arg(1, _FCNTL_COMMANDS),),
    "ioctl": (_Arg(1, _IOCTL_REQUESTS),),
    "clock_gettime": (_Arg(0, below=_FIXED_CLOCKS),),
    "clock_getres": (_Arg(0, below=_FIXED_CLOCKS),),
}

# --- syscall numbers of the calls named above

_X86_64 = {
    "read": 0, "write": 1, "open": 2, "close": 3, "stat": 4, "fstat": 5, "lstat": 6, "poll": 7,
    "lseek": 8, "mmap": 9, "mprotect": 10, "munmap": 11, "brk": 12, "rt_sigaction": 13,
    "rt_sigprocmask": 14, "rt_sigreturn": 15, "ioctl": 16, "pread64": 17, "pwrite64": 18, "readv": 19,
    "writev": 20, "access": 21, "pipe": 22, "select": 23, "sched_yield": 24, "mremap": 25, "msync": 26,
    "madvise": 28, "dup": 32, "dup2": 33, "pause": 34, "nanosleep": 35, "getitimer": 36, "alarm": 37,
    "setitimer": 38, "getpid": 39, "sendto": 44, "recvfrom": 45, "recvmsg": 47, "exit": 60, "kill": 62,
    "uname": 63,
    "fcntl": 72, "fsync": 74, "fdatasync": 75, "ftruncate": 77, "getcwd": 79, "chdir": 80,
    "fchdir": 81, "rename": 82, "mkdir": 83, "rmdir": 84, "unlink": 87, "readlink": 89, "umask": 95,
    "gettimeofday": 96, "getrlimit": 97, "getrusage": 98, "times": 100, "getuid": 102, "getgid": 104,
    "geteuid": 107, "getegid": 108, "getppid": 110, "getpgrp": 111, "getgroups": 115,
    "getresuid": 118, "getresgid": 120, "getpgid": 121, "getsid": 124, "rt_sigpending": 127,
    "rt_sigtimedwait": 128, "rt_sigqueueinfo": 129, "rt_sigsuspend": 130, "sigaltstack": 131,
    "getpriority": 140, "setpriority": 141, "sched_getparam": 143, "sched_getscheduler": 145,
    "setrlimit": 160, "gettid": 186, "tkill": 200, "time": 201, "futex": 202,
    "sched_setaffinity": 203, "sched_getaffinity": 204, "getdents64": 217, "restart_syscall": 219,
    "fadvise64": 221, "clock_gettime": 228, "clock_getres": 229, "clock_nanosleep": 230,
    "exit_group": 231, "tgkill": 234, "openat": 257, "mkdirat": 258, "newfstatat": 262,
    "unlinkat": 263, "renameat": 264, "readlinkat": 267, "faccessat": 269, "pselect6": 270,
    "ppoll": 271, "dup3": 292, "pipe2": 293, "preadv": 295, "pwritev": 296, "rt_tgsigqueueinfo": 297,
    "prlimit64": 302, "getcpu": 309, "renameat2": 316, "getrandom": 318, "preadv2": 327,
    "pwritev2": 328, "statx": 332, "close_range": 436, "faccessat2": 439,
}  # fmt: skip

_AARCH64 = {
    "getcwd": 17, "dup": 23, "dup3": 24, "fcntl": 25, "ioctl": 29, "mkdirat": 34, "unlinkat": 35,
    "renameat": 38, "faccessat": 48, "chdir": 49, "fchdir": 50, "openat": 56, "close": 57,
    "pipe2": 59, "getdents64": 61, "lseek": 62, "read": 63, "write": 64, "readv": 65, "writev": 66,
    "pread64": 67, "pwrite64": 68, "preadv": 69, "pwritev": 70, "pselect6": 72, "ppoll": 73,
    "readlinkat": 78, "newfstatat": 79, "fstat": 80, "fsync": 82, "fdatasync": 83, "ftruncate": 46,
    "exit": 93, "exit_group": 94, "futex": 98, "nanosleep": 101, "getitimer": 102, "setitimer": 103,
    "clock_gettime": 113, "clock_getres": 114, "clock_nanosleep": 115, "sched_getparam": 121,
    "sched_getscheduler": 120, "sched_setaffinity": 122, "sched_getaffinity": 123,
    "sched_yield": 124, "restart_syscall": 128, "kill": 129, "tkill": 130, "tgkill": 131,
    "sigaltstack": 132, "rt_sigsuspend": 133, "rt_sigaction": 134, "rt_sigprocmask": 135,
    "rt_sigpending": 136, "rt_sigtimedwait": 137, "rt_sigqueueinfo": 138, "rt_sigreturn": 139,
    "setpriority": 140, "getpriority": 141, "getresuid": 148, "getresgid": 150, "times": 153,
    "getpgid": 155, "getsid": 156, "getgroups": 158, "uname": 160, "getrlimit": 163,
    "setrlimit": 164, "getrusage": 165, "umask": 166, "getcpu": 168, "gettimeofday": 169,
    "getpid": 172, "getppid": 173, "getuid": 174, "geteuid": 175, "getgid": 176, "getegid": 177,
    "gettid": 178, "sendto": 206, "recvfrom": 207, "recvmsg": 212, "brk": 214, "munmap": 215,
    "mremap": 216,
    "mmap": 222, "fadvise64": 223, "mprotect": 226, "msync": 227, "madvise": 233,
    "rt_tgsigqueueinfo": 240, "prlimit64": 261, "renameat2": 276, "getrandom": 278, "preadv2": 286,
    "pwritev2": 287, "statx": 291, "close_range": 436, "faccessat2": 439,
}  # fmt: skip

# --- BPF: opcodes, return values, struct seccomp_data

AUDIT_ARCH = {
    "x86_64": 0xC000003E,  # EM_X86_64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE
    "aarch64": 0xC00000B7,  # EM_AARCH64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE
}
_TABLES = {"x86_64": _X86_64, "aarch64": _AARCH64}
_MACHINES = {"x86_64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}
X32_SYSCALL_BIT = 0x40000000

BPF_LD_W_ABS = 0x00 | 0x00 | 0x20  # BPF_LD | BPF_W | BPF_ABS
BPF_JA = 0x05 | 0x00  # BPF_JMP | BPF_JA
BPF_JEQ_K = 0x05 | 0x10 | 0x00  # BPF_JMP | BPF_JEQ | BPF_K
BPF_JGE_K = 0x05 | 0x30 | 0x00  # BPF_JMP | BPF_JGE | BPF_K
BPF_RET_K = 0x06 | 0x00
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
RET_EPERM = SECCOMP_RET_ERRNO | errno.EPERM
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2

# struct seccomp_data {int nr; u32 arch; u64 ip; u64 args[6]}, little-endian on both arches.
_OFF_NR, _OFF_ARCH, _OFF_ARGS = 0, 4, 16
_LEAF_SIZE = 4  # syscalls compared one by one at the bottom of the search tree


class Insn(NamedTuple):
    """One classic BPF instruction (struct sock_filter)."""

    code: int
    jt: int
    jf: int
    k: int


# struct sock_filter {u16 code; u8 jt; u8 jf; u32 k}: packed with struct, because building
# hundreds of ctypes structures costs a fraction of a millisecond in a freshly forked child.
_SOCK_FILTER = struct.Struct("=HBBI")


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.c_void_p)]


# --- a tiny assembler: jumps name labels, resolved to forward offsets at the end


@dataclasses.dataclass
class _Op:
    code: int
    k: int = 0
    jt: str | None = None  # None: fall through to the next instruction
    jf: str | None = None


class _Program:
    def __init__(self) -> None:
        self.items: list[_Op | str] = []
        self._labels = 0

    def label(self) -> str:
        self._labels += 1
        return f"L{self._labels}"

    def here(self, label: str) -> None:
        self.items.append(label)

    def op(self, code: int, k: int = 0, jt: str | None = None, jf: str | None = None) -> None:
        self.items.append(_Op(code, k, jt, jf))

    def ret(self, action: int) -> None:
        self.op(BPF_RET_K, action)

    def assemble(self) -> list[Insn]:
        where: dict[str, int] = {}
        ops: list[_Op] = []
        for item in self.items:
            if isinstance(item, str):
                where[item] = len(ops)
            else:
                ops.append(item)

        def offset(i: int, label: str | None, limit: int) -> int:
            if label is None:
                return 0
            distance = where[label] - i - 1
            if not 0 <= distance <= limit:
                raise ValueError(f"BPF jump from {i} to {label} out of range ({distance})")
            return distance

        program = []
        for i, op in enumerate(ops):
            if op.code == BPF_JA:
                program.append(Insn(op.code, 0, 0, offset(i, op.jt, 0xFFFFFFFF)))
            else:
                program.append(Insn(op.code, offset(i, op.jt, 255), offset(i, op.jf, 255), op.k))
        return program


# --- building the filter


def _machine(machine: str) -> str:
    if machine not in _MACHINES:
        raise KeyError(f"no syscall table for {machine}")
    return _MACHINES[machine]


def allowed_names(machine: str) -> list[str]:
    """The syscalls the filter lets through on ``machine`` (some only with certain arguments)."""
    table = _TABLES[_machine(machine)]
    return sorted({name for group in _ALLOWED.values() for name in group if name in table})


def describe(machine: str) -> str:
    """One line for reports: the filter's size and what it scopes."""
    return f"allow-list of {len(allowed_names(machine))} syscalls, pid-scoped calls only on self"


def _arg_block(prog: _Program, rules: tuple[_Arg, ...], self_pid: int) -> None:
    """Allow when every rule holds, else EPERM. Ends in a return: the accumulator is spent."""
    deny = prog.label()
    for rule in rules:
        values = tuple(self_pid if v == _SELF else v for v in rule.values)
        assert all(0 <= v <= 0xFFFFFFFF for v in values)  # the high word must be 0 for each
        lo, hi = _OFF_ARGS + 8 * rule.index, _OFF_ARGS + 8 * rule.index + 4
        prog.op(BPF_LD_W_ABS, hi)
        prog.op(BPF_JEQ_K, 0, jf=deny)
        prog.op(BPF_LD_W_ABS, lo)
        if rule.below:
            prog.op(BPF_JGE_K, rule.below, jt=deny)
            continue
        holds = prog.label()
        for value in values[:-1]:
            prog.op(BPF_JEQ_K, value, jt=holds)
        prog.op(BPF_JEQ_K, values[-1], jf=deny)
        prog.here(holds)
    prog.ret(SECCOMP_RET_ALLOW)
    prog.here(deny)
    prog.ret(RET_EPERM)


def _search(prog: _Program, entries: list[tuple[int, str]], self_pid: int) -> None:
    """A binary search on the syscall number (in the accumulator) over sorted ``entries``."""
    if len(entries) > _LEAF_SIZE:
        middle = len(entries) // 2
        upper, lower = prog.label(), prog.label()
        # JGE reaches only 255 instructions ahead: a BPF_JA (32-bit offset) leads to the upper half.
        prog.op(BPF_JGE_K, entries[middle][0], jf=lower)
        prog.op(BPF_JA, jt=upper)
        prog.here(lower)
        _search(prog, entries[:middle], self_pid)
        prog.here(upper)
        _search(prog, entries[middle:], self_pid)
        return
    allow = prog.label()
    blocks = []
    for nr, name in entries:
        if name in _ARG_RULES:
            blocks.append((block := prog.label(), name))
            prog.op(BPF_JEQ_K, nr, jt=block)
        else:
            prog.op(BPF_JEQ_K, nr, jt=allow)
    prog.ret(RET_EPERM)
    prog.here(allow)
    prog.ret(SECCOMP_RET_ALLOW)
    for block, name in blocks:
        prog.here(block)
        _arg_block(prog, _ARG_RULES[name], self_pid)


def build_filter(machine: str, self_pid: int) -> list[Insn]:
    """The BPF program for ``machine`` ("x86_64", "aarch64"): right arch or die, then the allow-list."""
    machine = _machine(machine)
    if not 0 < self_pid <= 0xFFFFFFFF:
        raise ValueError(f"self_pid must be a real pid, got {self_pid}")
    table = _TABLES[machine]
    prog = _Program()
    prog.op(BPF_LD_W_ABS, _OFF_ARCH)
    prog.op(BPF_JEQ_K, AUDIT_ARCH[machine], jt=(arch_ok := prog.label()))
    prog.ret(SECCOMP_RET_KILL_PROCESS)
    prog.here(arch_ok)
    prog.op(BPF_LD_W_ABS, _OFF_NR)
    if machine == "x86_64":
        # x32 syscalls reach the same kernel with other numbers: refuse the whole ABI.
        prog.op(BPF_JGE_K, X32_SYSCALL_BIT, jf=(native := prog.label()))
        prog.ret(SECCOMP_RET_KILL_PROCESS)
        prog.here(native)
    _search(prog, sorted((table[name], name) for name in allowed_names(machine)), self_pid)
    return prog.assemble()


# --- installing it

#: The packed program prepare_seccomp built for a pid, waiting for apply_seccomp.
_prepared: dict[int, bytes] = {}


def _packed(self_pid: int) -> tuple[bytes, str]:
    """The program for this machine as struct sock_filter bytes, and its description."""
    # oslayers re-exports apply_seccomp (and holds the shared kernel-call helpers), so it is
    # imported here and not at the top.
    from rlm_runtime.sandbox import oslayers

    oslayers._require_linux()
    if self_pid <= 0:
        raise ValueError(f"self_pid must be a real pid, got {self_pid}")
    machine = os.uname().machine
    # A 32-bit Python on a 64-bit kernel makes i386/arm syscalls: the arch check would kill it.
    if machine not in _MACHINES or ctypes.sizeof(ctypes.c_void_p) != 8:
        raise oslayers.LayerUnavailable(f"no syscall table for {machine} ({8 * ctypes.sizeof(ctypes.c_void_p)}-bit process)")
    code = _prepared.pop(self_pid, None)
    if code is None:
        code = b"".join(_SOCK_FILTER.pack(*insn) for insn in build_filter(machine, self_pid))
    return code, describe(machine)


def prepare_seccomp(self_pid: int) -> None:
    """Build the program ahead of ``apply_seccomp`` (about 1 ms), so installing it is quick.

    A spare worker calls this while it waits for a session: the cost is then not paid when
    a session asks for a worker. Nothing is installed.
    """
    _prepared.clear()
    _prepared[self_pid] = _packed(self_pid)[0]


def apply_seccomp(self_pid: int) -> str:
    """Install the allow-list filter for good (it is inherited and cannot be removed).

    Every call not in the allow-list fails with EPERM: sockets, connect/bind/listen/accept,
    exec, every way to create a process or thread (``clone3`` too, so glibc does not fall
    back), ptrace and cross-process memory access, pidfd tricks, mounts and namespaces,
    keyrings, bpf, perf, io_uring, modules, uid/gid/capability changes, SysV IPC, prctl.
    Calls that take a pid work only on ``self_pid`` (or 0 meaning the caller): a worker
    cannot signal, renice, re-limit, pin or inspect another process, the host and other
    workers of the same uid included. A syscall from another ABI (i386, x32) kills the
    process. This sets no_new_privs, irrevocably.

    Args:
        self_pid: this process's pid, the only target pid-scoped calls may name.

    Returns:
        A one-line description of the filter, for the layer report.

    Raises:
        LayerUnavailable: not Linux, or an architecture without a table here.
        OSError: the kernel refused the filter.
    """
    from rlm_runtime.sandbox import oslayers

    code, description = _packed(self_pid)
    buffer = ctypes.create_string_buffer(code, len(code))
    prog = _SockFprog(len(code) // _SOCK_FILTER.size, ctypes.addressof(buffer))
    oslayers.set_no_new_privs()
    try:
        oslayers._prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog))
    except OSError as e:
        if e.errno == errno.EINVAL:
            raise oslayers.LayerUnavailable("kernel has no seccomp filter mode (EINVAL)") from e
        raise
    return description
