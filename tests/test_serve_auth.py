"""Who may talk to ``rlm serve --http``: the token file, the bearer check and the Host check."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import Any

import httpx
import pytest
from _serve import TOKEN, serve

from rlm_runtime.config import paths_from_env
from rlm_runtime.errors import ConfigError
from rlm_runtime.serve.auth import Guard, TokenFile, load_or_create_token, local_hosts, rotate_token, token_path

ANSWER = "```python\nFINAL('ok')\n```"


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def loose_umask() -> Any:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def test_the_token_is_made_private_and_kept(loose_umask: None) -> None:
    """It makes the token 0600 in a 0700 folder on the first start, and reads the same one back."""
    paths = paths_from_env()
    token, created = load_or_create_token(paths)
    path = token_path(paths)
    assert created
    assert path == paths.home / "serve" / "token"
    assert len(token) >= 43 and path.read_text().strip() == token
    assert mode(path) == 0o600 and mode(path.parent) == 0o700
    assert load_or_create_token(paths) == (token, False)
    assert [p.name for p in path.parent.iterdir()] == ["token"]  # no temporary file left


def test_rotating_makes_a_new_private_token(loose_umask: None) -> None:
    """It replaces the token on rotation, still 0600, and the new one is read back."""
    paths = paths_from_env()
    old, _ = load_or_create_token(paths)
    new = rotate_token(paths)
    assert new != old and load_or_create_token(paths) == (new, False)
    assert mode(token_path(paths)) == 0o600


def test_a_token_file_follows_rotation_and_fails_closed() -> None:
    """It gives the token the file holds now (looked at once a second): a rotated one, and
    None, refusing everything, when the file is gone or holds no token."""
    paths = paths_from_env()
    now = [0.0]
    token = load_or_create_token(paths)[0]
    source = TokenFile(paths, token, clock=lambda: now[0])
    assert source() == token
    new = rotate_token(paths)
    assert source() == token  # not looked at again within the second
    now[0] += 1.5
    assert source() == new
    token_path(paths).unlink()
    now[0] += 1.5
    assert source() is None
    token_path(paths).write_text("not a token\n")
    now[0] += 1.5
    assert source() is None
    newer = rotate_token(paths)
    now[0] += 1.5
    assert source() == newer


def test_the_guard_refuses_everything_without_a_token() -> None:
    """It answers 401 to every token while its token source gives None."""
    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("reached the app")

    guard = Guard(app, token=lambda: None, hosts=["127.0.0.1:1"])
    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {"type": "http", "path": "/api/health", "headers": [(b"host", b"127.0.0.1:1"), (b"authorization", b"Bearer x")]}
    asyncio.run(guard(scope, None, send))
    assert sent[0]["status"] == 401


def test_a_loose_token_file_is_tightened() -> None:
    """It takes group and other bits off a token file it reads."""
    paths = paths_from_env()
    load_or_create_token(paths)
    os.chmod(token_path(paths), 0o644)
    load_or_create_token(paths)
    assert mode(token_path(paths)) == 0o600


def test_a_link_at_the_token_place_is_not_followed(tmp_path: Path) -> None:
    """It refuses a symlink planted where the token goes, and writes nothing through it."""
    paths = paths_from_env()
    target = tmp_path / "elsewhere"
    target.write_text("A" * 43)
    token_path(paths).parent.mkdir(parents=True)
    token_path(paths).symlink_to(target)
    with pytest.raises(ConfigError):
        load_or_create_token(paths)
    assert target.read_text() == "A" * 43


def test_a_file_without_a_token_is_refused() -> None:
    """It refuses a token file holding something that is not a token (empty, short, spaces)."""
    paths = paths_from_env()
    token_path(paths).parent.mkdir(parents=True)
    for text in ("", "short", "a token with spaces in it that is long enough"):
        token_path(paths).write_text(text)
        with pytest.raises(ConfigError):
            load_or_create_token(paths)


def test_local_hosts_name_the_bound_address_and_loopback() -> None:
    """It accepts the bound address and the loopback names, each with the port."""
    assert local_hosts("127.0.0.1", 8765) == {"127.0.0.1:8765", "localhost:8765", "[::1]:8765"}
    assert "[::1]:9" in local_hosts("::1", 9) and "10.0.0.5:9" in local_hosts("10.0.0.5", 9)


def call(guard: Guard, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bool]:
    """Send one request through ``guard``: its status, headers, and whether the app was reached."""
    reached = []
    sent: list[dict[str, Any]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(True)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {"type": "http", "path": path, "method": "GET",
             "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]}
    guard.app = app
    asyncio.run(guard(scope, receive, send))
    start = sent[0]
    return start["status"], {k.decode(): v.decode() for k, v in start["headers"]}, bool(reached)


GUARD = Guard(lambda *a: None, token=TOKEN, hosts=local_hosts("127.0.0.1", 8765))  # type: ignore[arg-type, return-value]
OK = {"host": "127.0.0.1:8765", "authorization": f"Bearer {TOKEN}"}


@pytest.mark.parametrize("headers", [
    {"host": "127.0.0.1:8765"},
    {**OK, "authorization": "Bearer wrong"},
    {**OK, "authorization": f"Basic {TOKEN}"},
    {**OK, "authorization": TOKEN},
    {**OK, "authorization": f"Bearer {TOKEN}x"},
])
def test_a_request_without_the_token_is_refused(headers: dict[str, str]) -> None:
    """It answers 401 with WWW-Authenticate: Bearer when the token is missing or wrong."""
    status, sent, reached = call(GUARD, "/api/health", headers)
    assert (status, sent.get("www-authenticate"), reached) == (401, "Bearer", False)


@pytest.mark.parametrize("headers", [
    {**OK, "host": "evil.example"},
    {**OK, "host": "evil.example:8765"},
    {**OK, "host": "127.0.0.1:9999"},
    {"authorization": OK["authorization"]},
    {**OK, "origin": "http://evil.example"},
    {**OK, "origin": "null"},
])
def test_a_request_for_another_host_or_origin_is_refused(headers: dict[str, str]) -> None:
    """It answers 403 to a Host or Origin that is not the server's own, token or not."""
    assert call(GUARD, "/api/health", headers)[::2] == (403, False)
    assert call(GUARD, "/docs", headers)[::2] == (403, False)


