"""Red team of named tokens (``rlm serve --add-token``): a planted secret note in one store must
not reach a token of another store by any route, a token's store is never served as a file,
odd bytes in the token header are refused cleanly, and tokens changing under a running server
refuse nobody they should not.

Servers run on 127.0.0.1 in a thread (``_serve.serve``), always stopped by the test.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from _serve import TOKEN, notes_root, serve

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402

from rlm_runtime.config import paths_from_env  # noqa: E402
from rlm_runtime.serve import tokens  # noqa: E402
from rlm_runtime.serve.auth import rotate_token  # noqa: E402
from rlm_runtime.serve.tokens import TokensFile, add_token, remove_token  # noqa: E402

CANARY = "s3cr3t-CANARY-note-5e2b"
SEARCH = "```python\nFINAL(str(search_chunks('vault phrase', k=10)))\n```"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return notes_root(tmp_path, "alpha\nnothing secret here\nomega\n")


def test_a_planted_note_never_reaches_a_token_of_another_store(root: Path, tmp_path: Path) -> None:
    """The owner's secret note (default store), read by the owner's own question, reaches a
    token with a store of its own by no route: REST and MCP searches, its questions'
    search_chunks, the owner's trajectory (REST and MCP resource), health."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    paths = paths_from_env()
    secret, _ = add_token(paths, "mallory", store=tmp_path / "mallory.db")
    notes = str(root / "notes.txt")

    async def over_mcp(url: str, trace: str) -> list[str]:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}, timeout=60)
        out: list[str] = []
        async with http, Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
            for name, arguments in (("search", {"query": "vault phrase"}),
                                    ("search", {"query": "vault phrase", "contexts": []}),
                                    ("ask", {"question": "the vault phrase?", "contexts": [notes]})):
                result = await client.call_tool(name, arguments)
                out.append(str(result.structured_content) + "".join(getattr(c, "text", "") for c in result.content))
            for uri in (f"rlm://trajectory/{trace}.json", f"rlm://trajectory/{trace}.html"):
                try:
                    out.append(str(await client.read_resource(uri)))
                except Exception as e:  # noqa: BLE001 - the SDK's error for a refused resource
                    out.append(str(e))
        return out

    with serve(lambda m: SEARCH, [root], session_options={"memory": True}, mcp=True, tokens=TokensFile(paths)) as api, \
            api.as_token(secret) as mallory:
        api.post("/api/memory/remember", json={"text": f"the vault phrase is {CANARY}"})
        owners = api.post("/api/ask", json={"question": "the vault phrase?", "contexts": [notes]}).json()
        assert CANARY in owners["answer"]  # the owner's question read it: its trajectory holds it
        trace = owners["trajectory"]
        seen = [mallory.get("/api/memory/search", params={"query": "vault phrase"}).text,
                mallory.get("/api/context/search/all", params={"query": "vault phrase"}).text,
                mallory.post("/api/ask", json={"question": "the vault phrase?", "contexts": [notes]}).text,
                mallory.post("/api/ask", json={"question": "again?", "contexts": [notes], "stream": True}).text,
                mallory.get(f"/api/traces/{trace}").text, mallory.get(f"/api/traces/{trace}.html").text,
                mallory.get(f"/api/traces/{trace}", params={"format": "html"}).text,
                mallory.get("/api/health").text, mallory.get("/api/context/stats").text]
        seen += anyio.run(over_mcp, api.url, trace)
    for text in seen:
        assert CANARY not in text and "Traceback" not in text


def test_a_tokens_store_under_a_root_is_not_served_as_a_file(root: Path) -> None:
    """A token's store (and its -wal) kept under a server's root is read by no token as a
    file: registering it, naming it, and walking the folder that holds it all leave it out."""
    paths = paths_from_env()
    root.chmod(0o755)  # a store's folder must be writable by its owner alone, whatever the umask
    secret, entry = add_token(paths, "alice", store=root / "alice.db")
    assert entry.store is not None
    with serve(lambda m: "```python\nFINAL('x')\n```", [root], session_options={"memory": True},
               tokens=TokensFile(paths)) as api, api.as_token(secret) as alice:
        assert alice.post("/api/memory/remember", json={"text": f"alice keeps {CANARY}"}).status_code == 200
        for client in (api.client, alice):
            for path in (entry.store, Path(f"{entry.store}-wal")):
                assert client.post("/api/context/register", json={"path": str(path)}).status_code == 403
                named = client.get("/api/context/search/all", params={"query": "alice keeps", "context": str(path)})
                assert named.status_code in (400, 403) and CANARY not in named.text
            walked = client.get("/api/context/search/all", params={"query": "alice keeps", "context": str(root)})
            assert walked.status_code == 200
            # Alice's own notes come back as memory hits (m...); no file of the root holds them.
            assert CANARY not in str([h for h in walked.json()["hits"] if not h["id"].startswith("m")])
            assert client is alice or CANARY not in walked.text
            asked = client.post("/api/ask", json={"question": "q", "contexts": [str(entry.store)]})
            assert asked.status_code == 403 and CANARY not in asked.text


