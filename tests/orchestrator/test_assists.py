"""The assist mechanism (``rlm_runtime.assist``): the hooks the loop calls, the trace events
the runner writes, the ``assists`` setting (``auto``, ``small``, ``none``, names) and its
flag on ``rlm ask`` and ``rlm repl``, and the typed lookups an assist reads the text with.

The mechanism is tested with small assists of this file's own, registered with
``monkeypatch`` (the ones that ship have their own tests).
The text they read is a pantry log in prose, shaped unlike any eval suite's template."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError

from rlm_runtime import Session
from rlm_runtime.assist import Answer, Assist, AssistState, Cell, Host, Question, lookups, names_for, registry
from rlm_runtime.assist.registry import REGISTRY, SMALL_MODEL_ASSISTS
from rlm_runtime.budget import RunLimits
from rlm_runtime.llm import ScriptedClient

from .support import FORCED, CLIResult, code, fast, of_type, read_trace

Script = Callable[..., Path]
CLI = Callable[..., CLIResult]

QUESTION = "How many jars of quince jam are on the cellar shelf?"
QUINCE = "On the cellar shelf, behind the flour, Marta counted eleven jars of quince jam."


def pantry(tmp_path: Path) -> Path:
    """A pantry log in prose: dated notes about shelves, one of them about the quince jam."""
    rows = [f"Tuesday note {i}: the larder was swept and the {('rye', 'oats', 'lentils')[i % 3]} sack moved a little."
            for i in range(300)]
    rows[211] = QUINCE
    path = tmp_path / "pantry.txt"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


class QuinceNote(Assist):
    """After a cell: the lines holding "quince" (looked up for the model), and the cell's kind."""

    name = "quince_note"

    def after_cell(self, host: Host, state: AssistState, cell: Cell) -> str:
        found, total = lookups.lines(host, "quince", ignore_case=True, most=3)
        return f"QUINCE NOTE after {cell.kind}: {total} line(s)\n" + "\n".join(found)


class Aside(Assist):
    """A second note after every cell, saying how many outputs the run has seen."""

    name = "aside"

    def after_cell(self, host: Host, state: AssistState, cell: Cell) -> str:
        return f"ASIDE NOTE ({len(state.seen)} outputs seen)"


class JarCheck(Assist):
    """Questions, once, an answer that gives no number of jars."""

    name = "jar_check"

    def __init__(self) -> None:
        self.asked = False

    def on_answer(self, host: Host, state: AssistState, answer: Answer) -> str | Question | None:
        if self.asked or answer.last or any(ch.isdigit() for ch in answer.text):
            return None
        self.asked = True
        host.note_lookup("no number in the answer")
        return Question(f"CHECK: how many jars? ({answer.text!r} gives no number)")


class Rounder(Assist):
    """Replaces the answer "eleven" by "11"."""

    name = "rounder"

    def on_answer(self, host: Host, state: AssistState, answer: Answer) -> str | Question | None:
        return "11" if answer.text == "eleven" else None


class Found(Assist):
    """Adds a line to the forced turn's prompt and leaves the answer to it."""

    name = "found"

    def last_found(self, host: Host, state: AssistState) -> str:
        return "\nFOUND: the quince jam is on the cellar shelf."


class Probe(Assist):
    """Reads the text every way ``lookups`` can, and a pattern RE2 refuses."""

    name = "probe"

    def after_cell(self, host: Host, state: AssistState, cell: Cell) -> str:
        lines, total = lookups.lines(host, "quince")
        kinds, n_kinds = lookups.tally(host, r"the (\w+) sack")
        refused = lookups.lines(host, r"(a+)+\1"), lookups.count(host, r"(a+)+\1")
        return f"PROBE {total} {lookups.count(host, 'sack')} {kinds} {n_kinds} {refused}"


