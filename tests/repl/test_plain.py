"""Without a terminal: `rlm repl < script` through the real entry point."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .conftest import code


def _repl(stdin: str, *args: str, home: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RLM_HOME": str(home)}
    env.pop("RLM_MODEL", None)
    return subprocess.run([sys.executable, "-m", "rlm_runtime.cli", "repl", *args], input=stdin, capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=60)


def test_a_script_runs_questions_cells_and_commands(write_script, _rlm_home: Path, tmp_path: Path) -> None:
    """It reads entries from stdin, prints results on stdout and the log on stderr, and exits 0."""
    script = write_script(code("x = 40 + 2\nprint('x is', x)"), code("FINAL('forty-two' + chr(27) + ']0;title' + chr(7))"))
    doc = tmp_path / "notes.md"
    doc.write_text("alpha\nbeta\n")
    stdin = ("# a comment\nwhat is x?\n>>> for i in range(2):\n...     print('row', i + x)\n\n/context list\n/exit\n"
             ">>> print('never')\n")
    done = _repl(stdin, "--model", f"scripted:{script}", "-c", str(doc), home=_rlm_home, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:3] == ["forty-two\\x1b]0;title\\x07", "row 42", "row 43"]
    assert "notes.md" in done.stdout and "never" not in done.stdout
    assert "rlm> what is x?" in done.stderr and "--- iteration 1" in done.stderr
    assert "\x1b" not in done.stdout + done.stderr and "\x07" not in done.stdout + done.stderr


def test_a_failed_entry_makes_the_status_1_and_the_script_goes_on(write_script, _rlm_home: Path, tmp_path: Path) -> None:
    """It runs every entry, says how many failed, and exits 1; no traceback."""
    script = write_script("unused")
    done = _repl(">>> 1/0\n/nope\n>>> print('went on')\n", "--model", f"scripted:{script}", home=_rlm_home, cwd=tmp_path)
    assert done.returncode == 1
    assert "went on" in done.stdout
    assert "ZeroDivisionError" in done.stderr and "unknown command /nope" in done.stderr and "2 entries failed" in done.stderr
    assert "rlm_runtime/" not in done.stderr


def test_bad_usage_is_exit_2(_rlm_home: Path, tmp_path: Path) -> None:
    """It refuses a missing context file before starting."""
    done = _repl("", "--model", "scripted:x", "-c", "/no/such/file", home=_rlm_home, cwd=tmp_path)
    assert done.returncode == 2
    assert "no such context file or folder" in done.stderr
