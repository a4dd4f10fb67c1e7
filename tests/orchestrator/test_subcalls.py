"""Sub-calls from sandboxed code: llm_query, llm_query_batched and rlm_query, with the budget
and the depth limit, through ``RLM.run`` with a scripted root and a scripted sub-model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlm_runtime import RLM, RunResult
from rlm_runtime.budget import Governor
from rlm_runtime.llm import ScriptedClient

from .support import FEEDBACK, code, fast, last_messages, of_type, read_trace


def run(root: list[Any] | ScriptedClient, sub: list[Any] | ScriptedClient, tmp_path: Path, context: Any = "the context",
        **options: Any) -> tuple[RunResult, list[dict[str, Any]], ScriptedClient, ScriptedClient]:
    root_client = root if isinstance(root, ScriptedClient) else ScriptedClient(root, model="scripted:root")
    sub_client = sub if isinstance(sub, ScriptedClient) else ScriptedClient(sub, model="scripted:sub")
    options.setdefault("limits", fast())
    trace = tmp_path / "t.jsonl"
    rlm = RLM(root_client, sub_client, trace=trace, **options)
    try:
        result = rlm.run("the question", context)
    finally:
        rlm.close()
    return result, read_trace(trace), root_client, sub_client


def batch_seconds(events: list[dict[str, Any]]) -> float:
    """How long the cells of the first iteration took (a batch of slow sub-calls)."""
    return sum(o["duration_s"] for o in of_type(events, "iteration")[0]["outputs"])


# ------------------------------------------------------------------- llm_query


def test_llm_query_asks_the_sub_model(tmp_path: Path) -> None:
    """It sends llm_query's prompt to the sub-model and returns its reply to the code."""
    result, events, _, sub = run([code("r = llm_query('Summarise: ' + context[:11])\nprint(r)"), code("FINAL(r)")],
                                 ["a short summary"], tmp_path)
    assert result.answer == "a short summary"
    assert sub.prompts == [[{"role": "user", "content": "Summarise: the context"}]]
    [call] = of_type(events, "sub_call")
    assert call["kind"] == "llm_query" and call["model"] == "scripted:sub"
    assert call["response"] == "a short summary" and call["error"] is None
    assert call["usage"]["calls"] == 1
    assert result.usage["scripted:sub"]["calls"] == 1 and result.usage["scripted:root"]["calls"] == 2


def test_a_long_sub_call_prompt_is_cut(tmp_path: Path) -> None:
    """It cuts a sub-call prompt to ``sub_call_max_chars``, saying so to the sub-model."""
    _, _, _, sub = run([code("llm_query('x' * 500)"), code("FINAL(1)")], ["ok"], tmp_path, limits=fast(sub_call_max_chars=100))
    sent = sub.prompts[0][0]["content"]
    assert sent.startswith("x" * 100) and not sent.startswith("x" * 101)
    assert "400 characters cut" in sent


def test_a_failed_llm_query_is_an_error_the_code_can_catch(tmp_path: Path) -> None:
    """It raises a failed sub-call inside the cell, where the code may handle it."""
    result, events, root, _ = run([
        code("try:\n    llm_query('will fail')\nexcept Exception as e:\n    print('caught:', e)"),
        code("FINAL('handled')"),
    ], [], tmp_path)
    assert result.answer == "handled"
    assert "caught:" in last_messages(root)[1] and "no reply left" in last_messages(root)[1]
    assert of_type(events, "sub_call")[0]["error"]


def test_sub_calls_reject_arguments_that_are_not_text(tmp_path: Path) -> None:
    """It tells the code that llm_query takes a str and rlm_query's context must be str or list of str."""
    result, _, root, _ = run([
        code("try:\n    llm_query(42)\nexcept Exception as e:\n    print('A', e)\n"
             "try:\n    rlm_query('q', context=5)\nexcept Exception as e:\n    print('B', e)"),
        code("FINAL('ok')"),
    ], [], tmp_path, limits=fast(max_depth=1))
    shown = last_messages(root)[1]
    assert "takes a str prompt" in shown and "context must be a str or a list of str" in shown
    assert result.answer == "ok"


# ----------------------------------------------------------- llm_query_batched


