"""The RLM loop through ``RLM.run`` and ``retrieve``: finishing, forgiving parsing, feedback,
failing cells, timeouts and the forced last turn, all with the scripted model."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rlm_runtime import RLM, RLMError, RunResult, retrieve
from rlm_runtime.errors import BudgetExceeded, LLMCallError
from rlm_runtime.llm import ScriptedClient
from rlm_runtime.orchestrator import parse_code_blocks, prose_final

from .support import FEEDBACK, FORCED, NEEDLE, QUICK_CELLS, code, fast, haystack, last_messages, prompt_text


def run(replies: list[str] | ScriptedClient, context: Any = None, *, assists: str = "", **options: Any) -> tuple[RunResult, ScriptedClient]:
    client = replies if isinstance(replies, ScriptedClient) else ScriptedClient(replies, model="scripted:root")
    options.setdefault("limits", fast())
    if assists:  # the assists a test of one of them names (none by default: the scripted model is not small)
        options["limits"] = options["limits"].model_copy(update={"assists": assists})
    options.setdefault("trace", False)
    rlm = RLM(client, **options)
    try:
        return rlm.run("What is the secret launch code?", context), client
    finally:
        rlm.close()


# ------------------------------------------------------------------ finishing


def test_finds_a_needle_over_several_iterations() -> None:
    """It runs each turn's code against the context, feeds the output back, and stops at FINAL."""
    result, client = run([
        code("print(peek(120))"),
        code("hits = grep('launch code')\nprint(hits)"),
        code("import re\nanswer = re.search(r'[A-Z]+-[0-9]+', hits[0].line).group(0)\nprint(answer)"),
        code("FINAL(answer)"),
    ], haystack(), limits=fast(max_iterations=6))
    assert result.answer == "TANGERINE-4471"
    assert result.error is None
    assert result.iterations == 4
    seen = last_messages(client)
    assert "line 1: nothing to see here" in seen[1]
    assert f"1777: {NEEDLE}" in seen[2]
    assert seen[3].startswith(FEEDBACK) and "TANGERINE-4471" in seen[3]
    assert result.usage["scripted:root"]["calls"] == 4


def test_the_context_is_described_not_pasted() -> None:
    """It describes the context in the system prompt but never pastes the text itself."""
    result, client = run([code("FINAL('x')")], haystack())
    system = client.prompts[0][0]
    assert system["role"] == "system"
    assert "About the text: " in system["content"] and " lines, ~" in system["content"]  # the probe summary
    assert NEEDLE not in "".join(m["content"] for m in client.prompts[0])
    assert result.answer == "x"


def test_final_var_answers_with_a_variable() -> None:
    """It accepts FINAL_VAR(name) in code: the answer is the variable's value."""
    result, _ = run([
        code("found = [l for l in grep('TANGERINE')]\ncode_word = found[0].line.split()[-1].rstrip('.')"),
        code("FINAL_VAR('code_word')"),
    ], haystack())
    assert result.answer == "TANGERINE-4471"
    assert result.iterations == 2


def test_final_var_of_a_missing_variable_is_shown_to_the_model() -> None:
    """It reports FINAL_VAR of an unknown name back to the model, and the run goes on."""
    result, client = run([code("FINAL_VAR('nope')"), code("FINAL('ok')")], "text")
    assert result.answer == "ok"
    assert "nope" in last_messages(client)[1]


def test_final_with_a_number_or_a_list_is_stringified() -> None:
    """It turns a non-string FINAL value into text."""
    assert run([code("FINAL(6 * 7)")])[0].answer == "42"
    assert run([code("FINAL([1, 'b'])")])[0].answer == "[1, 'b']"


def test_final_stops_at_the_block_that_calls_it() -> None:
    """It runs several blocks of one reply in order and stops at the first FINAL."""
    reply = code("x = 'first'") + "\nthen\n" + code("FINAL(x)") + "\n" + code("FINAL('too late')")
    result, _ = run([reply])
    assert result.answer == "first"
    assert result.iterations == 1


