"""The local model server: its launcher ends the server when the process that started it dies,
and its log is private and cannot be redirected through a planted link."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from _timing import SLACK_S

import rlm_runtime.llm.local as local
from rlm_runtime.llm.engines import ServerSettings

LAUNCHER = Path(local.__file__).with_name("serve_local.py")

#: A parent that starts the launcher around a server that never ends on its own, prints the
#: launcher's pid, then waits to be killed.
PARENT = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, sys.argv[1], str(os.getpid()), "http.server", "0", "--bind", "127.0.0.1"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
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


# ------------------------------------------------------------------ the server's log


def _server(home: Path) -> local.LocalServer:
    """A server object that is never started (no model file is needed)."""
    return local.LocalServer("tiny", home / "tiny.gguf", ServerSettings(n_threads=1, n_ctx=512), verify_model=False)


def test_the_log_goes_under_rlm_home(_rlm_home: Path) -> None:
    """It puts the server log in $RLM_HOME/logs, not at a predictable name in the shared temp folder."""
    server = _server(_rlm_home)
    assert server.log_path.parent == _rlm_home / "logs"
    assert str(os.getpid()) in server.log_path.name


def test_the_log_is_private(_rlm_home: Path) -> None:
    """It creates the log folder 0700 and the log 0600."""
    path = _rlm_home / "logs" / "a.log"
    with local.open_log(path) as log:
        log.write(b"hello\n")
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_bytes() == b"hello\n"


@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
def test_a_planted_link_is_replaced_not_written_through(kind: str, _rlm_home: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """It replaces a symlink or hard link planted at the log's path; the victim file is unchanged."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    server = _server(_rlm_home)
    server.log_path.parent.mkdir(parents=True)
    if kind == "symlink":
        server.log_path.symlink_to(victim)
    else:
        os.link(victim, server.log_path)

    def no_server(*args: object, **kwargs: object) -> None:
        os.write(kwargs["stdout"].fileno(), b"server output\n")  # type: ignore[attr-defined]
        raise OSError("no server in this test")

    monkeypatch.setattr(local.subprocess, "Popen", no_server)
    with pytest.raises(local.ModelUnavailable, match="no server in this test"):
        server.start()  # the real start path: it opens the log, then fails to launch
    assert victim.read_text() == "precious\n"
    assert not server.log_path.is_symlink() and server.log_path.stat().st_ino != victim.stat().st_ino
    assert server.log_path.read_bytes() == b"server output\n"


def test_a_log_that_cannot_be_created_is_a_clear_error(_rlm_home: Path) -> None:
    """It names the log path when the log cannot be created (a folder in the way)."""
    path = _rlm_home / "logs" / "busy.log"
    (path / "inside").mkdir(parents=True)
    with pytest.raises(local.ConfigError, match="cannot create the local model server's log .*busy.log"):
        local.open_log(path)


def test_log_tail_reads_the_last_lines(_rlm_home: Path) -> None:
    """It shows the last lines of the log on one line, and says so when there is no log or an empty one."""
    server = _server(_rlm_home)
    assert server.log_tail() == "(no server log)"
    with local.open_log(server.log_path):
        pass
    assert server.log_tail() == "(empty server log)"
    server.log_path.write_bytes(b"".join(b"line %d\n" % i for i in range(100_000)) + b"\xff bad utf-8\n" + b"x" * 5000 + b"\n")
    tail = server.log_tail(3)
    assert tail.startswith("line 99999 / \ufffd bad utf-8 / xxx")
    assert tail.endswith("...") and len(tail) < 400


def test_log_tail_does_not_follow_links_or_block(_rlm_home: Path, tmp_path: Path) -> None:
    """It neither reads through a symlink nor hangs on a FIFO planted at the log's path."""
    server = _server(_rlm_home)
    server.log_path.parent.mkdir(parents=True)
    secret = tmp_path / "secret.txt"
    secret.write_text("do not show\n")
    server.log_path.symlink_to(secret)
    assert server.log_tail() == "(no server log)"
    server.log_path.unlink()
    os.mkfifo(server.log_path)
    started = time.monotonic()
    assert server.log_tail() == "(no server log)"
    assert time.monotonic() - started < 1 + SLACK_S  # opening the FIFO to read would block for good
