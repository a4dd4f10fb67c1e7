"""The REST API of ``rlm serve --http``: a real server on a free port, a scripted model, httpx."""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from _serve import TOKEN, notes_root, serve
from _timing import SLACK_S

from rlm_runtime.budget import RunLimits
from rlm_runtime.serve import stream
from rlm_runtime.serve.limits import ServeLimits
from rlm_runtime.serve.rest import MAX_BODY_BYTES
from rlm_runtime.serve.tokens import OWNER

ANSWER = "```python\nprint(1)\nFINAL('4711')\n```"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return notes_root(tmp_path)


def events_of(text: str) -> list[tuple[str, Any]]:
    """The server-sent events of a stream: (name, JSON data)."""
    found = []
    for block in text.split("\n\n"):
        lines = [line for line in block.splitlines() if line and not line.startswith(":")]
        name = next((line[7:] for line in lines if line.startswith("event: ")), None)
        data = next((line[6:] for line in lines if line.startswith("data: ")), None)
        if name is not None and data is not None:
            found.append((name, json.loads(data)))
    return found


def test_every_endpoint_answers_its_happy_path(root: Path) -> None:
    """It serves each endpoint of the API over a registered file and the memory store."""
    with serve([ANSWER], [root], session_options={"memory": True}) as api:
        entry = api.register(root / "notes.txt", "notes")
        assert entry["id"] == "notes" and entry["kind"] == "file"
        assert api.post("/api/context/register", json={"path": str(root), "name": "docs", "tags": ["t1"]}).status_code == 200
        again = api.post("/api/context/register", json={"path": str(root), "tags": ["t2"]}).json()
        assert again["id"] == "docs" and again["existing"] is True and set(again["tags"]) == {"t1", "t2"}

        listed = api.get("/api/context").json()
        assert {e["id"] for e in listed} == {"notes", "docs"}
        assert [e["id"] for e in api.get("/api/context", params={"kind": "file"}).json()] == ["notes"]
        assert [e["id"] for e in api.get("/api/context", params={"tag": "t1"}).json()] == ["docs"]

        assert api.get("/api/context/notes/info").json()["name"] == "notes"
        loaded = api.get("/api/context/notes").json()
        assert loaded["text"].startswith("alpha") and loaded["length"] == len(loaded["text"])
        assert api.get("/api/context/ctx:notes", params={"max_chars": 1000}).status_code == 200
        assert api.get("/api/context/notes/peek", params={"chars": 5}).json()["text"].startswith("alpha\n...")
        grep = api.get("/api/context/notes/grep", params={"pattern": "LAUNCH", "ignore_case": "true"}).json()
        assert [m["line_no"] for m in grep["matches"]] == [2] and grep["complete"]
        chunk = api.get("/api/context/notes/chunk/1", params={"size": 1}).json()
        assert chunk["text"].strip() == "the launch code is 4711" and chunk["total"] == 3
        assert api.get("/api/context/stats").json()["contexts"]["notes"]["peeks"] == 1
        hits = api.get("/api/context/search/all", params={"query": "launch", "k": 3}).json()["hits"]
        assert hits and "launch" in hits[0]["snippet"]

        assert api.post("/api/memory/remember", json={"text": "the sky is green", "tags": ["x"]}).json()["ids"]
        assert "sky" in api.get("/api/memory/search", params={"query": "sky"}).json()["hits"][0]["snippet"]

        health = api.get("/api/health").json()
        assert health["status"] == "ok" and health["version"]
        meaning = health["meaning"]
        assert meaning["chunks"] >= 1 and meaning["quality_vectors"] == 0 and meaning["quality_installed"] is False

        answer = api.post("/api/ask", json={"question": "the code?", "contexts": ["ctx:notes"], "session": "a-1"}).json()
        assert answer["answer"] == "4711" and answer["ok"] and answer["iterations"] == 1
        health = api.get("/api/health").json()
        assert health["sessions"] == 1  # kept for the session's next question
        memory = health["memory"]
        assert memory["governor"]["max_workers"] >= 1 and memory["machine"]["cpus"] >= 1
        assert memory["use"]["workers"] == 1 and memory["use"]["workers_rss_mb"] > 0  # the kept session's worker
        assert memory["use"]["lazy_cache_budget_mb"] == 256 and memory["use"]["host_rss_mb"] > 0
        events = api.get(f"/api/traces/{answer['trajectory']}").json()
        assert events[0]["type"] == "trace_start"
        page = api.get(f"/api/traces/{answer['trajectory']}.html")
        assert page.headers["content-type"].startswith("text/html") and "content-security-policy" in page.headers
        assert api.get(f"/api/traces/{answer['trajectory']}", params={"format": "html"}).text == page.text


