"""Replays (a /load'ed transcript, lines piped into `rlm repl`) run questions, cells and
read-only commands; a command that writes a file, adds a context, changes the model or loads
another file is asked about on a terminal and refused without one. Each hostile test plants
a secret file and target paths and proves the secret reaches no prompt and no file is written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlm_runtime.llm.scripted import ScriptedClient

from .conftest import CTRL_C, ENTER, code

SECRET = "AKIA-CANARY-7f31c9e2-do-not-send"


@pytest.fixture
def planted(tmp_path: Path) -> dict[str, Path]:
    """A credentials file holding SECRET, and paths a hostile transcript tries to write."""
    secret = tmp_path / "credentials"
    secret.write_text(f"[default]\naws_secret_access_key = {SECRET}\n")
    return {"secret": secret, "rc": tmp_path / "bashrc", "page": tmp_path / "page.html", "copy": tmp_path / "copy.txt"}


def _hostile(planted: dict[str, Path], evil_model: str) -> list[str]:
    """A shared transcript's commands: each would send the secret out or write a file."""
    return [f"/context add {planted['secret']} notes", f"/save {planted['rc']}", f"/trace {planted['page']}",
            f"/load {planted['secret']}", f"/model {evil_model}", f"/sub-model {evil_model}", "/remember on",
            "/limits max_cost_usd=none", "/profile quick"]