def test_a_failing_block_skips_the_rest_of_the_reply() -> None:
    """It stops a reply at its first failing block: later blocks usually depend on it."""
    reply = code("1 / 0") + "\n" + code("FINAL('should not run')")
    result, client = run([reply, code("FINAL('after the error')")])
    assert result.answer == "after the error"
    assert "ZeroDivisionError" in last_messages(client)[1]


def test_arun_works_under_asyncio_run() -> None:
    """It answers through RLM.arun inside asyncio.run."""
    rlm = RLM(ScriptedClient([code("print(len(context))"), code("FINAL('async ok')")]), limits=fast(), trace=False)

    async def main() -> RunResult:
        return await rlm.arun("q", "some context")

    result = asyncio.run(main())
    assert result.answer == "async ok"
    assert result.iterations == 2


def test_several_contexts_are_all_reachable() -> None:
    """It exposes several contexts as `contexts`, described in the system prompt."""
    rlm = RLM(ScriptedClient([code("print(grep('beta', handle=contexts[1]))"), code("FINAL(len(contexts))")]),
              limits=fast(), trace=False)
    result = rlm.run("q", contexts=["alpha text", "some beta text"])
    client = rlm.client
    assert result.answer == "2"
    assert "contexts[1]" in client.prompts[0][0]["content"]  # type: ignore[attr-defined]
    assert "1: some beta text" in client.prompts[1][-1]["content"]  # type: ignore[attr-defined]


def test_no_context_answers_from_the_question() -> None:
    """It runs without any context, saying so in the system prompt."""
    result, client = run([code("FINAL('from the question')")])
    assert result.answer == "from the question"
    assert "(no context" in client.prompts[0][0]["content"]


# ------------------------------------------------------------ malformed replies


def test_prose_final_without_code_is_accepted() -> None:
    """It accepts FINAL(...) written in prose when the reply has no code."""
    result, _ = run(["I read enough. FINAL(TANGERINE-4471)"])
    assert result.answer == "TANGERINE-4471"
    assert result.iterations == 1


def test_prose_final_var_without_code_is_accepted() -> None:
    """It accepts FINAL_VAR(name) written in prose, reading the variable in the sandbox."""
    result, _ = run([code("word = 'kumquat'"), "The answer is in my variable: FINAL_VAR(word)"])
    assert result.answer == "kumquat"


def test_prose_final_of_a_variable_reads_its_value() -> None:
    """It evaluates an unquoted FINAL(name) written in prose in the sandbox: the variable's value."""
    result, _ = run([code("room = 589"), "The output shows it, so FINAL(room)"])
    assert result.answer == "589"


def test_prose_final_of_an_expression_is_evaluated() -> None:
    """It evaluates an unquoted expression inside a prose FINAL(...)."""
    result, _ = run([code("rooms = ['517', '589']"), "FINAL(rooms[1])"])
    assert result.answer == "589"


@pytest.mark.parametrize("reply", ["The output shows the answer, so FINAL(answer) in a code block.",
                                   "I will reply with FINAL(your answer)."])
def test_a_placeholder_in_prose_final_is_no_answer(reply: str) -> None:
    """It denies a FINAL(...) that copies the instructions' placeholder: the run goes on."""
    result, _ = run([code("x = 1"), reply, code("FINAL('real')")])
    assert result.answer == "real"
    assert result.iterations == 3


def test_an_unclosed_fence_still_runs() -> None:
    """It runs a trailing code block whose closing fence never came (generation stopped)."""
    result, _ = run(["Let me answer.\n```python\nFINAL('unclosed')"])
    assert result.answer == "unclosed"


@pytest.mark.parametrize("fence", ["```", "```py", "```repl", "```Python", "```python3"])
def test_other_fences_of_python_run(fence: str) -> None:
    """It runs blocks fenced as plain ```, py, repl, Python or python3."""
    result, _ = run([f"{fence}\nFINAL('ran')\n```"])
    assert result.answer == "ran"


def test_a_reply_without_code_or_final_is_reprompted() -> None:
    """It answers a reply with neither code nor FINAL with the reprompt, then goes on."""
    result, client = run(["Hmm, I think the answer might be somewhere in the text.", code("FINAL('second try')")], "text")
    assert result.answer == "second try"
    assert last_messages(client)[1] == prompt_text("reprompt")


