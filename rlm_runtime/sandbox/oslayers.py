"""Linux kernel lock-down layers a worker applies to itself before running untrusted code.

Each layer is one function over a raw syscall or ``prctl`` (ctypes only: no compiled
extension, no libseccomp). The worker is a single-threaded child forked from the zygote,
and every function here is safe to call there: none starts a thread.

The order matters, because later layers take away what earlier ones need:

1. ``set_parent_death_signal`` first, to shrink the window where the parent may die
   unnoticed (``drop_privileges`` keeps it, although the kernel clears it on a uid change),
2. ``unshare_network`` (needs root, or unprivileged user namespaces),
3. ``drop_privileges`` to ``worker_uid(pid)`` (root only; before seccomp, which denies ``setuid``),
4. ``set_dumpable(False)`` (a uid change resets it to the ``suid_dumpable`` sysctl),
5. ``apply_landlock`` (file system, TCP and signal scoping),
6. ``apply_seccomp`` last (it denies ``unshare``, ``setuid``, ``fork`` ...; the allow-list
   itself lives in ``seccomp.py``).

``probe`` tries every layer in a throwaway child and reports what this machine offers.
On other operating systems the module imports cleanly; the layers raise
``LayerUnavailable`` and ``probe`` reports every layer inactive.

What keeps one worker off other processes of the same user (the host, other workers):

* seccomp (x86_64 and aarch64): calls that take a pid work only on the worker itself, and
  the calls that reach other processes without a pid (ptrace, process_vm_*, pidfd_*,
  kcmp, F_SETOWN, SysV IPC, sockets) are not allowed at all. This is the layer that holds
  everywhere; the others are defence in depth behind it.
* a per-worker uid (host running as root): ``worker_uid(pid)`` is unique among live
  processes, so even a call seccomp let through would fail the kernel's same-user checks.
* a user namespace (host not root): it gives the worker its own empty network namespace,
  but it maps the host's uid to itself, so the kernel still sees the same user: kill,
  prlimit, setpriority and sched_setaffinity from it would be allowed by uid alone.
* Landlock: from ABI 1, ptrace-style access (ptrace, process_vm_*, kcmp, pidfd_getfd)
  to processes outside the worker's own domain is refused; from ABI 6 (Linux 6.12),
  signals (kill, tgkill, sigqueue, SIGIO) and abstract unix sockets too. It does not
  cover prlimit, setpriority, sched_setaffinity or ioprio_set.

What a worker can still do to other processes of the same user, with every layer on:
compete for CPU, memory and disk bandwidth within its rlimits; no signal, rlimit,
priority, affinity or memory access reaches them, and Landlock keeps their files and
/proc entries out of reach. Where a layer is missing the gap is specific: without
seccomp (an architecture with no table here, a 32-bit Python) a same-uid worker could
prlimit, renice or re-pin the host and its siblings (Landlock still stops ptrace, and
from ABI 6 signals); without Landlock (Linux < 5.13, or disabled) it could open any file that
user can, /proc/<pid>/ of the user's dumpable processes included. ``rlm sandbox doctor``
shows which layers hold on a machine.
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
import sys
import time
from collections.abc import Callable
from typing import NoReturn

from rlm_runtime.sandbox.seccomp import apply_seccomp

__all__ = [
    "WORKER_UID_BASE",
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
    "worker_uid",
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
PR_SET_NO_NEW_PRIVS = 38
PR_GET_NO_NEW_PRIVS = 39

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x2, 0x4, 0x8
MS_REC, MS_PRIVATE = 0x4000, 1 << 18

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
    libc.mount.restype = ctypes.c_int
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
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


def unshare_network() -> bool:
    """Move this process into a new, empty network namespace.

    Only a loopback interface exists there, and it is down, so nothing (not even
    127.0.0.1) can be reached. As root this is a plain ``unshare(CLONE_NEWNET)``. Without
    root it falls back to a new user namespace as well, mapping the current uid and gid to
    themselves. Root does not take that path: its uid would map to 0 in the new user
    namespace and a later ``drop_privileges`` could not switch to an unmapped uid.

    The user namespace separates nothing by uid: the kernel compares the same uid for kill,
    prlimit, setpriority and the like, so other processes of the user stay reachable as
    far as uids go (seccomp and Landlock are what keep the worker off them).

    Returns:
        True if a new user namespace was created as well, False for a plain network one.

    Raises:
        LayerUnavailable: neither way works here; the message says why.
        OSError: the user namespace was created but its id maps could not be written.
    """
    _require_linux()
    try:
        _unshare(CLONE_NEWNET)
        return False
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
    return True


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


# --- credentials

#: First uid (and gid) of the range workers get when the host runs as root: worker pid p runs
#: as WORKER_UID_BASE + p. pid_max is at most 4194304 (2**22), so the range ends below
#: 1_904_194_305, inside 1879048192..2147352575, which systemd's UID/GID table leaves unused
#: (above its container ranges, below its "foreign" range and 2**31). No /etc/passwd entry
#: is needed: the kernel only compares numbers.
WORKER_UID_BASE = 1_900_000_000
_PID_MAX_LIMIT = 1 << 22


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = (lambda v: v.encode() if v is not None else None)  # noqa: E731
    if _libc().mount(enc(source), enc(target), enc(fstype), flags, enc(data)) < 0:
        _raise_errno(f"mount({target!r})")


def mount_scratch(path: str, size_mb: int, uid: int, gid: int) -> str:
    """Put a private tmpfs of ``size_mb`` (and 64 files per MB) on ``path``, and enter it.

    RLIMIT_FSIZE caps one file; this caps them all, so a worker cannot fill the disk with
    many files. The mount lives in a new mount namespace of this process alone (made
    private first, so nothing propagates to the host's), and vanishes with the worker.
    Needs root, or the user namespace ``unshare_network`` may have created. Call it before
    Landlock (whose rule for ``path`` must name the new mount) and before the privilege drop.
    """
    _require_linux()
    try:
        _unshare(CLONE_NEWNS)
    except OSError as e:
        raise LayerUnavailable(f"no private mount namespace ({e.strerror})") from e
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    files = max(64, size_mb * 64)
    _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
           f"size={size_mb}m,nr_inodes={files},mode=0700,uid={uid},gid={gid}")
    os.chdir(path)  # the old cwd is the directory now hidden under the mount
    return f"private tmpfs of {size_mb} MB and {files} files on the temp dir"


def worker_uid(pid: int) -> int:
    """The uid and gid a worker with ``pid`` runs as when the host is root.

    Pids are unique among live processes of a pid namespace, so no two live workers share
    a uid and no coordination between hosts is needed. Both the worker (dropping to it)
    and the host (handing it the worker's temp dir) call this. Across pid namespaces (two
    containers sharing the host's uids) numbers can repeat: seccomp still keeps workers
    apart there.
    """
    if not 0 < pid <= _PID_MAX_LIMIT:
        raise ValueError(f"not a pid: {pid}")
    return WORKER_UID_BASE + pid


def drop_privileges(uid: int = 65534, gid: int = 65534) -> bool:
    """Switch from root to ``uid``/``gid`` for good, with no supplementary groups.

    Call it before ``apply_seccomp``, which denies the setuid family. The kernel clears
    the parent death signal on a uid change; this sets it again, so the worker still dies
    with its parent. Workers pass ``worker_uid(os.getpid())``: a uid no other process has.

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
    with_user = unshare_network()
    names = sorted(name for _, name in socket.if_nameindex())
    moved = os.readlink("/proc/self/ns/net") != before
    how = " inside a new user namespace" if with_user else ""
    return moved and names == ["lo"], f"new network namespace{how}; interfaces: {', '.join(names)}"


def _check_user_namespace() -> tuple[bool, str]:
    if os.geteuid() == 0:
        return False, "not needed as root: each worker gets its own uid instead"
    before = os.readlink("/proc/self/ns/user")
    try:
        _unshare(CLONE_NEWUSER)
    except OSError as e:
        raise LayerUnavailable(f"unprivileged user namespaces refused ({e.strerror})") from e
    moved = os.readlink("/proc/self/ns/user") != before
    return moved, f"unprivileged user namespaces work; the worker's uid {os.geteuid()} maps to itself (no uid separation)"


def _check_landlock() -> tuple[bool, str]:
    abi = apply_landlock(read_only=[], read_write=[])
    try:
        os.listdir("/")
    except PermissionError:
        return True, f"Landlock ABI {abi}"
    return False, f"Landlock ABI {abi} applied but / is still readable"


def _check_landlock_signal_scope() -> tuple[bool, str]:
    abi = apply_landlock(read_only=[], read_write=[])
    if abi < 6:
        return False, f"Landlock ABI {abi}: signal scoping needs ABI 6 (Linux 6.12)"
    try:
        os.kill(os.getppid(), 0)
    except PermissionError:
        return True, f"signals only within the worker's own domain (ABI {abi})"
    return False, f"Landlock ABI {abi} applied but the parent can still be signalled"


def _check_seccomp() -> tuple[bool, str]:
    import resource

    description = apply_seccomp(os.getpid())
    resource.prlimit(0, resource.RLIMIT_CPU)  # on itself: allowed
    try:
        resource.prlimit(os.getppid(), resource.RLIMIT_CPU)
        return False, f"{description}, but prlimit on the parent still works"
    except PermissionError:
        pass
    try:
        pid = os.fork()
    except PermissionError:
        return True, f"{description}; fork and prlimit of the parent refused (EPERM)"
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return False, f"{description}, but fork still works"


def _check_drop_privileges() -> tuple[bool, str]:
    if os.geteuid() != 0:
        return False, "not root: nothing to drop"
    uid = worker_uid(os.getpid())
    drop_privileges(uid, uid)
    try:
        os.setuid(0)
    except PermissionError:
        return True, f"dropped to per-worker uid {os.geteuid()}, gid {os.getegid()}; cannot regain root"
    return False, "dropped, but setuid(0) still works"


def _check_uid_separation() -> tuple[bool, str]:
    if os.geteuid() == 0:
        return True, f"per-worker uid: {WORKER_UID_BASE} + the worker's pid, unique among live processes"
    return False, f"none: workers keep uid {os.geteuid()}, like every other process of this user"


_CHECKS: dict[str, _Check] = {
    "no_new_privs": _check_no_new_privs,
    "dumpable": _check_dumpable,
    "network_namespace": _check_network_namespace,
    "user_namespace": _check_user_namespace,
    "landlock": _check_landlock,
    "landlock_signal_scope": _check_landlock_signal_scope,
    "seccomp": _check_seccomp,
    "drop_privileges": _check_drop_privileges,
    "uid_separation": _check_uid_separation,
}
