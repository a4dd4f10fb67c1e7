"""The MCP server, driven by the MCP SDK's own client in-process: tools, their schemas,
errors, progress, sessions kept between questions, cancellation, and what a client may read."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402

from rlm_runtime.llm.scripted import ScriptedClient  # noqa: E402
from rlm_runtime.serve.limits import ServeLimits  # noqa: E402
from rlm_runtime.serve.mcp import build_server  # noqa: E402
from rlm_runtime.serve.service import Service  # noqa: E402


def _code(body: str) -> str:
    return f"```python\n{body}\n```"


def _question(messages: list[dict[str, Any]]) -> str:
    """The user messages so far, the newest first (a follow-up's history holds the earlier questions)."""
    return "\n".join(m["content"] for m in reversed(messages) if m["role"] == "user")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "root"
    folder.mkdir()
    (folder / "notes.txt").write_text("alpha\nthe gate code is 4711\nomega\n" + "filler line\n" * 50)
    (folder / "docs").mkdir()
    (folder / "docs" / "a.md").write_text("# A\nbetween the lines\n")
    return folder


def _service(root: Path, responder: Any, **limits: Any) -> Service:
    return Service(ScriptedClient(responder), roots=[root], limits=ServeLimits(**limits),
                   session_options={"memory": None, "trace": root.parent / "traces"})


def _run(service: Service, body: Any) -> Any:
    async def main() -> Any:
        async with Client(build_server(service)) as client:
            return await body(client)

    try:
        return anyio.run(main)
    finally:
        service.close()


def _text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def test_tools_are_listed_with_described_arguments(root: Path) -> None:
    """It lists the nine tools, each with a description and described arguments."""
    async def body(client: Client) -> Any:
        return (await client.list_tools()).tools

    tools = {t.name: t for t in _run(_service(root, lambda m: ""), body)}
    assert set(tools) == {"ask", "peek", "grep", "chunk", "search", "remember", "memory_edit", "contexts_list", "context_add"}
    for tool in tools.values():
        assert tool.description and len(tool.description) > 30
        for name, prop in tool.input_schema.get("properties", {}).items():
            assert prop.get("description") or name in ("ignore_case",), (tool.name, name)
    assert tools["grep"].input_schema["required"] == ["context", "pattern"]


def test_peek_grep_chunk_read_a_file_under_the_root(root: Path) -> None:
    """It reads a file under the root as a model's peek, grep and chunk would."""
    notes = str(root / "notes.txt")

    async def body(client: Client) -> Any:
        peek = await client.call_tool("peek", {"context": notes, "chars": 10})
        grep = await client.call_tool("grep", {"context": notes, "pattern": r"code is \d+"})
        chunk = await client.call_tool("chunk", {"context": notes, "index": 1, "size": 20})
        folder = await client.call_tool("grep", {"context": str(root / "docs"), "pattern": "between"})
        return peek, grep, chunk, folder

    peek, grep, chunk, folder = _run(_service(root, lambda m: ""), body)
    assert peek.structured_content["length"] == 634
    assert peek.structured_content["text"].startswith("alpha\nthe \n... [624 more")
    matches = grep.structured_content["matches"]
    assert [m["line_no"] for m in matches] == [2] and "4711" in matches[0]["line"]
    assert chunk.structured_content["index"] == 1 and chunk.structured_content["total"] == 3
    assert chunk.structured_content["prev"] == 0 and chunk.structured_content["next"] == 2
    assert "between the lines" in _text(folder)


def test_search_of_a_folder_names_the_file_and_takes_a_mode(root: Path) -> None:
    """It finds a passage of a folder and names its file and own line; bm25 is one argument away."""
    docs = str(root / "docs")

    async def body(client: Client) -> Any:
        fused = await client.call_tool("search", {"query": "between lines", "contexts": [docs]})
        words = await client.call_tool("search", {"query": "zeppelin", "contexts": [docs], "mode": "bm25"})
        return fused, words

    fused, words = _run(_service(root, lambda m: ""), body)
    hit = fused.structured_content["hits"][0]
    assert hit["source"] == "a.md" and hit["lines"] == "1-2" and hit["by"] == "words"
    assert words.structured_content["hits"] == []


def test_bad_requests_are_tool_errors_with_a_reason(root: Path) -> None:
    """It answers a bad request with a tool error that says why, and no traceback."""
    notes = str(root / "notes.txt")
    calls = [("peek", {"context": "/etc/passwd"}, "not under the folders"),
             ("peek", {"context": str(root / "nothing.txt")}, "no such context"),
             ("grep", {"context": notes, "pattern": "(unclosed"}, "pattern"),
             ("peek", {"context": notes, "chars": 10**9}, "over this server's limit"),
             ("chunk", {"context": notes, "index": 0, "unit": "pages"}, "unit must be"),
             ("ask", {"question": "  ", "contexts": [notes]}, "non-empty"),
             ("ask", {"question": "x" * 30_000, "contexts": [notes]}, "question length")]

    async def body(client: Client) -> Any:
        return [await client.call_tool(name, args) for name, args, _ in calls]

    for (name, _, reason), result in zip(calls, _run(_service(root, lambda m: ""), body), strict=True):
        assert result.is_error, name
        assert reason in _text(result), (name, _text(result))
        assert "Traceback" not in _text(result)


def test_ask_reports_progress_and_keeps_the_session_between_questions(root: Path) -> None:
    """It answers with iterations, usage and a trajectory id, sends a progress notification
    per iteration, and a follow-up question finds the variables of the first."""
    def responder(messages: list[dict[str, Any]]) -> str:
        if "and now?" not in _question(messages):
            return _code("found = grep('gate code', context)[0].text.split()[-1]\nFINAL(found)")
        return _code("FINAL('again ' + found)")

    notes = str(root / "notes.txt")
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        progress.append((p, total, message))

    async def body(client: Client) -> Any:
        first = await client.call_tool("ask", {"question": "remember the gate code", "contexts": [notes], "session": "s1"},
                                       progress_callback=on_progress)
        second = await client.call_tool("ask", {"question": "and now?", "contexts": [notes], "session": "s1"})
        return first, second

    service = _service(root, responder)
    first, second = _run(service, body)
    assert first.structured_content["answer"] == "4711"
    assert first.structured_content["iterations"] == 1 and first.structured_content["ok"]
    assert first.structured_content["trajectory"].startswith("run-")
    assert progress and progress[0][0] == 1 and progress[0][2] == "iteration 1: 1 cell"
    assert second.structured_content["answer"] == "again 4711"


def test_a_client_cancelling_ask_stops_the_run(root: Path) -> None:
    """It stops a question whose client cancelled it: the worker's loop is interrupted and
    the session is free for the next question."""
    started = threading.Event()

    def responder(messages: list[dict[str, Any]]) -> str:
        if "forever" in _question(messages):
            started.set()
            return _code("while True:\n    pass")
        return _code("FINAL('free')")

    notes = str(root / "notes.txt")

    async def body(client: Client) -> Any:
        with anyio.move_on_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "ask", {"question": "loop forever", "contexts": [notes]})
                await anyio.to_thread.run_sync(started.wait, 20)
                await anyio.sleep(0.5)
                tg.cancel_scope.cancel()
        for _ in range(100):  # the run notices the cancel, then closes its session
            if len(service.sessions) == 0:
                break
            await anyio.sleep(0.1)
        left = len(service.sessions)
        return left, await client.call_tool("ask", {"question": "are you free?", "contexts": [notes]})

    service = _service(root, responder)
    left, result = _run(service, body)
    assert started.is_set()
    assert left == 0  # the looping question's session was closed, not left running
    assert result.structured_content["answer"] == "free"