def test_a_registered_file_that_grows_is_read_again_by_the_next_question_of_a_session(root: Path) -> None:
    """It answers the second question of a REST session over a registered file that grew in
    between from the file as it is now (one grep hit, then two)."""
    count = "```python\nFINAL(str(len(grep('launch code'))))\n```"
    with serve([count, count], [root]) as api:
        api.register(root / "notes.txt", "notes")
        ask = {"question": "how many launch codes?", "contexts": ["ctx:notes"], "session": "live"}
        assert api.post("/api/ask", json=ask).json()["answer"] == "1"
        with (root / "notes.txt").open("a") as fh:
            fh.write("the spare launch code is 1234\n")
        assert api.post("/api/ask", json=ask).json()["answer"] == "2"


def test_contexts_are_listed_by_type(root: Path) -> None:
    """It lists the registered contexts of one type (GET /api/context?type=identity), each
    entry with its type, and refuses a type that is none with 400."""
    from rlm_runtime.registry import Registry

    with Registry.open() as reg:
        reg.add("I answer in metres.", kind="text", name="me", type="identity")
    with serve([ANSWER], [root]) as api:
        api.register(root / "notes.txt", "notes")
        assert [e["id"] for e in api.get("/api/context", params={"type": "identity"}).json()] == ["me"]
        assert {e["id"]: e["type"] for e in api.get("/api/context").json()} == {"me": "identity", "notes": "document"}
        assert api.get("/api/context", params={"type": "bogus"}).status_code == 400


def test_ask_streams_iterations_then_the_result(root: Path) -> None:
    """It answers a streamed ask with, for each root turn, a model event (the prompt's size),
    a cell event per cell as it starts and an iteration event as the turn ends; then the result."""
    replies = ["```python\nprint(2)\n```", ANSWER]
    with serve(replies, [root]) as api:
        response = api.post("/api/ask", json={"question": "the code?", "contexts": [str(root / "notes.txt")], "stream": True})
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        events = events_of(response.text)
        assert [name for name, _ in events] == ["model", "cell", "iteration", "model", "cell", "iteration", "result"]
        turns = [data for name, data in events if name == "iteration"]
        assert [data["iteration"] for data in turns] == [1, 2]
        assert all(data["cells"] == 1 and data["seconds"] >= 0 for data in turns)
        assert all(data["prompt_tokens"] > 0 for name, data in events if name == "model")
        assert events[-1][1]["answer"] == "4711"


def test_a_list_answer_comes_back_as_json_data(root: Path) -> None:
    """A FINAL of a list comes back from POST /api/ask with ``value`` a JSON list (``answer``
    its text), and a str answer with ``value`` null."""
    with serve(["```python\nFINAL(['INC-101', 'INC-112'])\n```", ANSWER], [root]) as api:
        listed = api.post("/api/ask", json={"question": "which?", "contexts": [str(root / "notes.txt")]}).json()
        assert listed["value"] == ["INC-101", "INC-112"] and listed["answer"] == "['INC-101', 'INC-112']"
        plain = api.post("/api/ask", json={"question": "code?", "contexts": [str(root / "notes.txt")]}).json()
        assert plain["value"] is None and plain["answer"] == "4711"