@pytest.mark.parametrize("value", [
    b"Bearer \xff\xfe\xfd", b"Bearer \x01\x02", b"Bearer " + b"\xe9" * 43, b"bearer\x00" + TOKEN.encode(),
    b"Bearer " + TOKEN.encode() + b"\x7f", b"Bearer  ", b"Bearer " + b"A" * 6000, b"\xff" * 20,
])
def test_odd_bytes_in_the_token_header_are_refused_cleanly(root: Path, value: bytes) -> None:
    """It answers 401 (or 400 from the HTTP parser) to a token header of odd bytes, never a
    500 or a traceback, and keeps serving."""
    paths = paths_from_env()
    add_token(paths, "named")
    with serve(lambda m: "x", [root], tokens=TokensFile(paths)) as api:
        with socket.create_connection(("127.0.0.1", api.server.port), timeout=10) as sock:
            sock.sendall(b"GET /api/context HTTP/1.1\r\nHost: 127.0.0.1:" + str(api.server.port).encode() +
                         b"\r\nAuthorization: " + value + b"\r\nConnection: close\r\n\r\n")
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        status = int(answer.split(b" ", 2)[1])
        assert status in (400, 401) and b"Traceback" not in answer
        assert api.get("/api/context").status_code == 200


def test_tokens_changing_under_a_running_server_refuse_no_one_they_should_not(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While tokens are added and removed and the server's own token rotated as fast as they
    can be, a steady named token is never refused and no answer is a 5xx; a churned token
    removed for good is refused."""
    monkeypatch.setattr(tokens, "TOKENS_CHECK_S", 0.0)
    paths = paths_from_env()
    steady, _ = add_token(paths, "steady")
    stop = threading.Event()
    churned: list[str] = []
    failures: list[BaseException] = []

    def churn() -> None:
        n = 0
        try:
            while not stop.is_set():
                secret, _ = add_token(paths, f"churn{n % 3}")
                churned.append(secret)
                remove_token(paths, f"churn{n % 3}")
                rotate_token(paths)
                n += 1
        except BaseException as e:  # noqa: BLE001 - told below
            failures.append(e)

    with serve(lambda m: "x", [root], tokens=TokensFile(paths)) as api, api.as_token(steady) as client:
        worker = threading.Thread(target=churn)
        worker.start()
        statuses = []
        try:
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                statuses.append(client.get("/api/context").status_code)
        finally:
            stop.set()
            worker.join()
        assert not failures and churned
        assert set(statuses) == {200}, statuses
        with api.as_token(churned[-1]) as gone:
            assert gone.get("/api/context").status_code == 401


def test_another_token_naming_the_same_session_does_not_read_its_variables(root: Path) -> None:
    """A token naming the session another token's question left a secret in gets a session
    of its own: the variable is not there."""
    paths = paths_from_env()
    secret, _ = add_token(paths, "mallory")

    def responder(messages: list[dict[str, Any]]) -> str:
        last = [m["content"] for m in messages if m["role"] == "user"][-1]
        if "store it" in last:
            return f"```python\nprivate_note = {CANARY!r}\nFINAL('stored')\n```"
        return "```python\ntry:\n    FINAL(private_note)\nexcept NameError:\n    FINAL('nothing')\n```"

    notes = str(root / "notes.txt")
    with serve(responder, [root], tokens=TokensFile(paths)) as api, api.as_token(secret) as mallory:
        stored = api.post("/api/ask", json={"question": "store it", "contexts": [notes], "session": "main"})
        assert stored.json()["answer"] == "stored"
        stolen = mallory.post("/api/ask", json={"question": "what is there?", "contexts": [notes], "session": "main"})
        assert stolen.status_code == 200 and CANARY not in stolen.text and stolen.json()["answer"] == "nothing"


def test_a_read_only_tokens_question_cannot_write_through_the_model(root: Path) -> None:
    """A read-only token's question whose code tries to store a note through the runtime's
    names writes nothing to the store (its session opens the store read-only)."""
    import sqlite3

    from rlm_runtime.memory.store import default_store_path

    paths = paths_from_env()
    secret, _ = add_token(paths, "reader", read_only=True)
    attempt = ("```python\ntry:\n    remember('planted by the reader')\nexcept Exception as e:\n    print(e)\n"
               "FINAL('tried')\n```")
    with serve(lambda m: attempt, [root], session_options={"memory": True, "remember": True},
               tokens=TokensFile(paths)) as api, api.as_token(secret) as reader:
        api.post("/api/memory/remember", json={"text": "the owner's note"})
        asked: Any = reader.post("/api/ask", json={"question": "store something", "contexts": [str(root / "notes.txt")]})
        assert asked.status_code == 200
    with sqlite3.connect(f"{default_store_path().as_uri()}?mode=ro", uri=True) as conn:
        texts = [t for (t,) in conn.execute("SELECT text FROM chunks")]
    assert texts == ["the owner's note"]
