"""The tree-wide budget: reservations count calls in flight, settle counts what they cost,
and the cost, token, call and wall-clock limits trip (directly and through a run)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from _timing import SLACK_S
from pydantic import ValidationError

import rlm_runtime.session as session_module
from rlm_runtime import RLM
from rlm_runtime.budget import Budget, Governor, RunLimits
from rlm_runtime.errors import BudgetExceeded
from rlm_runtime.llm import Completion, ScriptedClient, Usage
from rlm_runtime.llm.base import Message

from .support import code, fast


def hold_reservations(budget: Budget, n: int, input_tokens: int = 10, max_output: int = 10) -> tuple[threading.Event, list[Any]]:
    """Start ``n`` threads that each reserve and hold until released; return the release event."""
    release = threading.Event()
    held = threading.Barrier(n + 1, timeout=5)
    outcomes: list[Any] = []

    def worker() -> None:
        try:
            with budget.reserve(input_tokens, max_output):
                held.wait()
                release.wait(5)
            outcomes.append("ok")
        except BudgetExceeded as e:
            outcomes.append(e)
            held.wait()

    for _ in range(n):
        threading.Thread(target=worker, daemon=True).start()
    held.wait()
    return release, outcomes


# ------------------------------------------------------------------ reservations


def test_calls_in_flight_count_against_the_call_limit() -> None:
    """It counts reservations held by other threads: a call beyond them trips the limit."""
    budget = Budget(RunLimits(max_llm_calls=3))
    release, outcomes = hold_reservations(budget, 3)
    with pytest.raises(BudgetExceeded) as info, budget.reserve(1, 1):
        pass
    assert info.value.limit == "max_llm_calls"
    release.set()
    time.sleep(0.05)
    assert outcomes == ["ok"] * 3
    with budget.reserve(1, 1):  # the reservations were given back, nothing was settled
        pass


def test_output_tokens_in_flight_count_at_their_maximum() -> None:
    """It reserves ``max_tokens`` of output for each call in flight."""
    budget = Budget(RunLimits(max_output_tokens=100))
    release, _ = hold_reservations(budget, 2, max_output=40)
    with pytest.raises(BudgetExceeded) as info, budget.reserve(0, 40):
        pass
    assert info.value.limit == "max_output_tokens"
    with budget.reserve(0, 20):
        pass
    release.set()


def test_input_tokens_in_flight_count() -> None:
    """It counts the prompt tokens of calls in flight and of the new call."""
    budget = Budget(RunLimits(max_input_tokens=1000))
    with pytest.raises(BudgetExceeded) as info, budget.reserve(1001, 1):
        pass
    assert info.value.limit == "max_input_tokens"
    release, _ = hold_reservations(budget, 1, input_tokens=600)
    with pytest.raises(BudgetExceeded), budget.reserve(500, 1):
        pass
    release.set()


def test_a_reservation_is_given_back_when_the_call_fails() -> None:
    """It releases the reservation of a call that raised."""
    budget = Budget(RunLimits(max_llm_calls=1))
    with pytest.raises(RuntimeError), budget.reserve(1, 1):
        raise RuntimeError("the call failed")
    with budget.reserve(1, 1):
        pass


def test_settle_counts_real_usage_per_model() -> None:
    """It adds each call's real usage, per model and in total."""
    budget = Budget(RunLimits())
    budget.settle("m1", Usage(1, 100, 20, 0.01))
    budget.settle("m1", Usage(1, 50, 10, 0.02))
    budget.settle("m2", Usage(1, 5, 5, 0.0))
    assert (budget.calls, budget.input_tokens, budget.output_tokens) == (3, 155, 35)
    assert budget.cost_usd == pytest.approx(0.03)
    assert budget.usage() == {"m1": {"calls": 2, "input_tokens": 150, "output_tokens": 30, "cost_usd": 0.03},
                              "m2": {"calls": 1, "input_tokens": 5, "output_tokens": 5, "cost_usd": 0.0}}


