"""Overhead of the RLM loop around the cells it runs, and the throughput of llm_query_batched.

Run from the repository root (the package must be importable: installed, or on PYTHONPATH)::

    python bench/orchestrator_bench.py [--json] [--iterations N] [--repeat R] [--long-iterations N]
                                       [--fanout-repeat R] [--profile]

What it measures (bench/ORCHESTRATOR.md has the details, the targets and results):

1. Per-iteration overhead. An instant scripted model replies ``x = 1`` in a code block for
   N-1 turns, then ``FINAL('done')``; ``RLM.run`` is timed with a JSONL trace and with
   ``trace=False``. The baseline is the same session run directly in this process, in the
   same round: ``Sandbox(...)`` start, the same N cells through ``Sandbox.execute``, close.
   Overhead per iteration = (run wall - baseline wall) / N, and an "all-in" variant that
   only subtracts the N cells, so the one-time session start and close count too. Host CPU
   time is reported beside wall time: on a loaded machine it is the steadier figure.
   The same is measured for a long run (200 turns) and a chatty one (20 turns whose cells
   print 4,000 characters), because the prompt's token count grows with the conversation.
   One extra instrumented run splits the time into model call, token counting, cell,
   trace writing and the rest; the system prompt is also timed over a 1 MB text context,
   where the probe counts the context's tokens.
2. Fan-out. One cell calls ``llm_query_batched`` with 200 prompts; the sub-model sleeps
   50 ms per call (``ScriptedClient(delay_s=0.05)``) and the governor allows 8 calls at a
   time. Ideal: 200 * 50 ms / 8 = 1250 ms. Reported: the cell's time, the span of the
   ``sub_call`` events, their ratio to ideal, and the peak concurrency the client saw.
   A small side run shows what a *responder* that sleeps does instead (ScriptedClient
   calls it under its lock, so those calls run one at a time).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from _common import machine

from rlm_runtime import loop
from rlm_runtime.budget import Governor, RunLimits
from rlm_runtime.config import Paths
from rlm_runtime.llm import ScriptedClient
from rlm_runtime.llm.base import Completion, Message
from rlm_runtime.orchestrator import RLM
from rlm_runtime.sandbox import Sandbox

POLICY = "default"
CELL = "x = 1"
LAST_CELL = "FINAL('done')"
FANOUT_PROMPTS = 200
FANOUT_DELAY_S = 0.05
FANOUT_CAP = 8
FANOUT_IDEAL_MS = FANOUT_PROMPTS * FANOUT_DELAY_S * 1000 / FANOUT_CAP
LOCKED_PROMPTS = 16  # the side run with a sleeping responder: serial, so keep it short
CONTEXT_BYTES = 1 << 20  # the context of the system-prompt measurement
LINE = "The quick brown fox jumps over the lazy dog; 0123456789 and some more words here.\n"
#: A cell that prints about 4,000 characters, as a grep or a chunk would.
CHATTY_CELL = "print('\\n'.join('line %d: the quick brown fox jumps over the lazy dog' % i for i in range(80)))"

TARGET_OVERHEAD_MS = 5.0
TARGET_FANOUT_RATIO = 1.3


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


def cells(n: int, cell: str = CELL) -> list[str]:
    """The cells of one run: ``cell`` N-1 times, then FINAL."""
    return [cell] * (n - 1) + [LAST_CELL]


def instant_responder(n: int, cell: str = CELL) -> Callable[[list[Message]], str]:
    """Replies with the k-th cell on the k-th turn (counted from the conversation)."""
    plan = [fenced(c) for c in cells(n, cell)]

    def reply(messages: list[Message]) -> str:
        turn = sum(1 for m in messages if m["role"] == "assistant")
        return plan[min(turn, len(plan) - 1)]

    return reply


class CountingClient(ScriptedClient):
    """A ScriptedClient that counts the calls in flight and times its own work."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._gate = threading.Lock()
        self._local = threading.local()
        self.in_flight = 0
        self.peak = 0
        self.first_start: float | None = None
        self.last_end: float | None = None
        self.complete_ns = 0  # inside complete(), its own usage counting included
        self.usage_count_ns = 0  # count_tokens called by complete() (usage of the fake model)
        self.caller_count_ns = 0  # count_tokens called by anyone else (the orchestrator)

    def complete(self, messages: list[Message], **kw: Any) -> Completion:
        t = time.perf_counter()
        with self._gate:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            self.first_start = t if self.first_start is None else min(self.first_start, t)
        self._local.inside = True
        try:
            return super().complete(messages, **kw)
        finally:
            self._local.inside = False
            end = time.perf_counter()
            with self._gate:
                self.in_flight -= 1
                self.last_end = end if self.last_end is None else max(self.last_end, end)
                self.complete_ns += int((end - t) * 1e9)

    def count_tokens(self, text: str) -> int:
        t = time.perf_counter_ns()
        try:
            return super().count_tokens(text)
        finally:
            spent = time.perf_counter_ns() - t
            with self._gate:
                if getattr(self._local, "inside", False):
                    self.usage_count_ns += spent
                else:
                    self.caller_count_ns += spent


