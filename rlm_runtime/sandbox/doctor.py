"""``rlm sandbox doctor``: which isolation layers are active here, and why not when not.

The report comes from a real worker (the layers it applied to itself), plus what the host
does for it. Nothing is claimed that was not observed. A layer that does not apply to this
host (a user namespace when the host is root: each worker gets its own uid instead; a
privilege drop when it is not root; sandbox-exec off macOS) is shown as ``[ - ]`` and not
counted as inactive.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from typing import Any

from rlm_runtime import private
from rlm_runtime.sandbox.supervisor import Sandbox

#: Layers in the order a reader should meet them, with what each protects against.
LAYER_HELP = {
    "process_boundary": "user code runs in a separate OS process, never in the host",
    "zygote_fork": "workers are forked from a pre-warmed single-threaded zygote",
    "host_not_dumpable": "other processes of the same user cannot read the host's memory or /proc/<pid>/environ",
    "empty_environment": "no API keys or other host environment variables in the worker",
    "private_cwd": "the worker's cwd is a private temp dir, removed afterwards",
    "closed_fds": "no inherited file descriptors but the channel",
    "process_group": "own session and process group, killed as a whole",
    "rlimits": "CPU, address space, open files, file size and core dumps are limited",
    "rlimit_as_enforced": "the address-space limit is enforced by the kernel",
    "rss_watchdog": "the host kills a worker whose resident memory passes the cap",
    "wall_clock_kill": "the host kills the worker's process group after timeout + grace",
    "network_namespace": "the worker has no network interfaces",
    "user_namespace": "without root, a user namespace is how the worker gets its own network namespace (its uid is still the host's)",
    "scratch_quota": "the worker's temp dir is a private tmpfs: the disk it may fill is capped in bytes and files",
    "landlock": "the worker can read only the Python stdlib and write only its temp dir",
    "landlock_signal_scope": "the worker can signal only itself (and reach no abstract unix socket outside)",
    "drop_privileges": "the worker runs as its own unprivileged uid instead of root",
    "uid_separation": "no other process shares the worker's uid, so the kernel's same-user checks refuse it too",
    "rlimit_nproc": "the worker cannot create processes (RLIMIT_NPROC)",
    "parent_death_signal": "the worker dies with its zygote",
    "dumpable": "the worker cannot be ptraced or have its memory read",
    "no_new_privs": "the worker cannot gain privileges through exec",
    "seccomp": "only the system calls a worker needs; calls that take a pid (kill, prlimit, setpriority, ...) work only on itself",
    "macos_sandbox_exec": "the zygote and its workers run under a deny-by-default sandbox-exec profile",
    "private_home": "$RLM_HOME and everything in it (traces, indexes, memory, history) is private to the user: 0700 folders, 0600 files",
}


@dataclass(frozen=True)
class Layer:
    name: str
    active: bool
    detail: str
    applies: bool = True
    #: What was found wrong (the paths of ``private_home`` others may read), one per line.
    findings: tuple[str, ...] = ()

    @property
    def purpose(self) -> str:
        return LAYER_HELP.get(self.name, "")


def diagnose(policy: str = "default", home: str | os.PathLike[str] | None = None) -> list[Layer]:
    """Start a worker under ``policy`` and report every layer; with ``home`` (``$RLM_HOME``),
    whether anything in it is readable by other users (``private_home``)."""
    with Sandbox(policy) as sandbox:
        worker_layers: dict[str, dict[str, Any]] = sandbox.layers
        host = sandbox.host_layers
    linux = sys.platform.startswith("linux")
    found: dict[str, Layer] = {
        "process_boundary": Layer("process_boundary", True, "worker subprocess"),
        "zygote_fork": Layer("zygote_fork", True, "fork of a zygote started with an empty environment"),
        "rss_watchdog": Layer("rss_watchdog", True, "psutil, checked every 50 ms while a cell runs"),
        "wall_clock_kill": Layer("wall_clock_kill", True, "SIGKILL to the process group"),
        "rlimit_as_enforced": Layer("rlimit_as_enforced", linux,
                                    "Linux enforces RLIMIT_AS" if linux else "macOS does not enforce RLIMIT_AS; the RSS watchdog is the cap"),
    }
    for name, info in {**host, **worker_layers}.items():
        found[name] = Layer(name, bool(info.get("active")), str(info.get("detail", "")), _applies(name))
    if sys.platform == "darwin":
        on = shutil.which("sandbox-exec") is not None
        found["macos_sandbox_exec"] = Layer("macos_sandbox_exec", on, "sandbox-exec found" if on else "sandbox-exec not found")
    else:
        found["macos_sandbox_exec"] = Layer("macos_sandbox_exec", False, "not macOS (Linux uses Landlock and seccomp instead)",
                                            applies=False)
    if home is not None:
        found["private_home"] = home_layer(home)
    order = list(LAYER_HELP)
    return sorted(found.values(), key=lambda layer: order.index(layer.name) if layer.name in order else len(order))


def home_layer(home: str | os.PathLike[str], limit: int = 50) -> Layer:
    """``private_home``: on when no path under ``home`` gives group or others any permission."""
    exposed = private.exposed(home, limit=limit + 1)
    if not exposed:
        there = os.path.isdir(home)
        return Layer("private_home", True, f"{home}: 0700 folders, 0600 files" if there else f"{home} does not exist yet")
    more = " (and more)" if len(exposed) > limit else ""
    detail = (f"{len(exposed[:limit])}{more} path(s) under {home} readable by other users: "
              f"run `chmod -R go-rwx {home}` (rlm tightens what it owns when a session starts)")
    return Layer("private_home", False, detail, findings=tuple(str(e) for e in exposed[:limit]))


def _applies(name: str) -> bool:
    """Whether a layer is meant to be on for a host like this one."""
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    if name == "user_namespace":
        return not root
    if name == "drop_privileges":
        return root
    return True


def render(layers: list[Layer]) -> str:
    width = max(len(layer.name) for layer in layers)
    rows = [f"Sandbox isolation layers on {sys.platform}:"]
    for layer in layers:
        mark = "on " if layer.active else "off" if layer.applies else " - "
        rows.append(f"  [{mark}] {layer.name.ljust(width)}  {layer.detail}")
        rows += [f"        {line}" for line in layer.findings]
    off = [layer.name for layer in layers if not layer.active and layer.applies]
    rows.append("")
    rows.append("All layers active." if not off else f"Inactive: {', '.join(off)}.")
    return "\n".join(rows)
