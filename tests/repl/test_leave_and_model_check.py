"""Leaving with ``exit`` or ``quit``, and ``/model`` refusing a name that fails the check
``rlm ask`` makes before any work (the session keeps its models)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlm_runtime.llm.scripted import ScriptedClient

from .conftest import ENTER, F2, code


@pytest.mark.parametrize("word", ["exit", "quit", "  EXIT  ", "Quit"])
def test_exit_or_quit_leaves_like_ctrl_d(word: str, drive, write_script) -> None:
    """It leaves on exit or quit alone (any case, spaces around), without asking the model."""
    client = ScriptedClient(write_script(code("FINAL('asked')")))
    run = drive(client, ">>> print('before')" + ENTER, word + ENTER, ">>> print('after')" + ENTER)
    assert run.status == 0
    assert "before" in run.out and "after" not in run.out
    assert client.prompts == []


def test_exit_leaves_python_mode_too(drive, write_script) -> None:
    """It leaves on exit typed in python mode rather than run it as a cell."""
    client = ScriptedClient(write_script(code("FINAL('asked')")))
    run = drive(client, F2, "exit" + ENTER, "print('after')" + ENTER)
    assert run.status == 0
    assert "after" not in run.out and "NameError" not in run.err


def test_exit_within_a_question_is_asked(drive, write_script) -> None:
    """It asks a question that only starts with exit."""
    client = ScriptedClient(write_script(code("FINAL('asked')")))
    run = drive(client, "exit strategies?" + ENTER)
    assert "asked" in run.out and len(client.prompts) == 1


def test_exit_ends_a_piped_script(write_script, _rlm_home: Path, tmp_path: Path) -> None:
    """It stops `rlm repl < script` at an exit line, with -m for --model."""
    script = write_script("unused")
    env = {**os.environ, "RLM_HOME": str(_rlm_home)}
    done = subprocess.run([sys.executable, "-m", "rlm_runtime.cli", "repl", "-m", f"scripted:{script}"],
                          input=">>> print('ran')\nquit\n>>> print('never')\n", capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "ran" in done.stdout and "never" not in done.stdout


def test_an_unknown_model_is_refused_and_the_old_one_kept(drive, write_script) -> None:
    """It refuses /model with a name no provider knows, in one line, and keeps asking the old model."""
    first = write_script(code("FINAL('from the first')"))
    run = drive(first, "/model nosuch/model" + ENTER, "/model" + ENTER, "which?" + ENTER)
    refused = [line for line in run.err.splitlines() if "nosuch/model" in line]
    assert len(refused) == 1
    assert refused[0].startswith("/model: unknown model 'nosuch/model'") and refused[0].endswith(f"(still using scripted:{first})")
    assert f"model: scripted:{first}; sub-model: scripted:{first}" in run.out
    assert "from the first" in run.out


def test_an_unknown_sub_model_is_refused_with_the_nearest_name(drive, write_script) -> None:
    """It refuses /sub-model with a local model's typo, names the one meant, and keeps the sub-model."""
    first = write_script(code("FINAL('from the first')"))
    run = drive(first, "/sub-model local:qwen2.5-coder-0.5" + ENTER, "/model" + ENTER)
    assert "did you mean 'qwen2.5-coder-0.5b'?" in run.err and f"(still using scripted:{first})" in run.err
    assert f"sub-model: scripted:{first}" in run.out


def test_a_missing_script_is_refused(drive, write_script, tmp_path: Path) -> None:
    """It refuses a scripted model whose file is missing before switching to it."""
    first = write_script(code("FINAL('from the first')"))
    run = drive(first, f"/model scripted:{tmp_path / 'gone.jsonl'}" + ENTER, "which?" + ENTER)
    assert "/model: script file not found" in run.err
    assert "from the first" in run.out
