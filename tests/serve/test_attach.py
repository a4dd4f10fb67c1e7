"""``rlm ask --server``: a question sent to a running ``rlm serve --http`` (found through
``$RLM_HOME/serve/server.json``), and what it refuses."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi")

from _serve import stop_server  # noqa: E402
from _timing import SLACK_S  # noqa: E402

from rlm_runtime.cli import main  # noqa: E402
from rlm_runtime.config import paths_from_env  # noqa: E402
from rlm_runtime.serve import running  # noqa: E402


@pytest.fixture
def served(tmp_path: Path) -> object:
    root = tmp_path / "root"
    root.mkdir()
    (root / "notes.txt").write_text("alpha\nthe gate code is 4711\n")
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"content": "```python\nFINAL(grep('gate code', context)[0].text.split()[-1])\n```"}) + "\n")
    process = subprocess.Popen([sys.executable, "-m", "rlm_runtime.cli", "serve", "--http", "--port", "0", "-m",
                                f"scripted:{script}", "--root", str(root), "--no-memory"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    record = running.record_path(paths_from_env())
    deadline = time.monotonic() + 60 + SLACK_S
    while running.find(paths_from_env()) is None and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.1)
    try:
        yield {"root": root, "script": script, "process": process, "record": record}
    finally:
        stop_server(process)


def test_a_question_goes_to_the_running_server(served: dict, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[type-arg]
    """It answers through the running server (the record names it, 0600), shows its
    iterations, and the record is gone once the server stops."""
    assert oct(served["record"].stat().st_mode & 0o777) == "0o600"
    assert main(["ask", "what is the gate code?", "-c", str(served["root"] / "notes.txt"), "--server"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "4711"
    assert "--- iteration 1: 1 cell(s)" in err and "on http://127.0.0.1:" in err
    assert main(["ask", "what is the gate code?", "-c", str(served["root"] / "notes.txt"), "--server", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["answer"] == "4711"
    served["process"].send_signal(signal.SIGINT)
    served["process"].wait(20)
    assert not served["record"].exists()
    assert main(["ask", "q", "-c", str(served["root"] / "notes.txt"), "--server"]) == 2
    assert "no rlm serve --http is running" in capsys.readouterr().err


def test_what_the_server_cannot_take_is_refused_before_anything_is_sent(served: dict, tmp_path: Path,  # type: ignore[type-arg]
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """It refuses a path outside the server's roots (the server says so), another model, and
    settings only a local run has, each with one line and exit status 2."""
    outside = tmp_path / "outside.txt"
    outside.write_text("x\n")
    assert main(["ask", "q", "-c", str(outside), "--server"]) == 2
    assert "not under the folders this server may read" in capsys.readouterr().err
    assert main(["ask", "q", "-c", str(served["root"]), "--server", "-m", "openai/gpt-4o-mini"]) == 2
    assert "answers with scripted:" in capsys.readouterr().err
    assert main(["ask", "q", "-c", str(served["root"]), "--server", "--max-iterations", "3"]) == 2
    assert "--max-iterations cannot be sent" in capsys.readouterr().err


def test_a_stale_or_forged_record_is_ignored(tmp_path: Path) -> None:
    """It ignores a record whose process is gone or is not a server, and one that is not a record."""
    paths = paths_from_env()
    running.announce(paths, running.Running("http://127.0.0.1:1", os.getpid(), "m", ()))
    assert running.find(paths) is None  # this process is pytest, not rlm serve
    running.record_path(paths).write_text('{"url": "http://x", "pid": 999999999, "model": "m", "roots": []}')
    assert running.find(paths) is None
    running.record_path(paths).write_text("[" * 100_000)
    assert running.find(paths) is None


def test_sigterm_removes_the_record(served: dict) -> None:  # type: ignore[type-arg]
    """It stops the server with SIGTERM (what a service manager sends) and the record is gone."""
    assert served["record"].exists()
    served["process"].send_signal(signal.SIGTERM)
    served["process"].wait(20 + SLACK_S)
    assert not served["record"].exists()


IMPOSTOR = r"""
import http.server, sys
log = open(sys.argv[1], "ab")
class H(http.server.BaseHTTPRequestHandler):
    def _take(self):
        size = int(self.headers.get("content-length") or 0)
        log.write(self.requestline.encode() + b"\n" + bytes(self.headers) + self.rfile.read(size) + b"\n")
        log.flush()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"proof": "0000"}')
    do_GET = do_POST = _take
    def log_message(self, *a):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), H)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def test_a_record_whose_port_another_program_took_gets_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It plants a record that names a live process with 'serve' in its command line (the
    old checks' pass) listening on the record's port, but not holding the record's key:
    the token, the question and the path are never sent to it."""
    from rlm_runtime.serve.auth import load_or_create_token

    paths = paths_from_env()
    token = load_or_create_token(paths)[0]
    log = tmp_path / "impostor.log"
    notes = tmp_path / "private-notes.txt"
    notes.write_text("x\n")
    impostor = subprocess.Popen([sys.executable, "-c", IMPOSTOR, str(log), "serve"], stdout=subprocess.PIPE, text=True)
    try:
        assert impostor.stdout is not None
        port = int(impostor.stdout.readline())
        running.announce(paths, running.Running(f"http://127.0.0.1:{port}", impostor.pid, "scripted:x", (),
                                                running.new_key()))
        assert running.find(paths) is not None  # what the record's old checks accepted
        assert main(["ask", "the QUESTION-CANARY", "-c", str(notes), "--server"]) == 2
        assert "not the server that wrote" in capsys.readouterr().err
    finally:
        impostor.kill()
        impostor.wait()
    seen = log.read_bytes().decode(errors="replace")
    assert "/api/hello" in seen
    assert token not in seen and "QUESTION-CANARY" not in seen and "private-notes" not in seen
    assert "authorization" not in seen.lower()


def test_a_rotated_token_reaches_the_running_server(served: dict, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[type-arg]
    """It rotates the token while the server runs: the new one is taken, the old one refused,
    and the command says so."""
    import httpx

    from rlm_runtime.serve.auth import TOKEN_CHECK_S, load_or_create_token

    paths = paths_from_env()
    old = load_or_create_token(paths)[0]
    url = running.find(paths).url  # type: ignore[union-attr]
    assert httpx.get(f"{url}/api/health", headers={"Authorization": f"Bearer {old}"}).status_code == 200
    assert main(["serve", "--rotate-token"]) == 0
    out, err = capsys.readouterr()
    new = out.strip()
    assert "takes the new token" in err
    time.sleep(TOKEN_CHECK_S + 0.2)
    assert httpx.get(f"{url}/api/health", headers={"Authorization": f"Bearer {old}"}).status_code == 401
    assert httpx.get(f"{url}/api/health", headers={"Authorization": f"Bearer {new}"}).status_code == 200
    assert main(["ask", "what is the gate code?", "-c", str(served["root"] / "notes.txt"), "--server"]) == 0
    assert capsys.readouterr().out.strip() == "4711"
