"""``rlm serve``'s own options through its entry point: the token commands and --allow-host."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi")

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
        process.send_signal(signal.SIGINT)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