@dataclass
class Figure:
    """One row of the table; times in milliseconds. ``spread`` is (min, max) over the runs."""

    key: str
    label: str
    value: float
    unit: str = "ms"
    spread: tuple[float, float] | None = None
    n: int = 1
    target: str = ""
    passed: bool | None = None


def _median_fig(key: str, label: str, values: list[float], **kw: Any) -> Figure:
    return Figure(key, label, statistics.median(values), spread=(min(values), max(values)), n=len(values), **kw)


def _rlm(client: CountingClient, paths: Paths, *, trace: str | bool, n: int,
         sub_client: CountingClient | None = None, on_event: Callable[[dict[str, Any]], None] | None = None) -> RLM:
    limits = RunLimits(max_iterations=n + 1, max_llm_calls=max(n, FANOUT_PROMPTS) + 10, max_concurrency=FANOUT_CAP)
    governor = Governor(available_bytes=16 << 30, cpu_count=8, ceiling=FANOUT_CAP)
    return RLM(client, sub_client, limits=limits, policy=POLICY, trace=trace, governor=governor, paths=paths,
               on_event=on_event)


# ------------------------------------------------------------- 1: loop overhead


@dataclass(frozen=True)
class Scenario:
    """One overhead measurement: N turns of ``cell``, ``rounds`` rounds, with and/or without a trace."""

    key: str
    label: str
    n: int
    rounds: int
    cell: str = CELL
    variants: tuple[str, ...] = ("trace", "notrace")


def direct_session(n: int, cell: str = CELL) -> dict[str, float]:
    """The baseline: the run's session without the loop. Seconds per phase (``cpu``: this process)."""
    host: dict[str, Callable[..., Any]] = {"llm_query": lambda p: p, "llm_query_batched": lambda ps: ps,
                                           "rlm_query": lambda p, context=None: p}
    cpu = time.process_time()
    t0 = time.perf_counter()
    sb = Sandbox(POLICY, host_functions=host)
    sb.start()
    t1 = time.perf_counter()
    for code in cells(n, cell):
        r = sb.execute(code)
        assert r.ok, r.error
    assert r.has_final and r.final == "done", r
    t2 = time.perf_counter()
    sb.close()
    t3 = time.perf_counter()
    return {"start": t1 - t0, "cells": t2 - t1, "close": t3 - t2, "total": t3 - t0, "cpu": time.process_time() - cpu}


def timed_run(n: int, paths: Paths, trace: str | bool, cell: str = CELL) -> tuple[float, float]:
    """Wall and host-CPU seconds of one ``RLM.run`` of N instant turns (construction not timed)."""
    rlm = _rlm(CountingClient(instant_responder(n, cell)), paths, trace=trace, n=n)
    cpu = time.process_time()
    t = time.perf_counter()
    result = rlm.run("benchmark")
    wall = time.perf_counter() - t
    cpu = time.process_time() - cpu
    assert result.answer == "done" and result.iterations == n, result
    return wall, cpu