def test_batched_fan_out_with_one_failure(tmp_path: Path) -> None:
    """It answers every prompt of a batch in order, with "[ERROR] ..." in place of the one that failed."""
    sub = ScriptedClient([{"when": "ALPHA", "content": "alpha is 1"}, {"when": "GAMMA", "content": "gamma is 3"}],
                         model="scripted:sub")  # BETA matches no rule and the queue is empty: that call fails
    result, events, root, _ = run([
        code("rs = llm_query_batched(['about ALPHA', 'about BETA', 'about GAMMA'])\nfor r in rs:\n    print(r)"),
        code("FINAL(' | '.join(r for r in rs if not r.startswith('[ERROR]')))"),
    ], sub, tmp_path)
    assert result.answer == "alpha is 1 | gamma is 3"
    lines = last_messages(root)[1].splitlines()
    assert lines[0].startswith(FEEDBACK)
    assert lines[1] == "alpha is 1"
    assert lines[2].startswith("[ERROR] ") and "no reply left" in lines[2]
    assert lines[3] == "gamma is 3"
    calls = of_type(events, "sub_call")
    assert len(calls) == 3
    assert sorted(c["error"] is None for c in calls) == [False, True, True]


class PeakCounter:
    """A sub-model that sleeps ``delay_s`` per call and records the most calls in flight at once."""

    def __init__(self, delay_s: float = 0.2) -> None:
        import threading

        self.delay_s = delay_s
        self.lock = threading.Lock()
        self.now = 0
        self.peak = 0

    def __call__(self, messages: list[dict[str, str]]) -> str:
        import time

        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        time.sleep(self.delay_s)
        with self.lock:
            self.now -= 1
        return "fine"


def test_batched_calls_run_concurrently_under_the_ceiling(tmp_path: Path) -> None:
    """It runs a batch's calls at the same time, never more than ``max_concurrency``: nine calls of
    0.2 s reach exactly three in flight, and take at least three waves (0.6 s)."""
    counter = PeakCounter()
    slow = ScriptedClient(counter, model="scripted:sub")
    result, events, _, _ = run([code("rs = llm_query_batched(['p%d' % i for i in range(9)])\nFINAL(rs[8])")],
                               slow, tmp_path, limits=fast(max_concurrency=3))
    assert result.answer == "fine"
    assert counter.peak == 3
    assert batch_seconds(events) >= 0.55


def test_limits_cap_concurrency_even_with_an_explicit_governor(tmp_path: Path) -> None:
    """It keeps Limits.max_concurrency as a ceiling when a governor is given too: eight calls of
    0.2 s two at a time take at least 0.8 s."""
    slow = ScriptedClient([{"when": "p", "content": "fine"}], model="scripted:sub", delay_s=0.2)
    roomy = Governor(available_bytes=64 << 30, cpu_count=16)
    _, events, _, _ = run([code("rs = llm_query_batched(['p%d' % i for i in range(8)])\nFINAL(len(rs))")],
                          slow, tmp_path, limits=fast(max_concurrency=2), governor=roomy)
    assert batch_seconds(events) >= 0.75


def test_a_sub_model_server_with_slots_caps_concurrency(tmp_path: Path) -> None:
    """It runs no more calls at once than the sub-model's server serves (a local server's slots,
    its ``parallel``): eight calls on two slots reach exactly two in flight."""
    counter = PeakCounter()
    slow = ScriptedClient(counter, model="scripted:sub")
    slow.parallel = 2  # type: ignore[attr-defined]
    roomy = Governor(available_bytes=64 << 30, cpu_count=16)
    _, events, _, _ = run([code("rs = llm_query_batched(['p%d' % i for i in range(8)])\nFINAL(len(rs))")],
                          slow, tmp_path, limits=fast(max_concurrency=8), governor=roomy)
    assert counter.peak == 2
    assert batch_seconds(events) >= 0.75


def test_batched_rejects_a_non_list(tmp_path: Path) -> None:
    """It tells the code that llm_query_batched takes a list of str."""
    result, _, root, _ = run([code("llm_query_batched('one prompt')"), code("FINAL(llm_query_batched([]))")], [], tmp_path)
    assert "takes a list of str" in last_messages(root)[1]
    assert result.answer == "[]"


