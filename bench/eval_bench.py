"""Overhead of the ``rlm eval`` runner per task, beyond the model's own time.

    python bench/eval_bench.py [--tasks 30] [--delay 0.05] [--length 10000] [--json]

A scripted model that sleeps ``--delay`` seconds per call answers every task (the needle
suite at ``--length`` characters), one task at a time, under two methods:

* ``direct``: one model call per task: what remains is the runner's own work (reading the
  context, the prompt, the token count, scoring, the fsync'd results line, progress);
* ``rlm``: one model turn per task: the runner's work plus a whole session (a sandbox
  worker from the pool, the probe, the trajectory file, the cell).

Overhead per task = (wall time of the batch - calls x delay) / tasks. Also printed: the
runner's bookkeeping alone (the batch's wall time minus the time spent inside the methods).
Target (issue 14): under 50 ms per task.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rlm_runtime.eval.progress import Quiet
from rlm_runtime.eval.results import read_results
from rlm_runtime.eval.runner import EvalConfig, Runner
from rlm_runtime.eval.suites import write_suite
from rlm_runtime.eval.tasks import load_tasks
from rlm_runtime.llm import ScriptedClient, register_provider

RLM_REPLY = ("```python\nhits = grep(r'[A-Z]{2}-\\d{4}|SN\\d{6}|\\d{2}-\\d{2}-\\d{2}')\n"
             "FINAL(' '.join(m.line for m in hits))\n```")


def measure(method: str, tasks: Path, script: Path, delay: float, out: Path) -> dict[str, float]:
    register_provider("benchslow:", lambda name, **o: ScriptedClient(name.removeprefix("benchslow:"), model=name, delay_s=delay),
                      replace=True)
    config = EvalConfig(model=f"benchslow:{script}", methods=(method,), out=out, concurrency=1, window=8192)
    runner = Runner(config, load_tasks(tasks), progress=Quiet())
    began = time.perf_counter()
    summary = runner.run()
    wall = time.perf_counter() - began
    records = read_results(out / "results.jsonl")
    calls = sum(int(u.get("calls") or 0) for r in records for u in r["usage"].values())
    inside = sum(float(r["wall_s"]) for r in records)
    n = len(records)
    return {"tasks": n, "calls": calls, "wall_s": round(wall, 3), "accuracy": summary.accuracy.get(method, 0.0),
            "overhead_ms_per_task": round(1000 * (wall - calls * delay) / n, 1),
            "bookkeeping_ms_per_task": round(1000 * (wall - inside) / n, 1),
            "median_task_s": round(statistics.median(float(r["wall_s"]) for r in records), 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=30)
    ap.add_argument("--delay", type=float, default=0.05)
    ap.add_argument("--length", type=int, default=10_000)
    ap.add_argument("--methods", default="direct,rlm")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="rlm-eval-bench-") as tmp:
        folder = Path(tmp)
        tasks = folder / "tasks.jsonl"
        write_suite("needle", tasks, lengths=(args.length,), n=args.tasks, seed=1)
        script = folder / "script.jsonl"
        script.write_text(json.dumps({"when": "Start by exploring the context with code.", "content": RLM_REPLY}) + "\n"
                          + json.dumps({"when": "Answer with the answer alone", "content": "unknown"}) + "\n")
        # One throw-away task first: imports, the worker pool and tiktoken warm up outside the figures.
        warm = folder / "warm.jsonl"
        warm.write_text(tasks.read_text().splitlines()[0] + "\n")
        for method in args.methods.split(","):
            measure(method, warm, script, 0.0, folder / f"warm-{method}")
        rows = {m: measure(m, tasks, script, args.delay, folder / f"out-{m}") for m in args.methods.split(",")}
    if args.json:
        print(json.dumps(rows))
    else:
        print(f"{args.tasks} needle tasks at {args.length:,} chars, scripted model sleeping {args.delay * 1000:.0f} ms per call, "
              "one task at a time")
        for m, r in rows.items():
            print(f"  {m:7} overhead {r['overhead_ms_per_task']:6.1f} ms/task (runner bookkeeping alone "
                  f"{r['bookkeeping_ms_per_task']:.1f} ms); {r['calls']} calls, wall {r['wall_s']:.2f} s, "
                  f"median task {r['median_task_s'] * 1000:.0f} ms, accuracy {r['accuracy']:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
