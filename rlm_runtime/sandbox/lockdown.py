"""How a worker process takes away its own powers before running any user code.

Two steps. ``detach`` runs in a fresh spare (config-independent, so it is paid before a
session asks for a worker); ``lock_down`` runs when the session's ``init`` frame arrives.
Each layer is best effort and reported: the host decides what to tell the user, and
``rlm sandbox doctor`` shows the report. Runs in the worker only.
"""

from __future__ import annotations

import os
import resource
import signal
import sys
from typing import Any

from rlm_runtime.sandbox import oslayers, seccomp

_MIB = 1024 * 1024
_LANDLOCK_SCOPE_ABI = 6  # the first Landlock ABI that scopes signals and abstract unix sockets
_layers: dict[str, dict[str, Any]] = {}
#: The address-space limit set for this worker (0 until lock_down), reported to the host.
AS_LIMIT = 0


def _record(name: str, active: bool, detail: str) -> None:
    _layers[name] = {"active": active, "detail": detail}


def _try(name: str, fn: Any, *args: Any, ok: str = "") -> Any:
    try:
        result = fn(*args)
    except (OSError, AttributeError) as e:
        _record(name, False, str(e) or type(e).__name__)
        return None
    _record(name, True, result if isinstance(result, str) else ok or "active")
    return result


def detach(keep_fd: int) -> None:
    """Own session, no inherited descriptors, quiet stdio, no network. Spare-time work."""
    os.setsid()
    _record("process_group", True, f"own session and process group {os.getpgid(0)}")
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    maxfd = max(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 1024)
    if maxfd == resource.RLIM_INFINITY:
        maxfd = 65536
    os.closerange(3, keep_fd)
    os.closerange(keep_fd + 1, maxfd)
    _record("closed_fds", True, "only stdio (/dev/null) and the channel are open")
    if sys.platform.startswith("linux"):
        _network_namespace()
        try:
            seccomp.prepare_seccomp(os.getpid())  # lock_down installs it; building it costs ~1 ms
        except (OSError, ValueError):
            pass  # apply_seccomp tries again, and reports why not
    else:
        _record("network_namespace", False, "not Linux")
        _record("user_namespace", False, "not Linux")


def _network_namespace() -> None:
    root = os.geteuid() == 0
    try:
        with_user = oslayers.unshare_network()
    except OSError as e:
        _record("network_namespace", False, str(e) or type(e).__name__)
        _record("user_namespace", False, "not needed as root" if root else f"unavailable: {e}")
        return
    _record("network_namespace", True, "empty network namespace (loopback down)")
    if with_user:
        uid = os.geteuid()
        _record("user_namespace", True, f"own user namespace; uid {uid} maps to itself, so it is still the host's user")
    else:
        _record("user_namespace", False, "not needed as root: the worker gets its own uid")


