"""History: kept per project under $RLM_HOME/history, across REPL sessions."""

from __future__ import annotations

from pathlib import Path

from rlm_runtime.repl.app import history_file

from .conftest import ENTER

UP = "\x1b[A"


def test_history_is_per_project_under_rlm_home(tmp_path: Path) -> None:
    """It names one file per project folder."""
    home = tmp_path / "home"
    one, two = history_file(home, tmp_path / "a"), history_file(home, tmp_path / "b")
    assert one.parent == home / "history" and one != two
    assert history_file(home, tmp_path / "a") == one


def test_history_persists_between_sessions(drive, write_script, _rlm_home: Path, tmp_path: Path, monkeypatch) -> None:
    """It recalls an entry of an earlier session in the same folder with Up."""
    monkeypatch.chdir(tmp_path)
    drive(write_script("unused"), ">>> print('from the first session')" + ENTER, history="project")
    assert "from the first session" in history_file(_rlm_home, tmp_path).read_text()
    run = drive(write_script("unused"), UP + ENTER, history="project")
    assert "from the first session" in run.out