# ------------------------------------------------------------------- rlm_query


def test_rlm_query_below_max_depth_spawns_a_child_run(tmp_path: Path) -> None:
    """It runs rlm_query as a child RLM (own worker, own context) nested under its parent."""
    result, events, root, sub = run([
        code("a = rlm_query('What number is in the text?', context='noise noise. The number is 99. noise')\nprint(a)"),
        code("FINAL('child said ' + a)"),
    ], [code("print(grep('number'))"), code("FINAL('99')")], tmp_path, limits=fast(max_depth=1))
    assert result.answer == "child said 99"
    assert result.max_depth_reached == 1
    starts = of_type(events, "run_start")
    assert [s["depth"] for s in starts] == [0, 1]
    parent, child = starts
    assert parent["parent_id"] is None and child["parent_id"] == parent["run_id"]
    assert child["query"] == "What number is in the text?" and child["model"] == "scripted:sub"
    ends = {e["run_id"]: e for e in of_type(events, "run_end")}
    assert ends[child["run_id"]]["answer"] == "99" and ends[child["run_id"]]["parent_id"] == parent["run_id"]
    assert [e["run_id"] for e in of_type(events, "iteration")].count(child["run_id"]) == 2
    assert "The number is 99" in last_messages(sub)[1]  # the child grepped its own context
    assert "rlm_query(" in root.prompts[0][0]["content"]
    assert "rlm_query(" not in sub.prompts[0][0]["content"]  # the child sits at the depth limit
    assert "child said" not in "".join(m["content"] for p in sub.prompts for m in p)


def test_rlm_query_at_max_depth_is_a_plain_call(tmp_path: Path) -> None:
    """It degrades rlm_query to one plain sub-call at the depth limit: no child run."""
    result, events, root, sub = run([
        code("a = rlm_query('What number?', context='The number is 7.')"),
        code("FINAL(a)"),
    ], ["7"], tmp_path, limits=fast(max_depth=0))
    assert result.answer == "7"
    assert result.max_depth_reached == 0
    assert len(of_type(events, "run_start")) == 1
    [call] = of_type(events, "sub_call")
    assert call["kind"].startswith("rlm_query") and "max depth" in call["kind"]
    prompt = sub.prompts[0][0]["content"]
    assert prompt.startswith("What number?") and "The number is 7." in prompt
    assert "rlm_query(" not in root.prompts[0][0]["content"]


def test_the_depth_limit_holds_inside_a_child(tmp_path: Path) -> None:
    """It lets a child at the depth limit call rlm_query only as a plain call."""
    sub = ScriptedClient([{"when": "Inner question", "content": "inner answer"},
                          code("b = rlm_query('Inner question', context=context[:])\nFINAL(b)")], model="scripted:sub")
    result, events, _, _ = run([code("FINAL(rlm_query('Outer question', context='some text'))")], sub, tmp_path,
                               limits=fast(max_depth=1))
    assert result.answer == "inner answer"
    starts = of_type(events, "run_start")
    assert [s["depth"] for s in starts] == [0, 1]
    [call] = of_type(events, "sub_call")
    assert call["run_id"] == starts[1]["run_id"] and call["depth"] == 1 and "max depth" in call["kind"]


def test_a_child_without_answer_is_an_error_for_the_parent(tmp_path: Path) -> None:
    """It raises in the parent's cell when the child found no answer; the parent goes on."""
    result, events, root, _ = run([
        code("try:\n    rlm_query('hard question', context='x')\nexcept Exception as e:\n    print('child failed:', e)"),
        code("FINAL('parent carried on')"),
    ], [code("1 / 0")], tmp_path, limits=fast(max_depth=1, max_consecutive_errors=1))
    assert result.answer == "parent carried on"
    assert "rlm_query found no answer" in last_messages(root)[1]
    child_end = [e for e in of_type(events, "run_end") if e["depth"] == 1][0]
    assert child_end["error_type"] == "TooManyErrors"


