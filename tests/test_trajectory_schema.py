"""The trace schema (version 2): typed events written in one place (``TraceWriter``), read in
one place (``read_trace``), older files still read, newer ones refused clearly, and every
new field shown escaped by both renderers."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from rlm_runtime.cli import main
from rlm_runtime.context.handles import AccessStats
from rlm_runtime.errors import ConfigError
from rlm_runtime.trajectory import (
    SCHEMA_VERSION,
    AnswerCheck,
    AssistShown,
    Cell,
    CellOutput,
    ContextAccess,
    ContextInfo,
    ContextStats,
    InvalidEvent,
    Iteration,
    Record,
    RunEnd,
    RunStart,
    SessionEnd,
    SubCall,
    SystemPrompt,
    ToolCall,
    Trace,
    TraceStart,
    TraceWriter,
    UnknownEvent,
    Usage,
    WorkerWait,
    event_dict,
    read_events,
    read_trace,
    render_html,
    render_tree,
)
from rlm_runtime.trajectory.events import EVENT_TYPES, Models, package_version

ROOT = {"run_id": "root1", "parent_id": None, "depth": 0}
CHILD = {"run_id": "kid22", "parent_id": "root1", "depth": 1}
USAGE = Usage(calls=1, input_tokens=300, output_tokens=20, cost_usd=0.0012)


def every_event() -> list[Record]:
    """One record of every type the schema knows, in the order a session writes them."""
    t = iter(range(1_700_000_000, 1_700_001_000))
    out = CellOutput(stdout="2: the needle\n", duration_s=0.01, warnings=["a note"])
    return [
        TraceStart(t=next(t), session_id="s1", model="scripted:root", sub_model="scripted:sub"),
        WorkerWait(t=next(t), session_id="s1", waited_s=0.25, pool_size=2, detail="all 2 workers busy"),
        Cell(t=next(t), session_id="s1", turn=0, code="x = 1\nprint(x)", output=CellOutput(stdout="1\n")),
        RunStart(t=next(t), **ROOT, model="scripted:root", sub_model="scripted:sub", query="Where is the needle?",
                 limits={"max_depth": 1}, turn=1,
                 contexts=[ContextInfo(name="notes.txt", summary="notes.txt: text, 3 lines", decision="load",
                                       reason="small enough to load", inline_chars=120),
                           ContextInfo(name="docs", decision="excerpt", reason="too large", skipped_documents=["a.bin"])]),
        SystemPrompt(t=next(t), **ROOT, text="You answer questions.\nUse grep."),
        SubCall(t=next(t), **ROOT, kind="llm_query", model="scripted:sub", prompt="Describe", response="a thing",
                usage=USAGE, duration_s=0.02),
        ToolCall(t=next(t), **ROOT, name="lookup", args="('needle',), {}", result="'found'", duration_s=0.003),
        AssistShown(t=next(t), **ROOT, name="leads", trigger="broad", chars=120),
        AnswerCheck(t=next(t), **ROOT, name="count_check", answer="7", outcome="questioned"),
        RunStart(t=next(t), **CHILD, model="scripted:sub", query="child question", contexts=[ContextInfo(name="sub_context")]),
        RunEnd(t=next(t), **CHILD, answer="child answer", iterations=1, usage={"scripted:sub": USAGE},
               run_usage={"scripted:sub": USAGE}, duration_s=0.1),
        Iteration(t=next(t), **ROOT, iteration=1, prompt_chars=1200, response="```python\nprint(grep('needle'))\n```",
                  code_blocks=["print(grep('needle'))"], outputs=[out], duration_s=0.5, model_s=0.4, usage=USAGE,
                  finish_reason="stop"),
        Iteration(t=next(t), **ROOT, iteration=2, forced=True, response="FINAL('x')", usage=USAGE),
        ContextStats(t=next(t), **ROOT, contexts=[ContextAccess(name="notes.txt", peeks=1, greps=2, chars_returned=40)]),
        RunEnd(t=next(t), **ROOT, answer="the needle", iterations=2, usage={"scripted:root": USAGE, "scripted:sub": USAGE},
               run_usage={"scripted:root": USAGE}, duration_s=1.5),
        Models(t=next(t), session_id="s1", model="scripted:other", sub_model="scripted:other"),
        SessionEnd(t=next(t), session_id="s1", usage={"scripted:root": USAGE}, questions=1),
    ]


def write(path: Path, events: list[Any], **options: Any) -> Path:
    with TraceWriter(path, **options) as writer:
        for e in events:
            writer.emit(e)
    return path


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# ---------------------------------------------------------------- the schema


def test_every_event_type_has_a_model() -> None:
    """It has a typed record with a Literal type for every event of schema 2."""
    assert set(EVENT_TYPES) == {"trace_start", "run_start", "system_prompt", "iteration", "sub_call", "tool_call",
                                "assist", "answer_check", "context_stats", "cell", "worker_wait", "run_end", "models", "session_end",
                                "invalid_event"}
    assert {type(e).model_fields["type"].default for e in every_event()} == set(EVENT_TYPES) - {"invalid_event"}


def test_a_v2_file_round_trips(tmp_path: Path) -> None:
    """It reads back every event type written, equal to what was emitted."""
    events = every_event()
    path = write(tmp_path / "t.jsonl", events)
    trace = read_trace(path)
    assert trace.schema == SCHEMA_VERSION == 2 and trace.notes == []
    assert trace.events == events
    assert [type(e) for e in trace.events] == [type(e) for e in events]


def test_the_first_line_is_trace_start(tmp_path: Path) -> None:
    """It starts the file with trace_start (schema, version, session, models)."""
    first = lines(write(tmp_path / "t.jsonl", every_event()))[0]
    assert first == {"type": "trace_start", "t": 1_700_000_000, "schema": 2, "version": package_version(),
                     "session_id": "s1", "model": "scripted:root", "sub_model": "scripted:sub"}


def test_the_writer_writes_trace_start_itself(tmp_path: Path) -> None:
    """It writes trace_start before a first event that is not one, with the models of that run_start."""
    path = write(tmp_path / "t.jsonl", [{"type": "run_start", **ROOT, "model": "m1", "sub_model": "m2", "query": "q"}],
                 session_id="abc")
    head, start = lines(path)
    assert head["type"] == "trace_start" and head["schema"] == 2 and head["version"] == package_version()
    assert (head["session_id"], head["model"], head["sub_model"]) == ("abc", "m1", "m2")
    assert start["type"] == "run_start" and start["t"] == head["t"]


def test_emit_returns_the_json_ready_dict_it_wrote(tmp_path: Path) -> None:
    """It returns, for on_event callbacks, exactly the dict written on the line, t filled in."""
    path = tmp_path / "t.jsonl"
    writer = TraceWriter(path)
    before = time.time()
    data = writer.emit(Iteration(**ROOT, iteration=1, code_blocks=["x"], outputs=[CellOutput(stdout="y")]))
    writer.close()
    assert lines(path)[1] == data and before <= data["t"] <= time.time()
    assert json.loads(json.dumps(data)) == data
    assert data["outputs"][0] == {"stdout": "y", "error": None, "error_type": None, "duration_s": 0.0,
                                  "worker_restarted": False, "warnings": []}


def test_a_writer_without_a_file_still_returns_the_dicts(tmp_path: Path) -> None:
    """It validates and returns each event with no trace file (trace=False still feeds the live view)."""
    writer = TraceWriter(None)
    data = writer.emit({"type": "sub_call", **ROOT, "prompt": "p", "usage": {}})
    assert data["type"] == "sub_call" and data["usage"] == {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
    assert event_dict(SystemPrompt(**ROOT, text="s"))["text"] == "s"


def test_schema_1_dicts_are_accepted_during_the_transition(tmp_path: Path) -> None:
    """It takes the loop's old dicts (contexts as names, missing fields) and writes them in schema 2."""
    path = write(tmp_path / "t.jsonl", [
        {"type": "run_start", **ROOT, "model": "m", "query": "q", "limits": {}, "contexts": ["text", "notes.md"]},
        {"type": "iteration", "run_id": "root1", "outputs": [{"stdout": "x"}, {"error": "E"}]},
    ], strict=True)
    _, start, iteration = lines(path)
    assert [c["name"] for c in start["contexts"]] == ["text", "notes.md"] and start["contexts"][0]["decision"] is None
    assert iteration["depth"] == 0 and iteration["parent_id"] is None and iteration["outputs"][1]["error"] == "E"


