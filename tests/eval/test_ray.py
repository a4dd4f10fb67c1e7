"""The Ray executor on a real local cluster (a head and two worker nodes, loopback only):
every job runs once, a killed Ray worker loses nothing silently, resume finishes the rest.

Skipped without Ray (``pip install 'rlm_runtime[ray]'``), except under ``CI=true``, where
``.[all]`` installs it and a missing Ray is a failure.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

try:
    import ray
except ImportError:
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("Ray is not installed (pip install 'rlm_runtime[ray]')", allow_module_level=True)

from rlm_runtime.eval.ray_executor import RayOptions, loopback_node
from rlm_runtime.eval.results import read_results
from rlm_runtime.eval.runner import EvalConfig, Runner, Summary
from rlm_runtime.eval.tasks import load_tasks
from rlm_runtime.llm import ScriptedClient, register_provider

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def register_slow(delay: float) -> None:
    """``slow:PATH``: the scripted model sleeping ``delay`` seconds per call (run on each node)."""
    register_provider("slow:", lambda name, **o: ScriptedClient(name.removeprefix("slow:"), model=name, delay_s=delay), replace=True)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A head (no CPUs: it runs no jobs) and two worker nodes of one CPU, on 127.0.0.1."""
    from ray.cluster_utils import Cluster

    with pytest.MonkeyPatch.context() as mp:
        # The node runners unpickle register_slow by reference: they import this module, by
        # the name pytest gave it (``eval.test_ray`` or ``tests.eval.test_ray``).
        mp.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH")])))
        c = None
        try:
            with loopback_node():
                c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False,
                                                                  "object_store_memory": 80 * 2**20})
                for _ in range(2):
                    c.add_node(num_cpus=1, object_store_memory=80 * 2**20)
                ray.init(address=c.address, log_to_driver=False, configure_logging=False)
            yield c
        finally:
            ray.shutdown()
            if c is not None:
                c.shutdown()


@pytest.fixture
def twelve_tasks(tmp_path: Path) -> Path:
    from rlm_runtime.eval.suites import write_suite

    path = tmp_path / "tasks.jsonl"
    write_suite("needle", path, lengths=(3000, 4000, 5000), n=4, seed=2)
    return path


def _runner(tasks: Path, script: Path, out: Path, cluster: Any, delay: float, retries: int, **kw: Any) -> Runner:
    register_slow(delay)  # the driver knows the name too (the resume check builds the same hashes)
    config = EvalConfig(model=f"slow:{script}", methods=("direct",), out=out, window=8192, executor="ray",
                        address=cluster.address, concurrency=2, **kw)
    return Runner(config, load_tasks(tasks), ray_options=RayOptions(max_retries=retries,
                                                                    worker_setup=functools.partial(register_slow, delay)))


def _node_runners() -> list[psutil.Process]:
    """This test's Ray workers holding a node runner (descendants of this process only)."""
    found = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.cmdline()[:1] and p.cmdline()[0].startswith("ray::NodeRunner"):
                found.append(p)
        except psutil.Error:
            continue
    return found


def _run_and_kill_one_worker(runner: Runner, results: Path, total: int) -> tuple[Summary, int]:
    """Run ``runner`` on a thread; once a job is recorded, kill -9 one node runner's process."""
    box: dict[str, Any] = {}

    def go() -> None:
        try:
            box["summary"] = runner.run()
        except BaseException as e:  # surfaced below
            box["error"] = e

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    killed = 0
    end = time.monotonic() + 60
    while time.monotonic() < end and thread.is_alive():
        recorded = len(read_results(results))
        if recorded >= 1:
            victims = _node_runners()
            if victims and recorded < total:
                victims[0].send_signal(signal.SIGKILL)
                killed = victims[0].pid
            break
        time.sleep(0.05)
    thread.join(timeout=90)
    assert not thread.is_alive(), "the run did not end"
    if "error" in box:
        raise box["error"]
    return box["summary"], killed


def _ids(out: Path) -> list[str]:
    return [r["task_id"] for r in read_results(out / "results.jsonl")]


def test_every_job_runs_once_with_a_worker_killed(cluster: Any, twelve_tasks: Path, script: Path, tmp_path: Path) -> None:
    """It records every job exactly once when a Ray worker dies mid-run (Ray restarts it and reruns its jobs)."""
    out = tmp_path / "run"
    runner = _runner(twelve_tasks, script, out, cluster, delay=1.0, retries=2)
    summary, killed = _run_and_kill_one_worker(runner, out / "results.jsonl", 12)
    assert killed, "no node runner was killed mid-run"
    ids = _ids(out)
    assert len(ids) == 12 and len(set(ids)) == 12, ids
    assert summary.done == 12 and summary.not_recorded == 0 and summary.stopped is None
    assert all(r["error"] is None and r["answer"] == "unknown" for r in read_results(out / "results.jsonl"))
    again = _runner(twelve_tasks, script, out, cluster, delay=0.0, retries=2, resume=True).run()
    assert again.skipped == 12 and again.jobs == 0 and len(_ids(out)) == 12  # a finished run is not run again


def test_jobs_lost_with_a_worker_are_left_for_resume(cluster: Any, twelve_tasks: Path, script: Path, tmp_path: Path) -> None:
    """It leaves a dead worker's jobs unrecorded (not lost silently) when retries are off, and resume runs only those."""
    out = tmp_path / "run"
    runner = _runner(twelve_tasks, script, out, cluster, delay=1.0, retries=0)
    summary, killed = _run_and_kill_one_worker(runner, out / "results.jsonl", 12)
    assert killed, "no node runner was killed mid-run"
    first = _ids(out)
    assert len(first) == len(set(first)) == summary.done
    assert summary.not_recorded >= 1 and summary.done + summary.not_recorded == 12
    rest = _runner(twelve_tasks, script, out, cluster, delay=0.0, retries=0, resume=True).run()
    assert rest.skipped == summary.done and rest.done == 12 - summary.done and rest.not_recorded == 0
    ids = _ids(out)
    assert len(ids) == 12 and len(set(ids)) == 12


def test_cli_starts_and_stops_a_local_cluster(script: Path, tmp_path: Path) -> None:
    """It runs `rlm eval --executor ray` on a local cluster it starts on loopback and shuts down, rlm and direct."""
    from rlm_runtime.eval.suites import write_suite

    tasks = tmp_path / "tasks.jsonl"
    write_suite("needle", tasks, lengths=(3000,), n=2, seed=4)
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RLM_RAY_TEST_MARK": str(out)}  # inherited by every Ray process
    cmd = [sys.executable, "-m", "rlm_runtime.cli", "eval", str(tasks), "--model", f"scripted:{script}", "--method", "rlm,direct",
           "--window", "8192", "--executor", "ray", "--concurrency", "2", "--out", str(out), "--no-report", "--json", "-q"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, stderr[-3000:]
    summary = json.loads(stdout)
    assert summary["done"] == 4 and summary["not_recorded"] == 0
    records = read_results(out / "results.jsonl")
    assert sorted((r["task_id"], r["method"]) for r in records) == sorted({(r["task_id"], r["method"]) for r in records})
    assert {r["method"]: r["score"] for r in records if r["task_id"].endswith("-0")} == {"rlm": 1.0, "direct": 0.0}
    # Nothing of the cluster is left: every process of its session ended with the run.
    left = [p for p in psutil.process_iter(["environ"]) if (p.info.get("environ") or {}).get("RLM_RAY_TEST_MARK") == str(out)]
    assert not left