def _repl(stdin: str, *args: str, home: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RLM_HOME": str(home)}
    env.pop("RLM_MODEL", None)
    return subprocess.run([sys.executable, "-m", "rlm_runtime.cli", "repl", *args], input=stdin, capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=120)


def test_read_only_commands_are_the_ones_that_only_show() -> None:
    """It lets a replay run only commands that write nothing, add nothing and change nothing."""
    from rlm_runtime.repl.replay import read_only

    for line in ("/help", "/context", "/context list", "/budget", "/limits", "/model", "/sub-model", "/profile",
                 "/profile list", "/vars", "/memory search x", "/memory show 1 --history",
                 "/remember", "/remember off", "/reset", "/exit", "/q", "/nope"):
        assert read_only(line), line
    for line in ("/context add x", "/save x", "/load x", "/trace", "/trace x", "/model m", "/sub-model m", "/profile quick",
                 "/limits max_iterations=3", "/remember on", "/context list x", "/memory edit 1 --kind x"):
        assert not read_only(line), line


def test_a_loaded_transcript_runs_no_command_without_a_yes(drive, write_script, planted: dict[str, Path], tmp_path: Path) -> None:
    """It asks before each command of a loaded transcript; Enter or n says no: no secret in any prompt, no file written."""
    client = ScriptedClient(lambda messages: code("FINAL('done')"))
    evil = write_script(code("FINAL('EVIL MODEL')"))
    shared = tmp_path / "shared.txt"
    commands = _hostile(planted, f"scripted:{evil}")
    shared.write_text("\n".join([*commands, "what do my notes say?"]) + "\n")
    answers = ["n" + ENTER if n % 2 else ENTER for n in range(len(commands))]
    run = drive(client, f"/load {shared}" + ENTER, *answers, "/context list" + ENTER)
    assert client.prompts and not any(SECRET in m["content"] for p in client.prompts for m in p)
    assert SECRET not in run.out + run.err + (tmp_path / "trace.jsonl").read_text()
    assert not any(planted[k].exists() for k in ("rc", "page", "copy"))
    for line in commands:
        assert f"not run: {line}" in run.err
    assert "done" in run.out and "EVIL MODEL" not in run.out
    assert "no contexts" in run.out and "internal error" not in run.err


def test_a_yes_runs_the_command(drive, write_script, tmp_path: Path) -> None:
    """It runs a loaded transcript's command when the person answers y."""
    doc = tmp_path / "doc.txt"
    doc.write_text("alpha\n")
    shared = tmp_path / "shared.txt"
    shared.write_text(f"/context add {doc} mine\n")
    run = drive(write_script("unused"), f"/load {shared}" + ENTER, "y" + ENTER, "/context list" + ENTER)
    assert "added mine as context" in run.out and "not run" not in run.err


def test_piped_lines_run_no_command_that_writes_or_sends(write_script, planted: dict[str, Path], _rlm_home: Path,
                                                          tmp_path: Path) -> None:
    """It refuses, naming each, the commands of piped lines; cells cannot read the secret; read-only commands run."""
    probe = "try:\n    print('CONTEXT', context[:400])\nexcept NameError:\n    print('no context')\nFINAL('done')"
    script = write_script(code(probe), code(probe))
    evil = write_script(code("FINAL('EVIL MODEL')"))
    commands = _hostile(planted, f"scripted:{evil}")
    stdin = "\n".join([*commands, f">>> print(open({str(planted['secret'])!r}).read())", "what do my notes say?",
                       "/budget", "/context list", "/limits", f"/save {planted['copy']}\x1b]0;title\x07"]) + "\n"
    trace = tmp_path / "t.jsonl"
    done = _repl(stdin, "--model", f"scripted:{script}", "--trace", str(trace), home=_rlm_home, cwd=tmp_path)
    assert SECRET not in done.stdout + done.stderr + trace.read_text()
    assert not any(planted[k].exists() for k in ("rc", "page", "copy"))
    assert done.returncode == 1
    for line in commands:
        assert f"not run: {line} (from standard input" in done.stderr
    assert "--allow-commands" in done.stderr and "\x1b" not in done.stderr
    assert "done" in done.stdout and "EVIL MODEL" not in done.stdout and "no context" in done.stderr
    assert "used:" in done.stdout and "no contexts" in done.stderr + done.stdout and "max_iterations = " in done.stdout
    assert "rlm_runtime/" not in done.stderr and "internal error" not in done.stderr


def test_allow_commands_runs_a_script_the_person_wrote(write_script, _rlm_home: Path, tmp_path: Path) -> None:
    """It runs piped commands with --allow-commands; a file that script /loads is still a replay."""
    doc = tmp_path / "doc.txt"
    doc.write_text("alpha\n")
    inner = tmp_path / "inner.txt"
    inner.write_text(f"/save {tmp_path / 'written-by-inner.txt'}\n")
    stdin = f"/context add {doc} mine\n/save {tmp_path / 'mine.txt'}\n/load {inner}\n"
    done = _repl(stdin, "--model", f"scripted:{write_script('unused')}", "--allow-commands", home=_rlm_home, cwd=tmp_path)
    assert "added mine as context" in done.stdout and (tmp_path / "mine.txt").is_file()
    assert f"not run: /save {tmp_path / 'written-by-inner.txt'} (from {inner}" in done.stderr
    assert not (tmp_path / "written-by-inner.txt").exists() and done.returncode == 1


def test_ctrl_c_at_the_question_stops_the_replay(drive, write_script, planted: dict[str, Path], tmp_path: Path) -> None:
    """It takes Ctrl-C at the question as no, and stops the replay there."""
    shared = tmp_path / "shared.txt"
    shared.write_text(f"/save {planted['rc']}\n/trace {planted['page']}\n>>> print('after the commands')\n")
    run = drive(write_script("unused"), f"/load {shared}" + ENTER, CTRL_C, ">>> print('back at the prompt')" + ENTER)
    assert f"not run: /save {planted['rc']}" in run.err and "replay stopped" in run.err
    assert "/trace" not in run.err and "after the commands" not in run.out and "back at the prompt" in run.out
    assert not planted["rc"].exists() and not planted["page"].exists()


def test_lines_typed_at_a_terminal_with_stdout_piped_are_the_persons(write_script, tmp_path: Path) -> None:
    """It runs every command of lines read from a terminal (only stdout piped): the person types them."""
    import io

    from rlm_runtime.repl.controller import ReplConfig
    from rlm_runtime.repl.plain import run_plain

    class Typed(io.StringIO):
        def isatty(self) -> bool:
            return True

    doc = tmp_path / "doc.txt"
    doc.write_text("alpha\n")
    out, err = io.StringIO(), io.StringIO()
    status = run_plain(ReplConfig(model=f"scripted:{write_script('unused')}", trace=str(tmp_path / "t.jsonl")),
                       Typed(f"/context add {doc} mine\n"), out, err)
    assert status == 0 and "added mine as context" in out.getvalue()
