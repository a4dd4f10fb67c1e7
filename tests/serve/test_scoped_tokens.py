"""Named tokens on a live ``rlm serve --http``: a read-only token reads and never writes, a
token with a store of its own never meets the default store, a removed token is refused, and
memory edits (REST and MCP) work for a token that may write."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from _serve import notes_root, serve

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402

from rlm_runtime.config import paths_from_env  # noqa: E402
from rlm_runtime.llm.scripted import ScriptedClient  # noqa: E402
from rlm_runtime.memory.store import MemoryStore, default_store_path  # noqa: E402
from rlm_runtime.serve.limits import ServeLimits  # noqa: E402
from rlm_runtime.serve.mcp import build_server  # noqa: E402
from rlm_runtime.serve.service import Service  # noqa: E402
from rlm_runtime.serve.tokens import TokensFile, add_token, remove_token  # noqa: E402

ANSWER = "```python\nFINAL('4711')\n```"


def answer(messages: Any) -> str:
    return ANSWER
MEMORY = {"memory": True}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return notes_root(tmp_path)


def chunks(path: Path) -> list[tuple[int, str]]:
    """Every chunk of the store at ``path`` (id, text), read without the store's code."""
    if not path.exists():
        return []
    with sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True) as conn:
        return [(int(i), str(t)) for i, t in conn.execute("SELECT id, text FROM chunks ORDER BY id")]


def versions(path: Path) -> int:
    with sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True) as conn:
        return int(conn.execute("SELECT count(*) FROM chunk_versions").fetchone()[0])


def test_a_read_only_token_searches_but_cannot_remember_or_edit(root: Path) -> None:
    """It lets a read-only token find a note the full token planted, and refuses its note,
    its edit and its registration (403, saying the token is read-only), the store unchanged."""
    paths = paths_from_env()
    secret, _ = add_token(paths, "reader", read_only=True)
    with serve(answer, [root], session_options=MEMORY, tokens=TokensFile(paths)) as api, api.as_token(secret) as reader:
        planted = api.post("/api/memory/remember", json={"text": "the vault combination is 31-41-59", "tags": ["vault"]})
        chunk_id = planted.json()["ids"][0]
        before = chunks(default_store_path())
        hits = reader.get("/api/memory/search", params={"query": "vault combination"}).json()["hits"]
        assert [h["id"] for h in hits] == [f"m{chunk_id}"]
        refused = [reader.post("/api/memory/remember", json={"text": "a note of the reader's"}),
                   reader.post("/api/memory/edit", json={"id": chunk_id, "text": "the vault is open"}),
                   reader.post("/api/memory/edit", json={"id": chunk_id, "add_tags": ["mine"]}),
                   reader.post("/api/context/register", json={"path": str(root / "notes.txt")})]
        for response in refused:
            assert response.status_code == 403, response.text
            assert response.json()["type"] == "ReadOnlyToken" and "read-only" in response.json()["error"]
        assert reader.get("/api/context/notes.txt/peek").status_code == 404  # reads go on as any token's
        assert chunks(default_store_path()) == before
    assert versions(default_store_path()) == 0
    with MemoryStore(default_store_path(), readonly=True) as store:
        assert store.history(chunk_id)[-1].tags == ("vault",)


def test_a_read_only_tokens_questions_remember_nothing(root: Path) -> None:
    """It answers a read-only token's question without storing it, on a server whose
    questions are remembered (the full token's is)."""
    paths = paths_from_env()
    secret, _ = add_token(paths, "reader", read_only=True)
    notes = str(root / "notes.txt")
    with serve(answer, [root], session_options={**MEMORY, "remember": True}, tokens=TokensFile(paths)) as api, \
            api.as_token(secret) as reader:
        api.post("/api/memory/remember", json={"text": "a note so that the store exists"})
        before = chunks(default_store_path())
        asked = reader.post("/api/ask", json={"question": "the launch code?", "contexts": [notes]})
        assert asked.status_code == 200 and asked.json()["answer"] == "4711"
        streamed = reader.post("/api/ask", json={"question": "the launch code again?", "contexts": [notes], "stream": True})
        assert "event: result" in streamed.text
        assert chunks(default_store_path()) == before
        assert api.post("/api/ask", json={"question": "the launch code?", "contexts": [notes]}).json()["answer"] == "4711"
        assert len(chunks(default_store_path())) > len(before)