@pytest.mark.parametrize("reply", ["", "   \n", "```\n```", "```python\n\n```"])
def test_an_empty_reply_is_reprompted(reply: str) -> None:
    """It re-prompts an empty reply, or one whose only block is empty."""
    result, client = run([reply, code("FINAL('then answered')")])
    assert result.answer == "then answered"
    assert last_messages(client)[1] == prompt_text("reprompt")


def test_a_second_reply_without_code_in_a_row_counts_as_a_failure() -> None:
    """It re-prompts once for free; another reply without code counts as a failing turn; a
    run failing in prose gets one forced answer turn before it stops."""
    result, client = run(["no code here", "still no code", "and again"], "text", limits=fast(max_consecutive_errors=1))
    assert result.answer is None
    assert result.error_type == "TooManyErrors"
    assert "failing turns in a row and a forced turn" in (result.error or "")
    assert result.iterations == 3
    assert last_messages(client)[1] == prompt_text("reprompt")
    assert last_messages(client)[2] == prompt_text("force_answer", found="", question="What is the secret launch code?")


def test_a_run_failing_in_prose_answers_in_the_forced_turn() -> None:
    """It asks a model that keeps replying without code for its answer before giving up, and takes it."""
    result, client = run([code("print(6 * 7)"), "The count is 42.", "The count is 42, as shown.", code("FINAL('42')")],
                         "text", limits=fast(max_iterations=10, max_consecutive_errors=1))
    assert result.answer == "42"
    assert last_messages(client)[-1] == prompt_text("force_answer", found="", question="What is the secret launch code?")


def test_the_same_prose_after_a_reprompt_is_taken_as_the_answer() -> None:
    """It takes a short reply without code, repeated after the re-prompt, as the model's answer."""
    said = "Casey reports to Quinn, who works in room 589."
    result, client = run([code("x = 1"), said, said, code("FINAL('never reached')")], assists="insisted_prose")
    assert result.answer == said
    assert result.iterations == 3
    assert any(m["content"] == prompt_text("reprompt") for m in client.prompts[-1])


def test_the_same_prose_with_code_turns_between_is_the_answer() -> None:
    """It takes prose the model repeats after code turns in between (grep, prose, grep, prose),
    the loop a 1.5B model fell into, as the answer."""
    said = "The guild meets in Ljubljana."
    grep = code("print(grep('guild'))")
    result, _ = run([grep, said, grep, said, grep, code("FINAL('never reached')")], assists="insisted_prose")
    assert result.answer == said
    assert result.iterations == 4


def test_prose_final_in_another_case_is_accepted() -> None:
    """It accepts Final("...") and final("...") written outside code (small models do)."""
    result, _ = run(['Final("in title case")'])
    assert result.answer == "in title case"
    result, _ = run(["so final('lower case')"])
    assert result.answer == "lower case"


def test_the_same_code_three_times_in_a_row_brings_the_forced_turn_early() -> None:
    """It asks for the answer after the same block came three turns in a row, instead of
    spending the remaining turns on it; the repeats are told so."""
    same = code("print('the river town')")
    client = ScriptedClient([same, same, same, {"when": FORCED, "content": code("FINAL('the river town')")}])
    result, _ = run(client, "text", limits=fast(max_iterations=10), assists="repeat_cut")
    assert result.answer == "the river town"
    assert result.iterations == 4
    assert "same code as one of your last turns" in client.prompts[2][-1]["content"]


def test_the_previous_turns_code_again_leaves_one_copy_in_the_conversation() -> None:
    """A turn that repeats the previous turn's code leaves the conversation with the output
    before it: the model sees its code once, followed by the newest output and its note (a
    small model copies back a turn it sees twice, whatever the note says). The trace keeps
    every turn."""
    same, other = code("print('the river town')"), code("print('the hill town')")
    client = ScriptedClient([same, same, other, code("FINAL('the river town')")])
    result, _ = run(client, "text", limits=fast(max_iterations=10), assists="repeat_cut")
    assert result.answer == "the river town" and result.iterations == 4
    third = client.prompts[2]
    assert [m["content"] for m in third if m["role"] == "assistant"] == [same]
    assert "same code as one of your last turns" in third[-1]["content"] and "(turn 2 of" in third[-1]["content"]
    fourth = client.prompts[3]
    assert [m["content"] for m in fourth if m["role"] == "assistant"] == [same, other]


