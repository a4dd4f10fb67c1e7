"""`rlm ask` end to end through the console script's entry point, with scripted models
(``--model scripted:PATH``): answers, --json, live iterations, exit codes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from rlm_runtime.config import paths_from_env

from .support import FORCED, NEEDLE, CLIResult, code, haystack, of_type, read_trace

pytestmark = pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")  # litellm's types, on first use

Script = Callable[..., Path]
CLI = Callable[..., CLIResult]


@pytest.fixture
def hay(tmp_path: Path) -> Path:
    path = tmp_path / "haystack.txt"
    path.write_text(haystack(), encoding="utf-8")
    return path


@pytest.fixture
def quick_policy(tmp_path: Path) -> Path:
    """The shipped default policy with a one-second cell timeout."""
    text = (paths_from_env().policy_dirs[-1] / "default.toml").read_text(encoding="utf-8")
    text = text.replace("cell_timeout_s = 30", "cell_timeout_s = 1").replace("kill_grace_s = 1.0", "kill_grace_s = 0.5")
    assert "cell_timeout_s = 1\n" in text
    path = tmp_path / "quick.toml"
    path.write_text(text, encoding="utf-8")
    return path


NEEDLE_SCRIPT = [
    code("print(peek(80))"),
    code("hits = grep('launch code')\nprint(hits)"),
    code("answer = hits[0].line.split()[-1].rstrip('.')\nprint(answer)"),
    code("FINAL(answer)"),
]


# ----------------------------------------------------------------- answers


def test_ask_finds_a_needle_over_several_iterations(write_script: Script, hay: Path, rlm_cli: CLI) -> None:
    """It prints the answer on stdout, shows each iteration on stderr and exits 0."""
    res = rlm_cli("ask", "What is the launch code?", "-c", hay, "--model", f"scripted:{write_script(*NEEDLE_SCRIPT)}",
                  "--max-iterations", "5")
    assert res.code == 0, res.err
    assert res.out == "TANGERINE-4471\n"
    for n in (1, 2, 3, 4):
        assert f"--- iteration {n}" in res.err
    # The reply as the model wrote it, then what its cell printed.
    assert res.err.index("  | hits = grep('launch code')") < res.err.index(f"1777: {NEEDLE}")
    assert "--- done: 4 iterations" in res.err


def test_quiet_hides_the_iterations(write_script: Script, hay: Path, rlm_cli: CLI) -> None:
    """It prints only the answer with -q."""
    res = rlm_cli("ask", "q", "-c", hay, "--model", f"scripted:{write_script(*NEEDLE_SCRIPT)}", "-q")
    assert res.code == 0
    assert res.out == "TANGERINE-4471\n"
    assert res.err == ""


def test_json_prints_one_object(write_script: Script, hay: Path, rlm_cli: CLI, tmp_path: Path) -> None:
    """It prints exactly one JSON object with answer, usage, iterations, trajectory and error."""
    trace = tmp_path / "ask.jsonl"
    res = rlm_cli("ask", "q", "-c", hay, "--model", f"scripted:{write_script(*NEEDLE_SCRIPT)}", "--json", "--trace", trace)
    assert res.code == 0
    doc = res.json()
    assert doc["answer"] == "TANGERINE-4471"
    assert doc["iterations"] == 4
    assert doc["error"] is None and doc["error_type"] is None
    assert doc["trajectory"] == str(trace)
    [(model, usage)] = doc["usage"].items()
    assert model.startswith("scripted:") and usage["calls"] == 4 and usage["input_tokens"] > 0
    events = read_trace(trace)
    assert events[0]["type"] == "trace_start" and events[0]["schema"] == 2
    types = [e["type"] for e in events]
    assert types[1] == "run_start" and types[-2:] == ["run_end", "session_end"]


def test_the_trace_goes_under_rlm_home_by_default(write_script: Script, hay: Path, rlm_cli: CLI, _rlm_home: Path) -> None:
    """It writes the trajectory under $RLM_HOME/traces when --trace is not given."""
    doc = rlm_cli("ask", "q", "-c", hay, "--model", f"scripted:{write_script(*NEEDLE_SCRIPT)}", "--json", "-q").json()
    assert Path(doc["trajectory"]).parent == _rlm_home / "traces"


def test_the_model_comes_from_rlm_model(write_script: Script, hay: Path, rlm_cli: CLI, monkeypatch: pytest.MonkeyPatch) -> None:
    """It uses $RLM_MODEL when --model is not given."""
    monkeypatch.setenv("RLM_MODEL", f"scripted:{write_script(code('FINAL(len(context))'))}")
    res = rlm_cli("ask", "q", "-c", hay, "-q")
    assert res.code == 0 and int(res.out) > 100_000


def test_final_var(write_script: Script, hay: Path, rlm_cli: CLI) -> None:
    """It answers with a variable through FINAL_VAR."""
    script = write_script(code("n = sum(1 for line in context if 'filler' in line)"), code("FINAL_VAR('n')"))
    res = rlm_cli("ask", "How many filler lines?", "-c", hay, "--model", f"scripted:{script}", "-q")
    assert (res.code, res.out) == (0, "2999\n")


def test_batched_fan_out_with_one_failure(write_script: Script, hay: Path, rlm_cli: CLI, tmp_path: Path) -> None:
    """It fans a batch out to the sub-model: the failing prompt yields "[ERROR] ...", the others answers."""
    root = write_script(
        code("rs = llm_query_batched(['part ONE', 'part TWO', 'part THREE'])\nfor r in rs:\n    print(r[:60])"),
        code("FINAL(' + '.join(r for r in rs if not r.startswith('[ERROR]')))"),
    )
    sub = write_script({"when": "part ONE", "content": "one ok"}, {"when": "part THREE", "content": "three ok"})
    trace = tmp_path / "t.jsonl"
    res = rlm_cli("ask", "q", "-c", hay, "--model", f"scripted:{root}", "--sub-model", f"scripted:{sub}", "--trace", trace)
    assert res.code == 0, res.err
    assert res.out == "one ok + three ok\n"
    assert "[ERROR]" in res.err and "llm_query:" in res.err
    calls = of_type(read_trace(trace), "sub_call")
    assert len(calls) == 3 and sum(1 for c in calls if c["error"]) == 1


def test_a_cell_timeout_mid_run(write_script: Script, hay: Path, rlm_cli: CLI, quick_policy: Path) -> None:
    """It stops a looping cell at the policy's timeout, says so, and the run still answers."""
    script = write_script(code("k = 'kept'"), code("while True:\n    pass"), code("FINAL(k + ' after timeout')"))
    res = rlm_cli("ask", "q", "-c", hay, "--model", f"scripted:{script}", "--policy", quick_policy)
    assert res.code == 0, res.err
    assert res.out == "kept after timeout\n"
    assert "TimeoutError" in res.err


