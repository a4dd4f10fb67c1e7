"""The assists' switch: ``RunLimits.assists`` (``auto``, ``none``, names), the hooks the loop
calls, the trace events, and the ``--assists`` flag of ``rlm ask`` and ``rlm repl``.

The chain, the counts and the records are those of ``test_leads.py``; here the scripted
model makes the same moves with the assists off, or only some of them on."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError

from rlm_runtime import Session
from rlm_runtime.assist import names_for
from rlm_runtime.assist.registry import SMALL_MODEL_ASSISTS
from rlm_runtime.budget import RunLimits
from rlm_runtime.llm import ScriptedClient

from .support import CLIResult, code, fast, of_type, read_trace
from .test_leads import BADGE, LEAD, QUESTION, _records, ask, chain

Script = Callable[..., Path]
CLI = Callable[..., CLIResult]


def test_auto_is_the_measured_set_for_a_small_model_and_none_for_others() -> None:
    """It reads auto as the measured set for a small model (local, or a name stating at most
    ~8B) and as none for any other, small as that set for any model, and none as none; the
    set measured on held-out text is empty (no assist gained there)."""
    assert SMALL_MODEL_ASSISTS == ()
    assert names_for("auto", "local:qwen2.5-coder-1.5b") == names_for("auto", "ollama/llama3.2:3b") == SMALL_MODEL_ASSISTS
    assert names_for("auto", "openai/gpt-4o") == names_for("auto", "anthropic/claude-sonnet-4-5") == ()
    assert names_for("small", "openai/my-model") == SMALL_MODEL_ASSISTS
    assert names_for("none", "local:qwen2.5-coder-1.5b") == ()
    assert names_for("leads,count_check", "openai/gpt-4o") == ("leads", "count_check")
    assert RunLimits().assists == "auto" and RunLimits.for_small_model().assists == "auto"


def test_a_list_of_names_is_kept_known_and_in_hook_order() -> None:
    """It takes a list or a comma-separated string, runs the names in the registry's order,
    and refuses a name no assist has (naming the known ones)."""
    assert RunLimits(assists="count_check, leads").assists == ("count_check", "leads")
    assert RunLimits(assists=["leads"]).assists == ("leads",)
    assert names_for(("count_check", "leads"), "m") == ("leads", "count_check")
    assert RunLimits(assists=None).assists == "none"  # what /limits makes of "off"
    with pytest.raises(ValidationError, match="no assist named 'magic'.*leads"):
        RunLimits(assists="leads,magic")
    again = RunLimits(**RunLimits(assists=("leads", "records")).model_dump())
    assert again.assists == ("leads", "records")


def test_none_shows_no_note_after_a_cell(tmp_path: Path) -> None:
    """It shows, with the assists off, a cell's output alone: no link followed, no question
    name after a broad grep, no lookup after an empty grep, and no assist event."""
    answer, client, events = ask(tmp_path, [code("print(grep('Belpex'))"), code("FINAL('24472')")], assists="none")
    assert answer == "24472"
    shown = client.prompts[1][-1]["content"]
    assert LEAD in shown and BADGE not in shown
    _, client, _ = ask(tmp_path, [code("print(grep('Badge'))"), code("FINAL('x')")], assists="none")
    assert LEAD not in client.prompts[1][-1]["content"]
    _, client, _ = ask(tmp_path, [code("print(grep(r'lead project (\\w+)').tally())"), code("FINAL('x')")], assists="none")
    assert LEAD not in client.prompts[1][-1]["content"]
    assert of_type(events, "assist") == [] and of_type(events, "answer_check") == []


def test_none_takes_every_answer_at_once(tmp_path: Path) -> None:
    """It takes, with the assists off, an unbacked count, a value the text never holds, and a
    middle link of a chain, each on the turn it is given."""
    for question, final in (("How many badges are there?", "FINAL('There are 11 badges')"), (QUESTION, "FINAL('The badge is 1234')"),
                            (QUESTION, "FINAL('Junsen Monnovbel')")):
        answer, client, events = ask(tmp_path, [code("print(grep('Belpex'))"), code(final), code("FINAL('other')")],
                                     question=question, assists="none")
        assert answer != "other" and len(client.prompts) == 2, final
        assert of_type(events, "answer_check") == []


def test_none_makes_the_last_turn_the_conversations_own(tmp_path: Path) -> None:
    """It asks, with the assists off, the whole conversation for the answer when the turns run
    out, with no chain's lines and no short call."""
    grep_belpex = code("print(grep('Belpex'))")
    answer, client, events = ask(tmp_path, [grep_belpex, grep_belpex, grep_belpex, "FINAL(24472)"], assists="none")
    assert answer == "24472"
    forced = client.prompts[-1][-1]["content"]
    assert len(client.prompts[-1]) > 1 and forced.startswith("You have no turns left.") and BADGE not in forced
    assert all("from" not in e for e in of_type(events, "iteration"))