def test_two_blocks_taken_in_turn_bring_the_forced_turn_early() -> None:
    """It counts a block that repeats the one two turns before (A, B, A, B: a loop of two) as
    a repeat, as it does the same block twice in a row."""
    a, b = code("print('the river town')"), code("print('the hill town')")
    client = ScriptedClient([a, b, a, b, {"when": FORCED, "content": code("FINAL('the river town')")}])
    result, _ = run(client, "text", limits=fast(max_iterations=10), assists="repeat_cut")
    assert result.answer == "the river town" and result.iterations == 5
    assert "same code as one of your last turns" not in client.prompts[2][-1]["content"]
    assert "same code as one of your last turns" in client.prompts[3][-1]["content"]


def test_a_long_repeated_prose_reply_is_not_an_answer() -> None:
    """It denies a long repeated reply without code the status of an answer (it is rambling)."""
    ramble = "I am still thinking about where to look. " * 20
    result, _ = run([ramble, ramble, code("FINAL('then answered')")])
    assert result.answer == "then answered"


def test_a_syntax_error_is_shown_and_the_run_goes_on() -> None:
    """It shows a cell's syntax error to the model and keeps going."""
    result, client = run([code("print('unclosed"), code("FINAL('fixed')")])
    assert result.answer == "fixed"
    assert "SyntaxError" in last_messages(client)[1] or "syntax" in last_messages(client)[1].lower()


def test_a_refused_cell_is_shown_and_the_run_goes_on() -> None:
    """It shows the policy's refusal of a cell (import os) and keeps going."""
    result, client = run([code("import os\nprint(os.environ)"), code("FINAL('behaved')")])
    assert result.answer == "behaved"
    assert "'os'" in last_messages(client)[1]


def test_a_cell_printing_nothing_says_so() -> None:
    """It tells the model when a cell printed nothing."""
    _, client = run([code("x = 1"), code("FINAL(x)")])
    assert "(no output)" in last_messages(client)[1]


def test_long_output_is_cut_to_feedback_chars() -> None:
    """It cuts a cell's output to ``feedback_chars`` in the middle, saying how much was cut."""
    result, client = run([code("print('A' * 3000 + 'B' * 3000)"), code("FINAL('ok')")], limits=fast(feedback_chars=1000))
    shown = last_messages(client)[1]
    assert result.answer == "ok"
    assert "characters cut" in shown
    assert len(shown) < 1300
    assert "AAAA" in shown and "BBBB" in shown


