"""Sessions: one worker, its variables and a conversation across questions and cells."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from rlm_runtime import RLM, Session
from rlm_runtime.budget import SessionLimits
from rlm_runtime.errors import BudgetExceeded, SessionBusy, SessionClosed
from rlm_runtime.llm import ScriptedClient

from .support import NEEDLE, code, fast, haystack, of_type, read_trace


def test_a_second_question_uses_a_variable_the_first_left(tmp_path: Path) -> None:
    """It keeps the namespace across questions: the second answer needs `code_word` from the first."""
    client = ScriptedClient([
        code("hits = grep('secret launch code')\ncode_word = str(hits).split('is ')[1].rstrip('.\\n')\nprint(code_word)"),
        code("FINAL(code_word)"),
        code("FINAL(code_word.split('-')[1])"),
    ])
    with Session(client, contexts=[haystack()], limits=fast(), trace=tmp_path / "s.jsonl") as s:
        first = s.ask("What is the secret launch code?")
        second = s.ask("And its number part?")
    assert first.answer == "TANGERINE-4471"
    assert second.answer == "4471", second.error
    # The second question's prompt says what the first asked and answered, and which variables exist.
    opening = [p[1]["content"] for p in client.prompts if len(p) == 2]
    assert len(opening) == 2
    assert "What is the secret launch code?" in opening[1] and "TANGERINE-4471" in opening[1]
    assert "code_word: str" in opening[1]
    assert "Earlier questions" not in opening[0]


def test_questions_share_one_worker() -> None:
    """It answers the second question in the same worker process as the first."""
    client = ScriptedClient([code("FINAL(1)"), code("FINAL(2)")])
    with Session(client, limits=fast(), trace=False) as s:
        s.ask("one")
        first_pid = s._sandbox._worker.pid  # type: ignore[union-attr]
        s.ask("two")
        assert s._sandbox._worker.pid == first_pid  # type: ignore[union-attr]


def test_a_cell_typed_by_a_person_shares_the_namespace(tmp_path: Path) -> None:
    """It runs a person's cell in the model's namespace, both ways, and traces it as a cell."""
    client = ScriptedClient([code("print(favourite)\nFINAL(favourite * 2)"), code("left_by_model = 7\nFINAL('ok')")])
    trace = tmp_path / "s.jsonl"
    with Session(client, limits=fast(), trace=trace) as s:
        assert s.execute("favourite = 21").ok
        assert s.ask("double it").answer == "42"
        assert s.ask("leave something").answer == "ok"
        assert s.execute("print(left_by_model + 1)").stdout.strip() == "8"
    cells = of_type(read_trace(trace), "cell")
    assert [c["code"] for c in cells] == ["favourite = 21", "print(left_by_model + 1)"]
    assert cells[1]["output"]["stdout"].strip() == "8"


def test_a_refused_cell_is_refused_by_the_same_policy() -> None:
    """It checks a person's cell against the session's policy like the model's."""
    with Session(ScriptedClient([]), trace=False) as s:
        result = s.execute("import subprocess")
    assert result.error_type == "PolicyViolation"


def test_reset_starts_a_fresh_worker_and_keeps_contexts() -> None:
    """It forgets variables and the conversation on reset, and keeps the contexts."""
    client = ScriptedClient([code("FINAL(len(context))"), code("FINAL(len(context))")])
    with Session(client, contexts=["abc"], limits=fast(), trace=False) as s:
        s.execute("kept = 1")
        assert s.ask("how long?").answer == "3"
        s.reset()
        assert s.history == []
        assert s.execute("print(kept)").error_type == "NameError"
        assert s.ask("how long now?").answer == "3"
        assert [h.name for h in s.contexts] == ["text"]


def test_add_context_keeps_the_variables() -> None:
    """It adds a context to a live worker without losing what the namespace holds."""
    with Session(ScriptedClient([]), contexts=["first text"], trace=False) as s:
        assert s.execute("x = len(context)").ok
        s.add_context("second, longer text", name="second")
        out = s.execute("print(x, len(contexts), contexts[1][:6])")
    assert out.stdout.split() == ["10", "2", "second"], out


