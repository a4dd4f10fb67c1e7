"""What ``rlm serve`` costs a client: reads per second over each protocol, and what it adds to
a question.

Reads: ``peek`` (2,000 characters) and ``grep`` (one match in a 2 MB file) of a registered
context, called back to back by one client, and by 8 clients at once over HTTP. The baseline
is the same ``Service`` call in-process, in the same run; each protocol's figure is also
given as the ratio of its median latency to the baseline's.

Search: ``search`` of that file, the first (which builds its index) and the repeated ones,
given as a ratio to the first.

Questions: a scripted model that answers in one iteration, asked over the same context and
session again and again: ``Session.ask`` in-process (the baseline), the MCP ``ask`` tool over
stdio, and ``POST /api/ask``. The difference of medians is what the server adds.

    .venv/bin/python bench/serve_bench.py [--json] [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
from _common import machine, quantile

REPLY = "```python\nFINAL(grep('needle', context)[0].text)\n```"


def _timed(fn: Callable[[], Any], n: int) -> list[float]:
    out = []
    for _ in range(n):
        began = time.perf_counter()
        fn()
        out.append(time.perf_counter() - began)
    return out


def _summary(samples: list[float], baseline: float | None = None) -> dict[str, Any]:
    p50 = statistics.median(samples)
    row = {"n": len(samples), "p50_ms": round(p50 * 1000, 3), "p99_ms": round(quantile(samples, 0.99) * 1000, 3),
           "per_s": round(1 / p50, 1)}
    if baseline:
        row["ratio"] = round(p50 / baseline, 1)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--repeat", type=int, default=200, help="reads timed per protocol (questions: a tenth)")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="rlm-serve-bench-"))
    os.environ["RLM_HOME"] = str(home / "home")
    root = home / "root"
    root.mkdir()
    notes = root / "notes.txt"
    notes.write_text("".join(f"line {i}: filler text of a record\n" for i in range(60_000)) + "the needle is here\n")
    script = home / "script.jsonl"
    script.write_text(json.dumps({"when": "needle", "content": REPLY}) + "\n")

    from rlm_runtime.llm.scripted import ScriptedClient
    from rlm_runtime.registry import Registry
    from rlm_runtime.serve.http import start_in_thread
    from rlm_runtime.serve.limits import ServeLimits
    from rlm_runtime.serve.service import Service
    from rlm_runtime.session import Session

    Registry.open().add(notes, name="notes")
    results: dict[str, Any] = {}
    n, nq = args.repeat, max(5, args.repeat // 10)
    began = time.perf_counter()

    # In-process: the baseline of every read and question.
    service = Service(ScriptedClient(lambda m: REPLY), roots=[root], limits=ServeLimits(sessions=4),
                      session_options={"memory": None})
    base_peek = _timed(lambda: service.peek("ctx:notes"), n)
    base_grep = _timed(lambda: service.grep("ctx:notes", "needle"), n)
    results["peek in-process"] = _summary(base_peek)
    results["grep in-process"] = _summary(base_grep)
    with Session(ScriptedClient(lambda m: REPLY), contexts=["ctx:notes"], memory=None) as s:
        s.ask("where is the needle?")
        base_ask = _timed(lambda: s.ask("where is the needle?"), nq)
    results["ask Session.ask"] = _summary(base_ask)
    bp, bg, ba = statistics.median(base_peek), statistics.median(base_grep), statistics.median(base_ask)
    # Search: the first one indexes the file (the server opens it by descriptor); every later
    # one, from any request or process, reuses that index while the file is unchanged.
    first = _timed(lambda: service.search("needle", contexts=["ctx:notes"]), 1)
    results["search, first (indexes)"] = _summary(first)
    results["search, repeated"] = _summary(_timed(lambda: service.search("needle", contexts=["ctx:notes"]),
                                                  max(5, n // 10)), statistics.median(first))

    # REST over HTTP, one client, then 8 at once.
    token = "bench-" + "t" * 30
    server = start_in_thread(service, token=token, mcp=True)
    try:
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
            results["peek REST"] = _summary(_timed(lambda: http.get("/api/context/notes/peek").raise_for_status(), n), bp)
            results["grep REST"] = _summary(_timed(
                lambda: http.get("/api/context/notes/grep", params={"pattern": "needle"}).raise_for_status(), n), bg)
            body = {"question": "where is the needle?", "contexts": ["ctx:notes"], "session": "bench"}
            http.post("/api/ask", json=body).raise_for_status()
            rest_ask = _timed(lambda: http.post("/api/ask", json=body).raise_for_status(), nq)
            results["ask REST"] = {**_summary(rest_ask, ba), "added_ms": round((statistics.median(rest_ask) - ba) * 1000, 1)}
        done = []
        stop = time.perf_counter() + 5

        def client() -> None:
            with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
                while time.perf_counter() < stop:
                    http.get("/api/context/notes/grep", params={"pattern": "needle"}).raise_for_status()
                    done.append(1)

        threads = [threading.Thread(target=client) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        results["grep REST, 8 clients"] = {"per_s": round(len(done) / 5, 1)}

        # MCP over streamable HTTP.
        results.update(anyio.run(_mcp_http, server.url, token, n, bp, bg))
    finally:
        server.stop()

    # MCP over stdio: the server as an editor starts it.
    results.update(anyio.run(_mcp_stdio, script, root, n, nq, bp, bg, ba))
    report = {"machine": machine(), "wall_s": round(time.perf_counter() - began, 1), "figures": results}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for name, row in results.items():
            print(f"{name:<24} " + "  ".join(f"{k}={v}" for k, v in row.items()))
    return 0


async def _mcp_http(url: str, token: str, n: int, bp: float, bg: float) -> dict[str, Any]:
    import httpx2  # the MCP SDK's own HTTP client
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    async with http, Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
        return {"peek MCP http": _summary(await _atimed(lambda: client.call_tool("peek", {"context": "ctx:notes"}), n), bp),
                "grep MCP http": _summary(await _atimed(
                    lambda: client.call_tool("grep", {"context": "ctx:notes", "pattern": "needle"}), n), bg)}


async def _mcp_stdio(script: Path, root: Path, n: int, nq: int, bp: float, bg: float, ba: float) -> dict[str, Any]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, env=dict(os.environ),
                                   args=["-m", "rlm_runtime.cli", "serve", "--mcp", "-m", f"scripted:{script}",
                                         "--root", str(root), "--no-memory"])
    async with Client(params, read_timeout_seconds=60) as client:
        out = {"peek MCP stdio": _summary(await _atimed(lambda: client.call_tool("peek", {"context": "ctx:notes"}), n), bp),
               "grep MCP stdio": _summary(await _atimed(
                   lambda: client.call_tool("grep", {"context": "ctx:notes", "pattern": "needle"}), n), bg)}
        question = {"question": "where is the needle?", "contexts": ["ctx:notes"], "session": "bench"}
        await client.call_tool("ask", question)
        asks = await _atimed(lambda: client.call_tool("ask", question), nq)
        out["ask MCP stdio"] = {**_summary(asks, ba), "added_ms": round((statistics.median(asks) - ba) * 1000, 1)}
        return out


async def _atimed(fn: Callable[[], Any], n: int) -> list[float]:
    out = []
    for _ in range(n):
        began = time.perf_counter()
        result = await fn()
        if getattr(result, "is_error", False):
            raise RuntimeError(str(result.content))
        out.append(time.perf_counter() - began)
    return out


if __name__ == "__main__":
    sys.exit(main())