def test_a_symlink_inside_the_root_does_not_reach_a_secret_outside(root: Path, secret: dict[str, str]) -> None:
    """It refuses a path under the root that is a symlink to a file outside, for every tool
    that reads, and a question over it never runs."""
    (root / "link.txt").symlink_to(secret["path"])
    (root / "linkdir").symlink_to(Path(secret["path"]).parent)
    asked: list[str] = []

    def responder(messages: list[dict[str, Any]]) -> str:
        asked.append(_question(messages))
        return _code("FINAL(peek(1000))")

    calls = [("peek", {"context": str(root / "link.txt")}), ("grep", {"context": str(root / "link.txt"), "pattern": "."}),
             ("chunk", {"context": str(root / "linkdir" / "secret.txt"), "index": 0}),
             ("search", {"query": "CANARY", "contexts": [str(root / "link.txt")]}),
             ("ask", {"question": "what is in it?", "contexts": [str(root / "link.txt")]}),
             ("context_add", {"path": str(root / "link.txt")})]

    async def body(client: Client) -> Any:
        return [await client.call_tool(name, args) for name, args in calls]

    results = _run(_service(root, responder), body)
    for (name, _), result in zip(calls, results, strict=True):
        assert result.is_error, name
        assert secret["value"] not in _text(result), name
    assert asked == []


def test_the_sdk_client_asks_over_streamable_http_with_the_token(root: Path) -> None:
    """It serves the MCP SDK's own streamable-HTTP client at /mcp when it sends the bearer
    token (a session kept for the connection), and refuses one without it."""
    import httpx2
    from _serve import TOKEN, serve
    from mcp.client.streamable_http import streamable_http_client

    def responder(messages: list[dict[str, Any]]) -> str:
        if "again?" in [m["content"] for m in messages if m["role"] == "user"][-1]:
            return _code("FINAL('again ' + found)")
        return _code("found = grep('gate code', context)[0].text.split()[-1]\nFINAL(found)")

    notes = str(root / "notes.txt")

    async def body(url: str) -> Any:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
        async with http, Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            first = await client.call_tool("ask", {"question": "the gate code?", "contexts": [notes], "session": "h1"})
            second = await client.call_tool("ask", {"question": "again?", "contexts": [notes], "session": "h1"})
        refused = None
        try:
            async with httpx2.AsyncClient(timeout=10) as bare, \
                    Client(streamable_http_client(f"{url}/mcp", http_client=bare)) as client:
                await client.list_tools()
        except Exception as e:  # noqa: BLE001 - what the SDK raises for a 401 is its own business
            refused = e
        return tools, first, second, refused

    with serve(responder, [root], mcp=True) as api:
        tools, first, second, refused = anyio.run(body, api.url)
    assert "ask" in tools and "grep" in tools
    assert first.structured_content["answer"] == "4711"
    assert second.structured_content["answer"] == "again 4711"
    assert refused is not None


