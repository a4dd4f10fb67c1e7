"""Linux kernel lock-down layers a worker applies to itself before running untrusted code.

Each layer is one function over a raw syscall or ``prctl`` (ctypes only: no compiled
extension, no libseccomp). The worker is a single-threaded child forked from the zygote,
and every function here is safe to call there: none starts a thread.

The order matters, because later layers take away what earlier ones need:

1. ``set_parent_death_signal`` first, to shrink the window where the parent may die
   unnoticed (``drop_privileges`` keeps it, although the kernel clears it on a uid change),
2. ``unshare_network`` (needs root, or unprivileged user namespaces),
3. ``drop_privileges`` (root only; before seccomp, which denies ``setuid``),
4. ``set_dumpable(False)`` (a uid change resets it to the ``suid_dumpable`` sysctl),
5. ``apply_landlock`` (file system, TCP and signal scoping),
6. ``apply_seccomp`` last (it denies ``unshare``, ``setuid``, ``fork`` ...).

``probe`` tries every layer in a throwaway child and reports what this machine offers.
On other operating systems the module imports cleanly; the layers raise
``LayerUnavailable`` and ``probe`` reports every layer inactive.
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import functools
import json
import os
import select
import signal
import socket
import stat
import struct
import sys
import time
from collections.abc import Callable
from typing import NamedTuple, NoReturn

__all__ = [
    "LayerStatus",
    "LayerUnavailable",
    "apply_landlock",
    "apply_seccomp",
    "drop_privileges",
    "probe",
    "set_dumpable",
    "set_no_new_privs",
    "set_parent_death_signal",
    "unshare_network",
]


class LayerUnavailable(OSError):
    """The kernel or OS does not offer this layer; the message says why."""


@dataclasses.dataclass(frozen=True)
class LayerStatus:
    """Whether one layer works on this machine, and why (or why not)."""

    name: str
    active: bool
    detail: str


# --- prctl, unshare and Landlock constants (linux/prctl.h, linux/sched.h, linux/landlock.h)

PR_SET_PDEATHSIG = 1
PR_GET_PDEATHSIG = 2
PR_GET_DUMPABLE = 3
PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
PR_SET_NO_NEW_PRIVS = 38
PR_GET_NO_NEW_PRIVS = 39
SECCOMP_MODE_FILTER = 2

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000

# Landlock syscalls share one number on every architecture (they came after the unification).
NR_LANDLOCK_CREATE_RULESET = 444
NR_LANDLOCK_ADD_RULE = 445
NR_LANDLOCK_RESTRICT_SELF = 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1

FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
FS_IOCTL_DEV = 1 << 15  # ABI 5
FS_ABI1_ALL = (1 << 13) - 1  # EXECUTE .. MAKE_SYM
# Rights that make sense on a regular file; a rule on a file may carry no others (EINVAL).
FS_FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # the kernel struct is __attribute__((packed)): 12 bytes
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


# --- seccomp: syscall tables, BPF opcodes and the deny-list

# Numbers from arch/x86/entry/syscalls/syscall_64.tbl and include/uapi/asm-generic/unistd.h
# (the table aarch64 uses). Only the syscalls the filter names are listed.
_X86_64 = {
    "socket": 41, "connect": 42, "accept": 43, "bind": 49, "listen": 50, "accept4": 288,
    "clone": 56, "fork": 57, "vfork": 58, "execve": 59, "execveat": 322, "clone3": 435,
    "kill": 62, "tkill": 200, "tgkill": 234,
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
    "pidfd_open": 434, "pidfd_send_signal": 424, "pidfd_getfd": 438,
    "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
    "unshare": 272, "setns": 308,
    "keyctl": 250, "add_key": 248, "request_key": 249,
    "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
    "init_module": 175, "finit_module": 313, "delete_module": 176,
    "kexec_load": 246, "kexec_file_load": 320, "reboot": 169, "swapon": 167, "swapoff": 168,
    "setuid": 105, "setgid": 106, "setreuid": 113, "setregid": 114, "setresuid": 117,
    "setresgid": 119, "setgroups": 116, "setfsuid": 122, "setfsgid": 123, "capset": 126,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "personality": 135, "open_by_handle_at": 304, "name_to_handle_at": 303,
    "mknod": 133, "mknodat": 259, "quotactl": 179, "acct": 163,
    "settimeofday": 164, "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159,
    "syslog": 103, "ioperm": 173, "iopl": 172, "vhangup": 153, "lookup_dcookie": 212,
    "move_pages": 279, "mbind": 237, "migrate_pages": 256, "fanotify_init": 300,
    "memfd_secret": 447,
}  # fmt: skip

# aarch64 has no fork, vfork, mknod, ioperm or iopl (glibc uses clone and mknodat).
_AARCH64 = {
    "socket": 198, "connect": 203, "accept": 202, "bind": 200, "listen": 201, "accept4": 242,
    "clone": 220, "execve": 221, "execveat": 281, "clone3": 435,
    "kill": 129, "tkill": 130, "tgkill": 131,
    "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271,
    "pidfd_open": 434, "pidfd_send_signal": 424, "pidfd_getfd": 438,
    "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51,
    "unshare": 97, "setns": 268,
    "keyctl": 219, "add_key": 217, "request_key": 218,
    "bpf": 280, "perf_event_open": 241, "userfaultfd": 282,
    "init_module": 105, "finit_module": 273, "delete_module": 106,
    "kexec_load": 104, "kexec_file_load": 294, "reboot": 142, "swapon": 224, "swapoff": 225,
    "setuid": 146, "setgid": 144, "setreuid": 145, "setregid": 143, "setresuid": 147,
    "setresgid": 149, "setgroups": 159, "setfsuid": 151, "setfsgid": 152, "capset": 91,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "personality": 92, "open_by_handle_at": 265, "name_to_handle_at": 264,
    "mknodat": 33, "quotactl": 60, "acct": 89,
    "settimeofday": 170, "clock_settime": 112, "clock_adjtime": 266, "adjtimex": 171,
    "syslog": 116, "vhangup": 58, "lookup_dcookie": 18,
    "move_pages": 239, "mbind": 235, "migrate_pages": 238, "fanotify_init": 262,
    "memfd_secret": 447,
}  # fmt: skip

# Syscalls that may only target the worker itself (arg0 == its pid); all others are denied.
_SIGNAL_SYSCALLS = ("kill", "tkill", "tgkill")
_DENIED = tuple(name for name in _X86_64 if name not in _SIGNAL_SYSCALLS)

AUDIT_ARCH_X86_64 = 0xC000003E  # EM_X86_64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE
AUDIT_ARCH_AARCH64 = 0xC00000B7  # EM_AARCH64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE
X32_SYSCALL_BIT = 0x40000000

BPF_LD_W_ABS = 0x00 | 0x00 | 0x20  # BPF_LD | BPF_W | BPF_ABS
BPF_JEQ_K = 0x05 | 0x10 | 0x00  # BPF_JMP | BPF_JEQ | BPF_K
BPF_JGE_K = 0x05 | 0x30 | 0x00  # BPF_JMP | BPF_JGE | BPF_K
BPF_RET_K = 0x06 | 0x00
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
RET_EPERM = SECCOMP_RET_ERRNO | errno.EPERM

# Offsets in struct seccomp_data {int nr; u32 arch; u64 ip; u64 args[6]}, little-endian.
_OFF_NR, _OFF_ARCH, _OFF_ARG0_LO, _OFF_ARG0_HI = 0, 4, 16, 20


@dataclasses.dataclass(frozen=True)
class _Arch:
    audit_arch: int
    syscalls: dict[str, int]
    has_x32: bool


_ARCHES = {
    "x86_64": _Arch(AUDIT_ARCH_X86_64, _X86_64, has_x32=True),
    "aarch64": _Arch(AUDIT_ARCH_AARCH64, _AARCH64, has_x32=False),
    "arm64": _Arch(AUDIT_ARCH_AARCH64, _AARCH64, has_x32=False),
}


class _Insn(NamedTuple):
    """One classic BPF instruction (struct sock_filter)."""

    code: int
    jt: int
    jf: int
    k: int


# struct sock_filter {u16 code; u8 jt; u8 jf; u32 k}: packed with struct, because building
# ~170 ctypes structures costs a few hundred microseconds in a freshly forked child.
_SOCK_FILTER = struct.Struct("=HBBI")


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.c_void_p)]


def _stmt(code: int, k: int) -> _Insn:
    return _Insn(code, 0, 0, k)


def _jump(code: int, k: int, jt: int, jf: int) -> _Insn:
    return _Insn(code, jt, jf, k)


# --- calling the kernel


def _require_linux() -> None:
    if not sys.platform.startswith("linux"):
        raise LayerUnavailable(f"not Linux ({sys.platform})")


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.prctl.restype = ctypes.c_int
    libc.unshare.restype = ctypes.c_int
    return libc


def _raise_errno(what: str) -> NoReturn:
    code = ctypes.get_errno()
    raise OSError(code, f"{what}: {os.strerror(code)}")


def _prctl(option: int, arg2: int = 0, arg3: int = 0) -> int:
    # Variadic: pass every argument as a full unsigned long, and zeros where the kernel
    # insists on them (PR_SET_NO_NEW_PRIVS fails with EINVAL on garbage in args 3-5).
    args = [ctypes.c_ulong(a) for a in (arg2, arg3, 0, 0)]
    result: int = _libc().prctl(ctypes.c_int(option), *args)
    if result < 0:
        _raise_errno(f"prctl({option})")
    return result


def _syscall(nr: int, *args: int) -> int:
    result: int = _libc().syscall(ctypes.c_long(nr), *(ctypes.c_long(a) for a in args))
    if result < 0:
        _raise_errno(f"syscall {nr}")
    return result


def _unshare(flags: int) -> None:
    if _libc().unshare(ctypes.c_int(flags)) < 0:
        _raise_errno(f"unshare({flags:#x})")


# --- process flags


def set_dumpable(flag: bool) -> None:
    """Allow or forbid core dumps and ptrace-attach by same-uid processes (PR_SET_DUMPABLE)."""
    _require_linux()
    _prctl(PR_SET_DUMPABLE, 1 if flag else 0)


def set_no_new_privs() -> None:
    """Make execve unable to grant privileges, for this process and its children, for good."""
    _require_linux()
    _prctl(PR_SET_NO_NEW_PRIVS, 1)


def set_parent_death_signal(sig: int) -> None:
    """Have the kernel send ``sig`` to this process when its parent thread exits.

    The parent may already be gone when this runs: callers should compare
    ``os.getppid()`` with the expected parent afterwards. The kernel clears this setting
    when the uid changes; ``drop_privileges`` sets it again.
    """
    _require_linux()
    _prctl(PR_SET_PDEATHSIG, sig)


# --- network namespace


def unshare_network() -> None:
    """Move this process into a new, empty network namespace.

    Only a loopback interface exists there, and it is down, so nothing (not even
    127.0.0.1) can be reached. As root this is a plain ``unshare(CLONE_NEWNET)``. Without
    root it falls back to a new user namespace as well, mapping the current uid and gid to
    themselves. Root does not take that path: its uid would map to 0 in the new user
    namespace and a later ``drop_privileges`` could not switch to an unmapped uid.

    Raises:
        LayerUnavailable: neither way works here; the message says why.
        OSError: the user namespace was created but its id maps could not be written.
    """
    _require_linux()
    try:
        _unshare(CLONE_NEWNET)
        return
    except OSError as e:
        if e.errno != errno.EPERM or os.geteuid() == 0:
            raise LayerUnavailable(f"unshare(CLONE_NEWNET) failed: {e.strerror}") from e
        denied = e
    uid, gid = os.geteuid(), os.getegid()
    try:
        _unshare(CLONE_NEWUSER | CLONE_NEWNET)
    except OSError as e:
        reason = f"not root and unshare(CLONE_NEWNET) denied ({denied.strerror})"
        raise LayerUnavailable(f"{reason}; no user namespace either ({e.strerror})") from e
    # A non-dumpable process's /proc files belong to root, which is unmapped in the new
    # namespace: the id maps would be unwritable. Be dumpable just while writing them.
    dumpable = _prctl(PR_GET_DUMPABLE)
    set_dumpable(True)
    try:
        # setgroups must be denied before an unprivileged process may write gid_map.
        _write_proc("/proc/self/setgroups", "deny")
        _write_proc("/proc/self/uid_map", f"{uid} {uid} 1")
        _write_proc("/proc/self/gid_map", f"{gid} {gid} 1")
    finally:
        set_dumpable(bool(dumpable))


def _write_proc(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


# --- Landlock


def _landlock_abi() -> int:
    try:
        return _syscall(NR_LANDLOCK_CREATE_RULESET, 0, 0, LANDLOCK_CREATE_RULESET_VERSION)
    except OSError as e:
        reasons = {
            errno.ENOSYS: "kernel has no Landlock (ENOSYS)",
            errno.EOPNOTSUPP: "Landlock is disabled at boot (EOPNOTSUPP)",
        }
        if e.errno in reasons:
            raise LayerUnavailable(reasons[e.errno]) from e
        raise


def _handled_fs(abi: int) -> int:
    rights = FS_ABI1_ALL
    if abi >= 2:
        rights |= FS_REFER
    if abi >= 3:
        rights |= FS_TRUNCATE
    if abi >= 5:
        rights |= FS_IOCTL_DEV
    return rights


def _ruleset_attr(abi: int) -> tuple[_RulesetAttr, int]:
    """The ruleset attribute and the size to announce: only fields this ABI knows."""
    attr = _RulesetAttr(handled_access_fs=_handled_fs(abi))
    size = _RulesetAttr.handled_access_net.offset
    if abi >= 4:
        # Handled with no rule: every TCP bind and connect is denied.
        attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP
        size = _RulesetAttr.scoped.offset
    if abi >= 6:
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
        size = ctypes.sizeof(_RulesetAttr)
    return attr, size


def _add_path_rule(ruleset_fd: int, path: str, dir_rights: int, handled: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return  # nothing there to grant
    try:
        rights = dir_rights & handled
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= FS_FILE_RIGHTS
        rule = _PathBeneathAttr(allowed_access=rights, parent_fd=fd)
        address = ctypes.addressof(rule)
        _syscall(NR_LANDLOCK_ADD_RULE, ruleset_fd, LANDLOCK_RULE_PATH_BENEATH, address, 0)
    except OSError as e:
        raise OSError(e.errno, f"landlock_add_rule({path!r}): {e.strerror}") from e
    finally:
        os.close(fd)


def apply_landlock(read_only: list[str], read_write: list[str]) -> int:
    """Confine this process's file system access, TCP and signals with Landlock.

    Every access right the running ABI knows is handled, so whatever no rule grants is
    denied. ``read_only`` paths get reading and executing (files also below a directory);
    ``read_write`` paths get every right. Missing paths are skipped. On ABI 4 and later all
    TCP bind and connect is denied; on ABI 6 and later the process can no longer signal
    processes, or reach abstract unix sockets, outside its Landlock domain (its parent).

    Landlock requires no_new_privs (or CAP_SYS_ADMIN): this sets it, irrevocably.

    Args:
        read_only: files or directories to allow reading and executing under.
        read_write: files or directories to allow everything under.

    Returns:
        The Landlock ABI version of the running kernel.

    Raises:
        LayerUnavailable: not Linux, or the kernel has no (enabled) Landlock.
        OSError: a rule could not be added, or restricting failed.
    """
    _require_linux()
    abi = _landlock_abi()
    attr, size = _ruleset_attr(abi)
    ruleset_fd = _syscall(NR_LANDLOCK_CREATE_RULESET, ctypes.addressof(attr), size, 0)
    try:
        handled = attr.handled_access_fs
        for path in read_only:
            _add_path_rule(ruleset_fd, path, FS_READ_FILE | FS_READ_DIR | FS_EXECUTE, handled)
        for path in read_write:
            _add_path_rule(ruleset_fd, path, handled, handled)
        set_no_new_privs()
        _syscall(NR_LANDLOCK_RESTRICT_SELF, ruleset_fd, 0)
    finally:
        os.close(ruleset_fd)
    return abi


# --- seccomp


def _current_arch() -> _Arch:
    machine = os.uname().machine
    if machine not in _ARCHES:
        raise LayerUnavailable(f"no syscall table for {machine}")
    # A 32-bit Python on a 64-bit kernel makes i386/arm syscalls: the arch check would kill it.
    if ctypes.sizeof(ctypes.c_void_p) != 8:
        raise LayerUnavailable(f"32-bit process on {machine}: no syscall table")
    return _ARCHES[machine]


def _build_filter(arch: _Arch, self_pid: int) -> list[_Insn]:
    """The BPF program: right arch or die, deny-listed syscalls get EPERM, rest allowed."""
    prog = [
        _stmt(BPF_LD_W_ABS, _OFF_ARCH),
        _jump(BPF_JEQ_K, arch.audit_arch, 1, 0),
        _stmt(BPF_RET_K, SECCOMP_RET_KILL_PROCESS),
        _stmt(BPF_LD_W_ABS, _OFF_NR),
    ]
    if arch.has_x32:
        # x32 syscalls reach the same kernel with other numbers: refuse the whole ABI.
        prog += [
            _jump(BPF_JGE_K, X32_SYSCALL_BIT, 0, 1),
            _stmt(BPF_RET_K, SECCOMP_RET_KILL_PROCESS),
        ]
    for name in _DENIED:
        if name in arch.syscalls:  # x86-only syscalls are absent on aarch64
            prog += [
                _jump(BPF_JEQ_K, arch.syscalls[name], 0, 1),
                _stmt(BPF_RET_K, RET_EPERM),
            ]
    pid_lo, pid_hi = self_pid & 0xFFFFFFFF, self_pid >> 32
    for name in _SIGNAL_SYSCALLS:
        # Each block returns, so nr need not be reloaded after it loads arg0.
        prog += [
            _jump(BPF_JEQ_K, arch.syscalls[name], 0, 6),
            _stmt(BPF_LD_W_ABS, _OFF_ARG0_LO),
            _jump(BPF_JEQ_K, pid_lo, 0, 3),
            _stmt(BPF_LD_W_ABS, _OFF_ARG0_HI),
            _jump(BPF_JEQ_K, pid_hi, 0, 1),
            _stmt(BPF_RET_K, SECCOMP_RET_ALLOW),
            _stmt(BPF_RET_K, RET_EPERM),
        ]
    prog.append(_stmt(BPF_RET_K, SECCOMP_RET_ALLOW))
    return prog


def apply_seccomp(self_pid: int) -> None:
    """Install the seccomp-BPF deny-list for good (it is inherited and cannot be removed).

    Denied syscalls fail with EPERM: new sockets, connect/bind/listen/accept, exec, every
    way to create a process or thread (``clone3`` too, so glibc does not fall back),
    ptrace and cross-process memory access, pidfd tricks, mounts and namespaces, keyrings,
    bpf, perf, userfaultfd, io_uring, modules, kexec, reboot, swap, uid/gid/capability
    changes, clock setting and a few more. ``kill``/``tkill``/``tgkill`` work only on
    ``self_pid``. A syscall from another ABI (i386, x32) kills the process. The rest is
    allowed: CPython needs a lot. This sets no_new_privs, irrevocably.

    Args:
        self_pid: this process's pid, the only target signals may go to.

    Raises:
        LayerUnavailable: not Linux, or an architecture without a table here.
        OSError: the kernel refused the filter.
    """
    _require_linux()
    if self_pid <= 0:
        raise ValueError(f"self_pid must be a real pid, got {self_pid}")
    instructions = _build_filter(_current_arch(), self_pid)
    code = b"".join(_SOCK_FILTER.pack(*insn) for insn in instructions)
    buffer = ctypes.create_string_buffer(code, len(code))
    prog = _SockFprog(len(instructions), ctypes.addressof(buffer))
    set_no_new_privs()
    try:
        _prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog))
    except OSError as e:
        if e.errno == errno.EINVAL:
            raise LayerUnavailable("kernel has no seccomp filter mode (EINVAL)") from e
        raise


# --- credentials


def drop_privileges(uid: int = 65534, gid: int = 65534) -> bool:
    """Switch from root to ``uid``/``gid`` for good, with no supplementary groups.

    Call it before ``apply_seccomp``, which denies the setuid family. The kernel clears
    the parent death signal on a uid change; this sets it again, so the worker still dies
    with its parent.

    Args:
        uid: the user to become (default: nobody).
        gid: the group to become (default: nogroup).

    Returns:
        True if privileges were dropped, False if not running as root (nothing to drop).
    """
    _require_linux()
    if os.geteuid() != 0:
        return False
    death_signal = _parent_death_signal()
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if death_signal:
        set_parent_death_signal(death_signal)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid):
        raise OSError(errno.EPERM, f"credentials did not change to {uid}:{gid}")
    return True


def _parent_death_signal() -> int:
    sig = ctypes.c_int(0)
    _prctl(PR_GET_PDEATHSIG, ctypes.addressof(sig))
    return sig.value


# --- probing

_Check = Callable[[], tuple[bool, str]]

PROBE_TIMEOUT_S = 5.0


def probe() -> dict[str, LayerStatus]:
    """Try every layer in a throwaway forked child and report which ones work here.

    Never raises. Call it from a single-threaded process: the children run code after
    ``fork``. A child that hangs longer than ``PROBE_TIMEOUT_S`` is killed.
    """
    if not sys.platform.startswith("linux"):
        return {name: LayerStatus(name, False, "not Linux") for name in _CHECKS}
    statuses = {}
    for name, check in _CHECKS.items():
        try:
            active, detail = _run_in_child(check, PROBE_TIMEOUT_S)
        except Exception as e:  # noqa: BLE001 (probe reports, it never raises)
            active, detail = False, f"probe failed: {e}"
        statuses[name] = LayerStatus(name, active, detail)
    return statuses


def _run_in_child(check: _Check, timeout: float) -> tuple[bool, str]:
    """Run ``check`` in a forked child; its (active, detail) comes back through a pipe."""
    read_fd, write_fd = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        raise
    if pid == 0:  # child: whatever happens, it must end here
        try:
            os.close(read_fd)
            os.write(write_fd, json.dumps(_report(check)).encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    try:
        data, timed_out = _read_until_eof(read_fd, timeout)
    finally:
        os.close(read_fd)
    if timed_out:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    if timed_out:
        return False, f"probe child hung for more than {timeout:g}s"
    if not data:
        return False, f"probe child died ({_describe_wait(status)})"
    active, detail = json.loads(data)
    return bool(active), str(detail)


def _report(check: _Check) -> tuple[bool, str]:
    try:
        return check()
    except LayerUnavailable as e:
        return False, str(e)
    except BaseException as e:  # noqa: BLE001 (the child must always report)
        return False, f"failed: {type(e).__name__}: {e}"


def _read_until_eof(fd: int, timeout: float) -> tuple[bytes, bool]:
    deadline = time.monotonic() + timeout
    chunks: list[bytes] = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return b"".join(chunks), True
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks), False
        chunks.append(chunk)


def _describe_wait(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit code {os.waitstatus_to_exitcode(status)}"


def _check_no_new_privs() -> tuple[bool, str]:
    set_no_new_privs()
    return _prctl(PR_GET_NO_NEW_PRIVS) == 1, "no_new_privs set"


def _check_dumpable() -> tuple[bool, str]:
    set_dumpable(False)
    return _prctl(PR_GET_DUMPABLE) == 0, "PR_SET_DUMPABLE 0 took effect"


def _check_network_namespace() -> tuple[bool, str]:
    before = os.readlink("/proc/self/ns/net")
    unshare_network()
    names = sorted(name for _, name in socket.if_nameindex())
    moved = os.readlink("/proc/self/ns/net") != before
    return moved and names == ["lo"], f"new network namespace; interfaces: {', '.join(names)}"


def _check_landlock() -> tuple[bool, str]:
    abi = apply_landlock(read_only=[], read_write=[])
    try:
        os.listdir("/")
    except PermissionError:
        return True, f"Landlock ABI {abi}"
    return False, f"Landlock ABI {abi} applied but / is still readable"


def _check_seccomp() -> tuple[bool, str]:
    apply_seccomp(os.getpid())
    try:
        pid = os.fork()
    except PermissionError:
        return True, "filter installed; fork denied (EPERM)"
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return False, "filter installed but fork still works"


def _check_drop_privileges() -> tuple[bool, str]:
    if os.geteuid() != 0:
        return False, "not root: nothing to drop"
    drop_privileges()
    try:
        os.setuid(0)
    except PermissionError:
        return (
            True,
            f"dropped to uid {os.geteuid()}, gid {os.getegid()}; cannot regain root",
        )
    return False, "dropped, but setuid(0) still works"


_CHECKS: dict[str, _Check] = {
    "no_new_privs": _check_no_new_privs,
    "dumpable": _check_dumpable,
    "network_namespace": _check_network_namespace,
    "landlock": _check_landlock,
    "seccomp": _check_seccomp,
    "drop_privileges": _check_drop_privileges,
}
