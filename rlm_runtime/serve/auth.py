"""Who may talk to ``rlm serve --http``: the bearer token, and the Host check against DNS rebinding.

The token is made on the first start, random (``secrets.token_urlsafe(32)``), and kept in
``$RLM_HOME/serve/token`` (0600, its folder 0700: ``private.py``), so that a client set up
once keeps working across restarts; ``rotate_token`` makes a new one (the old one stops
working at once: a running server reads the file again when it changes, ``TokenFile``). A
client sends it as ``Authorization: Bearer TOKEN``.

Besides it, the user may make named tokens, each with a scope and a memory store
(``tokens.py``). The server's own token is the ``OWNER``: full access, the default store.

``Guard`` is a pure ASGI middleware in front of everything the server answers (the REST API
and ``/mcp``). It refuses, in this order: a ``Host`` header that is not the server's own
address (403: a web page whose name was rebound to 127.0.0.1 sends its own name), an
``Origin`` of another site (403), and a missing or wrong token (401 with
``WWW-Authenticate: Bearer``). A request it lets through carries who sent it in its ASGI
scope, under ``CALLER`` (a ``tokens.Caller``): the REST routes and MCP tools hand it to
``Service``, which refuses a read-only caller's writes and opens each caller's own store.
Only the OpenAPI page and schema (``/docs``, ``/openapi.json``) and the server's proof of
who it is (``/api/hello``, see ``running.py``), which hold no data, are answered without the
token (and carry no caller); the Host check applies to them too.
"""

from __future__ import annotations

import hmac
import os
import secrets
import stat
import threading
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from rlm_runtime.config import Paths
from rlm_runtime.errors import ConfigError
from rlm_runtime.private import FILE_MODE, make_dir, tighten
from rlm_runtime.serve.httperrors import ASGIApp, Receive, Scope, Send, send_json
from rlm_runtime.serve.tokens import OWNER, Caller, match

#: Paths answered without the token: they describe the API or prove the server's identity,
#: and hold no data.
OPEN_PATHS = frozenset({"/docs", "/openapi.json", "/api/hello"})
#: The key of a request's ASGI scope under which ``Guard`` puts its ``tokens.Caller``.
CALLER = "rlm.caller"
#: How often a ``TokenFile`` looks at its file (seconds).
TOKEN_CHECK_S = 1.0
#: Characters of a token ``secrets.token_urlsafe`` makes; a token file holding anything else is refused.
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
_MIN_TOKEN = 32
_MAX_TOKEN = 512


def token_path(paths: Paths) -> Path:
    """Where the server's token is kept: ``$RLM_HOME/serve/token``."""
    return paths.home / "serve" / "token"


def load_or_create_token(paths: Paths) -> tuple[str, bool]:
    """The server's token, and whether it was made now: the one kept under ``$RLM_HOME``, or
    a new one (0600) on the first start.

    Raises:
        ConfigError: the token file is a link or not a regular file, or does not hold a token.
    """
    path = token_path(paths)
    make_dir(path.parent)
    tighten(path.parent)
    try:
        return _read(path), False
    except FileNotFoundError:
        pass
    except OSError as e:  # a link planted at its place (O_NOFOLLOW), no permission
        raise ConfigError(f"cannot read the server's token {path}: {e.strerror or e}") from e
    token = secrets.token_urlsafe(32)
    temp = _write_temp(path, token)
    try:
        os.link(temp, path)  # fails if another server made it meanwhile: that one is the token
    except FileExistsError:
        return load_or_create_token(paths)[0], False
    finally:
        temp.unlink(missing_ok=True)
    return token, True


def rotate_token(paths: Paths) -> str:
    """A new token, replacing the kept one: a running server takes it within
    ``TOKEN_CHECK_S`` (``TokenFile``), and the old one stops working then."""
    path = token_path(paths)
    make_dir(path.parent)
    token = secrets.token_urlsafe(32)
    os.replace(_write_temp(path, token), path)
    return token


def _write_temp(path: Path, token: str) -> Path:
    temp = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), FILE_MODE)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        os.fchmod(f.fileno(), FILE_MODE)  # whatever the umask
        f.write(token + "\n")
    return temp


def _read(path: Path) -> str:
    # O_NOFOLLOW: a link planted at the token's place is refused, not followed; O_NONBLOCK: a
    # FIFO planted there does not hold the server (it is then refused as no regular file).
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"{path} is not a regular file: remove it, a new token is made at the next start")
        if st.st_mode & 0o077:
            os.fchmod(f.fileno(), stat.S_IMODE(st.st_mode) & ~0o077)
        data = f.read(_MAX_TOKEN + 2)
    token = data.decode("ascii", errors="replace").strip()
    if not _MIN_TOKEN <= len(token) <= _MAX_TOKEN or not set(token) <= _TOKEN_CHARS:
        raise ConfigError(f"{path} does not hold a token: remove it (or rotate the token) and start again")
    return token