def test_usage_counts_every_question_and_the_session_budget_holds() -> None:
    """It sums usage over questions and refuses a question once the session's call budget is spent."""
    client = ScriptedClient([code("FINAL(1)"), code("FINAL(2)"), code("FINAL(3)")])
    with Session(client, limits=fast(), session_limits=SessionLimits(max_llm_calls=2), trace=False) as s:
        assert s.ask("one").answer == "1"
        assert s.ask("two").answer == "2"
        third = s.ask("three")
        usage = s.usage()
    assert usage["totals"]["calls"] == 2 and usage["questions"] == 3
    assert third.answer is None and third.error_type == "BudgetExceeded"
    assert isinstance(third.exception, BudgetExceeded) and third.exception.limit == "session.max_llm_calls"


def test_a_session_serves_one_thread_at_a_time() -> None:
    """It refuses a second thread's question with SessionBusy while one runs."""
    started = threading.Event()

    def slow(messages: list[dict[str, str]]) -> str:
        started.set()
        time.sleep(1.0)
        return "```python\nFINAL('slow')\n```"

    with Session(ScriptedClient(slow), limits=fast(), trace=False) as s:
        answers: list[str | None] = []
        t = threading.Thread(target=lambda: answers.append(s.ask("slow one").answer))
        t.start()
        assert started.wait(30)
        with pytest.raises(SessionBusy):
            s.ask("meanwhile")
        with pytest.raises(SessionBusy):
            s.execute("1")
        t.join(60)
    assert answers == ["slow"]


def test_a_closed_session_says_so() -> None:
    """It raises SessionClosed for a question after close, and close twice is fine."""
    s = Session(ScriptedClient([]), trace=False)
    s.close()
    s.close()
    with pytest.raises(SessionClosed):
        s.ask("anything")


def test_one_trajectory_holds_every_question(tmp_path: Path) -> None:
    """It writes one file per session: trace_start, two runs with their turn numbers, session_end."""
    client = ScriptedClient([code("FINAL(1)"), code("FINAL(2)")])
    trace = tmp_path / "s.jsonl"
    with Session(client, limits=fast(), trace=trace) as s:
        s.ask("first")
        s.ask("second")
    events = read_trace(trace)
    assert events[0]["type"] == "trace_start" and events[0]["schema"] == 2
    assert events[-1]["type"] == "session_end" and events[-1]["questions"] == 2
    assert [(e["query"], e["turn"]) for e in of_type(events, "run_start")] == [("first", 0), ("second", 1)]
    assert len(of_type(events, "system_prompt")) == 2


def test_rlm_is_a_context_manager_and_a_one_question_session() -> None:
    """It answers through RLM.run in a fresh session each time: no variable survives a run."""
    client = ScriptedClient([code("leftover = 1\nFINAL('a')"),
                             code("try:\n    FINAL(leftover)\nexcept NameError:\n    FINAL('gone')")])
    with RLM(client, limits=fast(), trace=False) as rlm:
        assert rlm.run("one", NEEDLE).answer == "a"
        assert rlm.run("two", NEEDLE).answer == "gone"
    with pytest.raises(SessionClosed):
        rlm.run("after close", NEEDLE)


def test_the_readme_session_demo_runs(tmp_path: Path) -> None:
    """It runs examples/session_demo.py offline: three answers, the third through the tool."""
    import os
    import subprocess
    import sys

    demo = Path(__file__).parents[2] / "examples" / "session_demo.py"
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    out = subprocess.run([sys.executable, str(demo)], capture_output=True, text=True, timeout=120, env=env, check=True).stdout
    lines = out.splitlines()
    assert lines[:3] == ["['INC-101', 'INC-107']", "['INC-112', 'INC-118']", "2281.6"]
    events = read_trace(tmp_path / "rlm-session-demo.jsonl")
    assert [e["name"] for e in of_type(events, "tool_call")] == ["fx_rate"]
