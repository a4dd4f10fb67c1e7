"""``rlm serve --mcp`` as an editor runs it: a subprocess spoken to over stdio by the MCP SDK's
own client, with a scripted model; and how the command refuses what it cannot serve."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from rlm_runtime.cli import main  # noqa: E402


def _script(tmp_path: Path) -> Path:
    lines = [{"when": "gate code", "content": "```python\nFINAL(grep('gate code', context)[0].text.split()[-1])\n```"},
             {"content": "```python\nFINAL('no idea')\n```"}]
    path = tmp_path / "script.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return path


def _params(tmp_path: Path, root: Path, *extra: str) -> StdioServerParameters:
    env = {**os.environ, "RLM_HOME": os.environ["RLM_HOME"]}
    return StdioServerParameters(command=sys.executable,
                                 args=["-m", "rlm_runtime.cli", "serve", "--mcp", "-m", f"scripted:{_script(tmp_path)}",
                                       "--root", str(root), "--no-memory", *extra], env=env)


def _cmdline(p: psutil.Process) -> str:
    try:
        return " ".join(p.cmdline())
    except psutil.Error:  # gone, or a zombie
        return ""


def _status(pid: int) -> str:
    try:
        return str(psutil.Process(pid).status())
    except psutil.Error:
        return "gone"


def _workers_of(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def test_an_editor_asks_over_stdio_and_nothing_outlives_the_server(tmp_path: Path) -> None:
    """It answers peek and ask over stdio, registers a context under its root, and when the
    client closes the connection the server exits with every worker it started."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "notes.txt").write_text("alpha\nthe gate code is 4711\nomega\n")
    seen: dict[str, Any] = {}

    async def body() -> None:
        async with Client(_params(tmp_path, root), read_timeout_seconds=60) as client:
            peek = await client.call_tool("peek", {"context": str(root / "notes.txt"), "chars": 5})
            added = await client.call_tool("context_add", {"path": str(root / "notes.txt"), "name": "notes"})
            listed = await client.call_tool("contexts_list", {})
            answer = await client.call_tool("ask", {"question": "what is the gate code?", "contexts": ["ctx:notes"]})
            resource = await client.read_resource(f"rlm://trajectory/{answer.structured_content['trajectory']}.json")
            server_pids = [p.pid for p in psutil.Process().children(recursive=True) if "rlm_runtime.cli serve --mcp" in _cmdline(p)]
            seen.update(peek=peek, added=added, listed=listed, answer=answer, resource=resource, pids=server_pids,
                        workers=[w.pid for pid in server_pids for w in _workers_of(pid)])

    anyio.run(body)
    assert seen["peek"].structured_content["text"].startswith("alpha")
    assert seen["added"].structured_content["id"] == "notes"
    assert [c["id"] for c in seen["listed"].structured_content["result"]] == ["notes"]
    assert seen["answer"].structured_content["answer"] == "4711", seen["answer"]
    events = json.loads(seen["resource"].contents[0].text)
    assert any(e["type"] == "run_end" for e in events)
    assert seen["pids"] and seen["workers"]  # a worker ran the question
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(psutil.pid_exists(p) for p in seen["pids"] + seen["workers"]):
        time.sleep(0.1)
    alive = [f"{p} {_status(p)} {_cmdline(psutil.Process(p)) if psutil.pid_exists(p) else ''}"
             for p in seen["pids"] + seen["workers"] if _status(p) not in ("gone", psutil.STATUS_ZOMBIE)]
    assert alive == [], seen


def test_serve_refuses_what_it_cannot_serve(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It says how to serve when no protocol is named, and refuses a root that is not a folder
    and a model it cannot load, each with one line and a usage or config exit code."""
    assert main(["serve"]) == 2
    assert "--mcp" in capsys.readouterr().err
    assert main(["serve", "--mcp", "-m", f"scripted:{_script(tmp_path)}", "--root", str(tmp_path / "none")]) != 0
    assert "root folder not found" in capsys.readouterr().err
    assert main(["serve", "--mcp", "-m", f"scripted:{tmp_path / 'none.jsonl'}"]) != 0
    err = capsys.readouterr().err
    assert "script file not found" in err and "Traceback" not in err and err.count("\n") == 1