def lock_down(msg: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Apply the session's limits and the remaining OS layers; return every layer's status."""
    tmpdir = msg["tmpdir"]
    os.chdir(tmpdir)
    _record("private_cwd", True, tmpdir)
    os.environ.clear()
    if msg.get("tiktoken_cache_dir"):
        from rlm_runtime.context import tokens

        tokens.CACHE_DIR = msg["tiktoken_cache_dir"]
    _record("empty_environment", len(os.environ) == 0, "no variables of the host's environment")
    limits = msg["limits"]
    global AS_LIMIT
    AS_LIMIT = _vm_size() + int(limits["memory_mb"]) * _MIB
    applied = apply_rlimits(limits, _vm_size())
    _record("rlimits", bool(applied), ", ".join(applied) or "none could be set")
    linux = sys.platform.startswith("linux")
    if linux:
        root = os.geteuid() == 0
        owner = oslayers.worker_uid(os.getpid()) if root else os.geteuid()
        _try("scratch_quota", oslayers.mount_scratch, tmpdir, int(limits.get("scratch_mb", 16)), owner,
             owner if root else os.getegid())
        abi = _try("landlock", _landlock, list(msg.get("read_paths", [])), [tmpdir])
        _record_signal_scope(abi)
        uid = oslayers.worker_uid(os.getpid())
        dropped = _try("drop_privileges", oslayers.drop_privileges, uid, uid, ok=f"running as per-worker uid and gid {uid}")
        if dropped is False:
            _record("drop_privileges", False, "not root: already unprivileged")
        _record_uid_separation(bool(dropped))
        if dropped or os.geteuid() != 0:
            # Counts processes per real uid, so only meaningful once we are not root.
            try:
                resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
                _record("rlimit_nproc", True, "no new processes (uid is not root)")
            except (ValueError, OSError) as e:
                _record("rlimit_nproc", False, str(e))
        else:
            _record("rlimit_nproc", False, "ignored for root (the privilege drop failed)")
        # Changing credentials clears the parent-death signal, so it is set after the drop.
        _try("parent_death_signal", oslayers.set_parent_death_signal, signal.SIGKILL, ok="SIGKILL when the zygote dies")
        _try("dumpable", oslayers.set_dumpable, False, ok="PR_SET_DUMPABLE=0")
        _try("no_new_privs", oslayers.set_no_new_privs, ok="PR_SET_NO_NEW_PRIVS=1")
        _try("seccomp", seccomp.apply_seccomp, os.getpid())
    else:
        for name in ("scratch_quota", "landlock", "landlock_signal_scope", "seccomp", "drop_privileges", "uid_separation",
                     "dumpable", "no_new_privs"):
            _record(name, False, "not Linux")
    return dict(_layers)


def _landlock(read_only: list[str], read_write: list[str]) -> str:
    abi = oslayers.apply_landlock(read_only, read_write)
    return f"ABI {abi}"


def _record_signal_scope(landlock: str | None) -> None:
    if landlock is None:
        _record("landlock_signal_scope", False, "no Landlock")
        return
    abi = int(landlock.split()[-1])
    if abi >= _LANDLOCK_SCOPE_ABI:
        _record("landlock_signal_scope", True, f"signals and abstract unix sockets reach only the worker itself (ABI {abi})")
    else:
        _record("landlock_signal_scope", False, f"Landlock ABI {abi}: signal scoping needs ABI 6 (Linux 6.12)")


def _record_uid_separation(dropped: bool) -> None:
    uid = os.geteuid()
    if dropped:
        _record("uid_separation", True, f"per-worker uid {uid}: no other live process has it")
        return
    how = "its user namespace maps it to itself" if _layers.get("user_namespace", {}).get("active") else "no user namespace"
    _record("uid_separation", False, f"none: the worker keeps the host's uid {uid} ({how}); seccomp and Landlock keep it off "
            "other processes of that user")


def _vm_size() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def apply_rlimits(limits: dict[str, Any], baseline_vm_bytes: int) -> list[str]:
    """Set the worker's rlimits; return the names that took effect.

    The memory cap is added to the address space the worker already has, because a forked
    interpreter maps tens of MB before any user code runs.
    """
    applied = []

    def _set(name: str, soft: int, hard: int | None = None) -> None:
        which = getattr(resource, name, None)
        if which is None:
            return
        hard = soft if hard is None else hard
        hard_now = resource.getrlimit(which)[1]
        if hard_now != resource.RLIM_INFINITY:
            hard = min(hard, hard_now)
            soft = min(soft, hard)
        try:
            resource.setrlimit(which, (soft, hard))
            applied.append(name)
        except (ValueError, OSError):
            pass

    _set("RLIMIT_CORE", 0)
    _set("RLIMIT_NOFILE", int(limits["open_files"]))
    _set("RLIMIT_FSIZE", int(limits["file_size_mb"]) * _MIB)
    _set("RLIMIT_CPU", int(limits["worker_cpu_s"]))
    # macOS accepts RLIMIT_AS but does not enforce it; the host's RSS watchdog covers that.
    _set("RLIMIT_AS", baseline_vm_bytes + int(limits["memory_mb"]) * _MIB)
    return applied


def set_cell_cpu_limit(limits: dict[str, Any], used_cpu_s: float) -> None:
    """Lower the soft CPU limit so this cell alone cannot burn much more than its timeout.

    SIGXCPU at the soft limit ends a worker stuck inside one C call that no Python-level
    timeout can interrupt, even if the host were gone.
    """
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    soft = int(used_cpu_s + float(limits["cell_timeout_s"]) + float(limits["kill_grace_s"])) + 2
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    except (ValueError, OSError):
        pass