def test_a_token_with_its_own_store_never_meets_the_default_store(root: Path, tmp_path: Path) -> None:
    """It keeps a token's notes in its store and the owner's in the default one: neither finds
    the other's planted note (searches, a question's search_chunks), an edit of an id its
    store lacks is 404, and the owner's trajectories are not the token's to read."""
    paths = paths_from_env()
    secret, entry = add_token(paths, "alice", store=tmp_path / "alice.db")
    assert entry.store is not None
    owner_note, alice_note = "the owner's launch phrase is CANARY-OWNER-8812", "alice's launch phrase is CANARY-ALICE-1204"
    look = "```python\nFINAL(str(search_chunks('launch phrase', k=10)))\n```"
    with serve(lambda m: look, [root], session_options=MEMORY, tokens=TokensFile(paths)) as api, api.as_token(secret) as alice:
        for n in range(3):
            api.post("/api/memory/remember", json={"text": f"filler note {n} of the owner"})
        owner_id = api.post("/api/memory/remember", json={"text": owner_note}).json()["ids"][0]
        assert alice.post("/api/memory/remember", json={"text": alice_note}).json()["ids"] == [1]
        assert [t for _, t in chunks(entry.store)] == [alice_note]
        assert alice_note not in str(chunks(default_store_path()))

        seen_by_alice = [alice.get("/api/memory/search", params={"query": "launch phrase"}),
                         alice.get("/api/context/search/all", params={"query": "launch phrase"}),
                         alice.post("/api/ask", json={"question": "the launch phrase?", "contexts": [str(root / "notes.txt")]})]
        seen_by_owner = [api.get("/api/memory/search", params={"query": "launch phrase"}),
                         api.get("/api/context/search/all", params={"query": "launch phrase"}),
                         api.post("/api/ask", json={"question": "the launch phrase?", "contexts": [str(root / "notes.txt")]})]
        for response in seen_by_alice:
            assert response.status_code == 200 and "CANARY-ALICE" in response.text and "CANARY-OWNER" not in response.text
        for response in seen_by_owner:
            assert response.status_code == 200 and "CANARY-OWNER" in response.text and "CANARY-ALICE" not in response.text

        missing = alice.post("/api/memory/edit", json={"id": owner_id, "text": "overwritten"})
        assert missing.status_code == 404 and missing.json()["type"] == "ChunkNotFound"
        assert alice.post("/api/memory/edit", json={"id": 1, "add_tags": ["hers"]}).json()["changed"] == ["tags"]

        owners_trace = seen_by_owner[2].json()["trajectory"]
        alices_trace = seen_by_alice[2].json()["trajectory"]
        assert alice.get(f"/api/traces/{owners_trace}").status_code == 404
        assert alice.get(f"/api/traces/{owners_trace}.html").status_code == 404
        assert alice.get(f"/api/traces/{alices_trace}").status_code == 200
        assert api.get(f"/api/traces/{alices_trace}").status_code == 200  # the owner reads every one
        health = alice.get("/api/health").json()["meaning"]
        assert health["chunks"] == 1
    assert dict(chunks(default_store_path()))[owner_id] == owner_note


def test_a_session_name_is_kept_apart_per_token(root: Path) -> None:
    """It gives two tokens naming the same session two sessions (neither reads the other's variables)."""
    paths = paths_from_env()
    secret, _ = add_token(paths, "other")
    notes = str(root / "notes.txt")
    with serve(answer, [root], tokens=TokensFile(paths)) as api, api.as_token(secret) as other:
        api.post("/api/ask", json={"question": "q", "contexts": [notes], "session": "shared"})
        other.post("/api/ask", json={"question": "q", "contexts": [notes], "session": "shared"})
        assert len(api.service.sessions) == 2


