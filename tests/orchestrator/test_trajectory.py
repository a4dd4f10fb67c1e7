"""Trajectories: the JSONL events a run writes, nested child runs, and the two readers
(``rlm trace show`` prints a tree, ``rlm trace html`` writes one self-contained page)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rlm_runtime import RLM, RunResult
from rlm_runtime.llm import ScriptedClient
from rlm_runtime.trajectory import TraceWriter, read_events, render_html, render_tree

from .support import CLIResult, code, fast, of_type, read_trace

ROOT_REPLIES = [
    code("print(grep('needle'))"),
    code("note = llm_query('Describe: <b>bold</b> & friends')\nprint(note)"),
    code("child = rlm_query('CHILD QUESTION', context='the child context')\nprint(child)"),
    code("FINAL('root answer: ' + child)"),
]
SUB_REPLIES = [
    {"when": "Describe:", "content": "a description"},
    code("print('child looks')"),
    code("FINAL('child answer')"),
]


def traced_run(trace: Path | bool | None, context: str = "hay\nthe needle here\nhay") -> RunResult:
    rlm = RLM(ScriptedClient(list(ROOT_REPLIES), model="scripted:root"), ScriptedClient(list(SUB_REPLIES), model="scripted:sub"),
              limits=fast(max_depth=1, max_iterations=5), trace=trace)
    return rlm.run("ROOT QUESTION", context)


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One trajectory with iterations, an llm_query and a child run, shared by the reader tests."""
    path = tmp_path_factory.mktemp("trace") / "run.jsonl"
    with pytest.MonkeyPatch.context() as mp:  # module scope: the autouse RLM_HOME fixture is not active yet
        mp.setenv("RLM_HOME", str(tmp_path_factory.mktemp("rlm_home")))
        result = traced_run(path)
    assert result.answer == "root answer: child answer"
    return path


def run_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events of runs (not the file's trace_start nor a session's session_end)."""
    return [e for e in events if e["type"] not in ("trace_start", "session_end")]


def test_a_run_writes_every_kind_of_event(trace_file: Path) -> None:
    """It writes trace_start first, then run_start, iteration, sub_call and run_end events, each with type, run_id, depth and t."""
    events = read_trace(trace_file)
    assert events[0]["type"] == "trace_start" and events[0]["schema"] == 2
    assert {"run_start", "system_prompt", "iteration", "sub_call", "run_end"} <= {e["type"] for e in events}
    for e in run_events(events):
        assert {"type", "run_id", "depth", "t"} <= set(e)
    root_start = of_type(events, "run_start")[0]
    assert root_start["parent_id"] is None
    assert root_start["query"] == "ROOT QUESTION" and root_start["model"] == "scripted:root"
    assert root_start["limits"]["max_depth"] == 1 and [c["name"] for c in root_start["contexts"]] == ["text"]
    root_end = of_type(events, "run_end")[-1]
    assert root_end["run_id"] == root_start["run_id"] and root_end["answer"] == "root answer: child answer"
    assert root_end["usage"]["scripted:root"]["calls"] == 4


def test_iterations_record_code_outputs_and_usage(trace_file: Path) -> None:
    """It records each iteration's response, code blocks, outputs, usage and duration."""
    root_id = of_type(read_trace(trace_file), "run_start")[0]["run_id"]
    iterations = [e for e in of_type(read_trace(trace_file), "iteration") if e["run_id"] == root_id]
    assert [e["iteration"] for e in iterations] == [1, 2, 3, 4]
    first = iterations[0]
    assert first["code_blocks"] == ["print(grep('needle'))"]
    assert first["outputs"][0]["stdout"] == "2: the needle here\n" and first["outputs"][0]["error"] is None
    assert first["usage"]["calls"] == 1 and first["usage"]["input_tokens"] > 0
    assert first["duration_s"] >= 0 and first["prompt_chars"] > 0


def test_child_runs_nest_by_parent_id(trace_file: Path) -> None:
    """It gives a child run its own run_start/run_end carrying its parent's run_id."""
    events = read_trace(trace_file)
    root, child = of_type(events, "run_start")
    assert child["parent_id"] == root["run_id"] and child["depth"] == 1 and child["query"] == "CHILD QUESTION"
    child_end = next(e for e in of_type(events, "run_end") if e["run_id"] == child["run_id"])
    assert child_end["answer"] == "child answer" and child_end["parent_id"] == root["run_id"]
    [call] = of_type(events, "sub_call")
    assert call["run_id"] == root["run_id"] and call["kind"] == "llm_query" and call["response"] == "a description"


def test_every_event_names_its_parent(trace_file: Path) -> None:
    """It puts parent_id on every event of a run, as the module documents."""
    for e in run_events(read_trace(trace_file)):
        assert "parent_id" in e, e["type"]


def test_run_end_records_the_duration(trace_file: Path) -> None:
    """It records how long each run took, which the HTML page shows."""
    for end in of_type(read_trace(trace_file), "run_end"):
        assert end.get("duration_s", 0) > 0


