"""A trace on one time axis: each run's turns and each sub-call as a bar, with its tokens and
its seconds, and a summary of each question (``rlm trace html`` draws both).

Events carry when they were written (``t``: the end of a turn, a sub-call or a run) and how
long they took, so a bar is ``[t - duration, t]``. A turn's bar is cut in two: the model's
part (``model_s``) and the cells' part (the rest). A run's lane holds its turns; its sub-calls
and tool calls get a lane of their own beneath, and a child run (``rlm_query``) its own lanes
after its parent's. A trace may be hostile or huge: at most ``MAX_BARS`` bars are made (the
rest are counted), and every label is plain text for the caller to escape. The time between
one question's end and the next one's start (a person typing in the REPL, a session idle
between a client's questions) is left out of the axis: questions are laid end to end, a
``GAP_S`` apart, and the time left out is counted (``idle_s``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rlm_runtime.trajectory.events import Iteration, SubCall, ToolCall, Usage
from rlm_runtime.trajectory.reader import Run, Trace

#: Bars drawn at most; a trace with more says how many were left out.
MAX_BARS = 2000
#: Lanes drawn at most (two a run at most: its turns, its sub-calls).
MAX_LANES = 200
#: Child runs followed at most this deep (as the other views).
_MAX_NESTING = 100
#: Seconds drawn between two questions whose real gap (idle time) is left out.
GAP_S = 0.5


@dataclass
class Bar:
    """One stretch of time: ``kind`` is ``model``, ``cells``, ``sub_call`` or ``tool``."""

    start: float
    end: float
    kind: str
    label: str


@dataclass
class Lane:
    name: str
    depth: int
    bars: list[Bar] = field(default_factory=list)


@dataclass
class Timeline:
    lanes: list[Lane]
    start: float
    end: float
    left_out: int = 0  # bars not made past MAX_BARS or MAX_LANES
    idle_s: float = 0.0  # time between questions left out of the axis


@dataclass
class Question:
    """One question of the trace (a root run), summed up."""

    query: str
    answer: str | None
    error: str | None
    model: str | None
    iterations: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    seconds: float | None
    sub_calls: int


def tokens(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 10_000 else f"{n:,}"


def _total(usage: dict[str, Usage]) -> tuple[int, int, float]:
    return (sum(u.input_tokens for u in usage.values()), sum(u.output_tokens for u in usage.values()),
            sum(u.cost_usd for u in usage.values()))


def _runs(trace: Trace) -> list[Run]:
    return [x for x in trace.top_level() if isinstance(x, Run)]


def questions(trace: Trace) -> list[Question]:
    """Each root run's question, outcome and totals (its whole call tree's usage)."""
    out = []
    for run in _runs(trace):
        end, start = run.end, run.start
        spent = _total(end.usage) if end is not None else (0, 0, 0.0)
        tree = _walk(run, 0)
        # llm_query calls and the child runs rlm_query started (each a run of the tree but the root).
        subs = sum(isinstance(e, SubCall) for r in tree for e in r.events) + len(tree) - 1
        out.append(Question(query=start.query if start else "", answer=end.answer if end else None,
                            error=(end.error if end else "the run did not end in this trace"),
                            model=start.model if start else None, iterations=end.iterations if end else 0,
                            input_tokens=spent[0], output_tokens=spent[1], cost_usd=spent[2],
                            seconds=end.duration_s if end else None, sub_calls=subs))
    return out


def _walk(run: Run, level: int) -> list[Run]:
    """``run`` and its descendants, parents first (to ``_MAX_NESTING`` levels)."""
    found, stack = [], [(run, level)]
    while stack:
        r, n = stack.pop()
        found.append(r)
        if n < _MAX_NESTING:
            stack.extend((c, n + 1) for c in reversed(r.children))
    return found


def timeline(trace: Trace) -> Timeline | None:
    """The trace's bars in lanes, or None when no event says when it happened."""
    lanes: list[Lane] = []
    made = left = 0

    def add(lane: Lane, bar: Bar) -> None:
        nonlocal made, left
        if made >= MAX_BARS:
            left += 1
            return
        if bar.end > bar.start:
            lane.bars.append(bar)
            made += 1

    shift = idle = 0.0  # seconds the current question's bars move left; seconds left out so far
    last_end: float | None = None
    for root in _runs(trace):
        first_lane = len(lanes)
        for run in _walk(root, 0):
            query = run.start.query if run.start is not None else ""
            turns = Lane(f"{'  ' * run.depth}run {run.run_id}: {query}", run.depth)
            calls = Lane(f"{'  ' * run.depth}  its sub-calls and tools", run.depth)
            for e in run.events:
                if e.t is None:
                    continue
                if isinstance(e, Iteration) and e.duration_s is not None:
                    begin = e.t - e.duration_s
                    model = min(e.model_s if e.model_s is not None else e.duration_s, e.duration_s)
                    what = f"turn {e.iteration}" + (" (forced)" if e.forced else "")
                    add(turns, Bar(begin, begin + model, "model", f"{what}: the model, {model:.1f}s, "
                                   f"{tokens(e.usage.input_tokens)} tokens in, {tokens(e.usage.output_tokens)} out"))
                    add(turns, Bar(begin + model, e.t, "cells", f"{what}: {len(e.code_blocks)} cell(s), "
                                   f"{e.duration_s - model:.1f}s"))
                elif isinstance(e, SubCall) and e.duration_s is not None:
                    add(calls, Bar(e.t - e.duration_s, e.t, "sub_call", f"{e.kind}: {e.duration_s:.1f}s, "
                                   f"{tokens(e.usage.input_tokens)} tokens in, {tokens(e.usage.output_tokens)} out"))
                elif isinstance(e, ToolCall) and e.duration_s is not None:
                    add(calls, Bar(e.t - e.duration_s, e.t, "tool", f"{e.name}: {e.duration_s:.2f}s"))
            for lane in (turns, calls):
                if len(lanes) < MAX_LANES and lane.bars:
                    lanes.append(lane)
                elif lane.bars:
                    left += len(lane.bars)
        mine = [b for lane in lanes[first_lane:] for b in lane.bars]
        if not mine:
            continue
        start = min(b.start for b in mine)
        if last_end is not None and start - shift > last_end + GAP_S:
            gap = start - shift - (last_end + GAP_S)  # the idle time before this question
            shift += gap
            idle += gap
        for b in mine:
            b.start -= shift
            b.end -= shift
        end = max(b.end for b in mine)
        last_end = end if last_end is None else max(last_end, end)
    bars = [b for lane in lanes for b in lane.bars]
    if not bars:
        return None
    return Timeline(lanes, min(b.start for b in bars), max(b.end for b in bars), left, idle)