def test_the_api_description_needs_no_token() -> None:
    """It lets /docs and /openapi.json through without the token, and nothing else."""
    for path in ("/docs", "/openapi.json"):
        assert call(GUARD, path, {"host": "localhost:8765"})[::2] == (200, True)
    assert call(GUARD, "/docs/", {"host": "localhost:8765"})[0] == 401
    assert call(GUARD, "/api/health", {**OK, "authorization": f"bearer {TOKEN}", "origin": "http://localhost:8765"})[::2] == (200, True)


def test_oauth_discovery_is_told_there_is_none() -> None:
    """``/.well-known/oauth-protected-resource`` (what an OAuth-capable MCP client asks first)
    answers 404, not 401, so the client does not go looking for an authorization server; with
    or without the token, and never reaching the app. Another host is still 403."""
    for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-authorization-server", "/.well-known/x"):
        status, sent, reached = call(GUARD, path, {"host": "127.0.0.1:8765"})
        assert (status, "www-authenticate" in sent, reached) == (404, False, False)
        assert call(GUARD, path, OK)[::2] == (404, False)
        assert call(GUARD, path, {**OK, "host": "evil.example"})[::2] == (403, False)


def test_the_live_server_checks_token_and_host(tmp_path: Path) -> None:
    """It refuses, on a real server, requests without the token (401) or for another host (403)."""
    with serve([ANSWER], [tmp_path]) as api:
        response = httpx.get(f"{api.url}/api/health")
        assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer"
        assert response.json() == {"error": response.json()["error"], "status": 401, "type": "Unauthorized"}
        assert httpx.get(f"{api.url}/api/context", headers={"authorization": "Bearer nope"}).status_code == 401
        assert api.get("/api/health", headers={"host": "attacker.example"}).status_code == 403
        assert api.get("/api/health", headers={"host": f"localhost:{api.server.port}"}).status_code == 200
        assert httpx.get(f"{api.url}/openapi.json").status_code == 200
        assert "Traceback" not in httpx.get(f"{api.url}/docs").text


def test_extra_hosts_are_accepted(tmp_path: Path) -> None:
    """It accepts a Host named in extra_hosts (a proxy's name), and still refuses others."""
    with serve([ANSWER], [tmp_path], extra_hosts=["proxy.example:443"]) as api:
        assert api.get("/api/health", headers={"host": "proxy.example:443"}).status_code == 200
        assert api.get("/api/health", headers={"host": "proxy.example:444"}).status_code == 403