def test_traces_go_under_rlm_home_by_default(_rlm_home: Path) -> None:
    """It writes a new file under $RLM_HOME/traces when no trace is given."""
    result = traced_run(None)
    assert result.trajectory is not None
    path = Path(result.trajectory)
    assert path.parent == _rlm_home / "traces" and path.suffix == ".jsonl"
    assert read_trace(path)[0]["type"] == "trace_start"


def test_a_trace_folder_gets_one_file_per_run(tmp_path: Path) -> None:
    """It writes one file per run into a trace folder."""
    traced_run(tmp_path / "traces")
    traced_run(tmp_path / "traces")
    assert len(list((tmp_path / "traces").glob("run-*.jsonl"))) == 2


def test_trace_false_writes_nothing(_rlm_home: Path) -> None:
    """It writes no trajectory with trace=False."""
    result = traced_run(False)
    assert result.trajectory is None
    assert not (_rlm_home / "traces").exists()


def test_render_tree_nests_children_under_their_parent(trace_file: Path) -> None:
    """It prints runs, iterations, code, outputs and sub-calls, indenting child runs."""
    tree = render_tree(read_events(trace_file))
    lines = tree.splitlines()
    assert lines[0].startswith("run ") and "depth=0" in lines[0] and "ROOT QUESTION" in lines[0]
    child_line = next(line for line in lines if "query='CHILD QUESTION'" in line)
    # Under the parent's turn that started it: two steps in.
    assert child_line.startswith("    run ") and "depth=1" in child_line
    assert "code[0]: print(grep('needle'))" in tree
    assert "out[0]: 2: the needle here" in tree
    assert "llm_query -> scripted:sub" in tree
    assert "answer='child answer'" in tree and "answer='root answer: child answer'" in tree


def test_render_html_is_one_self_contained_page(trace_file: Path) -> None:
    """It writes a page with no scripts and no links, holding the code and outputs, escaped."""
    page = render_html(read_events(trace_file))
    assert page.startswith("<!doctype html>")
    assert "<script" not in page.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page, re.I)
    assert "<link" not in page.lower()
    assert "print(grep(&#x27;needle&#x27;))" in page
    assert "2: the needle here" in page
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; friends" in page and "<b>bold</b>" not in page
    assert "CHILD QUESTION" in page and "child answer" in page