def test_the_depth_limit_makes_rlm_query_a_plain_call(write_script: Script, hay: Path, rlm_cli: CLI, tmp_path: Path) -> None:
    """It turns rlm_query into one sub-call at --max-depth 0 (no child run), and runs a child at 1."""
    root = [code("a = rlm_query('SUB: what is the code?', context=grep('launch')[0].line)"), code("FINAL(a)")]
    sub = write_script({"when": "SUB: what is the code?", "content": "TANGERINE-4471"})
    plain = tmp_path / "plain.jsonl"
    res = rlm_cli("ask", "q", "-c", hay, "--model", f"scripted:{write_script(*root)}", "--sub-model", f"scripted:{sub}",
                  "--max-depth", "0", "--trace", plain, "-q")
    assert (res.code, res.out) == (0, "TANGERINE-4471\n")
    assert len(of_type(read_trace(plain), "run_start")) == 1
    assert "max depth" in of_type(read_trace(plain), "sub_call")[0]["kind"]

    child_sub = write_script(code("FINAL(grep('TANGERINE')[0].line.split()[-1])"))
    nested = tmp_path / "nested.jsonl"
    res = rlm_cli("ask", "q", "-c", hay, "--model", f"scripted:{write_script(*root)}", "--sub-model", f"scripted:{child_sub}",
                  "--max-depth", "1", "--trace", nested)
    assert (res.code, res.out) == (0, "TANGERINE-4471.\n")
    assert "-> rlm_query (depth 1): SUB: what is the code?" in res.err
    starts = of_type(read_trace(nested), "run_start")
    assert [s["depth"] for s in starts] == [0, 1] and starts[1]["parent_id"] == starts[0]["run_id"]


