"""A worker that escaped the Python guards cannot reach other processes: the host, or another session's worker.

The attacker's cells run under a policy that allows ctypes (hostile.ESCAPED_POLICY), so
they make raw syscalls: prlimit64, setpriority, sched_setaffinity, kill, rt_sigqueueinfo,
pidfd_open + pidfd_send_signal and process_vm_readv, aimed at (a) the host process and
(b) a second Sandbox's worker. Each must fail with EPERM, and the target must be unharmed
afterwards: same rlimits, nice value and CPU affinity, no signal delivered, no memory
read, and it still runs a cell.

A worker's uid matters: as root every worker gets its own uid (oslayers.worker_uid), but
a normal user's workers share the host's uid and only seccomp and Landlock stand. So
when the suite runs as root, the normal-user case runs again in a child process under
``setpriv --reuid=65534``: ``python test_cross_process.py`` plays the host there, and
reports what it saw as JSON.
"""

from __future__ import annotations

import ast
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # hostile.py, when run as the non-root child

from hostile import ESCAPED_POLICY  # noqa: E402

import rlm_runtime  # noqa: E402
from rlm_runtime.sandbox import CellLimits, Sandbox  # noqa: E402

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Linux layers (seccomp, uids, Landlock)")

MACHINE = os.uname().machine
# Syscall numbers, written out here rather than taken from the filter's own tables.
NR = {
    "x86_64": {"prlimit64": 302, "setpriority": 141, "sched_setaffinity": 203, "kill": 62, "rt_sigqueueinfo": 129,
               "pidfd_open": 434, "pidfd_send_signal": 424, "process_vm_readv": 310},
    "aarch64": {"prlimit64": 261, "setpriority": 140, "sched_setaffinity": 122, "kill": 129, "rt_sigqueueinfo": 138,
                "pidfd_open": 434, "pidfd_send_signal": 424, "process_vm_readv": 270},
}.get(MACHINE, {})
RLIMIT_CPU, RLIMIT_AS = 0, 9  # asm-generic/resource.h, used by both architectures
CANARY = b"cross-process-canary-5d1e0b"
HOST_SIGNAL = signal.SIGUSR2  # the host counts it instead of dying: a delivery is visible
CHILD_TIMEOUT_S = 180
LIMITS = CellLimits(cell_timeout_s=10, kill_grace_s=1, memory_mb=256)

PRELUDE = """\
import ctypes
libc = ctypes.CDLL(None, use_errno=True)  # syscall returns an int: -1 or small counts here
def call(nr, *args):
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return [result, ctypes.get_errno()]
"""

ATTACKS = {
    # RLIMIT_CPU = 1 s killed the host; RLIMIT_AS = 1 MiB crippled another session's worker.
    "prlimit64": """\
cpu = (ctypes.c_ulong * 2)(1, 1)
space = (ctypes.c_ulong * 2)(1 << 20, 1 << 20)
results = [call({prlimit64}, {pid}, {RLIMIT_CPU}, ctypes.addressof(cpu), 0),
           call({prlimit64}, {pid}, {RLIMIT_AS}, ctypes.addressof(space), 0)]
""",
    "setpriority": "results = [call({setpriority}, 0, {pid}, 19)]\n",
    "sched_setaffinity": """\
mask = ctypes.c_ulong(1)
results = [call({sched_setaffinity}, {pid}, ctypes.sizeof(mask), ctypes.addressof(mask))]
""",
    "kill": "results = [call({kill}, {pid}, {sig})]\n",
    # si_code = SI_QUEUE (-1): what sigqueue(3) sends, so only the sender's rights decide.
    "rt_sigqueueinfo": """\
info = (ctypes.c_int * 32)({sig}, 0, -1)  # si_signo, si_errno, si_code
results = [call({rt_sigqueueinfo}, {pid}, {sig}, ctypes.addressof(info))]
""",
    # Without a pidfd (pidfd_open refused) the send is tried on -1: EPERM means seccomp, EBADF would not.
    "pidfd": """\
opened = call({pidfd_open}, {pid}, 0)
fd = opened[0] if opened[0] >= 0 else -1
results = [opened, call({pidfd_send_signal}, fd, {sig}, 0, 0)]
""",
    "process_vm_readv": """\
buf = ctypes.create_string_buffer(96)
local = (ctypes.c_size_t * 2)(ctypes.addressof(buf), 96)
remote = (ctypes.c_size_t * 2)({address}, 96)
results = [call({process_vm_readv}, {pid}, ctypes.addressof(local), 1, ctypes.addressof(remote), 1, 0)]
if results[0][0] > 0:
    results.append(buf.raw.hex())
""",
}