def test_a_removed_token_is_refused(root: Path) -> None:
    """It answers a token removed while the server runs with 401 once the file is read again;
    the server's own token and the other named ones keep working."""
    paths = paths_from_env()
    now = [0.0]
    gone, _ = add_token(paths, "gone")
    kept, _ = add_token(paths, "kept")
    with serve(answer, [root], tokens=TokensFile(paths, clock=lambda: now[0])) as api, \
            api.as_token(gone) as client, api.as_token(kept) as other:
        assert client.get("/api/context").status_code == 200
        remove_token(paths, "gone")
        now[0] += 2
        refused = client.get("/api/context")
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
        assert other.get("/api/context").status_code == 200 and api.get("/api/context").status_code == 200


def test_a_rest_edit_changes_a_note_in_place(root: Path) -> None:
    """It edits a note's text, tags, summary and confidence through POST /api/memory/edit,
    keeps the version it replaced, leaves absent fields as they are, clears with null, and
    refuses an unknown id (404), a bad value (400/422) and a server without memory (403)."""
    with serve(answer, [root], session_options=MEMORY) as api:
        chunk_id = api.post("/api/memory/remember", json={"text": "billing runs on MySQL", "tags": ["draft"]}).json()["ids"][0]
        done = api.post("/api/memory/edit", json={"id": chunk_id, "text": "billing runs on SQLite", "add_tags": ["decision"],
                                                  "remove_tags": ["draft"], "summary": "billing: SQLite", "confidence": 0.9})
        assert done.status_code == 200, done.text
        assert done.json() == {"id": chunk_id, "changed": ["text", "tags", "summary", "confidence"], "kept_version": 1}
        assert api.post("/api/memory/edit", json={"id": chunk_id, "kind": "decision"}).json()["changed"] == ["kind"]
        cleared = api.post("/api/memory/edit", json={"id": chunk_id, "summary": None})
        assert cleared.json()["changed"] == ["summary"]
        hits = api.get("/api/memory/search", params={"query": "billing SQLite", "mode": "bm25"}).json()["hits"]
        assert hits and hits[0]["id"] == f"m{chunk_id}" and "SQLite" in hits[0]["snippet"]
        assert api.post("/api/memory/edit", json={"id": 999, "text": "x"}).status_code == 404
        assert api.post("/api/memory/edit", json={"id": chunk_id, "text": "  "}).status_code == 400
        assert api.post("/api/memory/edit", json={"id": chunk_id}).status_code == 400
        assert api.post("/api/memory/edit", json={"id": chunk_id, "add_tags": ["a"], "remove_tags": ["a"]}).status_code == 400
        assert api.post("/api/memory/edit", json={"id": chunk_id, "confidence": 2}).status_code == 422
        assert api.post("/api/memory/edit", json={"id": chunk_id, "confidence": True}).status_code == 422
        assert api.post("/api/memory/edit", json={"id": 0, "text": "x"}).status_code == 422
        assert api.post("/api/memory/edit", json={"id": chunk_id, "colour": "red"}).status_code == 422
    with MemoryStore(default_store_path(), readonly=True) as store:
        history = store.history(chunk_id)
    assert [v.text for v in history] == ["billing runs on MySQL", "billing runs on SQLite", "billing runs on SQLite", "billing runs on SQLite"]
    assert history[-1].tags == ("decision",) and history[-1].summary is None and history[-1].confidence == 0.9
    with serve(answer, [root]) as api:
        refused = api.post("/api/memory/edit", json={"id": chunk_id, "text": "x"})
        assert refused.status_code == 403 and "--no-memory" in refused.json()["error"]


def _tool(client: Any, name: str, arguments: dict[str, Any]) -> Any:
    return client.call_tool(name, arguments)