def test_an_invalid_dict_is_recorded_not_written_as_given(tmp_path: Path) -> None:
    """It writes an invalid_event holding the dict and the errors in place of a dict that fails its schema."""
    path = tmp_path / "t.jsonl"
    bad = {"type": "iteration", **ROOT, "iteration": "third", "outputs": "not a list"}
    write(path, [bad])
    data = lines(path)[1]
    assert data["type"] == "invalid_event" and data["of_type"] == "iteration" and data["event"]["iteration"] == "third"
    assert any(e.startswith("iteration:") for e in data["errors"]) and any(e.startswith("outputs") for e in data["errors"])
    [invalid] = read_trace(path).of_type(InvalidEvent)
    assert invalid.of_type == "iteration"
    assert "warning: a iteration event was invalid when written" in render_tree(read_trace(path))


def test_a_strict_writer_raises_on_an_invalid_dict(tmp_path: Path) -> None:
    """It raises ValidationError for an invalid dict with strict=True, and writes nothing for it."""
    path = tmp_path / "t.jsonl"
    with TraceWriter(path, strict=True) as writer, pytest.raises(ValidationError):
        writer.emit({"type": "run_end", **ROOT, "iterations": "many"})
    assert path.read_text() == ""
    with TraceWriter(None, strict=True) as writer, pytest.raises(ValueError, match="needs a str 'type'"):
        writer.emit({"run_id": "x"})


