"""Throughput of ``rlm eval --executor ray`` against the number of Ray workers.

    python bench/eval_ray_bench.py [--workers 1,2,4] [--tasks 24] [--delay 0.5] [--json]

For each worker count N: a local Ray cluster on 127.0.0.1 (a head without CPUs and N nodes
of one CPU, one job at a time each: ``--concurrency 1``), then the needle suite (``--tasks``
tasks, method ``direct``: one model call per task) with the scripted model sleeping
``--delay`` seconds per call. A sleeping model scales on 2 cores: the figure is the executor's
own overhead (dispatch, the driver's scoring and fsync'd appends), not the model's.

"batch" is the time from the first job submitted to the last recorded (the cluster and its
node runners are up by then; "setup" is that part). ideal = tasks x delay / N; the ratio is
batch / ideal (issue 14's target: within 1.3x for 4 workers). It also checks that every
listening socket of the cluster's processes is on loopback.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from rlm_runtime.eval.ray_executor import RayOptions, loopback_node
from rlm_runtime.eval.results import read_results
from rlm_runtime.eval.runner import EvalConfig, Runner, Summary
from rlm_runtime.eval.suites import write_suite
from rlm_runtime.eval.tasks import load_tasks
from rlm_runtime.llm import ScriptedClient, register_provider


def register_slow(delay: float) -> None:
    """``benchslow:PATH``: the scripted model sleeping ``delay`` s per call (run on each node)."""
    register_provider("benchslow:", lambda name, **o: ScriptedClient(name.removeprefix("benchslow:"), model=name, delay_s=delay),
                      replace=True)


class Clock:
    """A progress display that only notes when the batch starts and ends."""

    def __init__(self) -> None:
        self.began = self.ended = 0.0
        self.listeners: set[str] = set()

    def start(self, total: int, skipped: int, concurrency: int) -> None:
        self.began = time.perf_counter()
        for p in psutil.Process().children(recursive=True):
            try:
                self.listeners |= {c.laddr.ip for c in p.net_connections("inet") if c.status == psutil.CONN_LISTEN}
            except psutil.Error:
                continue

    def started(self, task: Any, method: str) -> None:
        pass

    def finished(self, record: Any, task: Any, method: str) -> None:
        pass

    def close(self, summary: Summary) -> None:
        self.ended = time.perf_counter()


def measure(workers: int, tasks: Path, script: Path, delay: float, out: Path) -> dict[str, Any]:
    import ray
    from ray.cluster_utils import Cluster

    cluster = None
    try:
        with loopback_node():
            cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False,
                                                                    "object_store_memory": 80 * 2**20})
            for _ in range(workers):
                cluster.add_node(num_cpus=1, object_store_memory=80 * 2**20)
            ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
        register_slow(delay)
        config = EvalConfig(model=f"benchslow:{script}", methods=("direct",), out=out, window=8192, executor="ray",
                            address=cluster.address, concurrency=1)
        clock = Clock()
        runner = Runner(config, load_tasks(tasks), progress=clock,
                        ray_options=RayOptions(worker_setup=functools.partial(register_slow, delay)))
        began = time.perf_counter()
        summary = runner.run()
        wall = time.perf_counter() - began
    finally:
        ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
    records = read_results(out / "results.jsonl")
    n = len(records)
    batch = clock.ended - clock.began
    ideal = n * delay / workers
    return {"workers": workers, "tasks": n, "unique": len({r["task_id"] for r in records}), "done": summary.done,
            "setup_s": round(clock.began - began, 2), "batch_s": round(batch, 2), "wall_s": round(wall, 2),
            "ideal_s": round(ideal, 2), "ratio_to_ideal": round(batch / ideal, 3),
            "listeners": sorted(clock.listeners)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--tasks", type=int, default=24)
    ap.add_argument("--delay", type=float, default=0.5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="rlm-eval-ray-bench-") as tmp:
        folder = Path(tmp)
        tasks = folder / "tasks.jsonl"
        write_suite("needle", tasks, lengths=(5000,), n=args.tasks, seed=1)
        script = folder / "script.jsonl"
        script.write_text(json.dumps({"when": "Answer with the answer alone", "content": "unknown"}) + "\n")
        for w in (int(x) for x in args.workers.split(",")):
            rows.append(measure(w, tasks, script, args.delay, folder / f"out-{w}"))
            if not args.json:
                r = rows[-1]
                print(f"{w} workers: {r['tasks']} tasks ({r['unique']} unique), batch {r['batch_s']} s, ideal {r['ideal_s']} s, "
                      f"ratio {r['ratio_to_ideal']}x; setup {r['setup_s']} s; listeners {r['listeners']}", flush=True)
    if args.json:
        print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    # Run as a script, register_slow lives in __main__: Ray pickles it by value for the nodes.
    sys.exit(main())