def test_the_mcp_edit_tool_edits_over_stdio(root: Path) -> None:
    """It edits a note through the memory_edit tool (MCP without a token: the owner), clears a
    field named in 'clear', and an unknown id is a tool error."""
    service = Service(ScriptedClient(answer), roots=[root], limits=ServeLimits(),
                      session_options={"memory": True, "trace": root.parent / "traces"})

    async def body() -> Any:
        async with Client(build_server(service)) as client:
            made = await client.call_tool("remember", {"text": "the deploy key rotates on Mondays", "tags": ["ops"]})
            chunk_id = made.structured_content["ids"][0]
            edited = await client.call_tool("memory_edit", {"id": chunk_id, "text": "the deploy key rotates on Fridays",
                                                            "summary": "key rotation", "confidence": 0.5})
            cleared = await client.call_tool("memory_edit", {"id": chunk_id, "clear": ["confidence"]})
            missing = await client.call_tool("memory_edit", {"id": 4242, "text": "x"})
            return chunk_id, edited, cleared, missing

    try:
        chunk_id, edited, cleared, missing = anyio.run(body)
    finally:
        service.close()
    assert edited.structured_content["changed"] == ["text", "summary", "confidence"]
    assert cleared.structured_content["changed"] == ["confidence"]
    assert missing.is_error and "4242" in missing.content[0].text
    with MemoryStore(default_store_path(), readonly=True) as store:
        last = store.history(chunk_id)[-1]
    assert last.text == "the deploy key rotates on Fridays" and last.summary == "key rotation" and last.confidence is None


def test_the_mcp_tools_over_http_take_the_tokens_scope(root: Path, tmp_path: Path) -> None:
    """It runs memory_edit and remember over /mcp for a full named token (in its own store),
    and answers a read-only token's with a tool error saying it is read-only."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    paths = paths_from_env()
    writer, entry = add_token(paths, "writer", store=tmp_path / "writer.db")
    reader, _ = add_token(paths, "reader", read_only=True)
    assert entry.store is not None

    async def calls(url: str, token: str, steps: list[tuple[str, dict[str, Any]]]) -> list[Any]:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
        async with http, Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
            return [await client.call_tool(name, arguments) for name, arguments in steps]

    with serve(answer, [root], session_options=MEMORY, mcp=True, tokens=TokensFile(paths)) as api:
        made, edited, searched = anyio.run(calls, api.url, writer, [
            ("remember", {"text": "the writer's note about ledgers"}),
            ("memory_edit", {"id": 1, "text": "the writer's note about balance sheets"}),
            ("search", {"query": "balance sheets", "contexts": []})])
        refused = anyio.run(calls, api.url, reader, [
            ("remember", {"text": "x"}), ("memory_edit", {"id": 1, "kind": "fact"}), ("search", {"query": "balance", "contexts": []})])
    assert made.structured_content["ids"] == [1] and edited.structured_content["changed"] == ["text"]
    assert searched.structured_content["hits"][0]["id"] == "m1"
    assert [t for _, t in chunks(entry.store)] == ["the writer's note about balance sheets"]
    assert chunks(default_store_path()) == []
    for result in refused[:2]:
        assert result.is_error and "read-only" in result.content[0].text
    assert not refused[2].is_error and refused[2].structured_content["hits"] == []  # the default store: empty


def test_a_request_without_a_caller_is_refused_not_taken_as_the_owner() -> None:
    """It refuses (500, no detail) a route reached without the Guard's caller, rather than
    treating it as the owner's."""
    from fastapi.testclient import TestClient

    from rlm_runtime.serve.rest import build_app

    service = Service(ScriptedClient(answer), session_options={"memory": True})
    try:
        app = build_app(service, token="t" * 43, hosts=["testserver"])
        app.user_middleware.clear()  # no Guard
        app.middleware_stack = app.build_middleware_stack()
        with TestClient(app, raise_server_exceptions=False) as client:
            response = client.post("/api/memory/remember", json={"text": "a note without a caller"})
        assert response.status_code == 500 and "note" not in response.text
    finally:
        service.close()
    assert chunks(default_store_path()) == []


def test_a_token_of_another_server_is_refused(root: Path) -> None:
    """It refuses (401) a named token that is not in this server's file."""
    with serve(answer, [root]) as api:
        assert httpx.get(f"{api.url}/api/context", headers={"authorization": "Bearer " + "x" * 43}).status_code == 401
