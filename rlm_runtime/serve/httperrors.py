"""What an HTTP client of ``rlm serve`` is told when a request fails: a status and one JSON shape.

Every error the server answers is ``{"error": message, "status": code, "type": name}``.
An ``RLMError`` raised on purpose keeps its message (written for the person who sent the
request) and gets its status from ``STATUSES`` by its class, the nearest ancestor
deciding; anything else is a 500 whose message says nothing about the server (its
traceback goes to the server's log, never to the client).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from rlm_runtime.errors import (
    ConfigError,
    ContextError,
    LLMError,
    MissingAPIKey,
    ModelUnavailable,
    ReadOnlyToken,
    RLMError,
    SandboxError,
    SessionBusy,
    SessionClosed,
    SourceRefused,
    TerminalError,
    TooLarge,
    UnknownContext,
    UnknownTrajectory,
    WorkersBusy,
)
from rlm_runtime.memory.errors import ChunkNotFound
from rlm_runtime.utf8safe import utf8safe

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The status of each error class; a class not listed takes its nearest listed ancestor's.
STATUSES: dict[type[BaseException], int] = {
    RLMError: 400,
    ContextError: 400,
    ConfigError: 400,
    UnknownContext: 404,
    UnknownTrajectory: 404,
    SourceRefused: 403,
    ReadOnlyToken: 403,
    ChunkNotFound: 404,
    TooLarge: 413,
    SessionBusy: 409,
    SessionClosed: 503,
    WorkersBusy: 503,
    SandboxError: 503,
    TerminalError: 500,
    LLMError: 502,
    ModelUnavailable: 503,
    MissingAPIKey: 503,
}

UNEXPECTED = "the server failed on this request; its log has the details"


def status_of(error: BaseException) -> int:
    """The HTTP status of ``error`` (500 for anything not raised on purpose)."""
    for cls in type(error).__mro__:
        if cls in STATUSES:
            return STATUSES[cls]
    return 500


def error_body(error: BaseException) -> dict[str, Any]:
    """The JSON a client gets for ``error``: its message if it is an ``RLMError``, a generic one if not."""
    status = status_of(error)
    if not isinstance(error, RLMError):
        return {"error": UNEXPECTED, "status": 500, "type": "InternalError"}
    body: dict[str, Any] = {"error": str(error), "status": status, "type": type(error).__name__}
    suggestion = getattr(error, "suggestion", None)
    if isinstance(suggestion, str):
        body["suggestion"] = suggestion
    return dict(utf8safe(body))  # a message may quote a model's string or a file's name


async def send_json(send: Send, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """Answer with ``body`` as JSON from ASGI code (a middleware, a streamed response before it starts)."""
    data = json.dumps(body, ensure_ascii=False).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": data})