def test_resources_give_a_context_entry_and_a_trajectory_page(root: Path) -> None:
    """It reads a registered context's entry and a trajectory's HTML page as resources, and an
    unknown id is a resource error naming it, with no traceback."""
    notes = str(root / "notes.txt")

    async def body(client: Client) -> Any:
        await client.call_tool("context_add", {"path": notes, "name": "notes"})
        asked = await client.call_tool("ask", {"question": "q", "contexts": ["ctx:notes"]})
        entry = await client.read_resource("rlm://context/notes")
        page = await client.read_resource(f"rlm://trajectory/{asked.structured_content['trajectory']}.html")
        try:
            await client.read_resource("rlm://context/nosuch")
            missing = ""
        except Exception as e:  # noqa: BLE001 - the SDK's protocol error
            missing = str(e)
        return entry, page, missing

    entry, page, missing = _run(_service(root, lambda m: _code("FINAL('done')")), body)
    data = json.loads(entry.contents[0].text)
    assert data["id"] == "notes" and data["kind"] == "file" and data["usage"]["loads"] == 1
    assert "<html" in page.contents[0].text.lower() and "done" in page.contents[0].text
    assert "nosuch" in missing and "Traceback" not in missing


def test_resources_list_names_each_registered_context(root: Path) -> None:
    """``resources/list`` (the SDK client) names every registered context as rlm://context/ID,
    so an editor's resource picker shows them; each listed one reads."""
    async def body(client: Client) -> Any:
        before = await client.list_resources()
        await client.call_tool("context_add", {"path": str(root / "notes.txt"), "name": "notes"})
        await client.call_tool("context_add", {"path": str(root / "docs"), "name": "docs"})
        after = await client.list_resources()
        read = [await client.read_resource(str(r.uri)) for r in after.resources]
        return before, after, read

    before, after, read = _run(_service(root, lambda m: _code("FINAL('done')")), body)
    assert not [r for r in before.resources if str(r.uri).startswith("rlm://context/")]
    assert sorted(str(r.uri) for r in after.resources) == ["rlm://context/docs", "rlm://context/notes"]
    assert sorted(json.loads(r.contents[0].text)["id"] for r in read) == ["docs", "notes"]


def test_ask_gives_a_list_answer_as_json_data(root: Path) -> None:
    """The ask tool's structured result holds FINAL's list as a JSON list (``value``)."""
    async def body(client: Client) -> Any:
        return await client.call_tool("ask", {"question": "which?", "contexts": [str(root / "notes.txt")]})

    result = _run(_service(root, lambda m: _code("FINAL(['INC-101', 'INC-112'])")), body)
    assert result.structured_content["value"] == ["INC-101", "INC-112"]


def test_a_file_that_grows_between_two_questions_of_a_kept_session_is_read_again(root: Path) -> None:
    """It reads a file named by its path again when a line was appended between two questions
    of one client's kept session (the MCP client's ``session``): the second answer counts it,
    and the brief says what changed."""
    seen: list[str] = []

    def responder(messages: list[dict[str, Any]]) -> str:
        seen.append(messages[0]["content"])
        return _code("FINAL(str(len(grep('gate code'))))")

    notes = root / "notes.txt"

    async def body(client: Client) -> Any:
        first = await client.call_tool("ask", {"question": "how many gate codes?", "contexts": [str(notes)], "session": "s1"})
        with notes.open("a") as fh:
            fh.write("the back gate code is 1234\n")
        second = await client.call_tool("ask", {"question": "and now?", "contexts": [str(notes)], "session": "s1"})
        return first, second

    first, second = _run(_service(root, responder), body)
    assert first.structured_content["answer"] == "1" and second.structured_content["answer"] == "2"
    assert "added at the end" in seen[-1] and "added at the end" not in seen[0]


def test_contexts_list_filters_by_type(root: Path) -> None:
    """It lists the registered contexts of one type through the SDK client's contexts_list,
    and a type that is none is a tool error naming the types."""
    from rlm_runtime.registry import Registry

    with Registry.open() as reg:
        reg.add("I answer in metres.", kind="text", name="me", type="identity")
        reg.add(root / "notes.txt", name="notes")

    async def body(client: Client) -> Any:
        mine = await client.call_tool("contexts_list", {"type": "identity"})
        bogus = await client.call_tool("contexts_list", {"type": "bogus"})
        return mine, bogus

    mine, bogus = _run(_service(root, [_code("FINAL('x')")]), body)
    assert [e["id"] for e in mine.structured_content["result"]] == ["me"], mine
    assert bogus.is_error and "identity" in _text(bogus)

