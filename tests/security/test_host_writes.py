"""Issue 22, class 4: sandboxed code cannot make the host fill the disk under ``$RLM_HOME``.
Each test drives a session whose cells call host functions with hostile sizes (a tool failing
with a 10 MB error, a tight loop of tool calls, a 5 MB ``search_chunks`` query, a 50 MB
remembered answer) and checks the bytes under ``$RLM_HOME`` against the caps of
``rlm_runtime.hostwrites``."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from rlm_runtime import Session
from rlm_runtime.budget import RunLimits
from rlm_runtime.llm import ScriptedClient
from rlm_runtime.memory.store import MemoryStore, default_store_path

MB = 1024 * 1024


def code(src: str) -> str:
    return f"```python\n{src}\n```"


def limits() -> RunLimits:
    return RunLimits(max_iterations=3, max_wall_s=300.0)


def home_bytes(home: Path) -> int:
    return sum(p.stat().st_size for p in home.rglob("*") if p.is_file())


def events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def ask(cell: str, **session: Any) -> Any:
    root = ScriptedClient([code(cell), code("FINAL('done')")])
    began = time.monotonic()
    with Session(root, contexts=["alpha beta gamma\n" * 20], limits=limits(), **session) as s:
        result = s.ask("q")
        trace = s.trajectory
    assert time.monotonic() - began < 240
    return result, trace, root


def test_a_tool_failing_with_10_mb_errors_writes_a_bounded_trace(_rlm_home: Path) -> None:
    """It writes a few KB per call of a tool whose error is 10 MB, called 20 times, and the cell still sees the error."""

    def fetch(n: int) -> str:
        """Fetch."""
        raise RuntimeError("E" * (10 * MB))

    cell = ("errs = []\nfor i in range(20):\n    try:\n        fetch(i)\n    except Exception as e:\n"
            "        errs.append(str(e))\nprint(len(errs), errs[0][:40])")
    result, trace, root = ask(cell, tools=[fetch])
    assert result.answer == "done", result.error
    assert "20 fetch() failed: RuntimeError: EEEE" in root.prompts[1][-1]["content"]
    assert home_bytes(_rlm_home) < 1 * MB
    calls = [e for e in events(Path(trace)) if e["type"] == "tool_call"]
    assert len(calls) == 20 and all(len(c["error"]) < 5000 for c in calls)


def test_a_tight_loop_of_tool_calls_is_capped_per_run(_rlm_home: Path) -> None:
    """It stops writing a run's tool_call events past RUN_CALL_EVENT_BYTES and counts the rest in run_end."""
    from rlm_runtime.hostwrites import RUN_CALL_EVENT_BYTES

    def ping(payload: str) -> int:
        """Ping."""
        return len(payload)

    result, trace, _ = ask("arg = 'p' * 1000\nfor i in range(20000):\n    ping(arg)\nprint('pinged')", tools=[ping])
    assert result.answer == "done", result.error
    assert os.path.getsize(trace) < RUN_CALL_EVENT_BYTES + 1 * MB
    end = [e for e in events(Path(trace)) if e["type"] == "run_end"][-1]
    assert end["dropped_events"] > 0 and end["dropped_bytes"] > 0


def test_a_5_mb_search_query_is_not_stored_whole(_rlm_home: Path) -> None:
    """It keeps at most STORED_QUERY_CHARS of a 5 MB search_chunks query in the memory store's recall traces."""
    from rlm_runtime.hostwrites import STORED_QUERY_CHARS

    store_path = default_store_path()
    with MemoryStore(store_path) as store:
        store.add_text("alpha beta gamma delta, a note the search finds", source="notes")
    cell = "q = 'alpha ' * 900000\nfor i in range(3):\n    print(len(search_chunks(q)))"
    result, _, _ = ask(cell, memory=True)
    assert result.answer == "done", result.error
    with sqlite3.connect(store_path) as conn:
        lengths = [n for (n,) in conn.execute("SELECT length(query) FROM recall_traces")]
    assert lengths and max(lengths) <= STORED_QUERY_CHARS + 100
    assert home_bytes(_rlm_home) < 4 * MB


def test_a_50_mb_answer_is_remembered_and_traced_within_the_caps(_rlm_home: Path) -> None:
    """It stores at most REMEMBERED_ANSWER_CHARS of a 50 MB answer, and writes at most FIELD_CHARS of it in the trace."""
    from rlm_runtime.hostwrites import FIELD_CHARS, REMEMBERED_ANSWER_CHARS

    root = ScriptedClient([code("FINAL('y' * 50_000_000)")])
    with Session(root, contexts=["alpha"], limits=limits(), memory=True, remember=True) as s:
        result = s.ask("q")
        trace = s.trajectory
    assert result.answer is not None and len(result.answer) == 50_000_000
    assert home_bytes(_rlm_home) < 8 * MB
    with MemoryStore(default_store_path()) as store:
        text = "".join(row[0] for row in store.db.conn.execute("SELECT text FROM chunks"))
    assert "y" * 1000 in text and "y" * (REMEMBERED_ANSWER_CHARS + 1) not in text
    end = [e for e in events(Path(str(trace))) if e["type"] == "run_end"][-1]
    assert len(end["answer"]) < FIELD_CHARS + 100


def test_a_text_context_index_is_removed_when_the_session_closes(_rlm_home: Path) -> None:
    """It removes the index of a text context at close, and one a dead process left behind at the next search."""
    index = _rlm_home / "index"
    index.mkdir(parents=True)
    stale = index / "text-0123456789abcdef0123456789abcdef-999999999-deadbeef.db"
    stale.write_bytes(b"")
    old = index / "text-0123456789abcdef0123456789abcdef.db"  # named as before indexes were a session's own
    old.write_bytes(b"")
    root = ScriptedClient([code("print(search_chunks('alpha')[:1])"), code("FINAL('done')")])
    with Session(root, contexts=["alpha beta gamma\n" * 20], limits=limits(), trace=False) as s:
        assert s.ask("q").answer == "done"
        assert list(index.glob("text-*.db")), "the session's own index exists while it is open"
        assert not stale.exists() and not old.exists()
    assert not list(index.glob("text-*"))
