"""Latency benchmarks of the sandbox, each shown against ``python -c pass`` measured in the same run.

Run from the repository root (the package must be importable: installed, or on PYTHONPATH)::

    python bench/sandbox_bench.py [--json] [--repeat N]

What it measures (bench/README.md has the details and the targets):

1. cold start to the first cell: (a) a new process that imports rlm_runtime, starts a
   Sandbox and runs ``1+1`` (zygote boot included); (b) with this process's zygote warm,
   ``Sandbox(...)`` construction to the first cell's result.
2. a warm trivial cell: ``execute("x = 1")`` round trip.
3. a host-function call from user code (``echo(i)`` in a loop inside one cell), next to the
   floor of one bare frame round trip over a socketpair with the same framing.
   Rows 2 and 3 also show the mean CPU time per cell / call of the host and of the worker.
4. the policy check (parse, RestrictedPython, compile) of a 10-line cell, uncached and cached.

Machines are noisy, so every figure also appears as a ratio to the baseline, and the
baseline runs are interleaved with the cold-start runs they are compared with.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil
from _common import machine, quantile

import rlm_runtime
from rlm_runtime.sandbox import Sandbox, check, load_policy, protocol

POLICY = "default"
SESSIONS_PER_REPEAT = 20  # warm-zygote sessions for 1b: 20 * --repeat (200 by default)
CELL_WARMUP = 200
CELLS = 2000  # warm trivial cells for 2
CALLS_ONE_CELL = 2000  # echo() calls in the single cell of 3
CALL_CELLS = 40  # cells for the per-cell distribution of 3
CALLS_PER_CELL = 200
FLOOR_TRIPS = 3000  # bare frame round trips
CHECKS = 300  # policy checks per variant in 4

TEN_LINES = """\
import re
words = ['alpha', 'beta', 'gamma', 'delta']
counts = {{}}
for w in words:
    counts[w] = len(w) + {n}
