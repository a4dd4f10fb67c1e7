"""Issue 22, class 6: what the runtime writes under ``$RLM_HOME`` is private to the user (0700
folders, 0600 files) whatever the umask, and ``rlm sandbox doctor`` reports any path there that
others may read."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from rlm_runtime import Session
from rlm_runtime.budget import RunLimits
from rlm_runtime.llm import ScriptedClient

ROOT = Path(__file__).resolve().parents[2]
CONTEXT_TEXT = "the private ledger: alpha beta gamma\n" * 30


def code(src: str) -> str:
    return f"```python\n{src}\n```"


def modes(home: Path) -> dict[str, int]:
    found = {str(home): stat.S_IMODE(os.lstat(home).st_mode)}
    for path in home.rglob("*"):
        found[str(path)] = stat.S_IMODE(os.lstat(path).st_mode)
    return found


def assert_private(home: Path) -> None:
    wrong = {p: oct(m) for p, m in modes(home).items() if m != (0o700 if os.path.isdir(p) else 0o600)}
    assert not wrong, wrong


def test_a_run_with_a_trace_an_index_and_memory_leaves_only_private_paths(tmp_path: Path, umask_022: None,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """It creates RLM_HOME, traces, the index of a 0600 file, the memory store and its -wal/-shm as 0700/0600 under umask 022."""
    home = tmp_path / "home"  # not there yet: the runtime makes it
    monkeypatch.setenv("RLM_HOME", str(home))
    secret_file = tmp_path / "ledger.txt"
    secret_file.write_text(CONTEXT_TEXT)
    secret_file.chmod(0o600)
    root = ScriptedClient([code("print(search_chunks('ledger')[:1])"), code("FINAL('alpha')")])
    with Session(root, contexts=[str(secret_file), CONTEXT_TEXT], limits=RunLimits(max_iterations=3), memory=True,
                 remember=True) as s:
        assert s.ask("What is in the ledger?").answer == "alpha"
        names = {p.name for p in home.rglob("*")}
        assert any(n.endswith(".jsonl") for n in names) and "memory.db" in names
        assert any(n.startswith("path-") for n in names) and any(n.startswith("text-") for n in names)
        assert any(n.endswith("-wal") for n in names)
        assert_private(home)  # while open: the text index, the -wal and -shm files
    assert_private(home)


def test_an_existing_home_is_made_private_when_a_session_starts(tmp_path: Path, umask_022: None,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """It takes group and other bits off an existing RLM_HOME and what an older version left in it."""
    home = tmp_path / "home"
    (home / "traces").mkdir(parents=True)
    home.chmod(0o755)
    (home / "traces").chmod(0o755)
    old = home / "traces" / "run-old.jsonl"
    old.write_text("{}\n")
    old.chmod(0o644)
    monkeypatch.setenv("RLM_HOME", str(home))
    with Session(ScriptedClient([code("FINAL('x')")]), contexts=["x"], limits=RunLimits(max_iterations=2)) as s:
        s.ask("q")
    assert_private(home)


def test_the_repl_history_is_private(tmp_path: Path, umask_022: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """It creates the REPL's history file 0600 in a 0700 folder (every question typed is in it)."""
    import io

    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from rlm_runtime.repl.app import history_file, run_terminal
    from rlm_runtime.repl.controller import ReplConfig
    from rlm_runtime.repl.plain import PlainPrinter

    home = tmp_path / "home"
    script = tmp_path / "script.jsonl"
    script.write_text("")
    monkeypatch.chdir(tmp_path)
    with create_pipe_input() as pipe:
        pipe.send_text(">>> print('my private question')\r\x04")
        run_terminal(ReplConfig(model=f"scripted:{script}"), home=home, input=pipe, output=DummyOutput(),
                     printer=PlainPrinter(io.StringIO(), io.StringIO()))
    assert "my private question" in history_file(home, tmp_path).read_text()
    assert_private(home)


def doctor_json(home: Path) -> list[dict[str, object]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RLM_HOME": str(home)}
    done = subprocess.run([sys.executable, "-m", "rlm_runtime.cli", "sandbox", "doctor", "--json"], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    value = json.loads(done.stdout)
    assert isinstance(value, list)
    return value


def test_doctor_flags_a_file_others_can_read(tmp_path: Path) -> None:
    """It reports private_home off, naming a chmod 0644 file under RLM_HOME, and on once it is 0600."""
    home = tmp_path / "home"
    (home / "traces").mkdir(parents=True, mode=0o700)
    home.chmod(0o700)
    leaked = home / "traces" / "run-1.jsonl"
    leaked.write_text("{}\n")
    leaked.chmod(0o644)
    layer = next(x for x in doctor_json(home) if x["name"] == "private_home")
    assert layer["active"] is False and str(leaked) in "\n".join(layer["findings"])  # type: ignore[arg-type]
    leaked.chmod(0o600)
    layer = next(x for x in doctor_json(home) if x["name"] == "private_home")
    assert layer["active"] is True and "findings" not in layer


def test_doctor_text_lists_the_exposed_path(tmp_path: Path) -> None:
    """It prints the exposed path and the chmod that fixes it under the private_home row."""
    from rlm_runtime.sandbox.doctor import home_layer, render

    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    text = render([home_layer(home)])
    assert "[off] private_home" in text and f"chmod -R go-rwx {home}" in text and str(home) in text
