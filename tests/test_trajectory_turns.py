"""Events of a turn (sub-calls, tool calls, child runs) carry the turn's number, and the views
show them under that turn's iteration, though they were written before it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlm_runtime import Session
from rlm_runtime.budget import RunLimits
from rlm_runtime.llm.scripted import ScriptedClient
from rlm_runtime.trajectory import read_trace
from rlm_runtime.trajectory.reader import Run, Trace
from rlm_runtime.trajectory.render import render_html, render_tree


def code(src: str) -> str:
    return f"```python\n{src}\n```"


def _replies(messages: list[dict[str, Any]]) -> str:
    """The root asks a sub-model in turn 1 and a child run in turn 2; the child answers at once."""
    first = messages[0]["content"] if messages else ""
    last = messages[-1]["content"]
    if len(messages) == 1:  # llm_query's plain call
        return "a summary of the pantry"
    if "child question" in last and len(messages) == 2:
        return code("FINAL('child answer')")
    turn = sum(1 for m in messages if m["role"] == "assistant") + 1
    del first
    return {1: code("s = llm_query('summarise the pantry')\nprint(s)"),
            2: code("c = rlm_query('child question')\nprint(c)"),
            3: code("FINAL(s + ' / ' + c)")}[turn]


def _trace(tmp_path: Path) -> Path:
    path = tmp_path / "t.jsonl"
    with Session(ScriptedClient(_replies), contexts=["flour 2kg\nrice 1kg\n"], trace=path,
                 limits=RunLimits(max_depth=1)) as s:
        result = s.ask("what is in the pantry?")
    assert result.answer == "a summary of the pantry / child answer", result.error
    return path


def test_events_of_a_turn_carry_its_number(tmp_path: Path) -> None:
    """It writes the sub-call with iteration 1 and the child run's start with parent_iteration 2."""
    events = [json.loads(line) for line in _trace(tmp_path).read_text().splitlines()]
    sub = next(e for e in events if e["type"] == "sub_call")
    child = next(e for e in events if e["type"] == "run_start" and e["depth"] == 1)
    assert sub["iteration"] == 1 and child["parent_iteration"] == 2
    assert events.index(sub) < next(i for i, e in enumerate(events) if e["type"] == "iteration")  # written first


def test_the_views_show_a_turns_events_under_it(tmp_path: Path) -> None:
    """It lists the sub-call after iteration 1's line and the child run after iteration 2's, one step in, in text and HTML."""
    trace = read_trace(_trace(tmp_path))
    root = next(x for x in trace.top_level() if isinstance(x, Run))
    kinds = [type(x).__name__ if not isinstance(x, Run) else "Run" for x in root.items()]
    assert kinds.index("SubCall") == kinds.index("Iteration") + 1
    second = [n for n, k in enumerate(kinds) if k == "Iteration"][1]
    assert kinds[second + 1] == "Run"
    lines = render_tree(trace).split("\n")
    it1 = next(n for n, line in enumerate(lines) if line.strip().startswith("iteration 1:"))
    sub = next(n for n, line in enumerate(lines) if line.strip().startswith("llm_query ->"))
    assert sub > it1 and lines[sub].index("llm_query") > lines[it1].index("iteration 1")
    page = render_html(trace)
    first, second = (page.index("<div class=inturn>"), page.index("<div class=inturn>", page.index("<div class=inturn>") + 1))
    assert page.index("iteration 1") < first < page.index("iteration 2") < second
    assert "llm_query" in page[first:page.index("iteration 2")] and "run " in page[second:]


def test_a_trace_without_turn_numbers_keeps_its_order() -> None:
    """It shows an old trace's events in the order written (nothing says which turn they belong to)."""
    lines = [{"type": "run_start", "run_id": "r", "depth": 0, "query": "q"},
             {"type": "sub_call", "run_id": "r", "depth": 0, "kind": "llm_query", "prompt": "p", "response": "x"},
             {"type": "iteration", "run_id": "r", "depth": 0, "iteration": 1, "response": "", "code_blocks": [], "outputs": []},
             {"type": "run_end", "run_id": "r", "depth": 0, "answer": "a", "iterations": 1}]
    trace = Trace.from_dicts(lines)
    root = next(x for x in trace.top_level() if isinstance(x, Run))
    assert [type(x).__name__ for x in root.items()][:3] == ["RunStart", "SubCall", "Iteration"]