def test_a_dict_without_a_type_is_recorded_as_invalid(tmp_path: Path) -> None:
    """It records a dict without a type as invalid_event rather than a line no reader understands."""
    data = TraceWriter(None).emit({"run_id": "x", "what": object()})
    assert data["type"] == "invalid_event" and data["of_type"] is None and data["event"]["run_id"] == "x"


def test_context_access_keeps_the_counters_of_access_stats() -> None:
    """It keeps AccessStats' counters (not its log of every read) as a dict of numbers plus the name."""
    stats = AccessStats()
    stats.record("peeks", "0:100", 100)
    stats.record("greps", "needle", 20)
    access = ContextAccess.from_stats("notes.txt", stats.to_dict())
    assert access.counters()["peeks"] == 1 and access.counters()["chars_returned"] == 120
    assert "log" not in access.to_dict()
    assert ContextAccess.model_validate({"name": "n", "log": [1], "new_counter": 3}).counters()["new_counter"] == 3


def test_writers_in_many_threads_write_whole_lines(tmp_path: Path) -> None:
    """It writes every event of concurrent emitters as one whole line, after one trace_start."""
    path = tmp_path / "t.jsonl"
    writer = TraceWriter(path)

    def burst(k: int) -> None:
        for i in range(200):
            writer.emit(SubCall(**ROOT, prompt=f"{k}-{i}" + "x" * 500))

    threads = [threading.Thread(target=burst, args=(k,)) for k in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    writer.close()
    events = read_trace(path).events
    assert isinstance(events[0], TraceStart) and len(events) == 1 + 8 * 200
    assert len({e.prompt for e in events if isinstance(e, SubCall)}) == 8 * 200


def test_emit_is_cheap() -> None:
    """It emits a typical iteration event (validate, dump, encode, write, flush) in well under a loop turn (~0.6 ms)."""
    event: dict[str, Any] = {"type": "iteration", **ROOT, "iteration": 3, "prompt_chars": 12000, "response": "Let me look.\n" * 40,
             "code_blocks": ["print(grep('needle'))\n" * 3], "outputs": [{"stdout": "2: the needle here\n" * 50,
             "error": None, "error_type": None, "duration_s": 0.01, "worker_restarted": False, "warnings": []}],
             "duration_s": 0.5, "model_s": 0.4, "usage": USAGE.to_dict(), "finish_reason": "stop"}
    import tempfile

    with tempfile.TemporaryDirectory() as folder, TraceWriter(Path(folder) / "t.jsonl") as writer:
        best = float("inf")
        for _ in range(5):
            began = time.perf_counter()
            for _ in range(200):
                writer.emit(dict(event))
            best = min(best, (time.perf_counter() - began) / 200)
    assert best < 200e-6, f"emit took {best * 1e6:.0f} µs"  # ~30 µs here; the bound leaves room for slow CI


# ---------------------------------------------------------------- the reader


def test_a_trace_is_a_tree_of_runs(tmp_path: Path) -> None:
    """It links child runs to their parent and lists session events and root runs in order."""
    trace = read_trace(write(tmp_path / "t.jsonl", every_event()))
    [root] = trace.roots
    assert root.run_id == "root1" and [c.run_id for c in trace.children("root1")] == ["kid22"]
    assert root.start is not None and root.start.query == "Where is the needle?" and root.end is not None
    kinds = [x.run_id if not isinstance(x, Record) else x.type for x in root.items()]
    assert kinds == ["run_start", "system_prompt", "sub_call", "tool_call", "assist", "answer_check", "kid22", "iteration",
                     "iteration",
                     "context_stats", "run_end"]
    assert [x.type if isinstance(x, Record) else x.run_id for x in trace.top_level()] == [
        "trace_start", "worker_wait", "cell", "root1", "models", "session_end"]
    assert trace.header is not None and trace.header.session_id == "s1"


def test_a_crafted_parent_cycle_does_not_hang(tmp_path: Path) -> None:
    """It keeps runs whose parent links loop as roots instead of looping forever."""
    path = write(tmp_path / "t.jsonl", [RunStart(run_id="a", parent_id="b", depth=1), RunStart(run_id="b", parent_id="a", depth=1)])
    trace = read_trace(path)
    assert [r.run_id for r in trace.roots] == ["a"] and [c.run_id for c in trace.children("a")] == ["b"]
    assert render_tree(trace).count("run ") == 2


V1_LINES: list[dict[str, Any]] = [  # exactly as the orchestrator wrote them before schema 2
    {"type": "run_start", "run_id": "r0", "parent_id": None, "depth": 0, "model": "scripted:root", "sub_model": "scripted:sub",
     "query": "OLD QUESTION", "limits": {"max_depth": 1}, "contexts": ["text"], "t": 1.0},
    {"type": "sub_call", "run_id": "r0", "parent_id": None, "depth": 0, "kind": "llm_query", "model": "scripted:sub",
     "prompt": "Describe", "response": "old description", "error": None, "usage": {"calls": 1, "input_tokens": 3,
     "output_tokens": 2, "cost_usd": 0.0}, "duration_s": 0.01, "t": 2.0},
    {"type": "run_start", "run_id": "c1", "parent_id": "r0", "depth": 1, "model": "scripted:sub", "sub_model": "scripted:sub",
     "query": "OLD CHILD", "limits": {}, "contexts": ["sub_context"], "t": 3.0},
    {"type": "run_end", "run_id": "c1", "parent_id": "r0", "depth": 1, "answer": "old child answer", "error": None,
     "error_type": None, "iterations": 1, "usage": {}, "duration_s": 0.2, "t": 4.0},
    {"type": "iteration", "run_id": "r0", "parent_id": None, "depth": 0, "iteration": 1, "prompt_chars": 900,
     "response": "```python\nprint(grep('old'))\n```", "code_blocks": ["print(grep('old'))"],
     "outputs": [{"stdout": "1: an old line\n", "error": None, "error_type": None, "duration_s": 0.01,
                  "worker_restarted": False, "warnings": []}], "duration_s": 0.3,
     "usage": {"calls": 1, "input_tokens": 50, "output_tokens": 9, "cost_usd": 0.0}, "finish_reason": "stop", "t": 5.0},
    {"type": "iteration", "run_id": "r0", "parent_id": None, "depth": 0, "iteration": 2, "forced": True,
     "response": "FINAL('old answer')", "code_blocks": [], "outputs": [], "usage": {}, "duration_s": 0.1, "t": 6.0},
    {"type": "run_end", "run_id": "r0", "parent_id": None, "depth": 0, "answer": "old answer", "error": None,
     "error_type": None, "iterations": 2, "usage": {"scripted:root": {"calls": 2, "input_tokens": 50, "output_tokens": 9,
     "cost_usd": 0.0}}, "duration_s": 1.0, "t": 7.0},
]


@pytest.fixture
def v1_file(tmp_path: Path) -> Path:
    path = tmp_path / "old.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in V1_LINES), encoding="utf-8")
    return path


def test_a_schema_1_file_is_read_as_schema_2_records(v1_file: Path) -> None:
    """It reads a file without trace_start as schema 1, mapping each event onto the schema 2 models."""
    trace = read_trace(v1_file)
    assert trace.schema == 1 and trace.header is None
    assert [type(e) for e in trace.events] == [RunStart, SubCall, RunStart, RunEnd, Iteration, Iteration, RunEnd]
    start = trace.events[0]
    assert isinstance(start, RunStart) and start.contexts == [ContextInfo(name="text")] and start.turn == 0
    end = trace.events[-1]
    assert isinstance(end, RunEnd) and end.run_usage is None and end.usage["scripted:root"].calls == 2
    assert [c.run_id for c in trace.children("r0")] == ["c1"]


def test_a_schema_1_file_renders_as_a_tree(v1_file: Path) -> None:
    """It prints a schema 1 file as before, saying it is schema 1."""
    tree = render_tree(read_trace(v1_file))
    lines_ = tree.splitlines()
    assert lines_[0] == "run r0 depth=0 model=scripted:root query='OLD QUESTION'"
    assert "  context text" in lines_
    assert any(line.startswith("  run c1 depth=1") for line in lines_)
    assert "    code[0]: print(grep('old'))" in lines_ and "    out[0]: 1: an old line" in lines_
    assert "  iteration 2 (forced answer): 0.10s, 0 in / 0 out tokens" in lines_
    assert "answer='old answer', 2 iterations" in tree and "this run's own" not in tree
    assert lines_[-1].startswith("(trace schema 1:")
    assert render_tree(read_events(v1_file)) == tree == render_tree(V1_LINES)


def test_a_schema_1_file_renders_as_a_page(v1_file: Path) -> None:
    """It writes a schema 1 file as a self-contained page."""
    page = render_html(read_trace(v1_file))
    assert page.startswith("<!doctype html>") and "<script" not in page
    assert "OLD QUESTION" in page and "old child answer" in page and "print(grep(&#x27;old&#x27;))" in page
    assert "trace schema 1" in page


def test_rlm_trace_show_reads_a_schema_1_file(v1_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It prints a schema 1 file with `rlm trace show`."""
    assert main(["trace", "show", str(v1_file)]) == 0
    assert capsys.readouterr().out.startswith("run r0 depth=0")


def test_lines_appended_after_schema_1_lines_are_schema_2(v1_file: Path) -> None:
    """It reads a schema 1 file a schema 2 writer appended to: both parts, each in its own schema."""
    write(v1_file, [RunStart(run_id="new", query="NEW QUESTION", contexts=[ContextInfo(name="x", decision="load")])])
    trace = read_trace(v1_file)
    assert trace.schema == 2 and [r.run_id for r in trace.roots] == ["r0", "new"]
    assert "context x: load" in render_tree(trace)


def newer(tmp_path: Path, version: str | None = "9.1.0") -> Path:
    path = tmp_path / "newer.jsonl"
    head = {"type": "trace_start", "t": 1.0, "schema": 3, "session_id": "s"} | ({"version": version} if version else {})
    path.write_text(json.dumps(head) + "\n" + json.dumps({"type": "run_start", "run_id": "r", "shape": "new"}) + "\n")
    return path


def test_a_newer_schema_is_a_clear_error(tmp_path: Path) -> None:
    """It raises ConfigError naming the newer rlm_runtime and schema for a file of schema 3."""
    with pytest.raises(ConfigError, match=r"newer\.jsonl:1: this trace was written by rlm_runtime 9\.1\.0 in trace schema 3; "
                                          r".* reads schemas 1 to 2: upgrade rlm_runtime"):
        read_trace(newer(tmp_path))
    with pytest.raises(ConfigError, match="written by a newer rlm_runtime in trace schema 3"):
        read_trace(newer(tmp_path, version=None))


def test_rlm_trace_of_a_newer_schema_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It exits 2 with one line on stderr for `rlm trace show` of a schema 3 file."""
    assert main(["trace", "show", str(newer(tmp_path))]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "trace schema 3" in err and "9.1.0" in err


def test_a_trace_start_without_a_schema_number_is_an_error(tmp_path: Path) -> None:
    """It raises ConfigError for a trace_start whose schema is not a number."""
    path = tmp_path / "t.jsonl"
    path.write_text('{"type": "trace_start", "schema": "two"}\n')
    with pytest.raises(ConfigError, match="t.jsonl:1: trace_start has no valid schema number"):
        read_trace(path)


def test_an_invalid_event_in_a_v2_file_names_its_line(tmp_path: Path) -> None:
    """It raises ConfigError naming the line and field of an event that does not fit its schema."""
    path = write(tmp_path / "t.jsonl", [every_event()[0]])
    with path.open("a") as f:
        f.write(json.dumps({"type": "iteration", "run_id": "r", "iteration": "x"}) + "\n")
    with pytest.raises(ConfigError, match=r"t\.jsonl:2: invalid iteration event: iteration: "):
        read_trace(path)


def test_unknown_event_types_are_kept_and_skipped_when_shown(tmp_path: Path) -> None:
    """It keeps events of types it does not know (a later version wrote them) and the views skip them, saying so."""
    path = write(tmp_path / "t.jsonl", [*every_event()[:4], {"type": "plan", **ROOT, "steps": ["a", "b"]}])
    trace = read_trace(path)
    [unknown] = trace.unknown
    assert isinstance(unknown, UnknownEvent) and unknown.type == "plan" and unknown.model_extra == {**ROOT, "steps": ["a", "b"]}
    tree = render_tree(trace)
    assert "steps" not in tree and "(skipped 1 events of types this version does not know: plan)" in tree
    assert "types this version does not know: plan" in render_html(trace)


def test_a_truncated_last_line_is_skipped_with_a_note(tmp_path: Path) -> None:
    """It skips a last line cut short (a crash mid-write), and both views say so."""
    path = write(tmp_path / "t.jsonl", every_event()[:5])
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"type": "iteration", "run_id": "root1", "response": "caf\xc3')  # cut inside a character
    trace = read_trace(path)
    assert len(trace.events) == 5 and trace.notes == ["line 6 was cut short (the writer was probably killed mid-write) and is skipped"]
    assert "(note: line 6 was cut short" in render_tree(trace)
    assert "line 6 was cut short" in render_html(read_events(path))


def test_a_broken_line_inside_the_file_is_an_error(tmp_path: Path) -> None:
    """It raises ConfigError naming a broken line that is not the last, or a last line that was ended."""
    path = write(tmp_path / "t.jsonl", every_event()[:3])
    text = path.read_text()
    path.write_text(text + "{broken\n")
    with pytest.raises(ConfigError, match=r"t\.jsonl:4: not a trace event"):
        read_trace(path)
    path.write_text(text.replace("\n", "\n{broken\n", 1))
    with pytest.raises(ConfigError, match=r"t\.jsonl:2: not a trace event"):
        read_trace(path)


def test_an_empty_file_has_no_runs(tmp_path: Path) -> None:
    """It reads an empty file (a writer that wrote nothing) as a trace without runs."""
    path = tmp_path / "empty.jsonl"
    TraceWriter(path).close()
    assert read_trace(path).events == [] and render_tree(read_trace(path)) == "(no runs in this trace)"


def test_trace_start_names_the_package_version() -> None:
    """It writes rlm_runtime.__version__ as the version of a trace."""
    import rlm_runtime

    assert TraceStart().version == rlm_runtime.__version__


def test_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    """It raises ConfigError for a trace that does not exist."""
    with pytest.raises(ConfigError, match="trace file not found"):
        read_trace(tmp_path / "nope.jsonl")


# ---------------------------------------------------------------- what the views show


def test_the_tree_shows_the_new_information(tmp_path: Path) -> None:
    """It prints decisions, system prompt, tool calls, a person's cells, worker waits, access stats and own usage."""
    tree = render_tree(read_trace(write(tmp_path / "t.jsonl", every_event())))
    assert "waited 0.25s for a worker (pool of 2): all 2 workers busy" in tree
    assert "cell typed by a person (turn 0): x = 1 | print(x)" in tree
    assert "run root1 depth=0 turn=1 model=scripted:root query='Where is the needle?'" in tree
    assert "  context notes.txt: load (small enough to load); 120 chars inline" in tree
    assert "  context docs: excerpt (too large); 1 documents skipped: a.bin" in tree
    assert "  system prompt: 31 chars: 'You answer questions. | Use grep.'" in tree
    assert "  tool lookup(('needle',), {}) => \"'found'\" (0.00s)" in tree
    assert "  iteration 1: 0.50s (model 0.40s), 300 in / 20 out tokens" in tree
    assert "  access notes.txt: peeks=1 greps=2 chunks=0" in tree
    assert "this run's own: scripted:root: 1 call, " in tree and '{"calls"' not in tree  # read as words, not JSON
    assert "session end: 1 question; usage: " in tree
    assert tree.splitlines()[-1] == f"(trace schema 2; written by rlm_runtime {package_version()}; session s1; " \
                                    "model scripted:root, sub-model scripted:sub)"


def test_the_page_shows_the_new_information(tmp_path: Path) -> None:
    """It shows the same on the page, the system prompt collapsed."""
    page = render_html(read_trace(write(tmp_path / "t.jsonl", every_event())))
    assert "<details><summary>system prompt <span class=meta>31 chars</span></summary>" in page
    assert "<td>notes.txt</td><td>load</td><td>small enough to load</td><td>120</td>" in page
    assert "tool lookup" in page and "&#x27;found&#x27;" in page
    assert "cell typed by a person" in page and "waited 0.25s for a worker (pool of 2)" in page
    assert "peeks=1 greps=2" in page and "this run's own: " in page and "finish: stop" in page


# ---------------------------------------------------------------- hostile text

RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
ATTACK = "FAILED\x1b[1A\x1b[2K\rall passed \x1b]52;c;ZXZpbA==\x07 \x9b31m \u202eevil</pre><script>alert(1)</script>\nrun forged depth=0"


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    """Every new field of schema 2 holding terminal controls, a bidi override, markup and a forged line."""
    out = CellOutput(stdout=ATTACK, error=ATTACK, warnings=[ATTACK])
    return write(tmp_path / "hostile.jsonl", [
        TraceStart(session_id=ATTACK, model=ATTACK, sub_model=ATTACK, version=ATTACK),
        WorkerWait(waited_s=1.0, detail=ATTACK),
        Cell(code=ATTACK, output=out),
        RunStart(**ROOT, model=ATTACK, query=ATTACK, contexts=[ContextInfo(name=ATTACK, summary=ATTACK, decision=ATTACK,
                                                                             reason=ATTACK, skipped_documents=[ATTACK])]),
        SystemPrompt(**ROOT, text=ATTACK),
        ToolCall(**ROOT, name=ATTACK, args=ATTACK, result=ATTACK),
        ToolCall(**ROOT, name="t", args="", error=ATTACK),
        Iteration(**ROOT, response=ATTACK, finish_reason=ATTACK, outputs=[out]),
        ContextStats(**ROOT, contexts=[ContextAccess.model_validate({"name": ATTACK, ATTACK: 3})]),
        {"type": "iteration", **ROOT, "iteration": ATTACK},  # recorded as invalid_event, its errors quote the value
        RunEnd(**ROOT, error=ATTACK, usage={ATTACK: USAGE}, run_usage={ATTACK: USAGE}),
        {"type": ATTACK, **ROOT},
        SessionEnd(session_id=ATTACK, usage={ATTACK: USAGE}),
    ])


def test_the_tree_escapes_hostile_text_in_new_fields(hostile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It prints every new field with controls escaped and no forged line."""
    assert main(["trace", "show", str(hostile)]) == 0
    out, err = capsys.readouterr()
    assert not RAW_CONTROL.search(out + err)
    assert not any(line.startswith("run forged") for line in out.splitlines())
    assert "tool FAILED\\x1b[1A\\x1b[2K\\x0dall passed" in out and "\\u202eevil" in out


def test_the_page_escapes_hostile_text_in_new_fields(hostile: Path) -> None:
    """It shows every new field escaped on the page: no markup, no script, no raw control."""
    page = render_html(read_trace(hostile))
    assert not RAW_CONTROL.search(page)
    assert "<script" not in page.lower() and "</pre><script>" not in page
    assert page.count("&lt;/pre&gt;&lt;script&gt;") >= 10
    assert "FAILED\\x1b[1A\\x1b[2K\\x0dall passed" in page and "\\u202eevil" in page


@pytest.mark.parametrize("char", ["\x7f", "\x85", "\x9b", "\u2028", "\u2029", "\u202a", "\u202e", "\u2066", "\u2069",
                                  "\ud800", "\udfff"])
@pytest.mark.parametrize("around", ["plain ascii", "caf\u00e9 \u043a\u0438\u0440 \u2014 \U0001f600"])
def test_every_unsafe_character_is_escaped_in_the_file(char: str, around: str, tmp_path: Path) -> None:
    """It writes DEL, C1 controls, line separators, bidi controls and lone surrogates as JSON escapes, in ASCII lines and others."""
    path = write(tmp_path / "t.jsonl", [SystemPrompt(**ROOT, text=f"{around} {char} end")])
    text = path.read_text(encoding="utf-8")
    assert char not in text and f"\\u{ord(char):04x}" in text and len(text.splitlines()) == 2
    assert read_trace(path).of_type(SystemPrompt)[0].text == f"{around} {char} end"


def test_other_non_ascii_text_stays_readable(tmp_path: Path) -> None:
    """It keeps letters, dashes and emoji as they are in the file (only unsafe characters are escaped)."""
    text = "caf\u00e9 \u043a\u0438\u0440 \u2014 \u00a9 \U0001f600"
    path = write(tmp_path / "t.jsonl", [SystemPrompt(**ROOT, text=text)])
    assert text in path.read_text(encoding="utf-8")


def test_the_file_keeps_hostile_text_escaped_and_whole(hostile: Path) -> None:
    """It writes hostile text with every control escaped in the file and reads the original back."""
    assert not RAW_CONTROL.search(hostile.read_text(encoding="utf-8"))
    trace = read_trace(hostile)
    [tool, _] = trace.of_type(ToolCall)
    assert tool.name == ATTACK and tool.args == ATTACK
    assert trace.of_type(SystemPrompt)[0].text == ATTACK


def test_renderers_take_plain_event_dicts() -> None:
    """It renders a list of event dicts (collected from on_event) through the same reader."""
    dicts = [event_dict(e) for e in every_event()]
    trace = Trace.from_dicts(dicts)
    assert trace.events == [type(e).model_validate(d) for e, d in zip(every_event(), dicts, strict=True)]
    assert render_tree(dicts) == render_tree(trace)
