"""A server under load and a server killed: 16 clients at once for a fixed time (no answer
lost or given to the wrong client, memory bounded, every worker gone at the end), and
``kill -9`` mid-question (no orphan worker; the registry intact after a restart)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import psutil
import pytest

pytest.importorskip("fastapi")

from _timing import SLACK_S  # noqa: E402

TOKEN = "load-" + "x" * 40

#: A server whose scripted model answers with the tag the question carries, after a pause;
#: a question saying "hang" runs a cell that never ends.
SERVER = r"""
import re, sys, time
from rlm_runtime.llm.scripted import ScriptedClient
from rlm_runtime.serve.http import run_http
from rlm_runtime.serve.limits import ServeLimits
from rlm_runtime.serve.service import Service

def responder(messages):
    question = [m["content"] for m in messages if m["role"] == "user"][-1]
    if "hang" in question:
        return "```python\nimport time\nwhile True:\n    time.sleep(0.05)\n```"
    tag = re.findall(r"TAG-[0-9]+-[0-9]+", question)[-1]  # a kept session's prompt lists earlier questions first
    time.sleep(0.05)
    return "```python\nFINAL('" + tag + "')\n```"

service = Service(ScriptedClient(responder), roots=[sys.argv[1]], limits=ServeLimits(sessions=int(sys.argv[3]), wait_s=20),
                  session_options={"memory": True})
run_http(service, port=0, token=sys.argv[2], mcp=True, ready=lambda url: print(url, flush=True))
"""


def _start(root: Path, home: Path, sessions: int = 4) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "RLM_HOME": str(home)}
    process = subprocess.Popen([sys.executable, "-c", SERVER, str(root), TOKEN, str(sessions)], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, env=env)
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    assert url.startswith("http://127.0.0.1:"), url
    return process, url


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.kill()
        process.wait()


def _tree_rss(pid: int) -> tuple[int, int]:
    """(resident bytes of the process and its descendants, how many descendants)."""
    main = psutil.Process(pid)
    rss, n = main.memory_info().rss, 0
    for child in main.children(recursive=True):
        try:
            rss += child.memory_info().rss
            n += 1
        except psutil.Error:
            pass
    return rss, n


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "root"
    folder.mkdir()
    (folder / "notes.txt").write_text("".join(f"line {i}: the value of k{i} is {i * 7}\n" for i in range(2000)))
    return folder


@pytest.mark.slow
def test_sixteen_clients_at_once_get_their_own_answers(root: Path, tmp_path: Path) -> None:
    """It serves 16 clients asking at once for 8 seconds with 4 session places: every answer
    carries the asking client's tag (none lost, none crossed), the rest are reads that
    succeed or a 'busy' that says so, memory stays bounded, and after SIGTERM no worker is left."""
    process, url = _start(root, tmp_path / "home")
    notes = str(root / "notes.txt")
    outcomes: list[tuple[str, int, str]] = []
    lock = threading.Lock()
    stop_at = time.monotonic() + 8
    peak = {"rss": 0, "children": 0}

    def client(i: int) -> None:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http:
            n = 0
            while time.monotonic() < stop_at:
                n += 1
                tag = f"TAG-{i}-{n}"
                if n % 3:
                    r = http.post("/api/ask", json={"question": f"what is {tag}?", "contexts": [notes], "session": f"c{i}"})
                    got = r.json().get("answer") if r.status_code == 200 else r.json().get("error", "")
                else:
                    if n % 2:
                        r = http.get("/api/context/search/all", params={"query": f"k{n}", "k": 3})
                    else:
                        r = http.post("/api/memory/remember", json={"text": tag})
                    got = tag if r.status_code == 200 else r.text
                with lock:
                    outcomes.append((tag, r.status_code, str(got)))

    def watch() -> None:
        while time.monotonic() < stop_at:
            rss, children = _tree_rss(process.pid)
            peak["rss"], peak["children"] = max(peak["rss"], rss), max(peak["children"], children)
            time.sleep(0.25)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(16)] + [threading.Thread(target=watch)]
    try:
        rss_before, _ = _tree_rss(process.pid)
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        descendants = psutil.Process(process.pid).children(recursive=True)
        process.send_signal(signal.SIGTERM)
        process.wait(15 + SLACK_S)
        _, alive = psutil.wait_procs(descendants, timeout=5 + SLACK_S)
    finally:
        _stop(process)
    answered = [(tag, got) for tag, status, got in outcomes if status == 200]
    wrong = [(tag, got) for tag, got in answered if got != tag]
    other = [(tag, status, got) for tag, status, got in outcomes if status != 200]
    assert len(answered) >= 32, (len(outcomes), other[:5])
    assert wrong == []
    assert all(status == 503 and "busy" in got for _, status, got in other), other[:5]
    # 4 places: at most 4 workers, their zygote, and nothing else that lingers.
    assert peak["children"] <= 4 * 2 + 2, peak
    assert peak["rss"] - rss_before < 1_500 * 2**20, peak
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.slow
def test_a_server_killed_mid_question_leaves_no_worker_and_restarts_with_its_registry(root: Path, tmp_path: Path) -> None:
    """It loses no registered context and leaves no orphan worker when killed with SIGKILL
    while a question runs; a restarted server answers over the same registry."""
    home = tmp_path / "home"
    process, url = _start(root, home)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    try:
        registered = httpx.post(f"{url}/api/context/register", headers=headers, timeout=30,
                                json={"path": str(root / "notes.txt"), "name": "notes", "tags": ["kept"]})
        assert registered.status_code == 200, registered.text

        def hang() -> None:
            try:
                httpx.post(f"{url}/api/ask", headers=headers, timeout=30,
                           json={"question": "hang here", "contexts": ["ctx:notes"], "session": "h"})
            except httpx.HTTPError:
                pass  # the server dies under it

        asker = threading.Thread(target=hang, daemon=True)
        asker.start()
        deadline = time.monotonic() + 30
        workers: list[psutil.Process] = []
        while time.monotonic() < deadline and not workers:
            workers = psutil.Process(process.pid).children(recursive=True)
            time.sleep(0.1)
        assert workers
        time.sleep(1.0)  # the cell is looping now
        workers = psutil.Process(process.pid).children(recursive=True)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
        _, alive = psutil.wait_procs(workers, timeout=10 + SLACK_S)
        assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE], [p.cmdline()[:3] for p in alive]
    finally:
        _stop(process)

    process, url = _start(root, home)
    try:
        listed = httpx.get(f"{url}/api/context", headers=headers, timeout=30).json()
        entries = listed if isinstance(listed, list) else listed.get("contexts", listed)
        assert [(e["id"], e["tags"]) for e in entries] == [("notes", ["kept"])], json.dumps(listed)[:500]
        answer = httpx.post(f"{url}/api/ask", headers=headers, timeout=60,
                            json={"question": "what is TAG-1-1?", "contexts": ["ctx:notes"]}).json()
        assert answer["answer"] == "TAG-1-1", answer
        assert re.fullmatch(r"run-\d{8}-\d{6}-[0-9a-f]{6}", answer["trajectory"])
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(15)
        finally:
            _stop(process)