def test_malformed_replies_are_forgiven(write_script: Script, hay: Path, rlm_cli: CLI) -> None:
    """It re-prompts a reply without code, runs an unclosed block, and accepts FINAL in prose."""
    script = write_script("I will think about it first.", "```python\nn = len(grep('launch'))\nprint(n)", "So the count is FINAL(1)")
    res = rlm_cli("ask", "q", "-c", hay, "--model", f"scripted:{script}")
    assert (res.code, res.out) == (0, "1\n")
    assert "  | I will think about it first." in res.err
    assert "--- iteration 3" in res.err


def test_a_model_that_never_calls_final(write_script: Script, hay: Path, rlm_cli: CLI) -> None:
    """It exits 1 after the iterations and the forced turn, showing the partial output on stderr."""
    script = write_script({"when": FORCED, "content": "I give up."}, {"when": "Output of your code", "content": code("print('still looking')")},
                          code("print('looking')"))
    res = rlm_cli("ask", "q", "-c", hay, "--model", f"scripted:{script}", "--max-iterations", "3")
    assert res.code == 1
    assert res.out == ""
    assert "rlm: no answer: no FINAL answer after 3 iterations" in res.err
    assert "rlm: partial output: still looking" in res.err
    assert "--- forced answer" in res.err


def test_no_answer_in_json(write_script: Script, hay: Path, rlm_cli: CLI) -> None:
    """It exits 1 and reports the error in the JSON object when there is no answer."""
    script = write_script(code("1 / 0"))
    res = rlm_cli("ask", "q", "-c", hay, "--model", f"scripted:{script}", "--json", "--max-iterations", "1")
    assert res.code == 1
    doc = res.json()
    assert doc["answer"] is None and doc["error_type"] == "LLMCallError" and "no reply left" in doc["error"]
    assert "rlm: no answer" not in res.err


def test_a_zero_dollar_budget_stops_before_the_first_call(write_script: Script, hay: Path, rlm_cli: CLI) -> None:
    """It exits 1 with a budget error when --budget-usd is 0."""
    res = rlm_cli("ask", "q", "-c", hay, "--model", f"scripted:{write_script(code('FINAL(1)'))}", "--budget-usd", "0", "--json")
    assert res.code == 1
    doc = res.json()
    assert doc["error_type"] == "BudgetExceeded" and "cost limit" in doc["error"]


def test_budget_exhaustion_with_a_partial_answer(write_script: Script, hay: Path, rlm_cli: CLI) -> None:
    """It exits 1 when the call budget runs out, printing the partial output."""
    script = write_script(code("print('so far: TANGERINE')"), code("print('so far: TANGERINE-44')"), code("FINAL('late')"))
    res = rlm_cli("ask", "q", "-c", hay, "--model", f"scripted:{script}", "--max-calls", "2")
    assert res.code == 1
    assert "partial output: so far: TANGERINE-44" in res.err


def test_a_token_budget_stops_the_run(write_script: Script, hay: Path, rlm_cli: CLI) -> None:
    """It exits 1 with a budget error when --max-tokens is smaller than the first prompt."""
    res = rlm_cli("ask", "q", "-c", hay, "--model", f"scripted:{write_script(code('FINAL(1)'))}", "--max-tokens", "100", "--json")
    assert res.code == 1
    doc = res.json()
    assert doc["error_type"] == "BudgetExceeded" and "input-token limit of 100" in doc["error"]