def test_settled_calls_count_against_the_call_limit() -> None:
    """It refuses a call once settled calls reach the limit."""
    budget = Budget(RunLimits(max_llm_calls=2))
    budget.settle("m", Usage(2, 1, 1, 0.0))
    with pytest.raises(BudgetExceeded, match="2 model calls"), budget.reserve(1, 1):
        pass


def test_settle_from_many_threads_loses_nothing() -> None:
    """It settles concurrently without losing an update."""
    budget = Budget(RunLimits())
    threads = [threading.Thread(target=lambda: [budget.settle("m", Usage(1, 2, 3, 0.001)) for _ in range(200)]) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (budget.calls, budget.input_tokens, budget.output_tokens) == (1600, 3200, 4800)
    assert budget.cost_usd == pytest.approx(1.6)


def test_the_cost_limit_trips_once_reached() -> None:
    """It refuses the next call once the settled cost reaches max_cost_usd."""
    budget = Budget(RunLimits(max_cost_usd=0.05))
    budget.settle("m", Usage(1, 1, 1, 0.03))
    with budget.reserve(1, 1):
        pass
    budget.settle("m", Usage(1, 1, 1, 0.03))
    with pytest.raises(BudgetExceeded, match=r"\$0.05") as info, budget.reserve(1, 1):
        pass
    assert info.value.limit == "max_cost_usd"


def test_a_zero_cost_limit_refuses_the_first_call() -> None:
    """It treats max_cost_usd=0 as "no paid calls at all"."""
    with pytest.raises(BudgetExceeded), Budget(RunLimits(max_cost_usd=0)).reserve(1, 1):
        pass


def test_the_wall_clock_limit_trips() -> None:
    """It raises on check_time and on reserve once max_wall_s has passed."""
    budget = Budget(RunLimits(max_wall_s=0.5))  # room for a stall before the first check
    budget.check_time()
    time.sleep(0.55)
    with pytest.raises(BudgetExceeded, match="wall-clock") as info:
        budget.check_time()
    assert info.value.limit == "max_wall_s"
    with pytest.raises(BudgetExceeded), budget.reserve(1, 1):
        pass


def test_limits_are_validated_and_frozen() -> None:
    """It rejects invalid or unknown limits and cannot be changed after creation."""
    with pytest.raises(ValidationError):
        RunLimits(max_iterations=0)
    with pytest.raises(ValidationError):
        RunLimits(max_tokens=5)  # type: ignore[call-arg]
    limits = RunLimits()
    with pytest.raises(ValidationError):
        limits.max_depth = 3  # type: ignore[misc]


# --------------------------------------------------------------- through a run


class PricedClient(ScriptedClient):
    """A scripted model whose every call costs one cent (as a hosted model reports it)."""

    def complete(self, messages: list[Message], **options: Any) -> Completion:
        completion = super().complete(messages, **options)
        completion.usage.cost_usd = 0.01
        return completion


def test_a_run_stops_at_the_call_limit_with_its_partial_answer() -> None:
    """It ends a run with BudgetExceeded at the call limit, keeping the last output as partial."""
    client = ScriptedClient([code("print('partial: 44')"), code("print('partial: 4471')"), code("FINAL('late')")])
    result = RLM(client, limits=fast(max_llm_calls=2), trace=False).run("q", "text")
    assert result.answer is None
    assert result.error_type == "BudgetExceeded"
    assert result.partial == "partial: 4471"
    assert client.remaining == 1


def test_a_run_stops_at_the_cost_limit() -> None:
    """It stops a run whose calls have cost max_cost_usd, counting cost from the client."""
    client = PricedClient([code(f"print({i})") for i in range(10)])
    result = RLM(client, limits=fast(max_cost_usd=0.025, max_iterations=10), trace=False).run("q", "text")
    assert result.error_type == "BudgetExceeded"
    assert "cost limit" in (result.error or "")
    assert len(client.prompts) == 3
    assert result.usage[client.model]["cost_usd"] == pytest.approx(0.03)


def test_a_run_stops_at_the_wall_clock_limit() -> None:
    """It stops a run that goes over max_wall_s (a slow model here), long before its iterations run out."""
    client = ScriptedClient([code(f"print({i})") for i in range(20)], delay_s=0.15)
    began = time.monotonic()
    result = RLM(client, limits=fast(max_wall_s=0.5, max_iterations=20), trace=False).run("q", "text")
    assert result.error_type == "BudgetExceeded"
    assert "wall-clock" in (result.error or "")
    assert len(client.prompts) < 10  # what proves the stop; the time bound only catches a hang
    assert time.monotonic() - began < 5 + SLACK_S


def test_a_run_stops_at_the_token_limit() -> None:
    """It refuses a call whose prompt would go over max_input_tokens."""
    client = ScriptedClient([code("print('x ' * 3000)")] * 5)
    result = RLM(client, limits=fast(max_input_tokens=3000), trace=False).run("q", "text")
    assert result.error_type == "BudgetExceeded"
    assert "input-token" in (result.error or "")


def test_a_small_output_budget_still_allows_calls() -> None:
    """It lets a run with max_output_tokens=1000 make calls (each capped to what is left)."""
    result = RLM(ScriptedClient([code("FINAL('fits')")]), limits=fast(max_output_tokens=1000), trace=False).run("q")
    assert result.answer == "fits"


def test_concurrent_sub_calls_never_overrun_the_call_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It keeps the tree within max_llm_calls while a batch runs, even when settling is slow."""

    class SlowSettle(Budget):
        def settle(self, model: str, usage: Usage) -> None:  # widen the window between release and settle
            time.sleep(0.05)
            super().settle(model, usage)

    monkeypatch.setattr(session_module, "Budget", SlowSettle)
    sub = ScriptedClient([{"when": "p", "content": "fine"}], model="scripted:sub")
    root = ScriptedClient([code("rs = llm_query_batched(['p%d' % i for i in range(20)])")], model="scripted:root")
    rlm = RLM(root, sub, limits=fast(max_llm_calls=5, max_concurrency=8), trace=False,
              governor=Governor(available_bytes=16 << 30, cpu_count=8))
    result = rlm.run("q", "text")
    assert result.error_type == "BudgetExceeded"
    assert len(root.prompts) + len(sub.prompts) <= 5


def test_a_local_model_gets_the_small_model_defaults() -> None:
    """It gives an RLM over a local: model the small-model limits when none are passed."""
    rlm = RLM(ScriptedClient([code("FINAL(1)")], model="local:tiny"), trace=False)
    try:
        assert rlm.limits == RunLimits.for_small_model()
        assert rlm.limits.max_output_tokens_per_call < RunLimits().max_output_tokens_per_call
    finally:
        rlm.close()


@pytest.mark.parametrize(("model", "small"), [("local:qwen2.5-coder-1.5b", True), ("ollama/qwen2.5-coder:1.5b", True),
                                              ("ollama_chat/qwen2.5-coder:1.5b", True), ("openai/gpt-4o-mini", False),
                                              ("scripted:replies.jsonl", False)])
def test_limits_for_a_model_name_keep_the_overrides(model: str, small: bool) -> None:
    """It picks the defaults by model name and applies the overrides on top (None is ignored)."""
    limits = RunLimits.for_model(model, max_iterations=3, max_depth=None)
    assert limits.max_iterations == 3
    assert (limits.feedback_chars == RunLimits.for_small_model().feedback_chars) is small
    assert limits.max_depth == (RunLimits.for_small_model() if small else RunLimits()).max_depth


def test_small_model_defaults_follow_the_model_not_its_provider() -> None:
    """It gives a small model served through an OpenAI-compatible server the small-model limits."""
    from rlm_runtime.budget import RunLimits

    assert RunLimits.for_model("openai/qwen2.5-coder-1.5b-instruct").max_iterations == RunLimits.for_small_model().max_iterations
    assert RunLimits.for_model("openai/gpt-4o-mini").max_iterations == RunLimits().max_iterations
