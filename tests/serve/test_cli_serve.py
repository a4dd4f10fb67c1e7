"""``rlm serve``'s own options through its entry point: the token commands and --allow-host."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi")

from _serve import stop_server  # noqa: E402
from _timing import SLACK_S  # noqa: E402

from rlm_runtime.cli import main  # noqa: E402
from rlm_runtime.config import paths_from_env  # noqa: E402
from rlm_runtime.serve import running  # noqa: E402


def test_show_and_rotate_the_token(capsys: pytest.CaptureFixture[str]) -> None:
    """It prints the same token until --rotate-token replaces it (0600 both times)."""
    assert main(["serve", "--show-token"]) == 0
    first = capsys.readouterr().out.strip()
    assert main(["serve", "--show-token"]) == 0
    assert capsys.readouterr().out.strip() == first and len(first) >= 32
    assert main(["serve", "--rotate-token"]) == 0
    rotated = capsys.readouterr().out.strip()
    assert rotated != first
    assert main(["serve", "--show-token"]) == 0
    assert capsys.readouterr().out.strip() == rotated
    token_file = paths_from_env().home / "serve" / "token"
    assert oct(token_file.stat().st_mode & 0o777) == "0o600"


def test_allow_host_lets_a_proxy_name_through_and_no_other(tmp_path: Path) -> None:
    """It accepts a Host named with --allow-host (the token is then what is asked for) and
    refuses another name (403)."""
    script = tmp_path / "s.jsonl"
    script.write_text('{"content": "x"}\n')
    process = subprocess.Popen([sys.executable, "-m", "rlm_runtime.cli", "serve", "--http", "--port", "0", "-m",
                                f"scripted:{script}", "--allow-host", "rlm.example:443", "--no-memory"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ))
    try:
        deadline = time.monotonic() + 60 + SLACK_S
        while (found := running.find(paths_from_env())) is None and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.1)
        assert found is not None
        allowed = httpx.get(f"{found.url}/api/health", headers={"host": "rlm.example:443"}, timeout=30)
        other = httpx.get(f"{found.url}/api/health", headers={"host": "evil.example:443"}, timeout=30)
        assert allowed.status_code == 401 and other.status_code == 403
    finally:
        stop_server(process)


def test_without_the_default_model_it_starts_and_refuses_ask_alone(tmp_path: Path) -> None:
    """With no -m and the default local model not installed, ``rlm serve --http`` starts, says
    once that ask needs a model, serves grep over a root, and answers ask with that error (a
    model named with -m that cannot run still stops it: exit 2)."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "notes.txt").write_text("alpha\nthe gate code is 4711\n")
    env = {k: v for k, v in os.environ.items() if k != "RLM_MODEL"}
    env["RLM_MODELS_DIR"] = str(tmp_path / "no-models")
    refused = subprocess.run([sys.executable, "-m", "rlm_runtime.cli", "serve", "--http", "--port", "0", "-m",
                              "local:qwen2.5-coder-1.5b"], capture_output=True, text=True, env=env, timeout=60)
    assert refused.returncode == 2 and "not installed" in refused.stderr
    err = tmp_path / "err.txt"
    with err.open("w") as err_file:
        process = subprocess.Popen([sys.executable, "-m", "rlm_runtime.cli", "serve", "--http", "--port", "0", "--root",
                                    str(root), "--no-memory"], stdout=subprocess.DEVNULL, stderr=err_file, env=env)
    try:
        deadline = time.monotonic() + 60 + SLACK_S
        while (found := running.find(paths_from_env())) is None and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.1)
        assert found is not None, err.read_text()
        assert main(["serve", "--show-token"]) == 0
        token = paths_from_env().home.joinpath("serve", "token").read_text().strip()
        auth = {"authorization": f"Bearer {token}"}
        added = httpx.post(f"{found.url}/api/context/register", json={"path": str(root / "notes.txt"), "name": "notes"},
                           headers=auth, timeout=30)
        assert added.status_code == 200, added.text
        grep = httpx.get(f"{found.url}/api/context/notes/grep", params={"pattern": "gate"}, headers=auth, timeout=30)
        assert grep.status_code == 200 and grep.json()["matches"][0]["line_no"] == 2
        ask = httpx.post(f"{found.url}/api/ask", json={"question": "the code?", "contexts": ["notes"]}, headers=auth,
                         timeout=30)
        assert ask.status_code >= 400 and "ask needs a model" in ask.text and "rlm model install" in ask.text
        said = err.read_text()
        assert said.count("ask needs a model") == 1 and "Traceback" not in said
    finally:
        stop_server(process)