ALL = (QuinceNote, Aside, JarCheck, Rounder, Found, Probe)


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The assists of this file, in the registry in the order of ``ALL`` (the hook order)."""
    for cls in ALL:
        monkeypatch.setitem(REGISTRY, cls.name, cls)


def ask(tmp_path: Path, replies: list[str], question: str = QUESTION, **limits: object) -> tuple[str | None, ScriptedClient, list]:
    client = ScriptedClient(replies)
    trace = tmp_path / f"t{uuid.uuid4().hex[:8]}.jsonl"  # a trace file appends: one a run
    with Session(client, contexts=[pantry(tmp_path)], limits=fast(**limits), trace=trace) as s:
        result = s.ask(question)
    return result.answer, client, read_trace(trace)


def test_a_note_after_a_cell_reaches_the_next_message_and_is_traced(tmp_path: Path, registered: None) -> None:
    """It adds an assist's note to the cell's feedback and writes an assist event with its
    name, trigger (the cell's kind), characters and lookups."""
    answer, client, events = ask(tmp_path, [code("print('looking')"), code("print(grep('quince jars'))"), code("FINAL('11')")],
                                 assists="quince_note")
    assert answer == "11"
    first, second = client.prompts[1][-1]["content"], client.prompts[2][-1]["content"]
    assert "looking" in first and "QUINCE NOTE after cell: 1 line(s)\n212: " + QUINCE in first
    assert "QUINCE NOTE after empty_grep" in second
    notes = of_type(events, "assist")
    assert [(e["name"], e["trigger"]) for e in notes] == [("quince_note", "cell"), ("quince_note", "empty_grep"),
                                                          ("quince_note", "final")]
    assert notes[0]["chars"] == len(f"QUINCE NOTE after cell: 1 line(s)\n212: {QUINCE}")
    assert notes[0]["lookups"] == ["lines /quince/i: 1"]
    assert of_type(events, "tool_call") == []  # the runtime's lookups are not the model's tool calls


def test_none_turns_every_assist_off(tmp_path: Path, registered: None) -> None:
    """It shows, with the assists off, a cell's output alone, takes every answer at once,
    makes the last turn the conversation's own, and writes no assist event."""
    answer, client, events = ask(tmp_path, [code("print('looking')"), code("FINAL('some jars')")], assists="none")
    assert answer == "some jars" and len(client.prompts) == 2
    assert "NOTE" not in client.prompts[1][-1]["content"]
    answer, client, more = ask(tmp_path, [code("print(1)"), code("print(2)"), "FINAL(11)"], assists="none", max_iterations=2)
    assert answer == "11" and client.prompts[-1][-1]["content"].startswith(FORCED)
    assert "FOUND" not in client.prompts[-1][-1]["content"]
    events += more
    assert of_type(events, "assist") == [] and of_type(events, "answer_check") == []
    assert all("from" not in e for e in of_type(events, "iteration"))


def test_notes_come_in_the_registrys_order(tmp_path: Path, registered: None) -> None:
    """It calls the hooks in the registry's order whatever order the names are given in, each
    assist's note added, and the shared state holds the outputs seen so far."""
    _, client, events = ask(tmp_path, [code("print('looking')"), code("FINAL('11')")], assists="aside,quince_note")
    shown = client.prompts[1][-1]["content"]
    assert shown.index("QUINCE NOTE") < shown.index("ASIDE NOTE (1 outputs seen)")
    assert [e["name"] for e in of_type(events, "assist")][:2] == ["quince_note", "aside"]


def test_a_check_before_an_answer_gives_one_more_turn_and_is_traced(tmp_path: Path, registered: None) -> None:
    """It sends a check's note instead of taking the answer, takes the next one, and writes an
    answer_check event (name, answer, outcome, lookups)."""
    answer, client, events = ask(tmp_path, [code("FINAL('a few jars')"), code("FINAL('11 jars')")], assists="jar_check")
    assert answer == "11 jars" and len(client.prompts) == 2
    assert client.prompts[1][-1]["content"] == "CHECK: how many jars? ('a few jars' gives no number)"
    [check] = of_type(events, "answer_check")
    assert (check["name"], check["answer"], check["outcome"], check["lookups"]) == (
        "jar_check", "a few jars", "questioned", ["no number in the answer"])
    answer, client, _ = ask(tmp_path, [code("FINAL('a few jars')"), code("FINAL('11 jars')")], assists="jar_check",
                            max_iterations=1)
    assert answer == "a few jars" and len(client.prompts) == 1  # no turn left to give: taken


def test_settle_replaces_the_answer_and_is_traced(tmp_path: Path, registered: None) -> None:
    """It takes the answer an assist settles on in place of the model's, with an answer_check event."""
    answer, _, events = ask(tmp_path, [code("FINAL('eleven')")], assists="rounder")
    assert answer == "11"
    [check] = of_type(events, "answer_check")
    assert (check["name"], check["answer"], check["outcome"]) == ("rounder", "eleven", "replaced")
    answer, _, events = ask(tmp_path, [code("FINAL('twelve')")], assists="rounder")
    assert answer == "twelve" and of_type(events, "answer_check") == []


def test_last_found_is_shown_in_the_forced_turn(tmp_path: Path, registered: None) -> None:
    """It adds what an assist found to the conversation's forced turn when no assist answers it."""
    answer, client, _ = ask(tmp_path, [code("print(1)"), code("print(2)"), "FINAL(11)"], assists="found", max_iterations=2)
    assert answer == "11"
    forced = client.prompts[-1][-1]["content"]
    assert forced.startswith(FORCED + "\nFOUND: the quince jam is on the cellar shelf.") and QUESTION in forced


def test_lookups_leave_the_models_reads_and_variables_alone(tmp_path: Path, registered: None) -> None:
    """It answers an assist's lines, count and tally from the text, an empty result for a
    pattern RE2 refuses, and leaves the model's access counts and namespace as they were."""
    stats = {}
    for setting in ("none", "probe"):
        client = ScriptedClient([code("x = 1\nprint(grep('quince'))"), code("FINAL('11')")])
        trace = tmp_path / f"{setting}.jsonl"
        with Session(client, contexts=[pantry(tmp_path)], limits=fast(assists=setting), trace=trace) as s:
            assert s.ask(QUESTION).answer == "11"
            assert s.variable_names() == ["x"]
        [stats[setting]] = of_type(read_trace(trace), "context_stats")
    assert "PROBE 1 299 {'rye': 100, 'lentils': 100, 'oats': 99} 3 (([], 0), None)" in client.prompts[1][-1]["content"]
    assert stats["probe"]["contexts"] == stats["none"]["contexts"]
    assert stats["probe"]["contexts"][0]["greps"] == 1


def test_auto_gives_a_small_model_the_measured_set(monkeypatch: pytest.MonkeyPatch, registered: None, tmp_path: Path) -> None:
    """It reads auto as the measured set for a small model (local, or a name stating at most
    ~8B) and none for any other, small as that set for any model, and none as none; the set
    that ships names only registered assists (read_field, which gained held out, and the two
    former loop rules kept); those with no held-out gain are gone."""
    assert all(n in REGISTRY for n in SMALL_MODEL_ASSISTS)
    assert SMALL_MODEL_ASSISTS == ("repeat_cut", "copied_prose", "insisted_prose", "read_field", "records_count")
    assert not {"follow_link", "question_echo", "value_as_code", "records_reprompt"} & set(REGISTRY)
    assert names_for("auto", "local:qwen2.5-coder-1.5b") == SMALL_MODEL_ASSISTS
    assert names_for("auto", "openai/gpt-4o") == ()
    monkeypatch.setattr(registry, "SMALL_MODEL_ASSISTS", ("quince_note",))
    assert names_for("auto", "local:qwen2.5-coder-1.5b") == names_for("auto", "ollama/llama3.2:3b") == ("quince_note",)
    assert names_for("auto", "openai/gpt-4o") == names_for("auto", "anthropic/claude-sonnet-4-5") == ()
    assert names_for("small", "openai/my-model") == ("quince_note",)
    assert names_for("none", "local:qwen2.5-coder-1.5b") == ()
    assert RunLimits().assists == "auto" and RunLimits.for_small_model().assists == "auto"
    # The scripted model states no size: auto gives it nothing, small gives it the set.
    _, client, _ = ask(tmp_path, [code("print(1)"), code("FINAL('11')")])
    assert "QUINCE NOTE" not in client.prompts[1][-1]["content"]
    _, client, _ = ask(tmp_path, [code("print(1)"), code("FINAL('11')")], assists="small")
    assert "QUINCE NOTE" in client.prompts[1][-1]["content"]


def test_a_list_of_names_is_kept_known_and_in_hook_order(registered: None) -> None:
    """It takes a list or a comma-separated string, runs the names in the registry's order,
    and refuses a name no assist has, naming the known ones."""
    assert RunLimits(assists="rounder, quince_note").assists == ("rounder", "quince_note")
    assert RunLimits(assists=["aside"]).assists == ("aside",)
    assert names_for(("rounder", "quince_note"), "m") == ("quince_note", "rounder")
    assert RunLimits(assists=None).assists == "none"  # what /limits makes of "off"
    with pytest.raises(ValidationError, match="no assist named 'magic'.*quince_note, aside"):
        RunLimits(assists="aside,magic")
    again = RunLimits(**RunLimits(assists=("aside", "rounder")).model_dump())
    assert again.assists == ("aside", "rounder")


def test_a_removed_assist_is_an_unknown_name() -> None:
    """It refuses the names of the assists removed after the held-out measurement, naming those registered."""
    for name in ("leads", "count_check", "search_hint", "chain_answer", "question_fields", "unseen_answer", "follow_link"):
        with pytest.raises(ValidationError, match=f"no assist named .{name}.*(read_field|none is registered)"):
            RunLimits(assists=name)
    assert RunLimits(assists="none").assists == "none" and RunLimits(assists="small").assists == "small"


def test_ask_takes_the_assists_flag(write_script: Script, rlm_cli: CLI, tmp_path: Path, registered: None) -> None:
    """It passes --assists to the run's limits (seen in run_start and in what the model is
    shown) and refuses an unknown name."""
    for setting, noted in (("quince_note", True), ("none", False)):
        trace = tmp_path / f"{setting}.jsonl"
        script = write_script(code("print(1)"), code("FINAL('11')"))
        res = rlm_cli("ask", QUESTION, "-c", pantry(tmp_path), "--model", f"scripted:{script}", "--assists", setting,
                      "--trace", trace, "-q")
        assert res.code == 0, res.err
        events = read_trace(trace)
        [start] = of_type(events, "run_start")
        assert start["limits"]["assists"] == ("none" if setting == "none" else [setting])
        assert bool(of_type(events, "assist")) is noted
    script = write_script(code("FINAL('11')"))
    res = rlm_cli("ask", QUESTION, "-c", pantry(tmp_path), "--model", f"scripted:{script}", "--assists", "quince_note,magic", "-q")
    assert res.code != 0 and "no assist named 'magic'" in res.err


def test_the_repl_takes_the_assists_setting(tmp_path: Path, registered: None) -> None:
    """It opens the REPL's session with the assists its config names."""
    from rlm_runtime.repl.controller import ReplConfig, open_session

    script = tmp_path / "s.jsonl"
    script.write_text('{"content": "FINAL(1)"}\n', encoding="utf-8")
    config = ReplConfig(model=f"scripted:{script}", contexts=[str(pantry(tmp_path))], live=False, assists="quince_note",
                        trace=str(tmp_path / "r.jsonl"))
    session = open_session(config, lambda event: None)
    try:
        assert session.limits.assists == ("quince_note",)
    finally:
        session.close()
