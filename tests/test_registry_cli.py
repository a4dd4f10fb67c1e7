"""``rlm context add|list|show|rm|refresh|stats`` and ``rlm peek|grep|chunk|probe ctx:ID``,
through the real entry point: one-line errors and exit codes, escaped names, one JSON object."""

from __future__ import annotations

import io
import json
import os
import sys
import time
from pathlib import Path

import pytest

from rlm_runtime.cli import main
from rlm_runtime.config import paths_from_env
from rlm_runtime.registry import Registry


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "guide.md").write_text("# Guide\n\nsome needle text\n## Part two\nmore text\n")
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "a.txt").write_text("alpha\nneedle in a\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _one_line_error(err: str, *parts: str) -> None:
    assert err.startswith("rlm: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for part in parts:
        assert part in err, err


def test_add_list_show_rm(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It adds, lists, shows and removes contexts, as text and as one JSON object."""
    assert main(["context", "add", "guide.md", "--tag", "work", "--tag", "docs"]) == 0
    assert capsys.readouterr().out.startswith("added ctx:guide.md: guide.md  file  document  guide.md [docs, work]")
    assert main(["context", "add", "kb", "--id", "kb", "--name", "Knowledge base", "--json"]) == 0
    added = json.loads(capsys.readouterr().out)
    assert added["id"] == "kb" and added["kind"] == "folder" and added["meta"]["files"] == 1
    assert main(["context", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["guide.md", "kb"]
    assert main(["context", "list", "--tag", "work", "--json"]) == 0
    assert [c["id"] for c in json.loads(capsys.readouterr().out)["contexts"]] == ["guide.md"]
    assert main(["context", "show", "ctx:kb"]) == 0
    shown = capsys.readouterr().out
    assert shown.startswith("ctx:kb: Knowledge base\n  kind: folder\n") and "probe: load" in shown
    assert "answers found with" not in shown
    with Registry.open() as registry:
        registry.record_leads({"kb": ["grep('needle')", "find('\x1b[2J')"]})
        registry.record_leads({"kb": ["grep('needle')"]})
    assert main(["context", "show", "kb"]) == 0
    shown = capsys.readouterr().out
    assert "  answers found with: grep('needle') (2)\n" in shown + "\n" and "\x1b" not in shown  # the escape is never kept
    assert main(["context", "show", "kb", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["answer_leads"][0] == {"probe": "grep('needle')", "questions": 2}
    assert main(["context", "rm", "guide.md"]) == 0
    assert capsys.readouterr().out == "removed ctx:guide.md (guide.md)\n"
    assert main(["context", "list", "--json"]) == 0
    assert [c["id"] for c in json.loads(capsys.readouterr().out)["contexts"]] == ["kb"]


def test_adding_a_path_again_keeps_its_entry_and_another_makes_a_second(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``rlm context add`` of a path registered already says so, refreshes the entry and keeps
    its id (``existing`` in --json); ``--another`` registers it a second time."""
    assert main(["context", "add", "guide.md"]) == 0
    capsys.readouterr()
    assert main(["context", "add", "guide.md", "--tag", "again"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ctx:guide.md is this path already (refreshed; --another registers it again): ") and "[again]" in out
    assert main(["context", "add", "./guide.md", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["id"] == "guide.md" and shown["existing"] is True
    assert main(["context", "add", "guide.md", "--another", "--json"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["id"] == "guide.md-2" and second["existing"] is False
    assert main(["context", "list", "--json"]) == 0
    assert [c["id"] for c in json.loads(capsys.readouterr().out)["contexts"]] == ["guide.md", "guide.md-2"]


def test_a_text_from_standard_input(files: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """It stores standard input as a text context with - and --kind text; - alone is a usage error."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"piped words\nsecond line\n")))
    assert main(["context", "add", "-", "--kind", "text", "--name", "piped", "--json"]) == 0
    entry = json.loads(capsys.readouterr().out)
    assert entry["kind"] == "text" and entry["source"] is None and entry["meta"]["lines"] == 2
    assert main(["grep", "second", "ctx:piped"]) == 0
    assert capsys.readouterr().out == "2: second line\n"
    assert main(["context", "add", "-"]) == 2
    _one_line_error(capsys.readouterr().err, "--kind text")


def test_peek_grep_chunk_probe_take_ctx_ids_and_count(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It reads ctx:ID in peek, grep and chunk (each counted in the registry) and probes its path."""
    assert main(["context", "add", "guide.md", "--id", "g"]) == 0
    assert main(["peek", "ctx:g", "-n", "7"]) == 0
    assert main(["grep", "needle", "ctx:g"]) == 0
    assert main(["grep", "-c", "text", "ctx:g"]) == 0
    assert main(["chunk", "ctx:g", "0"]) == 0
    assert main(["probe", "ctx:g", "--json"]) == 0
    out = capsys.readouterr().out
    assert "# Guide" in out and "3: some needle text" in out and json.loads(out.splitlines()[-1])["lines"] == 5
    assert main(["context", "stats", "g", "--json"]) == 0
    usage = json.loads(capsys.readouterr().out)["stats"]["g"]
    assert (usage["peeks"], usage["greps"], usage["chunks"], usage["loads"]) == (1, 2, 1, 0)
    assert main(["context", "stats"]) == 0
    assert capsys.readouterr().out.startswith("ctx:g: loads 0, peeks 1, greps 2, chunks 1, searches 0; last access ")


def test_refresh_reprobes_a_changed_file(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It says unchanged for an untouched file and probes a changed one again."""
    assert main(["context", "add", "guide.md", "--id", "g"]) == 0
    assert main(["context", "refresh", "g"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("ctx:g: unchanged: ")
    (files / "guide.md").write_text("one\ntwo\n")
    os.utime(files / "guide.md", ns=(time.time_ns(), time.time_ns() + 10**9))
    assert main(["context", "refresh", "g", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["changed"] is True and result["context"]["meta"]["lines"] == 2


@pytest.mark.parametrize(("argv", "parts"), [
    (["context", "show", "gide"], ("no registered context 'ctx:gide'", "did you mean ctx:guide?")),
    (["context", "rm", "nope"], ("no registered context 'ctx:nope'",)),
    (["context", "refresh", "Guide"], ("did you mean ctx:guide?",)),
    (["context", "stats", "x" * 5000], ("5,004 characters",)),
    (["context", "add", "guide.md", "--id", "guide"], ("the id guide is taken",)),
    (["context", "add", "guide.md", "--id", "Guide!"], ("not a valid context id", "[a-z0-9][a-z0-9_.-]{0,63}")),
    (["context", "add", "missing.md"], ("no such file or folder",)),
    (["context", "add", "kb", "--kind", "file"], ("is a folder, not a file",)),
    (["context", "add", "guide.md", "--tag", "two words"], ("not a valid tag",)),
    (["peek", "ctx:gide"], ("did you mean ctx:guide?",)),
    (["grep", "x", "ctx:nope"], ("no registered context",)),
])
def test_bad_input_is_one_line_and_exit_2(files: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                                          parts: tuple[str, ...]) -> None:
    """It reports bad input in one line with exit status 2, never a traceback."""
    assert main(["context", "add", "guide.md", "--id", "guide"]) == 0
    capsys.readouterr()
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    _one_line_error(captured.err, *parts)


def test_json_errors_are_one_object(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It prints the error as the one JSON object with --json."""
    assert main(["context", "show", "nope", "--json"]) == 2
    captured = capsys.readouterr()
    assert json.loads(captured.out)["error_type"] == "UnknownContext"


def test_a_corrupt_registry_is_a_clear_error(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It refuses a registry.db that is not one, in one line, and leaves it alone."""
    path = paths_from_env().registry
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"garbage, not SQLite" * 50)
    for argv in (["context", "list"], ["context", "add", "guide.md"], ["peek", "ctx:x"]):
        assert main(argv) == 2
        _one_line_error(capsys.readouterr().err, "is not a usable registry of contexts", "move it away")
    assert path.read_bytes() == b"garbage, not SQLite" * 50


def test_names_and_paths_are_printed_escaped(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It shows a file name's terminal controls escaped in list and show, and keeps them in JSON."""
    hostile = files / "evil\x1b[2Jname.txt"
    hostile.write_text("text\n")
    assert main(["context", "add", str(hostile), "--id", "evil", "--name", "ok name"]) == 0
    assert main(["context", "list"]) == 0
    assert main(["context", "show", "evil"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "evil\\x1b[2Jname.txt" in out
    assert main(["context", "show", "evil", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["source"].endswith("evil\x1b[2Jname.txt")


def test_help_lists_the_group_after_memory(capsys: pytest.CaptureFixture[str]) -> None:
    """It lists `context` after `memory` in rlm --help, with examples on its own --help."""
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert out.index("    memory") < out.index("    context") < out.index("    probe")
    with pytest.raises(SystemExit):
        main(["context", "--help"])
    assert "rlm context add notes/ --id notes --tag work" in capsys.readouterr().out
