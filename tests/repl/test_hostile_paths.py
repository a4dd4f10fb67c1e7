"""Paths and files a person gives the REPL: an unknown ``~user`` and a TOML file nested too
deeply are one clear line, never an internal error, and the REPL goes on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ENTER

NO_USER = "~rlm-no-such-user-9f3a"
DEEP_TOML = "a = " + "[" * 100_000 + "]" * 100_000 + "\n"


def _repl(*args: str, home: Path, cwd: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RLM_HOME": str(home)}
    env.pop("RLM_MODEL", None)
    return subprocess.run([sys.executable, "-m", "rlm_runtime.cli", "repl", *args], input=stdin, capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=120)


def test_an_unknown_users_tilde_is_a_clear_error(drive, write_script) -> None:
    """It says ~user names no user for /context add, /save, /load, /trace and /profile, and goes on."""
    run = drive(write_script("unused"), *(f"/{cmd} {NO_USER}/x.toml" + ENTER for cmd in ("context add", "save", "load", "trace", "profile")),
                ">>> print('still here')" + ENTER)
    assert "internal error" not in run.err
    for cmd in ("/context", "/save", "/load", "/trace", "/profile"):
        assert f"{cmd}: cannot expand '{NO_USER}' in '{NO_USER}/x.toml': no such user" in run.err
    assert "still here" in run.out


@pytest.mark.parametrize("flag", ["--memory", "--profile"])
def test_an_unknown_users_tilde_in_a_flag_is_a_usage_error(flag: str, write_script, _rlm_home: Path, tmp_path: Path) -> None:
    """It exits 2 with one line for --memory or --profile under an unknown ~user."""
    done = _repl(f"--model=scripted:{write_script('unused')}", flag, f"{NO_USER}/x.toml", home=_rlm_home, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "no such user" in done.stderr and "internal error" not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("flag", ["--profile", "--policy"])
def test_a_toml_file_nested_too_deeply_is_a_clear_error(flag: str, write_script, _rlm_home: Path, tmp_path: Path) -> None:
    """It exits 2 with one line for a profile or policy file of 100,000 nested arrays."""
    deep = tmp_path / "deep.toml"
    deep.write_text(DEEP_TOML)
    done = _repl(f"--model=scripted:{write_script('unused')}", flag, str(deep), home=_rlm_home, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "nested too deeply" in done.stderr and "internal error" not in done.stderr and "Traceback" not in done.stderr


def test_a_project_rlm_toml_nested_too_deeply_is_a_clear_error(write_script, _rlm_home: Path, tmp_path: Path) -> None:
    """It says which rlm.toml cannot be read when the folder's probe settings nest 100,000 deep."""
    (tmp_path / "rlm.toml").write_text(DEEP_TOML)
    (tmp_path / "doc.txt").write_text("alpha\n")
    done = _repl(f"--model=scripted:{write_script('unused')}", "-c", "doc.txt", home=_rlm_home, cwd=tmp_path, stdin="what?\n")
    assert f"cannot read {tmp_path / 'rlm.toml'}: nested too deeply" in done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
