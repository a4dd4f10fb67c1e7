"""Red-team pass on the host's write caps (after issue 22): the caps were per run, so a cell
that starts many child runs (``rlm_query`` in a loop, each child's code looping on a host
function) multiplied them by the number of runs a question's budget allows. A question's
call tree has its own caps (``hostwrites.TREE_CALL_EVENT_BYTES``, ``TREE_EVENT_BYTES``)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from rlm_runtime import Session, hostwrites
from rlm_runtime.budget import RunLimits
from rlm_runtime.llm import ScriptedClient

RUN_CAP = 20_000
TREE_CAP = 60_000


def code(src: str) -> str:
    return f"```python\n{src}\n```"


def _child_reply(messages: list[dict[str, Any]]) -> str:
    if "Output of your code" in messages[-1]["content"]:
        return code("FINAL('child done')")
    return code("for i in range(400):\n    search_chunks('cats and dogs number ' + str(i))\nprint('searched')")


def test_child_runs_do_not_multiply_the_call_event_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It keeps a question's tool_call events under one tree-wide cap, whatever the number of child runs writing them."""
    monkeypatch.setattr(hostwrites, "RUN_CALL_EVENT_BYTES", RUN_CAP)
    monkeypatch.setattr(hostwrites, "TREE_CALL_EVENT_BYTES", TREE_CAP, raising=False)
    root = ScriptedClient([code("for i in range(8):\n    print(rlm_query('go', context='cats and dogs ' * 50))"),
                           code("FINAL('done')")])
    sub = ScriptedClient(_child_reply)
    trace = tmp_path / "t.jsonl"
    began = time.monotonic()
    with Session(root, sub, contexts=["some text"], limits=RunLimits(max_iterations=3, max_wall_s=240.0, max_depth=1),
                 trace=trace) as s:
        result = s.ask("q")
    assert time.monotonic() - began < 200 and result.answer == "done", result.error
    lines = trace.read_text(encoding="utf-8").splitlines()
    events = [json.loads(line) for line in lines]
    assert len({e["run_id"] for e in events if e["type"] == "run_start"}) == 9
    call_bytes = sum(len(line) for line, e in zip(lines, events, strict=True) if e["type"] in hostwrites.CALL_EVENTS)
    assert call_bytes <= TREE_CAP
    ends = [e for e in events if e["type"] == "run_end"]
    assert sum(e.get("dropped_events", 0) for e in ends) > 0


def test_a_search_chunks_flood_records_a_bounded_number_of_recalls(_rlm_home: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """It records at most RUN_RECORDED_SEARCHES of a run's searches in the memory store, while every search still answers."""
    import sqlite3

    from rlm_runtime.memory.store import MemoryStore, default_store_path

    monkeypatch.setattr(hostwrites, "RUN_RECORDED_SEARCHES", 30, raising=False)
    store_path = default_store_path()
    with MemoryStore(store_path) as store:
        for i in range(60):
            store.add_text(f"alpha beta gamma note {i}: the search finds it", source=f"notes{i}")
    cell = ("n = 0\nfor i in range(300):\n    n += len(search_chunks('alpha note ' + str(i) + ' ' + 'x' * 900, k=50))\n"
            "print('hits', n)")
    root = ScriptedClient([code(cell), code("FINAL('done')")])
    with Session(root, contexts=["some text"], limits=RunLimits(max_iterations=3, max_wall_s=240.0), memory=True) as s:
        result = s.ask("q")
    assert result.answer == "done", result.error
    assert "hits 15000" in root.prompts[1][-1]["content"]
    with sqlite3.connect(store_path) as conn:
        (traces,) = conn.execute("SELECT count(*) FROM recall_traces").fetchone()
        (rows,) = conn.execute("SELECT count(*) FROM trace_chunks").fetchone()
    assert traces <= 30 and rows <= 30 * 50


def test_a_remembered_answer_keeps_a_bounded_list_of_the_chunks_read(_rlm_home: Path) -> None:
    """It stores at most REMEMBERED_READ_IDS distinct chunk ids read by a run whose cell searched the memory thousands of times."""
    import sqlite3

    from rlm_runtime.memory.store import MemoryStore, default_store_path

    store_path = default_store_path()
    with MemoryStore(store_path) as store:
        for i in range(60):
            store.add_text(f"alpha beta gamma note {i}: the search finds it", source=f"notes{i}")
    cell = "for i in range(2000):\n    search_chunks('alpha note', k=50)\nprint('searched')"
    root = ScriptedClient([code(cell), code("FINAL('done')")])
    with Session(root, contexts=["some text"], limits=RunLimits(max_iterations=3, max_wall_s=240.0), memory=True,
                 remember=True) as s:
        result = s.ask("q")
    assert result.answer == "done", result.error
    with sqlite3.connect(store_path) as conn:
        metas = [json.loads(m) for (m,) in conn.execute("SELECT meta FROM chunks WHERE run_id IS NOT NULL AND meta IS NOT NULL")]
    assert metas and all(len(m["read_chunk_ids"]) <= hostwrites.REMEMBERED_READ_IDS for m in metas)
    assert all(len(m["read_chunk_ids"]) == len(set(m["read_chunk_ids"])) for m in metas)
