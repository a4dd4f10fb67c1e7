"""Red team of ``rlm serve``: planted secrets and hostile inputs against what docs/serve.md promises.

Each test plants a secret (a file outside the roots, the bearer token, an API key in the
server's environment) or sends a hostile input, and asserts what must hold. A test marked
``xfail(strict=True, reason="HOLE: ...")`` fails today because of a real hole (or, marked
"BUG"/"LIMIT", a defect or a known limit worth a decision): it turns into an XPASS failure
the day the hole is fixed, so the mark must then be removed.

Servers run on 127.0.0.1 only: in a thread (``_serve.serve``), or, for the attacks that can
kill or starve a whole process (SIGBUS, descriptor exhaustion), as a real ``rlm serve
--http`` subprocess with a scripted model, always stopped by the test.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from _serve import TOKEN, serve
from _timing import SLACK_S
from hostile import ESCAPED_POLICY

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402

from rlm_runtime.budget import RunLimits  # noqa: E402
from rlm_runtime.config import paths_from_env  # noqa: E402
from rlm_runtime.errors import RLMError, TooLarge  # noqa: E402
from rlm_runtime.llm.scripted import ScriptedClient  # noqa: E402
from rlm_runtime.serve.auth import load_or_create_token  # noqa: E402
from rlm_runtime.serve.limits import ServeLimits  # noqa: E402
from rlm_runtime.serve.mcp import build_server  # noqa: E402
from rlm_runtime.serve.service import Service  # noqa: E402

CANARY = "s3cr3t-CANARY-outside-9d1e"
API_KEY = "sk-CANARY-0123456789abcdefREDTEAM"
QUICK = "```python\nFINAL('ok')\n```"
INTERNALS = ("Traceback", "site-packages", "/work/", 'File "')


def _code(body: str) -> str:
    return f"```python\n{body}\n```"


def _last_user(messages: list[dict[str, Any]]) -> str:
    """The question of the newest user message (a kept session's prompt also quotes the earlier ones)."""
    last = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    return last.rsplit("Question:", 1)[-1]


@pytest.fixture
def land(tmp_path: Path) -> dict[str, Path]:
    """A root with a note, and a secret folder beside it (outside the root)."""
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "notes.txt").write_text("alpha\nthe launch code is 4711\nomega\n")
    (outside / "secret.txt").write_text(f"password = {CANARY}\n")
    return {"root": root, "outside": outside, "secret": outside / "secret.txt"}


def _service(root: Path, responder: Any = (QUICK,), **limits: Any) -> Service:
    model = ScriptedClient(responder if callable(responder) else list(responder))
    return Service(model, roots=[root], limits=ServeLimits(**{"sessions": 1, **limits}), session_options={"memory": None})


def _attempt(fn: Callable[[], Any]) -> str:
    """What a client gets from ``fn``: its JSON, or the refusal's message (an RLMError)."""
    try:
        return json.dumps(fn())
    except RLMError as e:
        return f"{type(e).__name__}: {e}"


def _within(seconds: float, fn: Callable[[], Any]) -> dict[str, Any]:
    """Run ``fn`` on a daemon thread; what it returned or raised, or {"hung": True}."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - reported to the test
            out["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    return out if out else {"hung": True}


def _raw(port: int, request: bytes, timeout: float = 10.0) -> bytes:
    """One raw HTTP exchange (the request sent as written: odd paths and headers stay odd)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        out = b""
        try:
            while chunk := sock.recv(65536):
                out += chunk
        except TimeoutError:
            pass
    return out


# ============================================================== 1. what a client may read


@pytest.mark.parametrize("ref", ["link.txt", "dirlink/secret.txt", "sub/inner.txt", "../outside/secret.txt",
                                 "{outside}/secret.txt", "{root}/../outside/secret.txt", "sub/../../outside/secret.txt",
                                 "/proc/self/environ", "/proc/self/root{outside}/secret.txt", "~/secret.txt", "~root"])
def test_links_dotdot_and_absolute_paths_out_of_the_root_read_nothing(land: dict[str, Path], ref: str) -> None:
    """It denies a file symlink, a folder symlink, an intermediate symlink, .., absolute paths, /proc and ~ out of the root."""
    root, outside = land["root"], land["outside"]
    (root / "link.txt").symlink_to(land["secret"])
    (root / "dirlink").symlink_to(outside)
    (root / "sub").mkdir()
    (root / "sub" / "inner.txt").symlink_to(land["secret"])
    ref = ref.format(root=root, outside=outside)
    svc = _service(root)
    try:
        got = [_attempt(lambda: svc.peek(ref, 1000)), _attempt(lambda: svc.grep(ref, "password")),
               _attempt(lambda: svc.load(ref)), _attempt(lambda: svc.chunk(ref, 0)),
               _attempt(lambda: svc.search("password", 5, [ref])), _attempt(lambda: svc.context_add(ref))]
        assert not [g for g in got if CANARY in g], got
        assert all(g.startswith(("SourceRefused", "ContextError", "ContextOutsideRoots", "RegistryError", "ConfigError"))
                   for g in got), got
    finally:
        svc.close()


@pytest.mark.parametrize("ref", ["ctx:", "ctx:../notes", "ctx:/etc/passwd", "CTX:notes", "ctx:NOTES", "ctx:notes\n",
                                 "ctx:notes\x00", "ctx:" + "a" * 70, "notes\n", ".", "", "ctx:stats"])