def test_the_records_tally_runs_alone_or_not_at_all(tmp_path: Path) -> None:
    """It counts a counting question's records with records alone, and leaves them uncounted
    (the answer taken at once) with the assists off."""
    question = "Which label occurs most often among the sightings?"
    for setting, answer, tallied in (("records", "heron", True), ("none", "otter", False)):
        client = ScriptedClient([code("print(1)"), code("FINAL('otter')"), code("FINAL('heron')")])
        with Session(client, contexts=[_records(tmp_path)], limits=fast(assists=setting)) as s:
            assert s.ask(question).answer == answer
        assert ("records of one form" in client.prompts[1][-1]["content"]) is tallied


def test_a_named_list_runs_only_those(tmp_path: Path) -> None:
    """It follows the chain with leads alone and takes a count no output showed; with
    count_check alone it questions the count and follows no chain."""
    answer, client, _ = ask(tmp_path, [code("print(grep('Belpex'))"), code("FINAL('24472')")], assists="leads")
    assert answer == "24472" and BADGE in client.prompts[1][-1]["content"]
    count = [code("print(grep('Belpex'))"), code("FINAL('There are 11 badges')"), code("FINAL(41)")]
    answer, client, _ = ask(tmp_path, count, question="How many badges are there?", assists="leads")
    assert answer == "There are 11 badges" and len(client.prompts) == 2
    answer, client, _ = ask(tmp_path, count, question="How many badges are there?", assists="count_check")
    assert answer == "41" and client.prompts[2][-1]["content"].startswith("Before 11 is taken as the answer")
    _, client, _ = ask(tmp_path, [code("print(grep('Belpex'))"), code("FINAL('x')")], assists="count_check")
    assert BADGE not in client.prompts[1][-1]["content"]


def test_the_assists_write_their_events(tmp_path: Path) -> None:
    """It writes an assist event (name, trigger, chars) for a note after a cell and an
    answer_check event (name, answer, outcome) for a questioned answer, and for the
    short call of the last turn."""
    _, _, events = ask(tmp_path, [code("print(grep('Belpex'))"), code("FINAL('24472')")])
    [note] = of_type(events, "assist")
    assert note["name"] == "leads" and note["trigger"] == "cell" and note["chars"] > len(BADGE)
    _, _, events = ask(tmp_path, [code("print(grep('Belpex'))"), code("FINAL('There are 11 badges')"), code("FINAL(41)")],
                       question="How many badges are there?")
    [check] = of_type(events, "answer_check")
    assert (check["name"], check["answer"], check["outcome"]) == ("count_check", "There are 11 badges", "questioned")
    grep_belpex = code("print(grep('Belpex'))")
    _, _, events = ask(tmp_path, [grep_belpex, grep_belpex, grep_belpex, "Answer: 24472."])
    assert [(e["name"], e["trigger"]) for e in of_type(events, "assist")][-1] == ("chain_answer", "last_turn")


def test_ask_takes_the_assists_flag(write_script: Script, rlm_cli: CLI, tmp_path: Path) -> None:
    """It passes --assists to the run's limits (seen in run_start) and refuses an unknown name."""
    trace = tmp_path / "a.jsonl"
    script = write_script(code("print(grep('Belpex'))"), code("FINAL('24472')"))
    res = rlm_cli("ask", QUESTION, "-c", chain(tmp_path), "--model", f"scripted:{script}", "--assists", "none", "--trace", trace, "-q")
    assert res.code == 0, res.err
    [start] = of_type(read_trace(trace), "run_start")
    assert start["limits"]["assists"] == "none"
    res = rlm_cli("ask", QUESTION, "-c", chain(tmp_path), "--model", f"scripted:{script}", "--assists", "leads,magic", "-q")
    assert res.code != 0 and "no assist named 'magic'" in res.err


def test_the_repl_takes_the_assists_setting(tmp_path: Path) -> None:
    """It opens the REPL's session with the assists its config names."""
    from rlm_runtime.repl.controller import ReplConfig, open_session

    script = tmp_path / "s.jsonl"
    script.write_text('{"content": "FINAL(1)"}\n', encoding="utf-8")
    config = ReplConfig(model=f"scripted:{script}", contexts=[str(chain(tmp_path))], live=False, assists="leads",
                        trace=str(tmp_path / "r.jsonl"))
    session = open_session(config, lambda event: None)
    try:
        assert session.limits.assists == ("leads",)
    finally:
        session.close()