def test_read_events_names_a_broken_line(tmp_path: Path) -> None:
    """It raises ConfigError naming the line of a trace that is not JSON."""
    from rlm_runtime.errors import ConfigError

    path = tmp_path / "t.jsonl"
    path.write_text('{"type": "run_start", "run_id": "a"}\nnot json\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="t.jsonl:2"):
        read_events(path)


def test_the_writer_is_append_only_and_flushes(tmp_path: Path) -> None:
    """It appends events and flushes each one (a crash loses nothing already emitted), each writer's part headed by trace_start."""
    path = tmp_path / "w.jsonl"
    writer = TraceWriter(path)
    writer.emit({"type": "run_start", "run_id": "x"})
    assert read_trace(path)[1]["run_id"] == "x"
    writer.close()
    writer.emit({"type": "late"})  # after close: ignored
    TraceWriter(path).emit({"type": "run_end", "run_id": "x"})
    assert [e["type"] for e in read_trace(path)] == ["trace_start", "run_start", "trace_start", "run_end"]


# ------------------------------------------------------------------------ CLI


def test_rlm_trace_show_prints_the_tree(trace_file: Path, rlm_cli: Callable[..., CLIResult]) -> None:
    """It prints the trajectory tree with `rlm trace show FILE`."""
    res = rlm_cli("trace", "show", trace_file)
    assert res.code == 0
    assert res.out.strip() == render_tree(read_events(trace_file))


def test_rlm_trace_html_writes_the_page(trace_file: Path, tmp_path: Path, rlm_cli: Callable[..., CLIResult]) -> None:
    """It writes the self-contained page with `rlm trace html FILE -o OUT`."""
    out = tmp_path / "page.html"
    res = rlm_cli("trace", "html", trace_file, "-o", out)
    assert res.code == 0
    assert str(out) in res.out
    page = out.read_text(encoding="utf-8")
    assert "run.jsonl" in page and "print(grep(&#x27;needle&#x27;))" in page and "<script" not in page


@pytest.mark.parametrize("args", [("show", "missing.jsonl"), ("html", "missing.jsonl", "-o", "x.html")])
def test_rlm_trace_of_a_missing_file_is_a_usage_error(args: tuple[str, ...], rlm_cli: Callable[..., CLIResult], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """It exits 2 with one line on stderr for a trace file that does not exist."""
    monkeypatch.chdir(tmp_path)
    res = rlm_cli("trace", *args)
    assert res.code == 2
    assert "trace file not found" in res.err and "Traceback" not in res.err
    assert not (tmp_path / "x.html").exists()


def test_rlm_trace_html_to_an_unwritable_place_is_a_usage_error(trace_file: Path, tmp_path: Path,
                                                                 rlm_cli: Callable[..., CLIResult]) -> None:
    """It exits 2 when the output cannot be written."""
    res = rlm_cli("trace", "html", trace_file, "-o", tmp_path / "no" / "such" / "dir" / "p.html")
    assert res.code == 2
    assert "cannot write" in res.err


# ------------------------------------------------------- terminal escapes in traces

#: Raw controls that would act on a terminal (C0 but newline and tab, DEL, C1, bidi controls).
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
#: Title (OSC 0/2), clipboard (OSC 52), hyperlink (OSC 8), a forged line, the C1 CSI, a bidi override.
ATTACK = ("FAILED\x1b[1A\x1b[2K\rall tests passed \x1b]0;t0\x07\x1b]2;t2\x07\x1b]52;c;ZXZpbA==\x07"
          "\x1b]8;;https://evil.example/\x1b\\docs\x1b]8;;\x1b\\ \x9b31m \u202eevil")
ATTACK_SHOWN = ("FAILED\\x1b[1A\\x1b[2K\\x0dall tests passed \\x1b]0;t0\\x07\\x1b]2;t2\\x07\\x1b]52;c;ZXZpbA==\\x07"
                "\\x1b]8;;https://evil.example/\\x1b\\docs\\x1b]8;;\\x1b\\ \\x9b31m \\u202eevil")


@pytest.fixture
def hostile_trace(tmp_path: Path) -> Path:
    """A trace whose query, code, output, error, sub-call, model name and answer all drive a terminal."""
    path = tmp_path / "hostile.jsonl"
    writer = TraceWriter(path)
    base = {"run_id": "r1", "parent_id": None, "depth": 0}
    writer.emit({**base, "type": "run_start", "model": f"m{ATTACK}", "query": ATTACK})
    writer.emit({**base, "type": "iteration", "iteration": 1, "response": ATTACK, "code_blocks": [f"x = 1  # {ATTACK}"],
                 "outputs": [{"stdout": ATTACK + "\n"}, {"error": f"ValueError: {ATTACK}"}], "usage": {}})
    writer.emit({**base, "type": "sub_call", "kind": f"llm_query{ATTACK}", "model": "m", "prompt": ATTACK, "response": ATTACK})
    writer.emit({**base, "type": "run_end", "answer": None, "error": f"{ATTACK}\nsecond line", "iterations": 1, "usage": {}})
    writer.close()
    return path


def test_rlm_trace_show_escapes_terminal_controls(hostile_trace: Path, rlm_cli: Callable[..., CLIResult]) -> None:
    """It prints a trace of hostile text with every terminal control escaped and the text still visible."""
    res = rlm_cli("trace", "show", hostile_trace)
    assert res.code == 0, res.err
    assert not RAW_CONTROL.search(res.out + res.err), res.out
    assert "code[0]: x = 1  # FAILED\\x1b[1A\\x1b[2K\\x0dall tests passed" in res.out
    assert "out[0]: FAILED\\x1b[1A\\x1b[2K\\x0dall tests passed" in res.out
    assert f"query={ATTACK!r}"[:40] in res.out  # shown with repr, escaped already
    assert f"error={ATTACK_SHOWN} | second line" in res.out


def test_render_html_escapes_controls_on_the_page(hostile_trace: Path) -> None:
    """It shows controls on the HTML page as visible escapes too: invisible there, and bidi overrides reorder text."""
    page = render_html(read_events(hostile_trace))
    assert not RAW_CONTROL.search(page)
    assert "FAILED\\x1b[1A\\x1b[2K\\x0dall tests passed" in page and "\\u202eevil" in page


def test_the_trace_file_keeps_the_original_text(hostile_trace: Path) -> None:
    """It writes the trace with every control escaped (safe to cat), and reads the original text back."""
    assert not RAW_CONTROL.search(hostile_trace.read_text(encoding="utf-8"))
    assert of_type(read_events(hostile_trace), "run_start")[0]["query"] == ATTACK


def test_line_separators_do_not_split_a_trace_line(tmp_path: Path) -> None:
    """It escapes U+2028, U+2029 and NEL in the JSONL, so a reader splitting lines keeps each event whole."""
    path = tmp_path / "seps.jsonl"
    writer = TraceWriter(path)
    writer.emit({"type": "run_end", "run_id": "r", "answer": "a\u2028b\u2029c\x85d ünï"})
    writer.close()
    text = path.read_text(encoding="utf-8")
    assert len(text.splitlines()) == 2 and "ünï" in text  # trace_start, then the event
    assert of_type(read_events(path), "run_end")[0]["answer"] == "a\u2028b\u2029c\x85d ünï"


def test_a_lone_surrogate_is_written_and_read_back(tmp_path: Path) -> None:
    """It writes a lone surrogate a cell printed as a JSON escape (UTF-8 cannot hold it) and reads it back."""
    path = tmp_path / "surrogate.jsonl"
    writer = TraceWriter(path)
    writer.emit({"type": "iteration", "run_id": "r", "outputs": [{"stdout": "x\ud800y"}]})
    writer.close()
    assert "\\ud800" in path.read_text(encoding="utf-8")
    assert of_type(read_events(path), "iteration")[0]["outputs"][0]["stdout"] == "x\ud800y"
