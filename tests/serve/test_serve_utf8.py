"""What a server answers is text: a model's answer holding a lone surrogate and a file whose
name is not UTF-8 reach REST and MCP clients with U+FFFD in their place (the REST answer was a
500, a streamed answer was cut short with no result, an MCP tool answered its generic error)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

pytest.importorskip("fastapi")

from _serve import TOKEN, serve  # noqa: E402
from mcp import Client  # noqa: E402

from rlm_runtime.llm.scripted import ScriptedClient  # noqa: E402
from rlm_runtime.serve.mcp import build_server  # noqa: E402
from rlm_runtime.serve.service import Service  # noqa: E402

SURROGATE_ANSWER = "```python\nFINAL('a' + chr(0xD800) + 'b')\n```"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A root with a folder holding a file whose name is Latin-1, not UTF-8."""
    folder = tmp_path / "root" / "d"
    folder.mkdir(parents=True)
    with open(os.path.join(os.fsencode(folder), b"caf\xe9.txt"), "wb") as f:
        f.write(b"the launch code is 4711\n")
    return folder.parent


def test_a_model_answer_holding_a_lone_surrogate_reaches_rest_clients(root: Path) -> None:
    """It answers a plain ask, a streamed one and the trajectory's JSON and page with U+FFFD
    where the answer held a lone surrogate."""
    with serve([SURROGATE_ANSWER] * 2, [root]) as api:
        plain = api.post("/api/ask", json={"question": "q", "contexts": []})
        assert plain.status_code == 200 and plain.json()["answer"] == "a\ufffdb"
        with httpx.Client(base_url=api.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as client:
            streamed = client.post("/api/ask", json={"question": "q", "contexts": [], "stream": True})
        assert streamed.status_code == 200
        assert 'event: result\ndata: {"answer": "a\ufffdb"' in streamed.text
        trace = plain.json()["trajectory"]
        events = api.get(f"/api/traces/{trace}")
        assert events.status_code == 200 and "a\ufffdb" in json.dumps(events.json(), ensure_ascii=False)
        page = api.get(f"/api/traces/{trace}.html")
        assert page.status_code == 200 and "a\ufffdb" in page.text


def test_a_file_name_that_is_not_utf8_reaches_rest_clients(root: Path) -> None:
    """It serves peek, grep, chunk, search and ask over a folder holding a file whose name is
    not UTF-8, the name with U+FFFD."""
    with serve(["```python\nFINAL(peek(300))\n```"], [root]) as api:
        api.register(root / "d", "docs")
        name = "caf\ufffd.txt"
        assert name in api.get("/api/context/docs/peek").json()["text"]
        assert api.get("/api/context/docs/grep", params={"pattern": "launch"}).json()["matches"][0]["doc"] == name
        assert name in api.get("/api/context/docs/chunk/0").json()["text"]
        hits = api.get("/api/context/search/all", params={"query": "launch"}).json()["hits"]
        assert hits and "4711" in hits[0]["snippet"]
        assert name in api.post("/api/ask", json={"question": "q", "contexts": ["ctx:docs"]}).json()["answer"]


def test_both_reach_mcp_clients(root: Path) -> None:
    """It answers MCP tools and the trajectory resource with U+FFFD, never its generic
    'Error executing tool'."""
    service = Service(ScriptedClient([SURROGATE_ANSWER]), roots=[root], session_options={"memory": None})
    folder = str(root / "d")

    async def body() -> Any:
        async with Client(build_server(service)) as client:
            asked = await client.call_tool("ask", {"question": "q", "contexts": []})
            page = await client.read_resource(f"rlm://trajectory/{asked.structured_content['trajectory']}.json")
            reads = [await client.call_tool(name, args) for name, args in (
                ("peek", {"context": folder}), ("grep", {"context": folder, "pattern": "launch"}),
                ("chunk", {"context": folder, "index": 0}), ("search", {"query": "launch", "contexts": [folder]}))]
            return asked, page, reads

    try:
        asked, page, reads = anyio.run(body)
    finally:
        service.close()
    assert not asked.is_error and asked.structured_content["answer"] == "a\ufffdb"
    assert "a\ufffdb" in page.contents[0].text
    for result in reads:
        assert not result.is_error, result.content
    assert "caf\ufffd.txt" in reads[0].structured_content["text"]