# -------------------------------------------------------------- exit codes


def test_a_missing_context_path_exits_2(write_script: Script, rlm_cli: CLI, tmp_path: Path) -> None:
    """It exits 2 naming a context path that does not exist."""
    res = rlm_cli("ask", "q", "-c", tmp_path / "nope.txt", "--model", f"scripted:{write_script(code('FINAL(1)'))}")
    assert res.code == 2
    assert "no such context file or folder" in res.err and "nope.txt" in res.err
    assert "Traceback" not in res.err


def test_an_unknown_model_exits_2(hay: Path, rlm_cli: CLI) -> None:
    """It exits 2 for a model name no provider knows."""
    res = rlm_cli("ask", "q", "-c", hay, "--model", "nonsense-model", "-q")
    assert res.code == 2
    assert "unknown model 'nonsense-model'" in res.err


def test_a_missing_api_key_exits_2(hay: Path, rlm_cli: CLI, monkeypatch: pytest.MonkeyPatch) -> None:
    """It exits 2 naming the variable of a missing API key."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    res = rlm_cli("ask", "q", "-c", hay, "--model", "openai/gpt-4o-mini", "-q")
    assert res.code == 2
    assert "OPENAI_API_KEY" in res.err


def test_an_unreachable_server_exits_3(hay: Path, rlm_cli: CLI) -> None:
    """It exits 3 when the model's server refuses connections."""
    res = rlm_cli("ask", "q", "-c", hay, "--model", "openai/x", "--api-base", "http://127.0.0.1:9", "-q")
    assert res.code == 3
    assert "unreachable" in res.err and "127.0.0.1:9" in res.err


def test_no_model_configured_exits_2(hay: Path, rlm_cli: CLI, monkeypatch: pytest.MonkeyPatch) -> None:
    """It exits 2 telling how to pick a model when neither --model nor $RLM_MODEL is set."""
    monkeypatch.delenv("RLM_MODEL", raising=False)
    res = rlm_cli("ask", "q", "-c", hay)
    assert res.code == 2
    assert "--model" in res.err and "RLM_MODEL" in res.err