def test_a_silent_stream_is_kept_alive(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It sends a keep-alive comment while a turn takes longer than KEEPALIVE_S."""
    monkeypatch.setattr(stream, "KEEPALIVE_S", 0.2)
    with serve([ANSWER], [root], delay_s=1.0) as api:
        response = api.post("/api/ask", json={"question": "q", "contexts": [str(root / "notes.txt")], "stream": True})
        assert ": keep-alive" in response.text
        assert [name for name, _ in events_of(response.text)] == ["model", "cell", "iteration", "result"]


def test_a_streamed_ask_refused_before_it_starts_is_an_ordinary_error(root: Path) -> None:
    """It answers a streamed ask naming an unknown context with 404 JSON, not a stream."""
    with serve([ANSWER], [root]) as api:
        response = api.post("/api/ask", json={"question": "q", "contexts": ["ctx:nope"], "stream": True})
        assert response.status_code == 404 and response.json()["type"] == "UnknownContext"


def test_a_client_leaving_a_stream_cancels_its_question(root: Path) -> None:
    """It cancels the question of a client that disconnects mid-stream (the run ends Cancelled)."""
    counter = itertools.count()

    def forever(messages: Any) -> str:  # a new cell each turn, never an answer
        return f"```python\nx = {next(counter)}\n```"

    options = {"limits": RunLimits(max_iterations=400)}
    with serve(forever, [root], delay_s=0.2, session_options=options) as api:
        with api.client.stream("POST", "/api/ask", json={"question": "q", "contexts": [str(root / "notes.txt")],
                                                         "stream": True, "session": "leaver"}) as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                if line.startswith("event: iteration"):
                    break
        left = time.monotonic()
        assert api.service.asked_event.wait(2 + SLACK_S), "the question went on after its client left"
        assert api.service.asked[0]["error_type"] == "Cancelled"
        assert time.monotonic() - left < 2 + SLACK_S
        assert next(counter) < 100


def test_the_same_session_asking_twice_at_once_is_refused(root: Path) -> None:
    """It refuses (409) a second question from a session that is answering one."""
    statuses: list[int] = []

    def ask() -> None:
        response = httpx.post(f"{api.url}/api/ask", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60,
                              json={"question": "q", "contexts": [str(root / "notes.txt")], "session": "twice"})
        assert "Traceback" not in response.text
        statuses.append(response.status_code)

    with serve(lambda messages: ANSWER, [root], delay_s=2.0) as api:
        first = threading.Thread(target=ask)
        first.start()
        time.sleep(0.5)
        ask()
        first.join(60)
        assert sorted(statuses) == [200, 409]
        assert api.service.asked[0]["answer"] == "4711"


def test_unknown_contexts_and_traces_are_refused(root: Path) -> None:
    """It answers 404 for an unknown context id and 400 for a malformed trajectory id."""
    with serve([ANSWER], [root]) as api:
        for path in ("/api/context/nope", "/api/context/nope/peek", "/api/context/nope/info", "/api/context/Bad..Id/grep?pattern=x"):
            response = api.get(path)
            assert response.status_code == 404, path
            assert set(response.json()) >= {"error", "status", "type"} and response.json()["status"] == 404
        assert api.get("/api/traces/run-1").status_code == 400
        assert api.get("/api/traces/run-20260101-000000-abcdef").status_code == 404
        assert api.get("/api/nothing-here").json() == {"error": "Not Found", "status": 404, "type": "HTTPError"}


def test_paths_outside_the_roots_are_refused(root: Path, tmp_path: Path) -> None:
    """It refuses (403) to register or read a path outside its roots."""
    outside = tmp_path / "outside.txt"
    outside.write_text("not yours")
    with serve([ANSWER], [root]) as api:
        assert api.post("/api/context/register", json={"path": str(outside)}).status_code == 403
        response = api.post("/api/ask", json={"question": "q", "contexts": [str(outside)]})
        assert response.status_code == 403 and response.json()["type"] == "SourceRefused"
        assert api.get("/api/context/search/all", params={"query": "x", "context": str(outside)}).status_code == 403


def test_a_planted_secret_is_never_returned(root: Path, secret: dict[str, str]) -> None:
    """It returns the secret of a file outside the roots through no endpoint, a symlink inside the roots notwithstanding."""
    (root / "leak.txt").symlink_to(secret["path"])
    (root / "sub").mkdir()
    (root / "sub" / "deeper.txt").symlink_to(secret["path"])
    with serve(lambda messages: ANSWER, [root]) as api:
        assert api.post("/api/context/register", json={"path": str(root / "leak.txt")}).status_code == 403
        assert api.post("/api/context/register", json={"path": str(root / "sub" / "deeper.txt")}).status_code == 403
        api.register(root, "docs")
        for path in ("/api/context/docs", "/api/context/docs/peek?chars=100000", "/api/context/docs/chunk/0?size=100000&unit=chars",
                     "/api/context/docs/grep?pattern=CANARY", "/api/context/docs/info", "/api/context/search/all?query=CANARY",
                     "/api/context/stats", "/api/context"):
            api.get(path)
        for ref in (str(root / "leak.txt"), str(root / "sub" / "deeper.txt"), "ctx:docs"):
            api.post("/api/ask", json={"question": "the secret?", "contexts": [ref]})
            api.post("/api/ask", json={"question": "the secret?", "contexts": [ref], "stream": True})
            api.get("/api/context/search/all", params={"query": "CANARY", "context": ref})
        assert len(api.bodies) == 20 and sum('"answer":"4711"' in body for body in api.bodies) == 1
        assert sum('"answer": "4711"' in body for body in api.bodies) == 1  # the streamed one
        assert not [body for body in api.bodies if secret["value"] in body]


def test_sizes_over_the_caps_are_refused(root: Path) -> None:
    """It refuses (413) a load over the cap, a size over a limit and a body over MAX_BODY_BYTES."""
    with serve([ANSWER], [root], limits=ServeLimits(sessions=1, load_chars=20, peek_chars=10)) as api:
        api.register(root / "notes.txt", "notes")
        response = api.get("/api/context/notes")
        assert response.status_code == 413 and response.json()["type"] == "TooLarge"
        assert api.get("/api/context/notes", params={"max_chars": 5}).status_code == 413
        assert api.get("/api/context/notes/peek", params={"chars": 11}).status_code == 413

        big = {"text": "x" * (MAX_BODY_BYTES + 1)}
        response = api.post("/api/memory/remember", json=big)
        assert response.status_code == 413 and response.json()["status"] == 413

        def chunks() -> Any:  # no Content-Length: the body is counted as it arrives
            for _ in range(MAX_BODY_BYTES // 65536 + 2):
                yield b"y" * 65536

        response = api.post("/api/memory/remember", content=chunks(), headers={"content-type": "application/json"})
        assert response.status_code == 413


def test_bad_parameters_are_refused_without_echoing_them(root: Path) -> None:
    """It answers 422 in the error shape for bad parameters, repeating little of what was sent."""
    with serve([ANSWER], [root]) as api:
        api.register(root / "notes.txt", "notes")
        for path in ("/api/context/notes/peek?chars=abc", "/api/context/notes/peek?chars=0", "/api/context/notes/grep",
                     "/api/context/notes/chunk/-1", "/api/context/notes/chunk/0?unit=pages", "/api/memory/search",
                     "/api/traces/run-20260101-000000-abcdef?format=pdf"):
            response = api.get(path)
            assert response.status_code == 422, path
            assert response.json()["status"] == 422 and response.json()["type"] == "RequestValidationError"
        for body in ({"question": "q", "contexts": [], "session": "not a name!"}, {"question": 5, "contexts": []},
                     {"question": "q", "contexts": [], "session": "s" * 65}, {"contexts": []}):
            assert api.post("/api/ask", json=body).status_code == 422, body
        huge = "z" * 200_000
        response = api.post("/api/ask", json={"question": ["q"], "contexts": [huge], huge: 1})
        assert response.status_code == 422 and len(response.text) < 10_000
        response = api.post("/api/ask", content=b"{not json", headers={"content-type": "application/json"})
        assert response.status_code == 422


def test_an_unexpected_failure_is_a_generic_500(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It answers 500 with a generic message, no traceback and no detail, when an operation fails unexpectedly."""
    with serve([ANSWER], [root]) as api:
        api.register(root / "notes.txt", "notes")

        def broken(*args: Any, **kwargs: Any) -> Any:
            raise ValueError("internal detail /very/private/path")

        monkeypatch.setattr(api.service, "peek", broken)
        response = api.get("/api/context/notes/peek")
        assert response.status_code == 500
        assert response.json()["type"] == "InternalError" and "private" not in response.text


def test_stopping_the_server_ends_its_sessions(root: Path) -> None:
    """It closes every client's session (and its worker) when the server stops."""
    with serve([ANSWER, ANSWER], [root]) as api:
        api.post("/api/ask", json={"question": "q", "contexts": [str(root / "notes.txt")], "session": "kept"})
        assert len(api.service.sessions) == 1
        kept = api.service.sessions._places[(OWNER, ("rest", "kept"))].session
    assert kept._closed and len(api.service.sessions) == 0
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{api.url}/api/health", timeout=5)


def test_mcp_is_served_at_mcp_behind_the_same_guard(root: Path) -> None:
    """It serves MCP over streamable HTTP at /mcp, with the token and the Host check."""
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    accept = {"accept": "application/json, text/event-stream"}
    with serve([ANSWER], [root], mcp=True) as api:
        response = api.post("/mcp", json=hello, headers=accept)
        assert response.status_code == 200 and '"serverInfo"' in response.text
        assert httpx.post(f"{api.url}/mcp", json=hello, headers=accept).status_code == 401
        assert api.post("/mcp", json=hello, headers={**accept, "host": "rebound.example:80"}).status_code == 403



SERVER = """
import sys
from rlm_runtime.llm.scripted import ScriptedClient
from rlm_runtime.serve.http import run_http
from rlm_runtime.serve.service import Service

service = Service(ScriptedClient(lambda messages: "```python\\nFINAL('ok')\\n```"), roots=[sys.argv[1]],
                  session_options={"memory": False})
run_http(service, port=0, token=sys.argv[2], mcp=True, ready=lambda url: print(url, flush=True))
print("returned", flush=True)
"""


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_ends_the_server_and_its_workers(root: Path, sig: int) -> None:
    """It stops on SIGTERM or SIGINT with every session's worker gone."""
    process = subprocess.Popen([sys.executable, "-c", SERVER, str(root), TOKEN], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), process.stderr.read() if process.stderr else ""
        response = httpx.post(f"{url}/api/ask", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60,
                              json={"question": "q", "contexts": [str(root / "notes.txt")], "session": "s"})
        assert response.json()["answer"] == "ok"
        descendants = psutil.Process(process.pid).children(recursive=True)
        assert descendants  # the session's worker (and its zygote)
        began = time.monotonic()
        process.send_signal(sig)
        process.wait(10 + SLACK_S)
        assert time.monotonic() - began < 5 + SLACK_S
        gone, alive = psutil.wait_procs(descendants, timeout=5)
        assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]
        if sig == signal.SIGTERM:  # (SIGINT ends in KeyboardInterrupt, raised again for the caller once all is closed)
            assert "Traceback" not in (process.stderr.read() if process.stderr else "")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_no_memory_keeps_clients_off_the_memory_store(root: Path) -> None:
    """It refuses a note (403) and leaves the memory store out of searches under --no-memory."""
    from rlm_runtime.memory.store import MemoryStore, default_store_path

    with MemoryStore(default_store_path()) as store:
        store.add_text("a remembered launch of the owner's", source="notes")
    with serve([ANSWER], [root]) as api:
        refused = api.post("/api/memory/remember", json={"text": "a client's note"})
        assert refused.status_code == 403 and "--no-memory" in refused.json()["error"]
        assert api.get("/api/memory/search", params={"query": "remembered launch"}).json()["hits"] == []
        hits = api.get("/api/context/search/all", params={"query": "launch", "context": "notes.txt"}).json()["hits"]
        assert hits and all(h["id"].startswith("c") for h in hits)


def test_search_names_a_folders_file_and_takes_a_mode(root: Path) -> None:
    """It answers a search over a registered folder with the file and its own lines, ranks by the
    mode asked (bm25 finds no chunk for words the text lacks), and refuses an unknown mode (422)."""
    (root / "sub").mkdir()
    (root / "sub" / "plan.md").write_text("one\ntwo\nthree\nthe drill is on tuesday\n")
    with serve([ANSWER], [root]) as api:
        api.register(root, "docs")
        hits = api.get("/api/context/search/all", params={"query": "drill tuesday", "context": "docs"}).json()["hits"]
        assert hits[0]["source"] == "sub/plan.md" and hits[0]["lines"].endswith("4") and hits[0]["by"] == "words"
        none = api.get("/api/context/search/all", params={"query": "zeppelin", "context": "docs", "mode": "bm25"})
        assert none.status_code == 200 and none.json()["hits"] == []
        assert api.get("/api/context/search/all", params={"query": "x", "mode": "fuzzy"}).status_code == 422