def test_odd_context_ids_name_nothing(land: dict[str, Path], ref: str) -> None:
    """It treats an empty, dotted, upper-case, overlong, NUL or newline ctx: id as unknown, never as a path."""
    svc = _service(land["root"])
    try:
        svc.context_add(str(land["root"] / "notes.txt"), name="notes")
        got = _attempt(lambda: svc.peek(ref, 100))
        if ref == ".":  # the root itself: allowed, and only the root's content
            assert "notes.txt" in got and CANARY not in got
        else:
            assert got.startswith(("UnknownContext", "ContextError", "SourceRefused")), got
    finally:
        svc.close()


def test_fifos_under_the_root_never_hang_a_request(land: dict[str, Path]) -> None:
    """It answers at once for a FIFO under the root, alone or inside a folder, and refuses to register one."""
    root = land["root"]
    os.mkfifo(root / "pipe.txt")
    (root / "folder").mkdir()
    (root / "folder" / "a.txt").write_text("alpha\n")
    os.mkfifo(root / "folder" / "b.txt")
    svc = _service(root)
    try:
        for call in (lambda: svc.peek("pipe.txt"), lambda: svc.grep("folder", "alpha"), lambda: svc.load("folder"),
                     lambda: svc.context_add(str(root / "pipe.txt")), lambda: svc.context_add(str(root / "folder")),
                     lambda: svc.search("alpha", 3, ["folder"])):
            outcome = _within(5 + SLACK_S, call)
            assert "hung" not in outcome
    finally:
        svc.close()


def test_a_folder_under_the_root_holding_links_out_reads_none_of_them(land: dict[str, Path]) -> None:
    """It leaves out of a registered folder its symlinks to a file and to a folder outside the root."""
    root = land["root"]
    folder = root / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n")
    (folder / "leak.md").symlink_to(land["secret"])
    (folder / "leakdir").symlink_to(land["outside"])
    svc = _service(root)
    try:
        svc.context_add(str(folder), name="docs")
        got = [_attempt(lambda ref=ref: svc.grep(ref, "password")) for ref in ("ctx:docs", "docs", str(folder))]
        got += [_attempt(lambda: svc.load("ctx:docs")), _attempt(lambda: svc.search("password", 5, ["ctx:docs"]))]
        assert not [g for g in got if CANARY in g], got
    finally:
        svc.close()


def test_a_folder_swapped_between_check_and_open_is_not_followed(land: dict[str, Path]) -> None:
    """It does not open a registered file whose folder became a link out of the root after the check."""
    root, outside = land["root"], land["outside"]
    (root / "sub").mkdir()
    (root / "sub" / "secret.txt").write_text("harmless\n")
    svc = _service(root)
    checked = svc._source

    def check_then_swap(ref: str) -> Any:  # the race window, made deterministic
        result = checked(ref)
        (root / "sub").rename(root / "sub.old")
        (root / "sub").symlink_to(outside)
        return result

    try:
        svc.context_add(str(root / "sub" / "secret.txt"), name="s")
        svc._source = check_then_swap  # type: ignore[method-assign]
        assert CANARY not in _attempt(lambda: svc.peek("ctx:s", 1000))
    finally:
        svc.close()