def test_a_broken_script_exits_2_naming_the_line(hay: Path, rlm_cli: CLI, tmp_path: Path) -> None:
    """It exits 2 naming the script line that is not JSON."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"content": "ok"}\n{"content": oops}\n', encoding="utf-8")
    res = rlm_cli("ask", "q", "-c", hay, "--model", f"scripted:{bad}")
    assert res.code == 2
    assert "bad.jsonl:2" in res.err and "Traceback" not in res.err


@pytest.mark.parametrize("args", [("--max-iterations", "0"), ("--max-depth", "99"), ("--policy", "no-such-policy")])
def test_invalid_options_exit_2(args: tuple[str, ...], write_script: Script, hay: Path, rlm_cli: CLI) -> None:
    """It exits 2 for an invalid limit or an unknown policy."""
    res = rlm_cli("ask", "q", "-c", hay, "--model", f"scripted:{write_script(code('FINAL(1)'))}", *args)
    assert res.code == 2
    assert res.err.startswith("rlm: error:")


def test_the_installed_command_in_a_real_process(write_script: Script, hay: Path, tmp_path: Path) -> None:
    """It prints nothing but the JSON object on stdout of a real process, and exits with the status."""
    script = write_script(*NEEDLE_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run([sys.executable, "-c", "from rlm_runtime.cli import entry; entry()", "ask", "q", "-c", str(hay),
                           "--model", f"scripted:{script}", "--json"], capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["answer"] == "TANGERINE-4471"
    assert proc.stdout.count("\n") == 1
    assert "--- iteration 1" in proc.stderr


# ------------------------------------------------------- terminal escapes in output

#: Raw controls that would act on a terminal (C0 but newline and tab, DEL, C1, bidi controls).
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
#: Sets the title (OSC 0/2), writes the clipboard (OSC 52), draws a hyperlink (OSC 8), forges a
#: line (cursor up, erase line, carriage return), uses the C1 CSI and a bidi override.
ATTACK = ("FAILED 3 tests\x1b[1A\x1b[2K\rall tests passed \x1b]0;t0\x07\x1b]2;t2\x07\x1b]52;c;ZXZpbA==\x07"
          "\x1b]8;;https://evil.example/\x1b\\docs\x1b]8;;\x1b\\ \x9b31mred \u202eevil")
ATTACK_SHOWN = ("FAILED 3 tests\\x1b[1A\\x1b[2K\\x0dall tests passed \\x1b]0;t0\\x07\\x1b]2;t2\\x07\\x1b]52;c;ZXZpbA==\\x07"
                "\\x1b]8;;https://evil.example/\\x1b\\docs\\x1b]8;;\\x1b\\ \\x9b31mred \\u202eevil")
#: A cell that prints the attack; its comment holds a raw ESC, as a model's code can.
ATTACK_CELL = code(f"ATTACK = {ATTACK!r}  # \x1b]0;code-title\x07\nprint(ATTACK)")


def test_ask_escapes_terminal_controls(write_script: Script, hay: Path, rlm_cli: CLI) -> None:
    """It shows the live view (code, output, prose) and the answer with their terminal controls escaped."""
    script = write_script(ATTACK_CELL, "Thinking\x1b]0;pwned\x07 FAILED\rall ok \u202e", code("FINAL(ATTACK)"))
    res = rlm_cli("ask", "q", "-c", hay, "--model", f"scripted:{script}")
    assert res.code == 0, res.err
    assert not RAW_CONTROL.search(res.out + res.err), res.err
    assert res.out == ATTACK_SHOWN + "\n"
    assert "# \\x1b]0;code-title\\x07" in res.err
    assert f"    {ATTACK_SHOWN[:100]}" in res.err
    assert "  | Thinking\\x1b]0;pwned\\x07 FAILED\\x0dall ok \\u202e" in res.err


def test_ask_json_round_trips_terminal_controls(write_script: Script, hay: Path, rlm_cli: CLI) -> None:
    """It keeps the --json answer free of raw controls through JSON's escapes, and parsing gives the exact answer."""
    script = write_script(ATTACK_CELL, code("FINAL(ATTACK)"))
    res = rlm_cli("ask", "q", "-c", hay, "--model", f"scripted:{script}", "--json", "-q")
    assert res.code == 0, res.err
    assert not RAW_CONTROL.search(res.out)
    assert res.json()["answer"] == ATTACK


def test_ask_escapes_the_partial_answer(write_script: Script, hay: Path, rlm_cli: CLI) -> None:
    """It shows the partial output of a run without an answer with its terminal controls escaped."""
    res = rlm_cli("ask", "q", "-c", hay, "--model", f"scripted:{write_script(ATTACK_CELL)}", "--max-iterations", "2", "-q")
    assert res.code == 1
    assert not RAW_CONTROL.search(res.out + res.err), res.err
    assert f"rlm: partial output: {ATTACK_SHOWN}\n" in res.err
    assert res.err.startswith("rlm: no answer: ")


def test_ask_escapes_a_child_query(write_script: Script, hay: Path, rlm_cli: CLI) -> None:
    """It shows an rlm_query question in the live view escaped and on one line."""
    root = write_script(code(f"a = rlm_query({ATTACK + chr(10) + 'second line'!r}, context='x')"), code("FINAL(a)"))
    sub = write_script(code("FINAL('ok')"))
    res = rlm_cli("ask", "q", "-c", hay, "--model", f"scripted:{root}", "--sub-model", f"scripted:{sub}", "--max-depth", "1")
    assert (res.code, res.out) == (0, "ok\n"), res.err
    assert not RAW_CONTROL.search(res.err), res.err
    assert f"-> rlm_query (depth 1): {ATTACK_SHOWN[:80]}\n" in res.err