def test_a_long_history_is_trimmed_keeping_the_system_prompt_and_question() -> None:
    """It drops the oldest turns once the conversation outgrows 24 x feedback_chars, never the
    system prompt or the question."""
    replies = [code(f"print('turn{i} ' + 'x' * 400)") for i in range(12)] + [code("FINAL('done')")]
    result, client = run(replies, "text", limits=fast(max_iterations=13, feedback_chars=200))
    assert result.answer == "done"
    last = client.prompts[-1]
    assert last[0]["role"] == "system" and last[1]["content"] == prompt_text("first_user", query="What is the secret launch code?", history="",
                                                                                  start=prompt_text("start_grep").strip())
    assert sum(len(m["content"]) for m in last) <= 24 * 200 + 1000
    assert "turn0 " not in "".join(m["content"] for m in last[2:])
    assert "turn11 " in last[-1]["content"]
    assert [m["role"] for m in last[2:]] == ["assistant", "user"] * ((len(last) - 2) // 2)


def test_a_non_python_block_is_not_run() -> None:
    """It ignores a ```json block and does not run the prose after it as code."""
    reply = 'Here is what I found:\n```json\n{"code": "TANGERINE-4471"}\n```\nSo the answer is FINAL(TANGERINE-4471)'
    assert parse_code_blocks(reply) == []
    result, _ = run([reply])
    assert result.answer == "TANGERINE-4471"


def test_prose_final_stops_at_its_own_parenthesis() -> None:
    """It takes FINAL(...)'s argument only, not the remark written after it."""
    assert prose_final("The answer is FINAL(Paris). (I checked twice.)") == "Paris"


def test_a_closing_fence_at_the_end_of_a_code_line_closes_the_block() -> None:
    """It ends a block at a fence written right after the last line of code."""
    assert parse_code_blocks('```python\nx = 1\nFINAL(x)```\nDone.') == ["x = 1\nFINAL(x)"]


def test_an_indented_block_runs() -> None:
    """It dedents a fenced block indented as a whole (a block inside a markdown list)."""
    reply = "1. First I check:\n   ```python\n   x = 2\n   FINAL(x * 21)\n   ```"
    assert parse_code_blocks(reply) == ["x = 2\nFINAL(x * 21)"]
    assert run([reply])[0].answer == "42"


def test_prose_final_keeps_parentheses_inside_the_answer() -> None:
    """It keeps balanced parentheses and strips quotes of a prose FINAL."""
    assert prose_final('FINAL("f(x) = 2")') == "f(x) = 2"
    assert prose_final("FINAL(g(1))") == "g(1)"
    assert prose_final("no answer here") is None


def test_parse_code_blocks_finds_every_python_block() -> None:
    """It returns the code of each python block, in order."""
    text = "a\n```python\nx = 1\n```\nb\n```repl\ny = 2\n```\n```python\n\n```"
    assert parse_code_blocks(text) == ["x = 1", "y = 2"]


# ---------------------------------------------------------------- failing turns


def test_consecutive_failing_cells_stop_the_run() -> None:
    """It stops after ``max_consecutive_errors`` failing cells in a row."""
    result, client = run([code("1 / 0"), code("[][1]"), code("undefined_name"), code("FINAL('never')")],
                         limits=fast(max_iterations=10, max_consecutive_errors=3))
    assert result.answer is None
    assert result.error_type == "TooManyErrors"
    assert "3 failing turns" in (result.error or "")
    assert result.iterations == 3
    assert client.remaining == 1


def test_a_good_cell_resets_the_error_count() -> None:
    """It counts only failures in a row: a clean cell in between resets the count."""
    replies = [code("1 / 0"), code("1 / 0"), code("print('fine')"), code("1 / 0"), code("1 / 0"), code("FINAL('made it')")]
    result, _ = run(replies, limits=fast(max_iterations=10, max_consecutive_errors=3))
    assert result.answer == "made it"


def test_a_cell_timeout_mid_run_is_reported_and_the_run_goes_on() -> None:
    """It stops a cell that loops forever, tells the model it timed out, and the next turn works."""
    result, client = run([
        code("kept = 'before the loop'\nprint(kept)"),
        code("n = 0\nwhile True:\n    n += 1"),
        code("print('still here:', kept)"),
        code("FINAL(kept)"),
    ], "text", limits=fast(max_iterations=5), cell_limits=QUICK_CELLS)
    assert result.answer == "before the loop"
    seen = last_messages(client)
    assert "TimeoutError" in seen[2] and "1s" in seen[2]
    assert "still here: before the loop" in seen[3]


def test_a_cell_that_swallows_the_timeout_is_killed_and_the_run_goes_on() -> None:
    """It kills a cell that catches its own timeout, tells the model its variables are lost, and goes on
    in a fresh worker."""
    result, client = run([
        code("kept = 1"),
        code("while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass"),
        code("print('context still has', len(context), 'characters')\nprint(kept)"),
        code("FINAL('recovered')"),
    ], "text", limits=fast(max_iterations=5), cell_limits=QUICK_CELLS)
    assert result.answer == "recovered"
    killed, after = last_messages(client)[2:4]
    assert "TimeoutError" in killed and "killed" in killed and "every variable" in killed
    assert "note: " in killed and "BaseException" in killed  # the policy's warning
    assert "context still has 4 characters" in after and "NameError" in after


def test_a_model_error_mid_run_ends_the_run_with_a_result() -> None:
    """It returns a result naming the model error when the model fails (script exhausted)."""
    result, _ = run([code("print('step one')")])
    assert result.answer is None
    assert result.error_type == "LLMCallError"
    assert "no reply left" in (result.error or "")
    assert result.partial == "step one"


# ------------------------------------------------------------------ forced turn


def test_the_forced_turn_after_max_iterations_is_accepted() -> None:
    """It makes one "answer now" turn after max_iterations and accepts its FINAL."""
    client = ScriptedClient([{"when": FORCED, "content": "FINAL(best guess: TANGERINE)"},
                             code("print('looking')"), code("print('still looking')")])
    result, _ = run(client, "text", limits=fast(max_iterations=2))
    assert result.answer == "best guess: TANGERINE"
    assert result.iterations == 3
    assert last_messages(client)[2] == prompt_text("force_answer", found="", question="What is the secret launch code?")


def test_a_forced_turn_with_code_is_run() -> None:
    """It runs code in the forced turn too (FINAL_VAR of an earlier variable)."""
    client = ScriptedClient([code("guess = 'from a variable'"), code("FINAL_VAR('guess')")])
    result, _ = run(client, "text", limits=fast(max_iterations=1))
    assert result.answer == "from a variable"
    assert result.iterations == 2


def test_a_model_that_never_calls_final_gets_no_answer_and_a_partial() -> None:
    """It gives up after the forced turn, keeping the last printed output as the partial answer."""
    client = ScriptedClient([{"when": FORCED, "content": "I am not sure yet."},
                             code("print('candidate: TANGERINE')"), code("print('candidate: TANGERINE-44')"),
                             code("print('candidate: TANGERINE-4471')")])
    result, _ = run(client, haystack(), limits=fast(max_iterations=3))
    assert result.answer is None
    assert result.error_type == "NoAnswer"
    assert result.iterations == 4
    assert result.partial == "candidate: TANGERINE-4471"


# --------------------------------------------------------------------- retrieve


def test_retrieve_returns_the_answer_text() -> None:
    """It returns the answer string from retrieve()."""
    client = ScriptedClient([code("FINAL(grep('launch')[0].line.split()[-1])")])
    answer = retrieve("What is the code?", haystack(), model=client, limits=fast(), trace=False)
    assert answer == "TANGERINE-4471."


def test_retrieve_raises_budget_exceeded_with_the_partial_answer() -> None:
    """It raises BudgetExceeded carrying the partial answer when the budget runs out."""
    client = ScriptedClient([code("print('half way: TANGERINE')"), code("print('more')"), code("FINAL('late')")])
    with pytest.raises(BudgetExceeded) as info:
        retrieve("q", "text", model=client, limits=fast(max_llm_calls=2), trace=False)
    assert info.value.partial == "more"
    assert "2 model calls" in str(info.value)


def test_retrieve_raises_rlm_error_without_an_answer() -> None:
    """It raises an RLMError saying why when the run found no answer."""
    client = ScriptedClient([code("1 / 0")] * 3)
    with pytest.raises(RLMError, match="failing turns"):
        retrieve("q", "text", model=client, limits=fast(max_consecutive_errors=3), trace=False)


def test_retrieve_raises_the_model_error_itself() -> None:
    """It raises the model's own error class (LLMCallError, MissingAPIKey...) so programs can tell them apart."""
    with pytest.raises(LLMCallError, match="no reply left"):
        retrieve("q", "text", model=ScriptedClient([]), limits=fast(), trace=False)


def test_retrieve_uses_the_configured_model(write_script: Callable[..., Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """It uses $RLM_MODEL (a scripted:PATH here) when no model is given."""
    monkeypatch.setenv("RLM_MODEL", f"scripted:{write_script(code('FINAL(42)'))}")
    assert retrieve("q", trace=False) == "42"


def test_on_event_sees_every_event_and_cannot_break_the_run() -> None:
    """It calls on_event with each event, and a callback that raises does not stop the run."""
    seen: list[str] = []

    def watch(event: dict[str, Any]) -> None:
        seen.append(event["type"])
        raise RuntimeError("display broke")

    result, _ = run([code("print(1)"), code("FINAL(2)")], on_event=watch)
    assert result.answer == "2"
    # The trace's events, and the live ones no trace holds: each turn's call, its text, its cell.
    assert seen == ["trace_start", "run_start", "system_prompt", "model_call", "model_text", "cell_start", "iteration",
                    "model_call", "model_text", "cell_start", "iteration", "run_end", "session_end"]


def test_an_empty_records_lookup_the_code_only_tested_is_reported() -> None:
    """It tells a model whose code hid an empty ``find`` behind ``if found:`` why nothing was
    found and what the phrase names (the worker's note), at most three a cell; a lookup the
    cell printed is not said twice."""
    table = "kiln\tglaze\tbackup\n" + "".join(f"k{i}\t{'ash' if i % 3 else 'celadon'}\tk{(i + 1) % 40}\n" for i in range(40))
    hidden = "found = records().find('backup of k7')\nif found:\n    print(found[0]['glaze'])\nelse:\n    print('none')"
    _, client = run([code(hidden), code("print(records().find('backup of k7'))"),
                     code("for w in range(5):\n    records().find(f'nothing {w}')"), code("FINAL('x')")], table)
    shown = client.prompts[1][-1]["content"]
    assert "none" in shown and "a records lookup in this code found nothing" in shown
    assert "'k7' (the 'kiln' of 1 record, the 'backup' of 1 record): find('k7')" in shown
    assert "find('k7')[0]['backup']" in shown
    printed = client.prompts[2][-1]["content"]
    assert printed.count("no record has 'backup of k7'") == 1 and "a records lookup in this code" not in printed
    assert client.prompts[3][-1]["content"].count("a records lookup in this code found nothing") == 3


def test_a_text_with_fields_is_started_with_records() -> None:
    """It puts records() first, shows a records() first turn and says to start with it when the
    probe finds fields; a text without fields keeps grep first."""
    table = "".join(f"shelf {i}\tbox-{i}\t{'sealed' if i % 2 else 'open'}\n" for i in range(300))
    table = "shelf\tlabel\tstate\n" + table
    _, client = run([code("print(len(records().where('state', 'sealed')))"), code("FINAL(150)")], table)
    system, first = client.prompts[0][0]["content"], client.prompts[0][1]["content"]
    functions = system[system.index("Functions you can call"):]
    assert functions.index("- records()") < functions.index("- grep(")
    assert "first turn (the text has fields)" in system and "begin with records()" in first
    assert "fields: 'shelf', 'label', 'state'" in system
    assert "is a link: follow it with" in system and "Count with count()" in system
    # The rules are those of a text with fields only: no "grep for distinctive words".
    assert "The text has fields (its shape above lists them): work on records()" in system
    assert "grep for one or two distinctive words" not in system and "grep one pattern" not in system
    assert "150" in client.prompts[1][-1]["content"]
    _, client = run([code("FINAL('x')")], "The launch was on a Tuesday, in the rain.\n" * 400)
    system, first = client.prompts[0][0]["content"], client.prompts[0][1]["content"]
    functions = system[system.index("Functions you can call"):]
    assert functions.index("- grep(") < functions.index("- records()")
    assert "first turn (the text has fields)" not in system and "records()" not in first
    # Counting and following links are said only where there are fields to count and follow.
    assert "is a link" not in system and "Count with count()" not in system
    assert "grep for one or two distinctive words" in system and "grep one pattern that every item" in system
    assert "work on records()" not in system and "$shape_rules" not in system


def test_a_failing_cell_shows_the_plain_values_it_set_before_its_error() -> None:
    """It shows a model whose last line raised the strings and numbers the cell had bound
    (the answer is often one of them); a value it did not change, a huge int and a container
    are not shown."""
    cell = ("kept = 'old'\n")
    failing = "kept = kept\nstation = 'K-17 north'\nhops = 2\nbig = 10 ** 400\nitems = ['x']\nprint(f'{undefined_name}')"
    _, client = run([code(cell), code(failing), code("print(station)"), code("FINAL(station)")])
    shown = client.prompts[2][-1]["content"]
    assert "NameError" in shown
    assert "before the error, this cell set: station = 'K-17 north', hops = 2" in shown
    assert "kept =" not in shown and "big =" not in shown and "items =" not in shown
    assert "before the error" not in client.prompts[3][-1]["content"]  # a cell that ran says nothing


def test_with_the_assists_off_final_of_the_question_is_the_answer() -> None:
    """It is the plain loop with the assists off: FINAL of the question copied back is taken as
    it is, a reply without code is asked for code (never taken when said twice), and the same
    code three times runs three times."""
    question = "What is the secret launch code?"
    result, client = run([code(f"FINAL({question!r})")], assists="none")
    assert result.answer == question and len(client.prompts) == 1
    said = "The launch code is K-4."
    result, client = run([said, said, code("print(1)"), code("print(1)"), code("print(1)"), code("FINAL('K-5')")],
                         assists="none", limits=fast(max_iterations=8, max_consecutive_errors=5))
    assert result.answer == "K-5" and len(client.prompts) == 6


def test_prose_copied_from_the_first_prompt_is_no_answer_however_often_said() -> None:
    """It never takes a sentence of the runtime's own opening, said again and again in another
    case and punctuation, as the answer: the run goes on to the model's real one."""
    copied = "START BY EXPLORING THE CONTEXT, WITH CODE!"
    result, _ = run([copied, copied, copied, code("FINAL('K-4')")], "The launch code is K-4.\n" * 50, assists="insisted_prose")
    assert result.answer == "K-4"
    for said in ("The launch code is K-4, says line 3.",  # words the opening does not hold, in that order
                 "The launch code is K-4.",  # a line of the text, which the brief may quote
                 "With code"):  # words of the opening, too few to be a copy
        result, _ = run([said, said, code("FINAL('never reached')")], "The launch code is K-4.\n" * 50,
                        assists="insisted_prose")
        assert result.answer == said


def test_prose_that_writes_the_runtimes_words_back_leaves_the_conversation() -> None:
    """With ``copied_prose``, a reply without code that copies the message it answered (or the
    run's opening) is taken out of the conversation, and that message is asked again with a
    note: the next prompt holds no copy for a small model to copy again. Without it the copy
    stays; a reply in the model's own words, or a short value, is never taken out."""
    copy = ("Output of your code: found 3 crates. If this output shows the answer, reply with FINAL(answer) in a "
            "code block. Otherwise write the next code block.")
    replies = [code("print('found 3 crates')"), copy, code("FINAL('K-4')")]
    result, client = run(list(replies), assists="copied_prose")
    assert result.answer == "K-4"
    third = client.prompts[2]
    assert [m["role"] for m in third][-2:] == ["assistant", "user"] and all(m["content"] != copy for m in third)
    assert third[-1]["content"].startswith(client.prompts[1][-1]["content"])
    assert third[-1]["content"].endswith("note: do not write this message back. Reply with one ```python code block that takes "
                                         "the next\nstep, or with FINAL(answer) in a code block if an output above shows the answer.")
    result, client = run([replies[0], copy, copy, replies[2]], assists="copied_prose")
    assert result.answer == "K-4" and client.prompts[3][-1]["content"] == third[-1]["content"]  # one note, however often
    _, plain = run(list(replies), assists="none")
    assert plain.prompts[2][-2]["content"] == copy  # the plain loop keeps it
    for own in ("The crates are counted; I think the answer is that there are three of them in all.", "K-4 probably"):
        _, client = run([code("print('found 3 crates')"), own, code("FINAL('K-4')")], assists="copied_prose")
        assert client.prompts[2][-2]["content"] == own
    # A line of the text, which the opening shows whole, said back: it may be the answer.
    line = "The launch code is K-4, kept in the blue vault."
    _, client = run([code("print('found 3 crates')"), line, code("FINAL('K-4')")], f"{line}\n" * 20, assists="copied_prose")
    assert line in client.prompts[0][0]["content"] + client.prompts[0][1]["content"]
    assert client.prompts[2][-2]["content"] == line
