"""Without a terminal: `rlm repl < script` through the real entry point."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from rlm_runtime.config import paths_from_env

from .conftest import code

# Read at import, before the autouse fixture points RLM_HOME at a temp dir.
REAL_MODELS_DIR = paths_from_env().models


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


def test_fill_quality_without_the_quality_model_says_how_to_install_it(write_script, _rlm_home: Path, tmp_path: Path) -> None:
    """``rlm repl --fill-quality`` where the quality model is not installed exits 2 with the
    install command, before any question; no traceback."""
    script = write_script(code("FINAL('never asked')"))
    env_models = _rlm_home / "no-models"
    env_models.mkdir()
    env = {**os.environ, "RLM_HOME": str(_rlm_home), "RLM_MODELS_DIR": str(env_models)}
    done = subprocess.run([sys.executable, "-m", "rlm_runtime.cli", "repl", "--fill-quality", "--model", f"scripted:{script}"],
                          input="what?\n", capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "rlm model install minilm-l6" in done.stderr and "Traceback" not in done.stderr
    assert "never asked" not in done.stdout


def test_fill_quality_fills_the_store_while_the_repl_waits(write_script, _rlm_home: Path, tmp_path: Path) -> None:
    """With the quality model installed, ``rlm repl --memory STORE --fill-quality`` gives the
    store's chunks their quality vectors while no question runs (the REPL waiting for a
    line), and ``/exit`` ends it: exit 0, every chunk with a vector, no thread left behind."""
    import sqlite3
    import time

    from rlm_runtime import contextual
    from rlm_runtime.memory import MemoryStore
    from rlm_runtime.repl.controller import FILL_IDLE_S

    models = REAL_MODELS_DIR
    if not contextual.installed(models):
        import pytest

        if os.environ.get("CI") == "true":
            pytest.fail(f"the quality model is not installed in {models}")
        pytest.skip("the quality model is not installed")
    store_path = tmp_path / "notes.db"
    with MemoryStore(store_path) as st:
        for i in range(3):
            st.add_text(f"Note {i}: refunds are paid back within {i + 30} days of purchase.", source=f"n{i}")
    script = write_script(code("FINAL('unused')"))
    env = {**os.environ, "RLM_HOME": str(_rlm_home), "RLM_MODELS_DIR": str(models)}
    proc = subprocess.Popen([sys.executable, "-m", "rlm_runtime.cli", "repl", "--memory", str(store_path), "--fill-quality",
                             "--model", f"scripted:{script}"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)

    def filled() -> int:
        conn = sqlite3.connect(f"{store_path.as_uri()}?mode=ro", uri=True)
        try:
            return int(conn.execute("SELECT count(*) FROM quality_vectors").fetchone()[0])
        finally:
            conn.close()

    try:
        deadline = time.monotonic() + FILL_IDLE_S + 60
        while filled() < 3 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
        out, err = proc.communicate("/exit\n", timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert filled() == 3 and "Traceback" not in err


def test_help_and_clear_alone_are_commands_not_questions(write_script, _rlm_home: Path, tmp_path: Path) -> None:
    """``help`` and ``clear`` typed alone run as /help and /clear (as in a shell or IPython):
    the model is never asked (its script has no reply to give), and the REPL exits 0."""
    script = write_script("unused")
    done = _repl("help\nclear\nHELP\n/exit\n", "--model", f"scripted:{script}", home=_rlm_home, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (done.stdout + done.stderr).count("/context add PATH") == 2
    assert "iteration" not in done.stderr and "no answer" not in done.stdout + done.stderr


def test_a_context_can_be_taken_out(write_script, _rlm_home: Path, tmp_path: Path) -> None:
    """``/context rm NAME`` (or ``/drop N``) takes a context out: the worker holds the others,
    numbered from 0, and a search finds nothing of the one taken out."""
    (tmp_path / "a.md").write_text("alpha file: the heron fishes at dawn\n")
    (tmp_path / "b.md").write_text("beta file: the kettle whistles\n")
    (tmp_path / "c.md").write_text("gamma file: the owl hunts at night\n")
    script = write_script("unused")
    stdin = ("/context rm a.md\n/context list\n>>> print([c.name for c in contexts])\n"
             ">>> print(sorted({h['source'] for h in search_chunks('file', k=10)}))\n/drop 1\n/context list\n"
             "/context rm nothing.md\n/exit\n")
    done = _repl(stdin, "--model", f"scripted:{script}", "-c", "a.md", "-c", "b.md", "-c", "c.md", "--allow-commands",
                 home=_rlm_home, cwd=tmp_path)
    assert "removed a.md" in done.stdout + done.stderr and "removed c.md" in done.stdout + done.stderr
    assert "['b.md', 'c.md']" in done.stdout
    found = [line for line in done.stdout.splitlines() if line.startswith("[") and ".md" in line and "b.md" in line]
    assert "a.md" not in found[-1]
    assert "no context 'nothing.md'" in done.stderr and done.returncode == 1


def test_a_model_that_cannot_run_stops_the_repl_before_it_starts(write_script, _rlm_home: Path, tmp_path: Path) -> None:
    """``rlm repl -m local:not-a-model`` (or a missing script, or such a --sub-model) exits 2
    naming the problem before reading any line: no question is asked, no traceback."""
    script = write_script(code("FINAL('never')"))
    for args in (("--model", "local:not-a-model"), ("--model", f"scripted:{tmp_path / 'none.jsonl'}"),
                 ("--model", f"scripted:{script}", "--sub-model", "local:not-a-model")):
        done = _repl("what?\n", *args, home=_rlm_home, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert "rlm: error:" in done.stderr and "Traceback" not in done.stderr and "rlm> " not in done.stderr