def bench_overhead(sc: Scenario, paths: Paths, tmp: Path) -> list[Figure]:
    """Rounds of (direct session, RLM.run per variant), order alternating; overhead per iteration in ms."""
    n = sc.n
    timed_run(min(n, 10), paths, False, sc.cell)  # warm: zygote, tiktoken, policy cache, prompt files
    direct_session(min(n, 10), sc.cell)
    base: list[dict[str, float]] = []
    walls: dict[str, list[float]] = {v: [] for v in sc.variants}
    over: dict[str, list[float]] = {}
    for k in range(sc.rounds):
        # Alternate the order so a burst of noise does not always land on the same variant.
        order = ["direct", *sc.variants] if k % 2 == 0 else [*reversed(sc.variants), "direct"]
        got: dict[str, Any] = {}
        for what in order:
            if what == "direct":
                got[what] = direct_session(n, sc.cell)
            else:
                trace = str(tmp / f"{sc.key}-{k}.jsonl") if what == "trace" else False
                got[what] = timed_run(n, paths, trace, sc.cell)
        d = got["direct"]
        base.append(d)
        for v in sc.variants:
            wall, cpu = got[v]
            walls[v].append(wall)
            over.setdefault(v, []).append((wall - d["total"]) / n * 1e3)
            over.setdefault(f"{v}_allin", []).append((wall - d["cells"]) / n * 1e3)
            over.setdefault(f"{v}_cpu", []).append((cpu - d["cpu"]) / n * 1e3)
    target = f"<= {TARGET_OVERHEAD_MS:g} ms"
    p = sc.key
    rows = [
        _median_fig(f"{p}_direct_session_ms", f"1  {sc.label}: baseline, the session run directly",
                    [d["total"] * 1e3 for d in base]),
        _median_fig(f"{p}_direct_start_ms", "   of which: Sandbox start (session creation)",
                    [d["start"] * 1e3 for d in base]),
        _median_fig(f"{p}_direct_cell_ms", "   of which: one cell (execute, host side)",
                    [d["cells"] / n * 1e3 for d in base]),
    ]
    names = {"trace": "JSONL trace", "notrace": "trace=False"}
    for v in sc.variants:
        rows += [
            _median_fig(f"{p}_run_{v}_ms", f"1  {sc.label}: RLM.run, {names[v]}", [w * 1e3 for w in walls[v]]),
            _median_fig(f"{p}_overhead_{v}_ms", "   overhead/iteration beyond the session", over[v], target=target),
            _median_fig(f"{p}_overhead_{v}_allin_ms", "   all-in (session start + close amortised)",
                        over[f"{v}_allin"], target=target),
            _median_fig(f"{p}_overhead_{v}_cpu_ms", "   host CPU/iteration beyond the session (less noisy)",
                        over[f"{v}_cpu"]),
        ]
    for r in rows:
        if r.target:
            r.passed = r.value <= TARGET_OVERHEAD_MS
    return rows