class TokenFile:
    """The server's token as its file holds it now: read again when the file changes (a
    rotation), looked at no more than every ``TOKEN_CHECK_S``. A file that is gone or holds
    no token gives None: every request is refused until a token is there again (fail closed).

    Args:
        paths: whose ``$RLM_HOME/serve/token``.
        token: the token read at start.
    """

    def __init__(self, paths: Paths, token: str, *, clock: Any = None) -> None:
        import time

        self.path = token_path(paths)
        self._clock = clock or time.monotonic
        self._token: str | None = token
        self._seen = self._stamp()
        self._checked = self._clock()
        self._lock = threading.Lock()

    def __call__(self) -> str | None:
        now = self._clock()
        with self._lock:
            if now - self._checked < TOKEN_CHECK_S:
                return self._token
            self._checked = now
            stamp = self._stamp()
            if stamp != self._seen:
                self._seen = stamp
                try:
                    self._token = _read(self.path) if stamp is not None else None
                except (OSError, ConfigError):
                    self._token = None
            return self._token

    def _stamp(self) -> tuple[int, int, int, int] | None:
        try:
            st = os.lstat(self.path)
        except OSError:
            return None
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def local_hosts(host: str, port: int) -> frozenset[str]:
    """The ``Host`` header values of a server bound to ``host``:``port``: that address and
    the loopback names (``localhost``, ``127.0.0.1``, ``[::1]``) with the port."""
    bound = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return frozenset({f"{bound}:{port}", f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"})


class Guard:
    """Refuses a request whose ``Host`` (or ``Origin``) is not the server's, or that lacks a
    token; puts the ``Caller`` of one it lets through in its scope (``CALLER``).

    Args:
        app: the application behind it.
        token: the server's own token (full access, the default store), or what gives it now
            (a ``TokenFile``: a rotated token is taken; None accepts no own token).
        tokens: what gives the named tokens now (a ``tokens.TokensFile``: each secret's
            digest to its caller); None: there are none.
        hosts: the ``Host`` values accepted (``local_hosts``); none: every request is refused.
    """

    def __init__(self, app: ASGIApp, *, token: str | Callable[[], str | None], hosts: Collection[str],
                 tokens: Callable[[], Mapping[str, Caller]] | None = None) -> None:
        if not token:
            raise ConfigError("the server needs a token")
        self.app = app
        self._token: Callable[[], str | None] = token if callable(token) else (lambda: token)
        self._tokens: Callable[[], Mapping[str, Caller]] = tokens or dict
        self.hosts = frozenset(h.lower() for h in hosts)
        self.origins = frozenset(f"http://{h}" for h in self.hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        scope.pop(CALLER, None)
        headers = _headers(scope)
        refusal = self._admit(scope, headers)
        if refusal is None:
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
        else:
            status, message = refusal
            extra = [(b"www-authenticate", b"Bearer")] if status == 401 else []
            kind = {401: "Unauthorized", 404: "NotFound"}.get(status, "Forbidden")
            await send_json(send, status, {"error": message, "status": status, "type": kind}, extra)

    def _admit(self, scope: Scope, headers: dict[bytes, bytes]) -> tuple[int, str] | None:
        """None to let the request through (with its caller in ``scope``), else (status, why)."""
        host = headers.get(b"host", b"").decode("latin-1").lower()
        if host not in self.hosts:
            return 403, "this server answers only requests addressed to its own address (Host header)"
        origin = headers.get(b"origin")
        if origin is not None and origin.decode("latin-1").lower() not in self.origins:
            return 403, "this server answers no requests from web pages of other sites (Origin header)"
        if scope.get("path") in OPEN_PATHS:
            return None
        if str(scope.get("path", "")).startswith("/.well-known/"):
            # OAuth discovery (MCP clients ask first): there is none, so no 401 sends a client
            # looking for an authorization server; the bearer token is the whole scheme.
            return 404, "this server has no OAuth: send its bearer token (Authorization: Bearer TOKEN)"
        caller = self._caller(headers)
        if caller is None:
            return 401, "a bearer token is required: Authorization: Bearer TOKEN (the token is in $RLM_HOME/serve/token)"
        scope[CALLER] = caller
        return None

    def _caller(self, headers: dict[bytes, bytes]) -> Caller | None:
        """Whose token the request carries: the server's own (``OWNER``), a named one, or none."""
        scheme, _, given = headers.get(b"authorization", b"").partition(b" ")
        given = given.strip()
        if scheme.lower() != b"bearer" or not given:
            return None
        token = self._token()
        if token and hmac.compare_digest(given, token.encode()):
            return OWNER
        return match(self._tokens(), given)


def caller_of(scope: Scope) -> Caller:
    """The caller ``Guard`` put in a request's scope.

    Raises:
        LookupError: there is none (the request did not pass a ``Guard``): never taken as the owner.
    """
    caller = scope.get(CALLER)
    if not isinstance(caller, Caller):
        raise LookupError("this request carries no caller: it did not pass the server's Guard")
    return caller


def _headers(scope: Scope) -> dict[bytes, bytes]:
    """The request's headers, names lowercased; a header sent twice keeps its first value."""
    found: dict[bytes, bytes] = {}
    for name, value in scope.get("headers") or ():
        found.setdefault(bytes(name).lower(), bytes(value))
    return found