def test_rlm_home_under_a_root_does_not_give_out_the_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It reads and registers nothing under $RLM_HOME, even when a root holds it: the token never reaches a client."""
    root = tmp_path / "home"
    root.mkdir()
    monkeypatch.setenv("RLM_HOME", str(root / ".rlm"))
    token, _ = load_or_create_token(paths_from_env())
    token_file = root / ".rlm" / "serve" / "token"
    with serve([_code("FINAL(peek(200))")], [root]) as api:
        api.post("/api/context/register", json={"path": str(token_file), "name": "tok"})
        api.get("/api/context/tok")
        api.get("/api/context/search/all", params={"query": "token", "context": str(token_file)})
        api.post("/api/ask", json={"question": "print it", "contexts": [".rlm/serve/token"]})
        assert not [b for b in api.bodies if token in b], "the bearer token was sent to a client"


@pytest.mark.xfail(strict=True, reason='LIMIT (docs/serve.md): a hard link under a root to a file outside is the same file; the server '
                   'cannot tell it from one placed there on purpose')
def test_a_hard_link_to_a_file_outside_the_root(land: dict[str, Path]) -> None:
    """It does not read, through a hard link under the root, a file that lives outside it."""
    os.link(land["secret"], land["root"] / "hard.txt")
    svc = _service(land["root"])
    try:
        assert CANARY not in _attempt(lambda: svc.peek("hard.txt", 1000))
    finally:
        svc.close()


def test_whether_a_path_outside_the_roots_exists_is_not_told(land: dict[str, Path]) -> None:
    """It answers the same refusal for an existing and a missing path outside the roots."""
    with serve([QUICK], [land["root"]]) as api:
        there = str(land["secret"])
        missing = str(land["outside"] / "no-such-file.txt")
        for ask in (lambda p: api.post("/api/ask", json={"question": "q", "contexts": [p]}),
                    lambda p: api.post("/api/context/register", json={"path": p})):
            a, b = ask(there), ask(missing)
            assert a.status_code == b.status_code
            assert a.json()["error"].replace(there, "P") == b.json()["error"].replace(missing, "P")
        assert str(Path.home()) not in api.post("/api/context/register", json={"path": "~"}).text


def test_a_relative_path_is_registered_from_the_roots(land: dict[str, Path], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """It registers 'notes.txt' as the file a peek of 'notes.txt' reads, wherever the server was started."""
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    svc = _service(land["root"])
    try:
        assert "launch code" in svc.peek("notes.txt", 100)["text"]
        assert svc.context_add("notes.txt")["source"] == str(land["root"] / "notes.txt")
    finally:
        svc.close()


@pytest.mark.xfail(strict=True, reason="DESIGN (docs/serve.md): the registry is the user's list of published contexts; what a client "
                   'registered stays published for later servers until rlm context rm')
def test_what_a_client_registered_under_other_roots_is_not_served(tmp_path: Path) -> None:
    """It does not serve, to a server over root B, a file a client registered under root A."""
    root_a, root_b = tmp_path / "a", tmp_path / "b"
    root_a.mkdir()
    root_b.mkdir()
    (root_a / "private.txt").write_text(f"{CANARY}\n")
    first = _service(root_a)
    first.context_add(str(root_a / "private.txt"), name="private")
    first.close()
    second = _service(root_b)
    try:
        assert CANARY not in _attempt(lambda: second.peek("ctx:private", 1000))
    finally:
        second.close()


def test_a_planted_registry_file_is_refused_cleanly(tmp_path: Path) -> None:
    """It refuses to start over a registry.db that is not a usable registry, naming no secret and leaving it unchanged."""
    paths = paths_from_env()
    paths.home.mkdir(parents=True, exist_ok=True)
    planted = b"SQLite format 3\x00" + CANARY.encode() * 200
    paths.registry.write_bytes(planted)
    with pytest.raises(RLMError) as caught:
        Service(ScriptedClient([QUICK]), roots=[tmp_path])
    assert CANARY not in str(caught.value) and paths.registry.read_bytes() == planted


# ============================================================== bounded requests


def test_grep_answers_are_bounded_in_characters(land: dict[str, Path]) -> None:
    """It refuses (413) or bounds a grep whose lines and context would exceed the load cap."""
    (land["root"] / "wide.txt").write_text(("y" * 100_000 + "\n") * 20)
    svc = _service(land["root"])
    try:
        try:
            result = svc.grep("wide.txt", ".", context_lines=50, max_matches=1000)
        except TooLarge:
            return
        assert len(json.dumps(result)) <= svc.limits.load_chars
    finally:
        svc.close()


def test_expensive_patterns_and_huge_indexes_stay_bounded(land: dict[str, Path]) -> None:
    """It answers a 150-way alternation, a case-blind wildcard pattern and absurd chunk requests over 30 MB in bounded time."""
    line = "the quick brown fox jumps over the lazy dog 0123456789\n"
    (land["root"] / "big.txt").write_text(line * (30_000_000 // len(line)))
    svc = _service(land["root"])
    try:
        calls = [lambda: svc.grep("big.txt", "|".join(f"w{i}x" for i in range(150))),
                 lambda: svc.grep("big.txt", "q.*z.*9$", ignore_case=True, max_matches=1000),
                 lambda: svc.chunk("big.txt", 10**9, 1, "tokens"),
                 lambda: svc.chunk("big.txt", 10**8, 1, "chars"),
                 lambda: svc.load("big.txt")]
        for call in calls:
            started = time.monotonic()
            _attempt(call)
            assert time.monotonic() - started < 3 + SLACK_S
        for bad in (lambda: svc.grep("big.txt", "a" * 1001), lambda: svc.peek("big.txt", 100_001),
                    lambda: svc.chunk("big.txt", 10**9 + 1), lambda: svc.load("big.txt", 2_000_001)):
            with pytest.raises(TooLarge):
                bad()
        with pytest.raises(TooLarge):
            svc.load("big.txt")
    finally:
        svc.close()


def test_a_search_indexing_a_big_file_does_not_stall_other_clients(land: dict[str, Path],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """It stores another client's note while a search is still indexing a big context."""
    from rlm_runtime import searching

    indexing = threading.Event()
    measured = threading.Event()
    real = searching.ChunkSearch.set_contexts

    def slow_index(self: Any, handles: Any) -> None:  # stands for indexing a big file: held until the test measured
        indexing.set()
        measured.wait(60)
        real(self, handles)

    monkeypatch.setattr(searching.ChunkSearch, "set_contexts", slow_index)
    with serve([QUICK], [land["root"]], limits=ServeLimits(sessions=2, wait_s=5), session_options={"memory": True}) as api:
        searcher = threading.Thread(target=lambda: httpx.get(
            f"{api.url}/api/context/search/all", params={"query": "launch", "context": "notes.txt"},
            headers={"Authorization": f"Bearer {TOKEN}"}, timeout=90), daemon=True)
        searcher.start()
        try:
            assert indexing.wait(30)
            try:
                status = httpx.post(f"{api.url}/api/memory/remember", json={"text": "note of another client"},
                                    headers={"Authorization": f"Bearer {TOKEN}"}, timeout=2 + SLACK_S).status_code
            except httpx.TimeoutException:
                status = None
        finally:
            measured.set()
            searcher.join(60)
        assert status == 200