def test_a_child_that_exhausts_the_budget_ends_the_whole_run(tmp_path: Path) -> None:
    """It shares one budget across the tree: a child running it out stops the parent too."""
    result, events, root, _ = run([
        code("print('root found part one')\na = rlm_query('sub question', context='x')"),
        code("FINAL('never reached')"),
    ], [code("print('child step')")] * 10, tmp_path, limits=fast(max_depth=1, max_llm_calls=4, max_iterations=8))
    assert result.answer is None
    assert result.error_type == "BudgetExceeded"
    assert result.partial == "root found part one"
    assert root.remaining == 1
    assert of_type(events, "run_end")[0]["error_type"] == "BudgetExceeded"  # the child's, first
    assert result.usage["scripted:root"]["calls"] + result.usage["scripted:sub"]["calls"] == 4


# --------------------------------------------------------------- sub-calls and the budget


def test_a_sub_call_refused_by_the_budget_ends_the_run(tmp_path: Path) -> None:
    """It refuses sub-calls past the budget ("[ERROR] ..." in a batch) and ends the run after that turn."""
    result, events, _, sub = run([
        code("rs = llm_query_batched(['a', 'b', 'c', 'd'])\nprint(sum(r.startswith('[ERROR]') for r in rs), 'refused')"),
        code("FINAL('never')"),
    ], ScriptedClient(lambda m: "fine", model="scripted:sub"), tmp_path, limits=fast(max_llm_calls=3))
    assert result.error_type == "BudgetExceeded"
    assert result.partial == "2 refused"
    assert len(sub.prompts) == 2
    assert sum(1 for c in of_type(events, "sub_call") if c["error"]) == 2


def test_final_after_a_refused_sub_call_is_kept(tmp_path: Path) -> None:
    """It keeps the answer a cell gives with FINAL after handling a budget refusal."""
    result, _, _, _ = run([
        code("rs = llm_query_batched(['a', 'b', 'c'])\nok = [r for r in rs if not r.startswith('[ERROR]')]\nFINAL(str(len(ok)) + ' answers')"),
    ], ScriptedClient(lambda m: "fine", model="scripted:sub"), tmp_path, limits=fast(max_llm_calls=3))
    assert result.answer == "2 answers"


def test_rlm_query_without_a_free_worker_is_a_plain_call(tmp_path: Path) -> None:
    """It answers rlm_query with a plain sub-call, and records a worker_wait, when the pool's only
    worker is the caller's own (waiting would deadlock on its ancestor)."""
    from rlm_runtime import Session
    from rlm_runtime.sandbox.pool import WorkerPool

    root = ScriptedClient([code("FINAL(rlm_query('what colour?', context='the sky is green'))")])
    sub = ScriptedClient([{"when": "what colour?", "content": "green"}], model="scripted:sub")
    trace = tmp_path / "t.jsonl"
    with Session(root, sub, limits=fast(max_depth=1), trace=trace, pool=WorkerPool(1)) as s:
        result = s.ask("colour?")
    assert result.answer == "green", result.error
    events = read_trace(trace)
    assert [e["depth"] for e in of_type(events, "run_start")] == [0]  # no child run started
    assert "plain call" in of_type(events, "worker_wait")[0]["detail"]
    assert [c["kind"] for c in of_type(events, "sub_call")] == ["rlm_query (plain call: no worker free)"]


def test_sub_calls_switched_off_are_not_offered_and_not_made(tmp_path: Path) -> None:
    """With ``sub_calls=False`` the prompt lists none of them, and each one called anyway raises
    in the cell without reaching the sub-model."""
    calls = "\n".join(f"try:\n    {c}\nexcept Exception as e:\n    print('refused:', e)"
                      for c in ("llm_query('x')", "llm_query_batched(['x', 'y'])", "rlm_query('x', 'text')"))
    result, events, root, sub = run([code(calls), code("FINAL('done')")], ["never"], tmp_path,
                                    limits=fast(sub_calls=False, max_depth=1))
    assert result.answer == "done" and sub.prompts == []
    system = root.prompts[0][0]["content"]
    assert "grep(" in system and "llm_query" not in system and "rlm_query" not in system
    feedback = last_messages(root)[1]
    assert feedback.count("refused:") == 3 and "switched off" in feedback
    assert not of_type(events, "sub_call")