total = sum(counts.values())
pattern = re.compile(r'a+')
hits = [w for w in words if pattern.search(w)]
summary = {{'total': total, 'hits': hits}}
print(summary)
"""

# The child of 1a reports its own phases on stdout as one JSON line.
_COLD_CHILD = """\
import json, time
t0 = time.perf_counter_ns()
from rlm_runtime.sandbox import Sandbox
t1 = time.perf_counter_ns()
sb = Sandbox({policy!r})
r = sb.execute('1+1')
t2 = time.perf_counter_ns()
assert r.stdout == '2\\n', r
sb.close()
print(json.dumps({{'import_ns': t1 - t0, 'first_cell_ns': t2 - t1}}))
"""




@dataclass
class Figure:
    """One row of the table. Times are in nanoseconds; ``ratio`` is p50 / baseline p50."""

    key: str
    label: str
    p50_ns: float
    p99_ns: float | None
    n: int
    ratio: float = math.nan
    target: str = ""
    limit_ns: float | None = None  # p50 must be at most this (below it when ``strict``)
    strict: bool = False
    passed: bool | None = None


def _stats(key: str, label: str, samples: Sequence[float], **kw: Any) -> Figure:
    return Figure(key, label, statistics.median(samples), quantile(samples, 0.99), len(samples), **kw)


def _timed(fn: Callable[[], object], n: int) -> list[int]:
    out = []
    for _ in range(n):
        t = time.perf_counter_ns()
        fn()
        out.append(time.perf_counter_ns() - t)
    return out


# ------------------------------------------------------------------ the benchmarks


def _child_env() -> dict[str, str]:
    """The environment of 1a's children: ours, with the package we import first on the path."""
    env = dict(os.environ)
    root = str(Path(rlm_runtime.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    return env


def bench_processes(repeat: int) -> tuple[list[int], list[int], list[dict[str, int]]]:
    """``python -c pass`` and the cold start (1a), interleaved so that noise hits both."""
    env = _child_env()
    child = _COLD_CHILD.format(policy=POLICY)
    baseline: list[int] = []
    cold: list[int] = []
    phases: list[dict[str, int]] = []
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)  # warm the page cache
    for _ in range(repeat):
        t = time.perf_counter_ns()
        subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
        baseline.append(time.perf_counter_ns() - t)
        t = time.perf_counter_ns()
        done = subprocess.run([sys.executable, "-c", child], env=env, check=True, capture_output=True, text=True)
        cold.append(time.perf_counter_ns() - t)
        phases.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return baseline, cold, phases


def bench_sessions(n: int) -> list[int]:
    """1b: ``Sandbox(...)`` to the first cell's result, zygote already warm; closing not timed."""
    out = []
    for _ in range(n):
        t = time.perf_counter_ns()
        sb = Sandbox(POLICY)
        r = sb.execute("1+1")
        out.append(time.perf_counter_ns() - t)
        assert r.stdout == "2\n", r
        sb.close()
    return out


def bench_cells(sb: Sandbox, n: int) -> tuple[list[int], list[float]]:
    """2: host-side round trips of ``x = 1``, and the worker's own exec time of each."""
    worker: list[float] = []
    out = []
    for _ in range(n):
        t = time.perf_counter_ns()
        r = sb.execute("x = 1")
        out.append(time.perf_counter_ns() - t)
        worker.append(r.duration_s * 1e9)
    return out, worker


def _worker_process(sb: Sandbox) -> psutil.Process | None:
    """The session's worker process. ``_worker`` is private: a benchmark may peek."""
    pid = getattr(getattr(sb, "_worker", None), "pid", None)
    try:
        return psutil.Process(pid) if pid else None
    except psutil.Error:
        return None


def _cpu_s(worker: psutil.Process | None) -> tuple[float, float]:
    """CPU seconds (user + system) used so far by this process and by the worker.

    Unlike wall time this hardly moves when other processes compete for the CPUs.
    """
    host = os.times()
    if worker is None:
        return host.user + host.system, math.nan
    w = worker.cpu_times()
    return host.user + host.system, w.user + w.system


def bench_callbacks(sb: Sandbox) -> tuple[float, list[float], list[int], int]:
    """3: per-call time of ``echo`` from one long cell, from many cells, and call to call.

    Also returns how many calls were made in all, for the CPU time per call.
    """
    assert sb.execute("for i in range(50): echo(i)").ok  # warm
    code = f"for i in range({CALLS_ONE_CELL}): echo(i)"
    t = time.perf_counter_ns()
    r = sb.execute(code)
    one_cell = (time.perf_counter_ns() - t) / CALLS_ONE_CELL
    assert r.ok, r.error
    per_cell = []
    code = f"for i in range({CALLS_PER_CELL}): echo(i)"
    for _ in range(CALL_CELLS):
        t = time.perf_counter_ns()
        r = sb.execute(code)
        per_cell.append((time.perf_counter_ns() - t) / CALLS_PER_CELL)
        assert r.ok, r.error
    # Host-side time between consecutive calls: one full round trip each, loop included.
    stamps: list[int] = []

    def stamped(x: Any) -> Any:
        stamps.append(time.perf_counter_ns())
        return x

    sb.register("stamped", stamped)
    gaps: list[int] = []
    for _ in range(CALL_CELLS // 4):
        stamps.clear()
        assert sb.execute(f"for i in range({CALLS_PER_CELL}): stamped(i)").ok
        gaps += [b - a for a, b in itertools.pairwise(stamps)]
    calls = 50 + CALLS_ONE_CELL + CALL_CELLS * CALLS_PER_CELL + (CALL_CELLS // 4) * CALLS_PER_CELL
    return one_cell, per_cell, gaps, calls


def bench_floor(n: int) -> list[int]:
    """One call/return frame pair over a socketpair to a forked echo process: the IPC floor."""
    import socket

    if not hasattr(os, "fork"):
        return []
    host, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:  # the echo process: no cleanup, no atexit hooks
        host.close()
        try:
            while True:
                msg = protocol.recv(child)
                protocol.send(child, {"op": "return", "value": msg["args"][0]})
        except BaseException:
            os._exit(0)
    child.close()
    try:
        for i in range(100):
            protocol.send(host, {"op": "call", "name": "echo", "args": [i], "kwargs": {}})
            protocol.recv(host)
        out = []
        for i in range(n):
            t = time.perf_counter_ns()
            protocol.send(host, {"op": "call", "name": "echo", "args": [i], "kwargs": {}})
            protocol.recv(host)
            out.append(time.perf_counter_ns() - t)
        return out
    finally:
        host.close()
        os.waitpid(pid, 0)


def bench_policy(n: int) -> tuple[list[int], list[int]]:
    """4: check() of a 10-line cell; uncached sources differ by one constant."""
    policy = load_policy(POLICY)
    sources = [TEN_LINES.format(n=i) for i in range(n)]
    assert len(sources[0].splitlines()) == 10 and check(sources[0], policy).ok
    it = iter(sources[1:] + [TEN_LINES.format(n=-1)])
    uncached = _timed(lambda: check(next(it), policy), n)
    cached_src = sources[0]
    check(cached_src, policy)
    cached = _timed(lambda: check(cached_src, policy), n)
    return uncached, cached


# ------------------------------------------------------------------------- report


def run(repeat: int) -> tuple[float, list[Figure], dict[str, Any]]:
    """Every benchmark; returns the baseline p50 (ns), the rows, and extra figures."""
    baseline, cold, phases = bench_processes(repeat)
    base = statistics.median(baseline)
    rows = [
        _stats("baseline_python_c_pass", "python -c pass (baseline)", baseline),
        _stats("cold_start_new_process", "1a cold start, new process (import + zygote + 1+1)", cold),
        _stats("cold_start_import", "   of which: import rlm_runtime.sandbox", [p["import_ns"] for p in phases]),
        _stats("cold_start_first_cell", "   of which: Sandbox() + zygote boot + 1+1", [p["first_cell_ns"] for p in phases]),
    ]
    first = Sandbox(POLICY)  # boots this process's zygote
    assert first.execute("1+1").stdout == "2\n"
    first.close()
    rows.append(_stats("session_start_warm_zygote", "1b Sandbox() to first result, warm zygote",
                       bench_sessions(SESSIONS_PER_REPEAT * repeat), target="p50 < baseline", limit_ns=base, strict=True))

    with Sandbox(POLICY, host_functions={"echo": lambda x: x}) as sb:
        proc = _worker_process(sb)
        _ = bench_cells(sb, CELL_WARMUP)
        cpu0 = _cpu_s(proc)
        cells, worker = bench_cells(sb, CELLS)
        cpu1 = _cpu_s(proc)
        one_cell, per_cell, gaps, calls = bench_callbacks(sb)
        cpu2 = _cpu_s(proc)
    rows.append(_stats("warm_cell", '2  execute("x = 1"), warm', cells, target="p50 <= 1 ms", limit_ns=1e6))
    rows.append(_stats("warm_cell_worker_exec", "   of which: exec in the worker (duration_s)", worker))
    rows += _cpu_rows("warm_cell", "cell", cpu0, cpu1, CELLS)

    call_target, call_limit = "p50 <= 100 us", 100e3
    rows.append(Figure("callback_one_cell", f"3  echo() per call, one cell of {CALLS_ONE_CELL}", one_cell, None,
                       CALLS_ONE_CELL, target=call_target, limit_ns=call_limit))
    rows.append(_stats("callback_per_cell", f"3  echo() per call, {CALL_CELLS} cells of {CALLS_PER_CELL}", per_cell,
                       target=call_target, limit_ns=call_limit))
    rows.append(_stats("callback_call_to_call", "3  echo() call-to-call gap, seen by the host", gaps,
                       target=call_target, limit_ns=call_limit))
    rows += _cpu_rows("callback", "call", cpu1, cpu2, calls)
    floor = bench_floor(FLOOR_TRIPS)
    if floor:
        rows.append(_stats("ipc_floor", "   floor: bare frame round trip (socketpair)", floor))

    uncached, cached = bench_policy(CHECKS)
    rows.append(_stats("policy_check_uncached", "4  check() of a 10-line cell, uncached", uncached))
    rows.append(_stats("policy_check_cached", "4  check() of a 10-line cell, cached", cached))

    for row in rows:
        row.ratio = row.p50_ns / base
        if row.limit_ns is not None:
            row.passed = row.p50_ns < row.limit_ns if row.strict else row.p50_ns <= row.limit_ns
    extra = {"machine": machine(), "repeat": repeat}
    return base, rows, extra


def _cpu_rows(key: str, what: str, before: tuple[float, float], after: tuple[float, float], n: int) -> list[Figure]:
    """Mean CPU time per cell or call, host and worker, over the same ``n`` operations."""
    return [
        Figure(f"{key}_cpu_{side}", f"   CPU per {what}: {side} (mean)", (after[k] - before[k]) * 1e9 / n, None, n)
        for k, side in enumerate(("host", "worker"))
    ]




def _fmt(ns: float | None) -> str:
    if ns is None or math.isnan(ns):
        return "-"
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.1f} us"
    return f"{ns:.0f} ns"


def print_table(base: float, rows: list[Figure], extra: dict[str, Any]) -> None:
    m = extra["machine"]
    print(f"rlm_runtime sandbox bench: Python {m['python']}, {m['cpus']} CPUs, load {m['load_1min']}, "
          f"{m['platform']}")
    print(f"baseline: `python -c pass` = {_fmt(base)} (median of {extra['repeat']})\n")
    head = ("benchmark", "p50", "p99", "n", "x baseline", "target", "")
    widths = (54, 10, 10, 6, 11, 15, 4)
    line = "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))
    print(line.rstrip())
    print("-" * len(line.rstrip()))
    for r in rows:
        verdict = "" if r.passed is None else ("PASS" if r.passed else "MISS")
        cells = (r.label, _fmt(r.p50_ns), _fmt(r.p99_ns), str(r.n), f"{r.ratio:.3g}", r.target, verdict)
        print("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--repeat", type=int, default=10, metavar="N",
                        help="runs of `python -c pass` and of the cold start; 20*N warm sessions (default 10)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    started = time.perf_counter()
    base, rows, extra = run(args.repeat)
    extra["wall_s"] = round(time.perf_counter() - started, 2)
    if args.json:
        out = {"baseline_ns": base, **extra,
               "figures": {r.key: {k: v for k, v in asdict(r).items() if k not in ("key", "strict")} for r in rows}}
        print(json.dumps(out, indent=2))
    else:
        print_table(base, rows, extra)
        print(f"\n(full run: {extra['wall_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
