"""Red-team pass on file modes (rt-a): under umask 022 every file the runtime writes from a
private source (a trajectory, the memory store, a session) is 0600: the REPL's /trace and
/save, rlm trace html, rlm memory export, and what rlm model install leaves in RLM_HOME."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _rlm(*args: str, home: Path, cwd: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RLM_HOME": str(home)}
    env.pop("RLM_MODEL", None)
    return subprocess.run([sys.executable, "-m", "rlm_runtime.cli", *args], input=stdin, capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=120)


def test_the_repl_trace_page_and_saved_transcript_are_private(tmp_path: Path, umask_022: None) -> None:
    """It writes /trace's HTML page (beside the 0600 trajectory, in RLM_HOME) and /save's transcript 0600 under umask 022."""
    home, script = tmp_path / "home", tmp_path / "script.jsonl"
    script.write_text(json.dumps({"content": "```python\nFINAL('the code is 42')\n```"}) + "\n")
    trace = home / "traces" / "s.jsonl"
    done = _rlm("repl", "--model", f"scripted:{script}", "--trace", str(trace), "--allow-commands", home=home, cwd=tmp_path,
                stdin=f"what is the code?\n/trace\n/save {tmp_path / 'mine.txt'}\n")
    assert done.returncode == 0, done.stderr
    page = trace.with_suffix(".html")
    assert "rlm repl session" in page.read_text() and _mode(page) == 0o600
    assert _mode(tmp_path / "mine.txt") == 0o600


def test_rlm_trace_html_and_memory_export_are_private(tmp_path: Path, umask_022: None) -> None:
    """It writes rlm trace html's page and rlm memory export's file 0600 under umask 022 (copies of private files)."""
    from rlm_runtime.memory import MemoryStore

    home, script = tmp_path / "home", tmp_path / "script.jsonl"
    script.write_text(json.dumps({"content": "```python\nFINAL('the code is 42')\n```"}) + "\n")
    traces = home / "traces"
    done = _rlm("repl", "--model", f"scripted:{script}", "--trace", str(traces / "t.jsonl"), home=home, cwd=tmp_path,
                stdin="what is the code?\n")
    assert done.returncode == 0, done.stderr
    done = _rlm("trace", "html", str(traces / "t.jsonl"), "-o", str(traces / "t.html"), home=home, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert _mode(traces / "t.html") == 0o600
    doc = tmp_path / "ledger.txt"
    doc.write_text("the vault code is 1234\n")
    with MemoryStore(tmp_path / "m.db") as store:
        store.ingest([doc])
    done = _rlm("memory", "export", str(tmp_path / "out.jsonl"), "--store", str(tmp_path / "m.db"), home=home, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "1234" in (tmp_path / "out.jsonl").read_text() and _mode(tmp_path / "out.jsonl") == 0o600


def test_the_model_notices_are_private(tmp_path: Path, umask_022: None) -> None:
    """It copies the model's licence notices into the models folder 0600, so doctor finds nothing readable there."""
    from rlm_runtime import private
    from rlm_runtime.llm import models

    folder = private.make_dir(tmp_path / "home" / "models")
    models.write_notice(folder)
    assert sorted(p.name for p in folder.iterdir()) and all(_mode(p) == 0o600 for p in folder.iterdir())
    assert private.exposed(tmp_path / "home") == []


def test_a_linked_rlm_home_makes_its_folder_private_and_doctor_sees_it(tmp_path: Path) -> None:
    """It tightens the folder a symlinked RLM_HOME names (it stayed 0755, listable) and doctor reports it while it is open."""
    from rlm_runtime import private

    real = tmp_path / "disk" / "rlm"
    real.mkdir(parents=True, mode=0o755)
    real.chmod(0o755)
    home = tmp_path / "home-link"
    home.symlink_to(real, target_is_directory=True)
    assert [e.path for e in private.exposed(home)] == [str(real)]
    private.secure_home(home)
    assert _mode(real) == 0o700 and private.exposed(home) == []
    assert home.is_symlink()