def test_named_tokens_are_made_listed_and_removed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """It prints a named token once, lists names, scopes and stores and never a secret, and
    removes a token by name (exit 2 for an unknown one)."""
    from rlm_runtime.serve.tokens import digest, tokens_path

    assert main(["serve", "--add-token", "ci", "--read-only"]) == 0
    ci = capsys.readouterr()
    assert "read-only" in ci.err and "shown this once" in ci.err
    assert main(["serve", "--add-token", "alice", "--store", str(tmp_path / "alice.db")]) == 0
    alice = capsys.readouterr().out.strip()
    secrets = [ci.out.strip(), alice]
    assert all(len(s) >= 43 for s in secrets) and (tmp_path / "alice.db").exists()
    assert main(["serve", "--list-tokens"]) == 0
    listed = capsys.readouterr()
    lines = listed.out.splitlines()
    assert lines[0].split() == ["NAME", "SCOPE", "STORE", "MADE"]
    assert lines[1].split()[:3] == ["owner", "full", "default"]
    assert lines[2].split()[:3] == ["ci", "read-only", "default"]
    assert lines[3].split()[:3] == ["alice", "full", str(Path(os.path.realpath(tmp_path)) / "alice.db")]
    for secret in secrets:
        assert secret not in listed.out + listed.err and digest(secret) not in listed.out + listed.err
        assert secret not in tokens_path(paths_from_env()).read_text()
    assert main(["serve", "--remove-token", "ci"]) == 0
    assert main(["serve", "--remove-token", "ci"]) == 2
    assert "no token named 'ci'" in capsys.readouterr().err
    assert main(["serve", "--list-tokens"]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()] == ["NAME", "owner", "alice"]


def test_token_options_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    """It refuses --read-only or --store without --add-token, a bad name and the default
    store, each with one line and exit 2."""
    assert main(["serve", "--list-tokens", "--read-only"]) == 2
    assert main(["serve", "--add-token", "owner"]) == 2
    assert main(["serve", "--add-token", "a b"]) == 2
    assert main(["serve", "--add-token", "x", "--store", str(paths_from_env().home / "brain" / "memory.db")]) == 2
    err = capsys.readouterr().err
    assert "--read-only and --store go with --add-token" in err and "default memory store" in err
    assert "Traceback" not in err


def test_a_damaged_tokens_file_stops_the_server_with_why(tmp_path: Path) -> None:
    """It refuses to serve over a tokens file it did not write (exit 2, the file named, no
    traceback), and --list-tokens says the same."""
    from rlm_runtime.serve.tokens import tokens_path

    path = tokens_path(paths_from_env())
    path.parent.mkdir(parents=True)
    path.write_text('{"version": 1, "tokens": [{"name": "x"}]}')
    script = tmp_path / "s.jsonl"
    script.write_text('{"content": "x"}\n')
    done = subprocess.run([sys.executable, "-m", "rlm_runtime.cli", "serve", "--http", "--port", "0", "-m",
                           f"scripted:{script}", "--no-memory"], capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert done.returncode == 2 and str(path) in done.stderr and "damaged" in done.stderr
    assert "Traceback" not in done.stderr and running.find(paths_from_env()) is None
    listed = subprocess.run([sys.executable, "-m", "rlm_runtime.cli", "serve", "--list-tokens"], capture_output=True, text=True,
                            timeout=60, env=dict(os.environ))
    assert listed.returncode == 2 and "damaged" in listed.stderr and "Traceback" not in listed.stderr


def test_a_running_server_takes_tokens_made_and_removed_with_the_cli(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """It serves a named token made before the start and one made while it runs, and refuses
    a token removed while it runs, each within a second or so of the command."""
    assert main(["serve", "--add-token", "before", "--read-only"]) == 0
    before = capsys.readouterr().out.strip()
    script = tmp_path / "s.jsonl"
    script.write_text('{"content": "x"}\n')
    process = subprocess.Popen([sys.executable, "-m", "rlm_runtime.cli", "serve", "--http", "--port", "0", "-m",
                                f"scripted:{script}", "--no-memory"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ))

    def status(token: str) -> int:
        return httpx.get(f"{found.url}/api/context", headers={"authorization": f"Bearer {token}"}, timeout=30).status_code

    def waits_for(token: str, wanted: int) -> bool:
        deadline = time.monotonic() + 3 + SLACK_S
        while status(token) != wanted:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    try:
        deadline = time.monotonic() + 60 + SLACK_S
        while (found := running.find(paths_from_env())) is None and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.1)
        assert found is not None
        assert status(before) == 200
        refused = httpx.post(f"{found.url}/api/context/register", json={"path": str(tmp_path)},
                             headers={"authorization": f"Bearer {before}"}, timeout=30)
        assert refused.status_code == 403 and refused.json()["type"] == "ReadOnlyToken"
        assert main(["serve", "--add-token", "during"]) == 0
        during = capsys.readouterr().out.strip()
        assert waits_for(during, 200)
        assert main(["serve", "--remove-token", "before"]) == 0
        assert waits_for(before, 401) and status(during) == 200
    finally:
        stop_server(process)
