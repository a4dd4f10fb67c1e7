"""End to end in a real terminal: `rlm repl` under tmux, keys sent, the screen read back."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import code

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")

#: A cell that keeps the question in flight for a few seconds, so the HUD can be read.
BUSY = ("import datetime\nstart = datetime.datetime.now()\nwhile (datetime.datetime.now() - start).total_seconds() < 3:\n"
        "    pass\nx = 21 * 2\nprint('x is', x)")


def test_a_person_asks_inspects_and_sees_the_hud(write_script, _rlm_home: Path, tmp_path: Path) -> None:
    """It shows the prompt, the HUD while a question runs, the answer, and a python-mode result."""
    script = write_script(code(BUSY), code("FINAL(f'the answer is {x}')"))
    socket = f"rlm-test-{uuid.uuid4().hex[:8]}"
    tmux = [TMUX or "tmux", "-L", socket]
    env = {**os.environ, "RLM_HOME": str(_rlm_home), "TERM": "xterm-256color"}
    command = f"cd {tmp_path} && {sys.executable} -m rlm_runtime.cli repl --model scripted:{script}; echo REPL-EXITED-$?; sleep 30"
    try:
        subprocess.run([*tmux, "new-session", "-d", "-x", "200", "-y", "50", command], check=True, env=env, timeout=10)
        screen = _screen(tmux)
        _wait(lambda: "rlm>" in screen(), screen, "the first prompt")
        subprocess.run([*tmux, "send-keys", "what is x?", "Enter"], check=True, timeout=10)
        _wait(lambda: "iter 1/" in screen() and "Ctrl-C cancels" in screen(), screen, "the HUD")
        hud = next(line for line in screen().splitlines() if "iter 1/" in line)
        assert "model scripted:" in hud and "depth 0" in hud and "tokens" in hud and "worker" in hud and "free" in hud
        _wait(lambda: "the answer is 42" in screen(), screen, "the answer")
        _wait(lambda: "session 1 question," in screen(), screen, "the toolbar after one question (1 question, not 1 questions)")
        subprocess.run([*tmux, "send-keys", ">>> print(x + 1000)", "Enter"], check=True, timeout=10)
        _wait(lambda: "1042" in screen(), screen, "the cell's output")
        subprocess.run([*tmux, "send-keys", "C-d"], check=True, timeout=10)
        _wait(lambda: "REPL-EXITED-0" in screen(), screen, "the exit")
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True, timeout=10)


def _screen(tmux: list[str]) -> Callable[[], str]:
    def capture() -> str:
        done = subprocess.run([*tmux, "capture-pane", "-p"], capture_output=True, text=True, timeout=10)
        return done.stdout.rstrip()

    return capture


def _wait(ready: Callable[[], bool], screen: Callable[[], str], what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}; the screen:\n{screen()}")