def attack(attacker: Sandbox, name: str, pid: int, address: int, sig: int) -> list[Any]:
    """Run one attack cell against ``pid``; what each syscall returned, as [result, errno]."""
    code = PRELUDE + ATTACKS[name].format(pid=pid, address=address, sig=sig, RLIMIT_CPU=RLIMIT_CPU, RLIMIT_AS=RLIMIT_AS, **NR)
    code += "print(repr(results))"
    result = attacker.execute(code)
    assert result.error is None, result
    return list(ast.literal_eval(result.stdout))


def snapshot(pid: int) -> dict[str, Any]:
    """What the attacks would change: rlimits, nice value and CPU affinity of ``pid``.

    The limits come from /proc/<pid>/limits, which anyone may read: prlimit on another uid's
    process needs CAP_SYS_RESOURCE, which even root may lack in a container.
    """
    with open(f"/proc/{pid}/limits") as f:
        limits = [line.split()[-3:-1] for line in f if line.startswith(("Max cpu time", "Max address space"))]
    return {
        "limits": limits,
        "nice": os.getpriority(os.PRIO_PROCESS, pid),
        "affinity": sorted(os.sched_getaffinity(pid)),
    }


def start_victim(policy: Path) -> tuple[Sandbox, int, int]:
    """A second session whose worker holds the canary: the sandbox, its worker's pid, the canary's address."""
    victim = Sandbox(policy, LIMITS)
    victim.start()
    r = victim.execute(f"import os\ncanary = {CANARY!r}\nprint(os.getpid(), id(canary))")
    assert r.error is None, r
    pid, address = (int(x) for x in r.stdout.split())
    return victim, pid, address


def run_all(attacker: Sandbox, victim: Sandbox, victim_pid: int, victim_address: int) -> dict[str, Any]:
    """Every attack on the host (this process) and on the victim's worker, and both targets' state around them."""
    host_pid, host_canary = os.getpid(), bytes(CANARY)
    received: list[int] = []
    previous = signal.signal(HOST_SIGNAL, lambda signum, frame: received.append(signum))
    try:
        before = {"host": snapshot(host_pid), "victim": snapshot(victim_pid)}
        results = {
            "host": {name: attack(attacker, name, host_pid, id(host_canary), HOST_SIGNAL) for name in ATTACKS},
            "victim": {name: attack(attacker, name, victim_pid, victim_address, signal.SIGKILL) for name in ATTACKS},
        }
        after = {"host": snapshot(host_pid), "victim": snapshot(victim_pid)}
    finally:
        signal.signal(HOST_SIGNAL, previous)
    still = victim.execute("import os\nprint(os.getpid(), len(canary))")
    return {
        "results": results,
        "before": before,
        "after": after,
        "host_signals": len(received),
        "victim_after": [still.error, still.stdout, still.worker_restarted],
        "victim_pid": victim_pid,
        "attacker_uid": attacker.execute("import os\nprint(os.getuid())").stdout.strip(),
        "host_uid": os.getuid(),
    }


# --- the checks, shared by the in-process run and the non-root child's report


def check_refused(report: dict[str, Any], target: str, name: str) -> None:
    for outcome in report["results"][target][name]:
        assert isinstance(outcome, list), f"{name} on the {target} read memory: {outcome}"
        assert outcome == [-1, errno.EPERM], f"{name} on the {target} was not refused with EPERM: {outcome}"


def check_unharmed(report: dict[str, Any], target: str) -> None:
    assert report["after"][target] == report["before"][target]
    if target == "host":
        assert report["host_signals"] == 0
    else:
        error, stdout, restarted = report["victim_after"]
        assert error is None and not restarted, report["victim_after"]
        assert stdout == f"{report['victim_pid']} {len(CANARY)}\n"


# --- in this process (as root: per-worker uids; as a normal user: the same uid everywhere)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    if not NR:
        pytest.skip(f"no syscall numbers for {MACHINE}")
    policy = tmp_path_factory.mktemp("cross") / "escaped.toml"
    policy.write_text(ESCAPED_POLICY)
    with Sandbox(policy, LIMITS) as attacker:
        victim, victim_pid, address = start_victim(policy)
        try:
            yield run_all(attacker, victim, victim_pid, address)
        finally:
            victim.close()


@pytest.mark.parametrize("target", ["host", "victim"])
@pytest.mark.parametrize("name", list(ATTACKS))
def test_attack_is_refused(report: dict[str, Any], target: str, name: str) -> None:
    """It denies prlimit64, setpriority, sched_setaffinity, kill, rt_sigqueueinfo, pidfd and process_vm_readv on other processes."""
    check_refused(report, target, name)


@pytest.mark.parametrize("target", ["host", "victim"])
def test_target_is_unharmed(report: dict[str, Any], target: str) -> None:
    """It denies every attack its effect: same rlimits, nice and affinity, no signal, the victim still runs cells."""
    check_unharmed(report, target)