def bench_count_at_trim(repeat: int) -> Figure:
    """One token count of a conversation at the trim ceiling: the steady state of a long or chatty run."""
    from rlm_runtime.context.tokens import count_text

    chars = 24 * RunLimits().feedback_chars  # _trim keeps this many characters of conversation
    text = (LINE * (chars // len(LINE) + 1))[:chars]
    count_text(text)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        count_text(text)
        times.append((time.perf_counter() - t) * 1e3)
    return _median_fig("count_at_trim_ceiling_ms",
                       f"1  one token count of a {chars:,}-char conversation (2 per turn)", times)


@contextmanager
def instrumented() -> Iterator[dict[str, int]]:
    """Time the loop's parts by wrapping them (nanoseconds, summed over the run)."""
    spent: dict[str, int] = {"session_start": 0, "session_close": 0, "execute": 0, "call": 0, "emit": 0,
                             "system_prompt": 0, "trim": 0}

    def timing(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*a: Any, **kw: Any) -> Any:
            t = time.perf_counter_ns()
            try:
                return fn(*a, **kw)
            finally:
                spent[name] += time.perf_counter_ns() - t
        return wrapper

    class TimedSandbox(Sandbox):
        start = timing("session_start", Sandbox.start)
        close = timing("session_close", Sandbox.close)
        execute = timing("execute", Sandbox.execute)

    parts = [(loop.Tree, "call", "call"), (loop.Run, "emit", "emit"), (loop.Run, "_system_prompt", "system_prompt"),
             (loop.Run, "_trim", "trim")]
    saved = [(cls, name, cls.__dict__[name]) for cls, name, _ in parts]
    loop.Sandbox = TimedSandbox  # type: ignore[misc]
    for (cls, name, key), (_, _, fn) in zip(parts, saved, strict=True):
        setattr(cls, name, timing(key, fn))
    try:
        yield spent
    finally:
        loop.Sandbox = Sandbox  # type: ignore[misc]
        for cls, name, fn in saved:
            setattr(cls, name, fn)


BREAKDOWN_PARTS = (
    ("execute", "cells: Sandbox.execute (check + IPC + exec)"),
    ("tokens_orchestrator", "token counting of the prompt in Tree.call (tiktoken)"),
    ("tokens_scripted", "token counting for the scripted model's usage (tiktoken)"),
    ("model_other", "scripted model, rest of complete()"),
    ("call_other", "Tree.call, rest (budget reserve/settle)"),
    ("emit", "trace events (json.dumps + write + flush)"),
    ("trim", "_trim of the conversation"),
    ("session", "session start + close, amortised"),
    ("system_prompt", "system prompt (no context), amortised"),
    ("rest", "rest: parsing, prompt files, the loop itself"),
)


def breakdown_once(n: int, paths: Paths, tmp: Path) -> dict[str, int]:
    """Nanoseconds per part of one instrumented, traced run (the wrappers cost about 1 us per call)."""
    client = CountingClient(instant_responder(n))
    rlm = _rlm(client, paths, trace=str(tmp / "breakdown.jsonl"), n=n)
    with instrumented() as spent:
        t = time.perf_counter_ns()
        result = rlm.run("benchmark")
        wall = time.perf_counter_ns() - t
    assert result.answer == "done", result
    parts = {
        "wall": wall,
        "execute": spent["execute"],
        "tokens_orchestrator": client.caller_count_ns,
        "tokens_scripted": client.usage_count_ns,
        "model_other": client.complete_ns - client.usage_count_ns,
        "call_other": spent["call"] - client.complete_ns - client.caller_count_ns,
        "emit": spent["emit"],
        "trim": spent["trim"],
        "session": spent["session_start"] + spent["session_close"],
        "system_prompt": spent["system_prompt"],
    }
    parts["rest"] = wall - sum(v for k, v in parts.items() if k not in ("wall", "call_other")) - parts["call_other"]
    return parts


def bench_breakdown(n: int, paths: Paths, tmp: Path, repeat: int = 3) -> tuple[list[Figure], dict[str, Any]]:
    """Where a traced run's time goes, per iteration: the median of each part over ``repeat`` runs."""
    runs = [breakdown_once(n, paths, tmp) for _ in range(repeat)]
    per = lambda key: [r[key] / n / 1e6 for r in runs]  # noqa: E731
    rows = [_median_fig("bd_wall", f"   breakdown of a traced run ({n} iterations), per iteration", per("wall"))]
    rows += [_median_fig(f"bd_{key}", f"     {label}", per(key)) for key, label in BREAKDOWN_PARTS]
    return rows, {"breakdown_ns": runs}


def bench_system_prompt(paths: Paths, repeat: int) -> list[Figure]:
    """The one-time system prompt over a 1 MB text context: probe (with its exact token count) and fill."""
    from rlm_runtime.context import open_context
    from rlm_runtime.context.tokens import count_text

    text = LINE * (CONTEXT_BYTES // len(LINE))
    rlm = _rlm(CountingClient(instant_responder(2)), paths, trace=False, n=2)
    session = rlm.session()
    setup = session.setup
    run = loop.Run(loop.Tree(setup, None, lambda e: None, pool_key="bench"), "benchmark", depth=0,  # type: ignore[arg-type]
                   parent_id=None)
    session.close()
    total: list[float] = []
    tokens: list[float] = []
    with Sandbox(POLICY) as sb:
        for _ in range(repeat):
            handle = open_context(text, as_text=True, name="bench")  # fresh: the probe caches nothing across handles
            t = time.perf_counter()
            prompt = run._system_prompt(sb, loop._describe([handle], "benchmark", setup))
            total.append((time.perf_counter() - t) * 1e3)
            t = time.perf_counter()
            count_text(text)
            tokens.append((time.perf_counter() - t) * 1e3)
    assert "bench" in prompt
    t = time.perf_counter()
    for _ in range(repeat):
        bare = run._system_prompt(sb, [])
    bare_ms = (time.perf_counter() - t) / repeat * 1e3
    assert bare
    return [
        _median_fig("system_prompt_1mb_ms", "1  system prompt over a 1 MB text context (once per run)", total),
        _median_fig("system_prompt_1mb_tokens_ms", "   of which (about): tiktoken count of the 1 MB context", tokens),
        Figure("system_prompt_bare_ms", "   system prompt without a context", bare_ms, n=repeat),
    ]


# -------------------------------------------------------------------- 2: fan-out


FANOUT_CODE = "answers = llm_query_batched(['question %d' % i for i in range({n})])\nFINAL(len(answers))"


def fanout_once(paths: Paths, tmp: Path, n: int, sub: CountingClient, tag: str) -> dict[str, Any]:
    code = FANOUT_CODE.format(n=n)
    events: list[dict[str, Any]] = []
    lock = threading.Lock()

    def on_event(e: dict[str, Any]) -> None:
        with lock:
            events.append(e)

    root = CountingClient(lambda messages: fenced(code))
    rlm = _rlm(root, paths, trace=str(tmp / f"fanout-{tag}.jsonl"), n=2, sub_client=sub, on_event=on_event)
    t = time.perf_counter()
    result = rlm.run("fan out")
    wall = time.perf_counter() - t
    assert result.answer == str(n), result
    subs = [e for e in events if e["type"] == "sub_call"]
    assert len(subs) == n and not any(e["error"] for e in subs), [e["error"] for e in subs if e["error"]][:3]
    cell = next(e for e in events if e["type"] == "iteration")["outputs"][0]
    starts = [e["t"] - e["duration_s"] for e in subs]
    durations = sorted(e["duration_s"] * 1e3 for e in subs)
    return {
        "cell_ms": cell["duration_s"] * 1e3,
        "sub_call_span_ms": (max(e["t"] for e in subs) - min(starts)) * 1e3,
        "model_span_ms": ((sub.last_end or 0) - (sub.first_start or 0)) * 1e3,
        "run_ms": wall * 1e3,
        "sub_call_p50_ms": statistics.median(durations),
        "sub_call_max_ms": durations[-1],
        "peak": sub.peak,
    }


def bench_fanout(paths: Paths, tmp: Path, repeat: int) -> tuple[list[Figure], dict[str, Any]]:
    got = [fanout_once(paths, tmp, FANOUT_PROMPTS, CountingClient(lambda m: "ok", delay_s=FANOUT_DELAY_S), f"{k}")
           for k in range(repeat)]

    def sleeping(messages: list[Message]) -> str:
        time.sleep(FANOUT_DELAY_S)
        return "ok"

    locked = fanout_once(paths, tmp, LOCKED_PROMPTS, CountingClient(sleeping), "locked")
    col = lambda key: [g[key] for g in got]  # noqa: E731
    ideal = FANOUT_IDEAL_MS
    label = f"{FANOUT_PROMPTS} x {FANOUT_DELAY_S * 1e3:g} ms, cap {FANOUT_CAP}"
    rows = [
        Figure("fanout_ideal_ms", f"2  ideal: {label}", ideal),
        _median_fig("fanout_cell_ms", "2  the llm_query_batched cell (worker-side duration_s)", col("cell_ms")),
        _median_fig("fanout_cell_ratio", "   ratio to ideal", [v / ideal for v in col("cell_ms")], unit="x",
                    target=f"<= {TARGET_FANOUT_RATIO:g}x"),
        _median_fig("fanout_span_ms", "2  first sub_call start to last end (trace events)", col("sub_call_span_ms")),
        _median_fig("fanout_span_ratio", "   ratio to ideal", [v / ideal for v in col("sub_call_span_ms")], unit="x",
                    target=f"<= {TARGET_FANOUT_RATIO:g}x"),
        _median_fig("fanout_run_ms", "2  whole RLM.run (session start, root turn, the cell)", col("run_ms")),
        _median_fig("fanout_sub_call_p50_ms", "   one sub_call, p50 (50 ms asleep + overhead)", col("sub_call_p50_ms")),
        _median_fig("fanout_sub_call_max_ms", "   one sub_call, max", col("sub_call_max_ms")),
        _median_fig("fanout_peak", "   peak concurrent calls seen by the sub-model", [float(v) for v in col("peak")],
                    unit="calls", target=f"== {FANOUT_CAP}"),
        Figure("locked_cell_ms", f"2  side run: {LOCKED_PROMPTS} prompts, the responder sleeps (cell)",
               locked["cell_ms"]),
        Figure("locked_ratio", f"   ratio to its ideal of {LOCKED_PROMPTS * FANOUT_DELAY_S * 1e3 / FANOUT_CAP:g} ms",
               locked["cell_ms"] / (LOCKED_PROMPTS * FANOUT_DELAY_S * 1e3 / FANOUT_CAP), unit="x"),
        Figure("locked_peak", "   peak calls in complete() (the responder itself runs one at a time)",
               float(locked["peak"]), unit="calls"),
    ]
    for r in rows:
        if r.key in ("fanout_cell_ratio", "fanout_span_ratio"):
            r.passed = r.value <= TARGET_FANOUT_RATIO
        elif r.key == "fanout_peak":
            r.passed = all(v == FANOUT_CAP for v in col("peak"))
    return rows, {"fanout_runs": got, "locked_run": locked}


# -------------------------------------------------------------- 3: sessions


def bench_session(paths: Paths, repeat: int) -> list[Figure]:
    """A question of one turn asked as the second of a session (its worker already runs)
    against the same question through ``RLM.run`` (a one-question session: a new worker)."""
    fresh: list[float] = []
    second: list[float] = []
    first_cell_fresh: list[float] = []
    first_cell_second: list[float] = []

    def first_cell_timer(out: list[float]) -> Callable[[dict[str, Any]], None]:
        state: dict[str, float] = {}

        def watch(event: dict[str, Any]) -> None:
            if event["type"] == "run_start" and not event.get("depth"):
                state["start"] = time.perf_counter()
            elif event["type"] == "iteration" and "start" in state:
                # The iteration event ends the turn: its one cell has run by then.
                out.append((time.perf_counter() - state.pop("start")) * 1e3)
        return watch

    for k in range(repeat):
        order = ("fresh", "session") if k % 2 == 0 else ("session", "fresh")
        for which in order:
            if which == "fresh":
                rlm = _rlm(CountingClient(instant_responder(1)), paths, trace=False, n=1,
                           on_event=first_cell_timer(first_cell_fresh))
                t = time.perf_counter()
                assert rlm.run("benchmark").answer == "done"
                fresh.append((time.perf_counter() - t) * 1e3)
            else:
                rlm = _rlm(CountingClient(instant_responder(1)), paths, trace=False, n=1)
                with rlm.session() as session:
                    assert session.ask("warm-up").answer == "done"
                    session.on_event = first_cell_timer(first_cell_second)
                    t = time.perf_counter()
                    assert session.ask("benchmark").answer == "done"
                    second.append((time.perf_counter() - t) * 1e3)
    return [
        _median_fig("session_fresh_ms", "3  a one-turn question through RLM.run (new worker, session start and close)", fresh),
        _median_fig("session_second_ms", "3  the same question, second in a session (its worker runs already)", second),
        _median_fig("session_saved_ms", "   saved per question", [a - b for a, b in zip(fresh, second, strict=True)]),
        _median_fig("session_first_cell_fresh_ms", "3  run start to the first turn's end, RLM.run", first_cell_fresh),
        _median_fig("session_first_cell_second_ms", "   run start to the first turn's end, second question of a session",
                    first_cell_second),
    ]


# ---------------------------------------------------------------------- profile


def profile_run(n: int, paths: Paths, tmp: Path, top: int = 25) -> str:
    """cProfile of one traced run of N instant turns, sorted by cumulative time."""
    rlm = _rlm(CountingClient(instant_responder(n)), paths, trace=str(tmp / "profile.jsonl"), n=n)
    prof = cProfile.Profile()
    prof.enable()
    rlm.run("benchmark")
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(top)
    return out.getvalue()


# ------------------------------------------------------------------------ report




def _fmt(value: float, unit: str) -> str:
    if unit == "ms":
        return f"{value * 1e3:.0f} us" if value < 1 else f"{value:.2f} ms"
    if unit == "x":
        return f"{value:.3f}x"
    return f"{value:g} {unit}"


def print_table(rows: list[Figure], extra: dict[str, Any]) -> None:
    m = extra["machine"]
    print(f"rlm_runtime orchestrator bench: Python {m['python']}, {m['cpus']} CPUs, load {m['load_1min']}, "
          f"{m['platform']}")
    print(f"{extra['iterations']} iterations per run, {extra['repeat']} rounds; medians, [min - max] over rounds\n")
    head = ("benchmark", "median", "min - max", "n", "target", "")
    widths = (68, 10, 22, 4, 10, 4)
    line = "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))
    print(line.rstrip())
    print("-" * len(line.rstrip()))
    for r in rows:
        verdict = "" if r.passed is None else ("PASS" if r.passed else "MISS")
        spread = "" if r.spread is None else f"{_fmt(r.spread[0], r.unit)} - {_fmt(r.spread[1], r.unit)}"
        cells_ = (r.label, _fmt(r.value, r.unit), spread, str(r.n), r.target, verdict)
        print("  ".join(c.ljust(w) for c, w in zip(cells_, widths, strict=True)).rstrip())


def run(n: int, repeat: int, long_n: int, fanout_repeat: int, profile: bool) -> tuple[list[Figure], dict[str, Any]]:
    scenarios = [Scenario("main", f"{n} x `x = 1`", n, repeat)]
    if long_n:
        scenarios.append(Scenario("long", f"{long_n} x `x = 1`", long_n, 3, variants=("trace",)))
    scenarios.append(Scenario("chatty", "20 x print 4,000 chars", 20, 5, CHATTY_CELL, ("trace",)))
    rows: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="rlm-orch-bench-") as d:
        tmp = Path(d)
        paths = Paths(home=tmp / "home")
        for sc in scenarios:
            rows += bench_overhead(sc, paths, tmp)
        bd_rows, extra = bench_breakdown(n, paths, tmp)
        rows += bd_rows + [bench_count_at_trim(5)] + bench_system_prompt(paths, 5)
        fan_rows, fan_extra = bench_fanout(paths, tmp, fanout_repeat)
        rows += fan_rows + bench_session(paths, max(5, repeat))
        extra.update(fan_extra)
        if profile:
            extra["profile"] = profile_run(n, paths, tmp)
    extra.update(iterations=n, repeat=repeat, long_iterations=long_n, machine=machine())
    return rows, extra


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--iterations", type=int, default=50, metavar="N",
                        help="model turns per run in the overhead benchmark (default 50)")
    parser.add_argument("--repeat", type=int, default=9, metavar="R",
                        help="rounds of the overhead benchmark (default 9)")
    parser.add_argument("--long-iterations", type=int, default=200, metavar="N",
                        help="model turns of the long-run overhead measurement, 3 rounds (default 200; 0 skips it)")
    parser.add_argument("--fanout-repeat", type=int, default=3, metavar="R",
                        help="runs of the 200-prompt fan-out (default 3)")
    parser.add_argument("--profile", action="store_true", help="also print cProfile of one traced run")
    args = parser.parse_args(argv)
    if not 2 <= args.iterations <= 499:
        parser.error("--iterations must be between 2 and 499")
    if args.long_iterations and not 2 <= args.long_iterations <= 499:
        parser.error("--long-iterations must be 0 or between 2 and 499")
    if args.repeat < 1 or args.fanout_repeat < 1:
        parser.error("--repeat and --fanout-repeat must be at least 1")
    started = time.perf_counter()
    rows, extra = run(args.iterations, args.repeat, args.long_iterations, args.fanout_repeat, args.profile)
    extra["wall_s"] = round(time.perf_counter() - started, 2)
    if args.json:
        out = {**extra, "targets": {"overhead_ms_per_iteration": TARGET_OVERHEAD_MS,
                                    "fanout_ratio_to_ideal": TARGET_FANOUT_RATIO},
               "figures": {r.key: {k: v for k, v in asdict(r).items() if k != "key"} for r in rows}}
        print(json.dumps(out, indent=2))
    else:
        print_table(rows, extra)
        if args.profile:
            print("\n" + extra["profile"])
        print(f"\n(full run: {extra['wall_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