def test_a_lone_surrogate_in_cell_output(write_script: Script, hay: Path, rlm_cli: CLI, tmp_path: Path) -> None:
    """It runs on when a cell prints a lone surrogate: the trace keeps it as a JSON escape, the live view shows it escaped."""
    trace = tmp_path / "t.jsonl"
    script = write_script(code("print('x' + chr(0xd800))"), code("FINAL('done')"))
    res = rlm_cli("ask", "q", "-c", hay, "--model", f"scripted:{script}", "--trace", trace)
    assert (res.code, res.out) == (0, "done\n"), res.err
    assert of_type(read_trace(trace), "iteration")[0]["outputs"][0]["stdout"] == "x\ud800\n"


def test_remember_then_ask_the_memory(write_script: Script, rlm_cli: CLI) -> None:
    """It stores an answer with --remember, and a later ask with -c memory: finds it with search_chunks."""
    first = rlm_cli("ask", "Where do they meet?", "--remember", "-q", "--model",
                    f"scripted:{write_script(code('FINAL(' + repr('They meet in Ljubljana') + ')'))}")
    assert first.code == 0, first.err
    later = write_script(code("hits = search_chunks('meet')\nFINAL(read_chunk(hits[0]['id']))"))
    res = rlm_cli("ask", "Where did we say they meet?", "-c", "memory:", "-q", "--model", f"scripted:{later}")
    assert res.code == 0, res.err
    assert "They meet in Ljubljana" in res.out


def test_memory_colon_searches_the_store_memory_names(write_script: Script, rlm_cli: CLI, tmp_path: Path) -> None:
    """``-c memory: --memory STORE`` searches STORE, not the default store; two stores named
    two ways is a usage error (exit 2)."""
    from rlm_runtime.memory import MemoryStore

    store = tmp_path / "team.db"
    with MemoryStore(store) as st:
        st.add_text("The team meets in Ljubljana on Thursdays.", source="team")
    later = write_script(code("hits = search_chunks('meets')\nFINAL(read_chunk(hits[0]['id']) if hits else 'none')"))
    res = rlm_cli("ask", "Where does the team meet?", "-c", "memory:", "--memory", store, "-q", "--model", f"scripted:{later}")
    assert res.code == 0 and "Ljubljana" in res.out, res.err
    res = rlm_cli("ask", "q?", "-c", f"memory:{tmp_path / 'other.db'}", "--memory", store, "-q", "--model", f"scripted:{later}")
    assert res.code == 2 and "a run searches one" in res.err


def test_the_readmes_scripted_example_prints_what_the_readme_says(rlm_cli: CLI) -> None:
    """It answers the README's scripted example (examples/scripted_payments.jsonl) as shown there."""
    root = Path(__file__).resolve().parents[2]
    res = rlm_cli("ask", "Which incidents touched payments?", "-c", root / "examples" / "incidents.md",
                  "-m", f"scripted:{root / 'examples' / 'scripted_payments.jsonl'}")
    assert res.code == 0, res.err
    assert res.out == "['INC-101', 'INC-112']\n"
    readme = (root / "README.md").read_text(encoding="utf-8")
    assert "['INC-101', 'INC-112']" in readme and "INC-112 payments: duplicate charges" in res.err


def test_a_list_answer_is_json_data_in_json_output(write_script, rlm_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """FINAL(a list) gives ``--json`` a ``value`` that is a JSON list (``answer`` stays its text);
    a str answer has no value; a number's value is the number."""
    doc = tmp_path / "notes.txt"
    doc.write_text("INC-101 payments\nINC-112 payments\n")
    for final, value in (("['INC-101', 'INC-112']", ["INC-101", "INC-112"]), ("'INC-101'", None), ("42", 42),
                         ("{'a': [1, 2]}", {"a": [1, 2]})):
        script = write_script(code(f"FINAL({final})"))
        res = rlm_cli("ask", "which?", "-c", doc, "-m", f"scripted:{script}", "--json")
        data = json.loads(res.out)
        assert res.code == 0 and data["value"] == value, (final, res.out)
        assert isinstance(data["answer"], str)
