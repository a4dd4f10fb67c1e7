"""The local model server's launcher ends the server when the process that started it dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

import rlm_runtime.llm.local as local

LAUNCHER = Path(local.__file__).with_name("serve_local.py")

#: A parent that starts the launcher around a server that never ends on its own, prints the
#: launcher's pid, then waits to be killed.
PARENT = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, sys.argv[1], str(os.getpid()), "http.server", "0", "--bind", "127.0.0.1"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
print(child.pid, flush=True)
time.sleep(600)
"""


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.slow
def test_the_server_ends_when_its_parent_is_killed() -> None:
    """It ends the server within a few seconds of a SIGKILL of its parent (no exit handler ran)."""
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(LAUNCHER)], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    server = int(parent.stdout.readline())
    try:
        time.sleep(1.5)
        assert not _gone(server), "the launcher must keep the server running while its parent lives"
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 10
        while not _gone(server) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _gone(server)
    finally:
        if not _gone(server):
            os.kill(server, signal.SIGKILL)
