"""Red-team pass on cancel (after issue 22): ``rlm_query(p, context=[...])`` over a list of
hundreds of thousands of texts made each a document on the host, unreachable by
``cancel()`` (44 s after it, for 900,000 texts); the list is now made a corpus in batches
with a look at the budget between them."""

from __future__ import annotations

import threading
import time
from typing import Any

from rlm_runtime import Session
from rlm_runtime.budget import RunLimits
from rlm_runtime.llm import ScriptedClient


def code(src: str) -> str:
    return f"```python\n{src}\n```"


def test_cancel_reaches_the_documents_of_a_huge_rlm_query_list() -> None:
    """It ends a question within seconds of cancel() while rlm_query's 600,000 texts are made documents."""
    root = ScriptedClient([code("print(rlm_query('q', context=['ab'] * 600000))"), code("FINAL('done')")])
    sub = ScriptedClient(lambda messages: code("FINAL('ok')"))
    out: dict[str, Any] = {}
    with Session(root, sub, contexts=["some text"], limits=RunLimits(max_iterations=3, max_wall_s=600.0, max_depth=1)) as s:
        worker = threading.Thread(target=lambda: out.setdefault("result", s.ask("q")))
        worker.start()
        time.sleep(2.5)
        s.cancel()
        cancelled = time.monotonic()
        worker.join(120)
        waited = time.monotonic() - cancelled
    assert not worker.is_alive()
    assert out["result"].error_type == "Cancelled", out["result"].error
    assert waited < 10, f"{waited:.1f} s after cancel()"


def _ask_and_cancel(cell: str, limits: RunLimits, after_s: float) -> tuple[Any, float]:
    root = ScriptedClient([code(cell), code("FINAL('done')")])
    sub = ScriptedClient(lambda messages: "a reply")
    out: dict[str, Any] = {}
    with Session(root, sub, contexts=["some text"], limits=limits) as s:
        worker = threading.Thread(target=lambda: out.setdefault("result", s.ask("q")))
        worker.start()
        time.sleep(after_s)
        s.cancel()
        cancelled = time.monotonic()
        worker.join(180)
        assert not worker.is_alive()
    return out["result"], time.monotonic() - cancelled


def test_cancel_stops_a_batch_of_200000_prompts() -> None:
    """It ends a question within seconds of cancel() while llm_query_batched works through 200,000 prompts."""
    result, waited = _ask_and_cancel("print(len(llm_query_batched(['x'] * 200000)))",
                                     RunLimits(max_iterations=3, max_wall_s=600.0, max_llm_calls=10**7), 2.0)
    assert result.error_type == "Cancelled", result.error
    assert waited < 10, f"{waited:.1f} s after cancel()"


def test_a_spent_budget_answers_the_rest_of_a_batch_at_once() -> None:
    """It answers the prompts of a batch past the call budget with the budget error without one refused call each."""
    root = ScriptedClient([code("r = llm_query_batched(['x'] * 200000)\nprint(len(r), r[0], r[-1][:40])"),
                           code("FINAL('done')")])
    sub = ScriptedClient(lambda messages: "a reply")
    began = time.monotonic()
    with Session(root, sub, contexts=["some text"], limits=RunLimits(max_iterations=3, max_wall_s=600.0,
                                                                     max_llm_calls=50)) as s:
        result = s.ask("q")
    assert time.monotonic() - began < 20
    assert result.error_type == "BudgetExceeded", result.error
    shown = root.prompts[1][-1]["content"] if len(root.prompts) > 1 else ""
    assert not shown or "200000 a reply [ERROR] budget" in shown
