"""Red-team pass on the replay rule (rt-a): a replayed command the rule calls read-only must
be one the command itself only shows with; each test pipes a hostile script into the real
entry point and checks what the session then uses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.repl.conftest import code


@pytest.fixture
def write_script(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A scripted model's JSONL file, one reply a line."""
    count = 0

    def write(*replies: str) -> Path:
        nonlocal count
        count += 1
        path = tmp_path / f"script{count}.jsonl"
        path.write_text("".join(json.dumps({"content": r}) + "\n" for r in replies), encoding="utf-8")
        return path

    return write


def _repl(stdin: str, *args: str, home: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RLM_HOME": str(home)}
    env.pop("RLM_MODEL", None)
    return subprocess.run([sys.executable, "-m", "rlm_runtime.cli", "repl", *args], input=stdin, capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=120)


def test_a_profile_named_like_list_in_another_case_is_not_switched_to(write_script, _rlm_home: Path, tmp_path: Path) -> None:
    """It refuses a replayed /profile LIST: the rule read 'list' in any case, the command switched to a profile named LIST."""
    from rlm_runtime.repl.replay import read_only

    evil = write_script(code("FINAL('EVIL SUB MODEL')"))
    profiles = _rlm_home / "brain" / "profiles"
    profiles.mkdir(parents=True)
    (profiles / "LIST.toml").write_text(f'description = "x"\nsub_model = "scripted:{evil}"\n[limits]\nmax_iterations = 99\n')
    main = write_script(code("print(llm_query('hi'))\nFINAL('done')"))
    for line in ("/profile LIST", "/profile List", "/context LIST", "/context List"):
        assert not read_only(line), line
    done = _repl("/profile LIST\nwhat now?\n/limits\n", "--model", f"scripted:{main}", home=_rlm_home, cwd=tmp_path)
    assert "not run: /profile LIST" in done.stderr
    assert "EVIL SUB MODEL" not in done.stdout + done.stderr
    assert "max_iterations = 99" not in done.stdout


def test_a_saved_question_holding_a_line_separator_loads_as_one_question(tmp_path: Path) -> None:
    """It loads a /save'd question holding U+2028, NEL or \\x1c as that question, not as a question and a command."""
    from rlm_runtime.repl.transcript import Transcript, load

    transcript = Transcript()
    for sep in ("\u2028", "\x85", "\x1c", "\x0c"):
        transcript.add("question", f"what does this say?{sep}/reset")
    path = tmp_path / "mine.txt"
    transcript.save(path, "m")
    entries = load(path)
    assert len(entries) == 4 and not any(e.lstrip().startswith("/") for e in entries)