def test_a_request_leaves_no_mapping_or_descriptor_behind(land: dict[str, Path]) -> None:
    """It unmaps the file a peek, grep or chunk read once the request is answered (reference counting alone)."""
    (land["root"] / "mapped.txt").write_text("x" * 100_000 + "\n")
    svc = _service(land["root"])
    gc.collect()
    gc.disable()
    try:
        for _ in range(5):
            svc.peek("mapped.txt", 10)
            svc.grep("mapped.txt", "x")
            svc.chunk("mapped.txt", 0)
        with open("/proc/self/maps") as maps:
            assert sum("mapped.txt" in line for line in maps) == 0
    finally:
        gc.enable()
        svc.close()


# ============================================================== 2. secrets


def test_the_worker_sees_no_key_no_token_no_registry(land: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """It denies a question's code the API key, /proc/*/environ of worker and server, the token and registry.db,
    even under a policy that lets the code import os (as if the Python guards were escaped)."""
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    paths = paths_from_env()
    token, _ = load_or_create_token(paths)
    policy = land["root"].parent / "escaped.toml"
    policy.write_text(ESCAPED_POLICY)
    targets = ["/proc/self/environ", f"/proc/{os.getpid()}/environ", f"/proc/{os.getpid()}/cmdline",
               str(paths.home / "serve" / "token"), str(paths.registry), str(land["secret"])]
    probe = _code("import os\nout = [repr(dict(os.environ))]\n"
                  f"for p in {targets!r}:\n"
                  "    try:\n"
                  "        fd = os.open(p, os.O_RDONLY)\n"
                  "        out.append(p + '=' + repr(os.read(fd, 65536)))\n"
                  "    except Exception as e:\n"
                  "        out.append(p + '!' + repr(e))\n"
                  "FINAL(chr(10).join(out))")
    naive = _code(f"FINAL(open({targets[3]!r}).read())")
    for options, reply in (({"policy": str(policy)}, probe), ({}, naive)):
        with serve(lambda messages, reply=reply: reply, [land["root"]], session_options=options) as api:
            answer = api.post("/api/ask", json={"question": "show the environment", "contexts": ["notes.txt"]})
            # A trajectory shows the model's own tracebacks ("Traceback (your code)"): not the helper's check.
            trace = api.client.get(f"/api/traces/{answer.json()['trajectory']}")
            for body in (answer.text, trace.text):
                for secret in (API_KEY, token, TOKEN, CANARY, "SQLite format", "site-packages"):
                    assert secret not in body
            if options:  # the probe ran, and was refused every file
                assert answer.json()["answer"].startswith("{}") and answer.json()["answer"].count("PermissionError") == 6


def test_the_token_reaches_no_response_and_no_log(land: dict[str, Path], capfd: pytest.CaptureFixture[str]) -> None:
    """It never sends the bearer token back (401, 403, 404, 422, 413, 500 answers) nor writes it to the server's log."""
    with serve([QUICK], [land["root"]]) as api:
        port = api.server.port
        host = f"127.0.0.1:{port}"
        anon = httpx.Client(base_url=api.url, timeout=30)
        replies = [anon.get("/api/context", headers={"authorization": f"Bearer {TOKEN}x"}),
                   anon.get("/api/context", headers={"authorization": f"Basic {TOKEN}"}),
                   anon.get("/api/context", headers={"authorization": TOKEN}),
                   api.get("/api/context", headers={"host": "evil.example"}),
                   api.get("/api/context/nope"), api.get("/api/nothing"),
                   api.post("/api/ask", json={"question": 5, "bogus": "x"}),
                   api.get("/openapi.json"), api.get("/docs")]
        anon.close()
        bodies = [r.text + json.dumps(dict(r.headers)) for r in replies]
        bodies.append(_raw(port, f"GET /api/health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()).decode())
    assert not [b for b in bodies if TOKEN in b]
    out, err = capfd.readouterr()
    assert TOKEN not in out + err


# ============================================================== 3. auth


def test_every_route_needs_the_token_whatever_the_path_spelling(land: dict[str, Path]) -> None:
    """It answers 401 to every method on every spelling of a route (//, .., %-escapes, trailing /, /mcp), and only
    the API description without the token."""
    paths = ["/api/context", "//api/context", "/api/../api/context", "/api/%63ontext", "/api/context/",
             "/docs/../api/context", "/docs%2F..%2Fapi%2Fcontext", "/docs/", "/docs/oauth2-redirect", "/mcp", "/mcp/",
             "/openapi.json/", "/OPENAPI.JSON", "/api/health", "/api/traces/x", "http://127.0.0.1/api/context",
             "/api/context/stats", "/api/context/search/all?query=a"]
    with serve([QUICK], [land["root"]], mcp=True) as api:
        port = api.server.port
        for path in paths:
            for method in ("GET", "HEAD", "OPTIONS", "POST", "PUT", "DELETE", "PATCH"):
                reply = _raw(port, f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n"
                                   f"Content-Length: 0\r\n\r\n".encode())
                status = reply.split(b"\r\n", 1)[0]
                assert b" 401 " in status, (method, path, status)
        for path in ("/docs", "/%64ocs", "/openapi.json"):  # the description only
            reply = _raw(port, f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
            assert b" 200 " in reply.split(b"\r\n", 1)[0] and b"4711" not in reply


HOSTILE_HOSTS = [
    "Host: evil.example", "Host: evil.example:{port}", "Host: 127.0.0.1:{port}.", "Host: 127.0.0.1:{port}@evil.example",
    "Host: 127.0.0.1", "Host: 127.0.0.1:0{port}", "Host: 127.0.0.2:{port}", "Host: 0x7f000001:{port}",
    "Host: 127.0.0.1:{port}\r\nOrigin: http://evil.example", "Host: 127.0.0.1:{port}\r\nOrigin: null",
    "Host: 127.0.0.1:{port}\r\nOrigin: https://127.0.0.1:{port}",
    "Host: 127.0.0.1:{port}\r\nOrigin: http://127.0.0.1:{port}.evil.example",
    "Host: 127.0.0.1:{port}\r\nHost: evil.example", "Host: evil.example\r\nHost: 127.0.0.1:{port}", ""]


def test_rebinding_hosts_and_foreign_origins_are_refused(land: dict[str, Path]) -> None:
    """It refuses, token or not, a Host that is not its own (rebinding, port tricks, duplicates, none) and a foreign
    Origin, on the API, on /mcp and on /docs."""
    with serve([QUICK], [land["root"]], mcp=True) as api:
        port = api.server.port
        for headers in HOSTILE_HOSTS:
            extra = headers.format(port=port)
            for path in ("/api/context", "/mcp", "/docs"):
                request = (f"GET {path} HTTP/1.1\r\n{extra + chr(13) + chr(10) if extra else ''}"
                           f"Authorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n")
                reply = _raw(port, request.encode())
                status = reply.split(b"\r\n", 1)[0]
                assert b" 403 " in status or b" 400 " in status, (path, extra, reply[:300])
                assert b"4711" not in reply and b"access-control-allow-origin" not in reply.lower()


def test_no_cors_grant_is_ever_sent(land: dict[str, Path]) -> None:
    """It sends no Access-Control-Allow-* header, to a preflight or a request, from its own origin or another."""
    with serve([QUICK], [land["root"]], mcp=True) as api:
        port = api.server.port
        for origin in (f"http://127.0.0.1:{port}", "http://evil.example", "null"):
            for method, path in (("OPTIONS", "/api/context"), ("GET", "/api/context"), ("OPTIONS", "/mcp"), ("POST", "/mcp")):
                reply = _raw(port, (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: {origin}\r\n"
                                    f"Access-Control-Request-Method: GET\r\nAuthorization: Bearer {TOKEN}\r\n"
                                    "Content-Length: 0\r\nConnection: close\r\n\r\n").encode())
                assert b"access-control-allow" not in reply.lower(), (method, path, origin)


# ============================================================== 4. errors and wedging


def test_hostile_bodies_get_json_errors_without_echo_or_internals(land: dict[str, Path]) -> None:
    """It answers deep nesting, 20k extra keys, bad UTF-8, wrong content types, a 5000-digit number and a NUL with a short
    JSON 4xx that repeats none of the input and names no internal path; 20k keys in bounded time."""
    bodies = {"deep": b"[" * 400_000 + b"]" * 400_000,
              "keys": ("{" + ",".join(f'"k{i}":"{CANARY}"' for i in range(20_000)) + "}").encode(),
              "utf8": b'{"question": "\xff\xfe\x00"}',
              "digits": b'{"question": "q", "session": ' + b"9" * 5000 + b"}",
              "nul": b'{"question": "q", "contexts": ["notes.txt\\u0000/../../outside/secret.txt"]}',
              "session": json.dumps({"question": "q", "session": "../" + CANARY}).encode()}
    with serve([QUICK], [land["root"]]) as api:
        for name, body in bodies.items():
            for ctype in ("application/json", "text/plain", "application/x-www-form-urlencoded"):
                started = time.monotonic()
                reply = api.post("/api/ask", content=body, headers={"content-type": ctype})
                assert time.monotonic() - started < 3 + SLACK_S, name
                assert 400 <= reply.status_code < 500, (name, ctype, reply.status_code)
                assert reply.json()["status"] == reply.status_code
                assert len(reply.content) < 10_000 and CANARY not in reply.text, name
                assert not [i for i in INTERNALS if i in reply.text], (name, reply.text[:300])


def test_a_lone_surrogate_in_a_context_name_is_a_bad_request(land: dict[str, Path]) -> None:
    """It refuses a context name holding a lone surrogate with a 400, like any other bad name."""
    with serve([QUICK], [land["root"]]) as api:
        body = b'{"question": "q", "contexts": ["\\ud800"]}'
        reply = httpx.post(f"{api.url}/api/ask", content=body, timeout=30,
                           headers={"content-type": "application/json", "Authorization": f"Bearer {TOKEN}"})
        assert not [i for i in INTERNALS if i in reply.text]
        assert reply.status_code == 400


def test_a_stream_reader_that_never_reads_wedges_no_one(land: dict[str, Path]) -> None:
    """It serves other clients while one client's stream is never read, and ends that stream's session at stop."""
    counter = iter(range(10**6))

    def responder(messages: list[dict[str, Any]]) -> str:
        return QUICK if "quick" in _last_user(messages) else _code(f"x = {next(counter)}\nprint('y' * 2000)")

    with serve(responder, [land["root"]], delay_s=0.05, limits=ServeLimits(sessions=2, wait_s=5),
               session_options={"limits": RunLimits(max_iterations=300)}) as api:
        port = api.server.port
        body = json.dumps({"question": "slow", "contexts": ["notes.txt"], "stream": True}).encode()
        with socket.create_connection(("127.0.0.1", port)) as mute:
            mute.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            mute.sendall(f"POST /api/ask HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\n"
                         f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
            time.sleep(1.0)
            started = time.monotonic()
            assert api.get("/api/health").status_code == 200
            assert api.post("/api/ask", json={"question": "quick", "contexts": ["notes.txt"]}).json()["answer"] == "ok"
            assert time.monotonic() - started < 3 + SLACK_S


def test_a_client_leaving_a_plain_ask_frees_its_place(land: dict[str, Path]) -> None:
    """It cancels the plain ask of a client that disconnects, so that the next client gets the place."""
    counter = iter(range(10**6))

    def responder(messages: list[dict[str, Any]]) -> str:
        return QUICK if "quick" in _last_user(messages) else _code(f"x = {next(counter)}")

    with serve(responder, [land["root"]], delay_s=0.2, limits=ServeLimits(sessions=1, wait_s=2 + SLACK_S),
               session_options={"limits": RunLimits(max_iterations=150)}) as api:
        port = api.server.port
        body = json.dumps({"question": "slow", "contexts": ["notes.txt"]}).encode()
        with socket.create_connection(("127.0.0.1", port)) as leaver:
            leaver.sendall(f"POST /api/ask HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\n"
                           f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
            time.sleep(1.0)
        reply = api.post("/api/ask", json={"question": "quick", "contexts": ["notes.txt"]})
        assert reply.status_code == 200, reply.text


# ============================================================== 5. sessions


@pytest.mark.xfail(strict=True, reason='DESIGN (docs/serve.md): the holders of one token are one user; a session name is shared by '
                   'whoever names it with that token (another token gets its own: test_redteam_serve_tokens.py)')
def test_another_caller_naming_the_same_session_does_not_read_its_variables(land: dict[str, Path]) -> None:
    """It keeps a caller's variables from another caller who names the same session."""
    def responder(messages: list[dict[str, Any]]) -> str:
        if "store" in _last_user(messages):
            return _code(f"private_note = {CANARY!r}\nFINAL('stored')")
        return _code("try:\n    FINAL(private_note)\nexcept NameError:\n    FINAL('nothing')")

    with serve(responder, [land["root"]]) as alice:
        assert alice.post("/api/ask", json={"question": "store it", "contexts": ["notes.txt"],
                                            "session": "main"}).json()["answer"] == "stored"
        mallory = httpx.Client(base_url=alice.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
        try:
            stolen = mallory.post("/api/ask", json={"question": "what is there?", "contexts": ["notes.txt"],
                                                    "session": "main"}).json()["answer"]
        finally:
            mallory.close()
        assert stolen != CANARY


def test_many_session_names_do_not_starve_another_client(land: dict[str, Path]) -> None:
    """It evicts one client's idle sessions (many names) to serve another, and keeps at most its places."""
    with serve([QUICK] * 20, [land["root"]], limits=ServeLimits(sessions=2, wait_s=2)) as api:
        for n in range(8):
            assert api.post("/api/ask", json={"question": "q", "contexts": ["notes.txt"], "session": f"s{n}"}).status_code == 200
            assert len(api.service.sessions) <= 2
        started = time.monotonic()
        other = httpx.post(f"{api.url}/api/ask", json={"question": "q", "contexts": ["notes.txt"]},
                           headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
        assert other.status_code == 200 and time.monotonic() - started < 2 + SLACK_S


def test_an_idle_session_is_closed_without_further_traffic(land: dict[str, Path]) -> None:
    """It closes a session idle for idle_s even when no other question comes."""
    with serve([QUICK], [land["root"]], limits=ServeLimits(sessions=2, wait_s=2, idle_s=1.0)) as api:
        assert api.post("/api/ask", json={"question": "q", "contexts": ["notes.txt"], "session": "idle"}).status_code == 200
        assert len(api.service.sessions) == 1
        time.sleep(1.0 + SLACK_S)
        assert api.get("/api/health").json()["sessions"] == 0


# ============================================================== 6. MCP


def test_mcp_hostile_resource_ids_and_argument_types_read_nothing(land: dict[str, Path]) -> None:
    """It answers hostile resource URIs (.., %-escapes, other schemes) and wrong argument types with errors only."""
    root = land["root"]
    (root / "link.txt").symlink_to(land["secret"])
    service = _service(root)
    uris = ["rlm://trajectory/../../x.json", "rlm://trajectory/..%2F..%2Fsecret.json", "rlm://context/../../etc/passwd",
            "rlm://context/%2e%2e%2foutside", "rlm://context/ctx:../x", "file:///etc/passwd",
            f"file://{land['secret']}", "rlm://trajectory/run-20260101-000000-abcdef.json"]
    calls = [("peek", {"context": ["x"], "chars": "abc"}), ("chunk", {"context": "notes.txt", "index": -5}),
             ("peek", {"context": "link.txt"}), ("grep", {"context": "link.txt", "pattern": "password"}),
             ("ask", {"question": "q", "contexts": "notes.txt"}), ("ask", {"question": "q", "contexts": ["x"], "session": "../x"}),
             ("context_add", {"path": str(land["secret"])}), ("context_add", {"path": "link.txt"}),
             ("search", {"query": "password", "contexts": [str(land["secret"])]}), ("peek", {"context": "x", "chars": 10**30})]

    async def body() -> list[str]:
        seen = []
        async with Client(build_server(service)) as client:
            for uri in uris:
                try:
                    seen.append(str(await client.read_resource(uri)))
                except Exception as e:  # noqa: BLE001 - a refusal is what is asked for
                    seen.append(f"refused {e}")
            for name, args in calls:
                result = await client.call_tool(name, args)
                assert result.is_error, (name, args)
                seen.append("".join(getattr(c, "text", "") for c in result.content))
        return seen

    try:
        seen = anyio.run(body)
    finally:
        service.close()
    assert not [s for s in seen if CANARY in s or "root:x:0" in s or "Traceback" in s], seen
    assert all(s.startswith("refused") for s in seen[: len(uris)])


def test_a_trajectory_that_is_a_link_is_not_read(land: dict[str, Path]) -> None:
    """It refuses, over REST and MCP, a trajectory id whose file in $RLM_HOME/traces is a symlink out of it."""
    traces = paths_from_env().traces
    traces.mkdir(parents=True, exist_ok=True)
    planted = land["outside"] / "planted.jsonl"
    planted.write_text(json.dumps({"type": "trace_start", "t": 1, "secret": CANARY}) + "\n")
    trace_id = "run-20260101-000000-abcdef"
    (traces / f"{trace_id}.jsonl").symlink_to(planted)
    os.mkfifo(traces / "run-20260101-000000-f1f000.jsonl")
    with serve([QUICK], [land["root"]]) as api:
        for path in (f"/api/traces/{trace_id}", f"/api/traces/{trace_id}.html", f"/api/traces/{trace_id}?format=html",
                     "/api/traces/run-20260101-000000-f1f000", "/api/traces/..%2F..%2Foutside%2Fplanted"):
            reply = api.get(path)
            assert reply.status_code in (400, 404) and CANARY not in reply.text, path
    service = _service(land["root"])

    async def body() -> str:
        async with Client(build_server(service)) as client:
            try:
                return str(await client.read_resource(f"rlm://trajectory/{trace_id}.json"))
            except Exception as e:  # noqa: BLE001
                return f"refused {e}"

    try:
        assert anyio.run(body).startswith("refused")
    finally:
        service.close()


def _stdio(root: Path, script: Path, tmp_path: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "RLM_HOME": os.environ["RLM_HOME"], "OPENAI_API_KEY": API_KEY}
    return subprocess.Popen([sys.executable, "-m", "rlm_runtime.cli", "serve", "--mcp", "-m", f"scripted:{script}",
                             "--root", str(root), "--no-memory"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=tmp_path)


def _replies(proc: subprocess.Popen[bytes], wanted: set[int], seconds: float) -> dict[int, dict[str, Any]]:
    """The JSON-RPC replies read from ``proc`` until every id in ``wanted`` came or ``seconds`` passed."""
    assert proc.stdout is not None
    got: dict[int, dict[str, Any]] = {}
    deadline = time.monotonic() + seconds
    while not wanted <= set(got) and time.monotonic() < deadline:
        if not select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))[0]:
            break
        line = proc.stdout.readline()
        if not line:
            break
        message = json.loads(line)
        if isinstance(message.get("id"), int):
            got[message["id"]] = message
    return got


def _send(proc: subprocess.Popen[bytes], message: Any) -> None:
    assert proc.stdin is not None
    proc.stdin.write(message if isinstance(message, bytes) else json.dumps(message).encode())
    proc.stdin.write(b"\n")
    proc.stdin.flush()


@contextmanager
def _stdio_session(land: dict[str, Path], tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"content": QUICK}) + "\n")
    proc = _stdio(land["root"], script, tmp_path)
    try:
        _send(proc, b"this is not json")
        _send(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                     "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        assert 1 in _replies(proc, {1}, 30 + SLACK_S)
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        yield proc
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def test_mcp_stdio_survives_malformed_and_hostile_messages(land: dict[str, Path], tmp_path: Path) -> None:
    """It keeps serving over stdio after garbage lines, bad JSON-RPC, wrong argument types and hostile URIs,
    and writes no key or traceback to its output."""
    (land["root"] / "link.txt").symlink_to(land["secret"])
    with _stdio_session(land, tmp_path) as proc:
        for garbage in (b"[1,2,3]", b'{"jsonrpc":"2.0","id":2}', b'{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}',
                        b"\xff\xfe\x00garbage", b"{" * 10_000, b'{"jsonrpc":"2.0","id":3,"method":"nope"}'):
            _send(proc, garbage)
        hostile = {10: ("tools/call", {"name": "peek", "arguments": {"context": ["x"], "chars": "abc"}}),
                   11: ("tools/call", {"name": "peek", "arguments": {"context": "link.txt"}}),
                   12: ("tools/call", {"name": "peek", "arguments": {"context": "../outside/secret.txt"}}),
                   13: ("tools/call", {"name": "grep", "arguments": {"context": str(land["secret"]), "pattern": "pass"}}),
                   14: ("resources/read", {"uri": "rlm://trajectory/../../x.json"}),
                   15: ("resources/read", {"uri": "rlm://context/../../etc/passwd"}),
                   16: ("tools/call", {"name": "context_add", "arguments": {"path": "link.txt"}}),
                   17: ("tools/call", {"name": "peek", "arguments": {"context": "notes.txt"}})}
        for rid, (method, params) in hostile.items():
            _send(proc, {"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        got = _replies(proc, set(hostile), 30 + SLACK_S)
        assert set(hostile) <= set(got)
        assert "4711" in json.dumps(got[17]) and not got[17]["result"].get("isError")
        text = json.dumps(got)
        assert CANARY not in text and API_KEY not in text and "Traceback" not in text


@pytest.mark.xfail(strict=True, reason='LIMIT (docs/serve.md): the MCP SDK drops a stdio line its JSON parser refuses (a lone surrogate) '
                   'without an answer; in-process and over HTTP it is a tool error')
def test_mcp_stdio_answers_a_lone_surrogate(land: dict[str, Path], tmp_path: Path) -> None:
    """It answers, with a tool error, a peek of a context named by a lone surrogate."""
    with _stdio_session(land, tmp_path) as proc:
        _send(proc, b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"peek","arguments":{"context":"\\ud800"}}}')
        assert 7 in _replies(proc, {7}, 3 + SLACK_S)


# ============================================================== whole-process attacks (a real `rlm serve --http`)


@contextmanager
def _spawned(root: Path, script: list[dict[str, Any]], tmp_path: Path, *, nofile: int | None = None) -> Iterator[dict[str, Any]]:
    """``rlm serve --http --port 0`` in a subprocess (its descriptors capped at ``nofile``); its URL, token, process."""
    env = {**os.environ, "OPENAI_API_KEY": API_KEY}
    path = tmp_path / "spawned-script.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in script))
    command = [sys.executable, "-m", "rlm_runtime.cli", "serve"]
    token = subprocess.run([*command, "--show-token"], env=env, capture_output=True, text=True, check=True).stdout.strip()

    def cap() -> None:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    proc = subprocess.Popen([*command, "--http", "--port", "0", "-m", f"scripted:{path}", "--root", str(root),
                             "--no-memory", "--sessions", "2"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, preexec_fn=cap)
    log: list[str] = []
    try:
        assert proc.stderr is not None
        url = None
        deadline = time.monotonic() + 60 + SLACK_S
        while url is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            log.append(line)
            if "serving http://" in line:
                url = line.split("serving ", 1)[1].split("/api", 1)[0]
        assert url, "".join(log)
        threading.Thread(target=lambda: log.extend(proc.stderr or ()), daemon=True).start()
        yield {"url": url, "token": token, "proc": proc, "log": log,
               "client": httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)}
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    assert token not in "".join(log)


def test_a_file_truncated_under_a_kept_session_does_not_kill_the_server(land: dict[str, Path], tmp_path: Path) -> None:
    """It keeps serving when a file of a kept session is truncated and the next question searches it."""
    log = land["root"] / "app.log"
    log.write_text("".join(f"event {i} user alice did a thing\n" for i in range(200_000)))
    script = [{"when": "search it", "content": _code("print(search_chunks('alice', k=3))\nFINAL('searched')")},
              {"content": QUICK}, {"content": QUICK}]
    with _spawned(land["root"], script, tmp_path) as server:
        client = server["client"]
        assert client.post("/api/ask", json={"question": "hello", "contexts": ["app.log"], "session": "s"}).status_code == 200
        os.truncate(log, 0)
        try:
            client.post("/api/ask", json={"question": "please search it", "contexts": ["app.log"], "session": "s"})
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
        assert server["proc"].poll() is None, f"the server died: {server['proc'].returncode}"


@pytest.mark.xfail(strict=True, reason='LIMIT (docs/serve.md): uvicorn has no timeout for a request that never completes its headers; the '
                   'server listens on loopback and raises its open-file limit to the hard limit')
def test_idle_connections_without_the_token_cannot_starve_the_server(land: dict[str, Path], tmp_path: Path) -> None:
    """It still answers a client with the token while 300 token-less connections sit idle (descriptors capped at 256)."""
    with _spawned(land["root"], [{"content": QUICK}], tmp_path, nofile=256) as server:
        port = int(server["url"].rsplit(":", 1)[1])
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(300)]
        try:
            try:
                status = server["client"].get("/api/health", timeout=3 + SLACK_S).status_code
            except httpx.HTTPError:
                status = None
        finally:
            for sock in idle:
                sock.close()
        assert status == 200


def test_a_folder_with_more_files_than_descriptors(land: dict[str, Path], tmp_path: Path) -> None:
    """It finds a match in the last file of a 600-file folder (descriptors capped at 256), and serves on afterwards."""
    folder = land["root"] / "many"
    folder.mkdir()
    for i in range(600):
        (folder / f"f{i:04d}.txt").write_text(f"file {i}\n")
    with _spawned(land["root"], [{"content": QUICK}], tmp_path, nofile=256) as server:
        client = server["client"]
        assert client.post("/api/context/register", json={"path": str(folder), "name": "many"}).status_code == 200
        grep = client.get("/api/context/many/grep", params={"pattern": "file 599"})
        assert grep.status_code == 413 or [m["line"] for m in grep.json()["matches"]] == ["file 599"], grep.text
        try:
            after = client.post("/api/ask", json={"question": "q", "contexts": ["notes.txt"]}).status_code
        except httpx.HTTPError:
            after = None
        assert after == 200
