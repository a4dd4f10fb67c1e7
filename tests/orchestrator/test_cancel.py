"""Session.cancel() and the rest of what an interactive front end needs from a session:
switching models and limits, the variable names, the worker's memory."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rlm_runtime import Cancelled, Session
from rlm_runtime.budget import RunLimits
from rlm_runtime.errors import ConfigError
from rlm_runtime.llm import ScriptedClient
from rlm_runtime.llm.base import Completion, Message, Usage, stop_requested
from rlm_runtime.llm.tokens import count_tokens
from tests._timing import SLACK_S

from .support import code, fast, of_type, read_trace


class SlowStreamingClient:
    """Streams a reply slowly, as a local model does, and stops when told (like the litellm
    client's streaming loop); counts what it produced."""

    def __init__(self, reply: str, seconds: float = 20.0) -> None:
        self.model = "scripted:slow-stream"
        self.reply = reply
        self.seconds = seconds
        self.calls = 0
        self.stopped_early = threading.Event()
        self.started = threading.Event()

    def complete(self, messages: list[Message], *, max_tokens: int | None = None,
                 stop_after_code_block: bool = False, timeout_s: float | None = None) -> Completion:
        self.calls += 1
        self.started.set()
        deadline = time.monotonic() + self.seconds
        produced = 0
        while time.monotonic() < deadline:
            if stop_requested():
                self.stopped_early.set()
                return Completion("```python\nprint('half", self.model, Usage(1, 10, produced, 0.0),
                                  finish_reason="cancelled")
            produced += 1
            time.sleep(0.01)
        return Completion(self.reply, self.model, Usage(1, 10, produced, 0.0))

    def count_tokens(self, text: str) -> int:
        return count_tokens(text)

    def close(self) -> None:
        pass


def _cancel_when(session: Session, ready: threading.Event | None = None, after_s: float = 0.3) -> threading.Thread:
    def go() -> None:
        if ready is not None:
            ready.wait(10)
        time.sleep(after_s)
        assert session.cancel()

    thread = threading.Thread(target=go)
    thread.start()
    return thread


def test_cancel_stops_a_running_cell_and_the_session_goes_on(tmp_path: Path) -> None:
    """It ends a question stuck in a busy cell with Cancelled; variables and worker stay."""
    client = ScriptedClient([code("progress = 'looked at the first half'\nprint(progress)\nwhile True:\n    pass"),
                             code("FINAL(progress)")])
    trace = tmp_path / "s.jsonl"
    with Session(client, limits=fast(), trace=trace) as s:
        s.execute("kept = 7")
        thread = _cancel_when(s, after_s=0.8)
        began = time.monotonic()
        result = s.ask("a question that hangs")
        thread.join()
        assert time.monotonic() - began < 0.8 + 3 + SLACK_S
        assert result.answer is None
        assert isinstance(result.exception, Cancelled) and result.error_type == "Cancelled"
        assert result.partial and "first half" in result.partial
        assert s.usage()["totals"]["calls"] == 1  # settled: the one call made is counted
        assert s.cancel() is False  # nothing runs now
        follow = s.ask("and now?")
        assert follow.answer == "looked at the first half", follow.error
        assert s.execute("print(kept)").stdout.strip() == "7"
    ends = of_type(read_trace(trace), "run_end")
    assert ends[0]["error_type"] == "Cancelled" and ends[1]["answer"] == "looked at the first half"


def test_cancel_stops_a_streaming_model_call() -> None:
    """It makes a streaming call stop reading at once, and settles the tokens it produced."""
    client = SlowStreamingClient(code("FINAL(1)"), seconds=30)
    with Session(client, limits=fast(), trace=False) as s:
        thread = _cancel_when(s, client.started, after_s=0.2)
        began = time.monotonic()
        result = s.ask("slow")
        thread.join()
        took = time.monotonic() - began
    assert client.stopped_early.is_set()
    assert isinstance(result.exception, Cancelled)
    assert took < 0.2 + 2 + SLACK_S
    totals = s.usage()["totals"]
    assert totals["calls"] == 1 and totals["output_tokens"] > 0


def test_cancel_interrupts_a_persons_cell() -> None:
    """It interrupts a cell typed by a person: KeyboardInterrupt, variables kept."""
    with Session(ScriptedClient([]), limits=fast(), trace=False) as s:
        s.execute("kept = 5")
        thread = _cancel_when(s, after_s=0.3)
        result = s.execute("while True:\n    pass")
        thread.join()
        assert result.error_type == "KeyboardInterrupt" and not result.worker_restarted
        assert s.execute("print(kept)").stdout.strip() == "5"


def test_a_cell_that_ignores_cancel_costs_its_variables_and_says_so() -> None:
    """It kills a cell that swallows the interrupt; the cell's result says the worker was replaced."""
    from rlm_runtime.sandbox import CellLimits

    with Session(ScriptedClient([]), limits=fast(), cell_limits=CellLimits(kill_grace_s=0.5), trace=False) as s:
        s.execute("kept = 5")
        thread = _cancel_when(s, after_s=0.3)
        result = s.execute("while True:\n    try:\n        while True:\n            pass\n"
                           "    except BaseException:\n        pass")
        thread.join()
        assert result.worker_restarted and result.error_type == "KeyboardInterrupt"
        assert s.variable_names() == []
        assert s.execute("x = 1").ok


def test_a_cancelled_child_run_stops_its_parent(tmp_path: Path) -> None:
    """It interrupts the cells of a child run (rlm_query) and ends the whole tree."""
    def reply(messages: list[dict[str, Any]]) -> str:
        if "child question" in messages[1]["content"]:
            return code("while True:\n    pass")
        return code("x = rlm_query('child question', 'some text')\nFINAL(x)")

    with Session(ScriptedClient(reply), limits=fast(max_depth=2), trace=tmp_path / "t.jsonl") as s:
        thread = _cancel_when(s, after_s=1.5)
        began = time.monotonic()
        result = s.ask("parent")
        thread.join()
    assert isinstance(result.exception, Cancelled), result.error
    assert time.monotonic() - began < 1.5 + 4 + SLACK_S
    ends = of_type(read_trace(tmp_path / "t.jsonl"), "run_end")
    assert {e["depth"] for e in ends} == {0, 1}


def test_set_models_and_set_limits_apply_to_later_questions(tmp_path: Path) -> None:
    """It answers the next question with the new model and limits, and traces the switch."""
    first = ScriptedClient([code("FINAL('from the first')")], model="scripted:first")
    second = ScriptedClient([code("FINAL('from the second')")], model="scripted:second")
    trace = tmp_path / "s.jsonl"
    with Session(first, limits=fast(), trace=trace) as s:
        assert s.ask("q").answer == "from the first"
        s.set_models(second)
        assert s.setup.sub_client is second  # the sub-model followed the root model
        s.set_limits(fast(max_iterations=2))
        assert s.limits.max_iterations == 2
        assert s.ask("q").answer == "from the second"
        with pytest.raises(ConfigError):
            s.set_limits({"max_iterations": 3})  # type: ignore[arg-type]
    models = of_type(read_trace(trace), "models")
    assert models and models[0]["model"] == "scripted:second"
    assert "invalid_event" not in {e["type"] for e in read_trace(trace)}


def test_limits_from_the_model_follow_a_model_switch() -> None:
    """It gives a newly chosen small model the small-model limits when none were set."""
    with Session(ScriptedClient([], model="scripted:big"), trace=False) as s:
        s.set_models(ScriptedClient([], model="ollama/qwen2.5-coder:1.5b"))
        assert s.limits == RunLimits.for_model("ollama/qwen2.5-coder:1.5b")


def test_variable_names_and_worker_rss() -> None:
    """It lists the worker's variables by name and measures the worker's memory."""
    with Session(ScriptedClient([]), trace=False) as s:
        assert s.variable_names() == []
        assert s.execute("alpha = 1\nbeta = 'x:\\ny: z'").ok
        assert s.variable_names() == ["alpha", "beta"]
        rss = s.worker_rss()
        assert rss is not None and rss > 1_000_000
    assert s.worker_rss() is None