def test_workers_have_their_own_uid_as_root(report: dict[str, Any]) -> None:
    """It denies a root host's workers the host's uid (each has its own), and keeps a normal user's uid."""
    uid = int(report["attacker_uid"])
    if report["host_uid"] == 0:
        assert uid >= 1_900_000_000
    else:
        assert uid == report["host_uid"]


def test_each_worker_gets_a_different_uid(tmp_path: Path) -> None:
    """It denies two live workers the same uid when the host is root."""
    if os.geteuid() != 0:
        pytest.skip("per-worker uids need a root host")
    with Sandbox("default", LIMITS) as one, Sandbox("default", LIMITS) as two:
        uids = [sb.layers["uid_separation"]["detail"].split()[2].rstrip(":") for sb in (one, two)]
        assert uids[0] != uids[1] and all(int(u) >= 1_900_000_000 for u in uids), uids
        assert one.layers["uid_separation"]["active"] and two.layers["uid_separation"]["active"]


# --- again as a normal user, when the suite runs as root


@pytest.fixture(scope="module")
def non_root_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The report of a child host running as uid 65534 (nobody) with two sandboxes of its own."""
    if os.geteuid() != 0:
        pytest.skip("the suite already runs as a normal user: the in-process tests are that case")
    if not NR:
        pytest.skip(f"no syscall numbers for {MACHINE}")
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is not installed")
    home = tmp_path_factory.mktemp("nobody")
    for folder in (home, home / "tmp", home / "rlm"):
        folder.mkdir(exist_ok=True)
        os.chown(folder, 65534, 65534)
    os.chmod(home.parent, 0o755)  # pytest's base temp dir is 0700: nobody must traverse it
    as_nobody = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    paths = sysconfig.get_paths()
    code_paths = [str(Path(rlm_runtime.__file__).parents[1]), paths["purelib"], paths["platlib"]]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TMPDIR": str(home / "tmp"), "RLM_HOME": str(home / "rlm"),
           "HOME": str(home), "PYTHONPATH": os.pathsep.join(dict.fromkeys(code_paths))}
    python = _python_nobody_can_run(as_nobody, env)
    cmd = [*as_nobody, python, __file__, "--as-child"]
    try:
        done = subprocess.run(cmd, env=env, cwd=str(home), capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the non-root child did not finish within {CHILD_TIMEOUT_S}s: {e.stderr!r}")
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and lines, f"the non-root child failed ({done.returncode}):\n{done.stderr[-3000:]}"
    return dict(json.loads(lines[-1]))


def _python_nobody_can_run(as_nobody: list[str], env: dict[str, str]) -> str:
    """An interpreter of this Python version that uid 65534 may exec (the zygote execs it again).

    A pyenv or venv interpreter under /root is out of nobody's reach; the system one of the
    same version runs the venv's packages just as well.
    """
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in dict.fromkeys([sys.executable, f"/usr/bin/{version}", f"/usr/local/bin/{version}"]):
        # Through sh: setpriv itself may still exec paths that the child's own exec could not reach.
        probe = [*as_nobody, "sh", "-c", '"$0" -c "import rlm_runtime, pytest"', candidate]
        if os.path.exists(candidate) and subprocess.run(probe, env=env, capture_output=True, timeout=60).returncode == 0:
            return candidate
    pytest.skip(f"no {version} interpreter that uid 65534 can run")


@pytest.mark.parametrize("target", ["host", "victim"])
@pytest.mark.parametrize("name", list(ATTACKS))
def test_attack_is_refused_as_a_normal_user(non_root_report: dict[str, Any], target: str, name: str) -> None:
    """It denies the same attacks when host and workers share one normal uid."""
    assert non_root_report["host_uid"] == 65534 and non_root_report["attacker_uid"] == "65534"
    check_refused(non_root_report, target, name)


@pytest.mark.parametrize("target", ["host", "victim"])
def test_target_is_unharmed_as_a_normal_user(non_root_report: dict[str, Any], target: str) -> None:
    """It denies every attack its effect on a same-uid host and a same-uid worker."""
    check_unharmed(non_root_report, target)


def _child_main() -> None:
    """The non-root host: two sandboxes under the escaped policy, attacks both ways, a JSON report."""
    import tempfile

    policy = Path(tempfile.mkdtemp()) / "escaped.toml"
    policy.write_text(ESCAPED_POLICY)
    with Sandbox(policy, LIMITS) as attacker:
        victim, victim_pid, address = start_victim(policy)
        try:
            report = run_all(attacker, victim, victim_pid, address)
            report["layers"] = attacker.layers
        finally:
            victim.close()
    print(json.dumps(report))


if __name__ == "__main__" and sys.argv[1:] == ["--as-child"]:
    _child_main()
