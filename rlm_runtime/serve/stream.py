"""``POST /api/ask`` with ``"stream": true``: a question's progress as server-sent events.

The question runs on a worker thread (``Service.ask``). Until its session is had, the
request is an ordinary one: a refusal (an unknown context, a busy session, a server
without free workers) is answered with its HTTP status and the JSON error. From then on
the answer is ``text/event-stream``: for each turn of the root run a ``model`` event when its
model is called (``{"iteration": n, "prompt_tokens": t}``: a local model may read for a
minute), a ``cell`` event as each of its cells starts (``{"iteration": n}``), and an
``iteration`` event when it ends (``{"iteration": n, "cells": c, "seconds": s}``); a
``: keep-alive`` comment when nothing happened for ``KEEPALIVE_S``, then one ``result`` event (the JSON ``ask`` returns) or one
``error`` event (the JSON error shape). A client that disconnects cancels the question
(``Session.cancel``): its worker is freed as soon as the run notices.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import threading
from collections.abc import Hashable, Sequence
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread

from rlm_runtime.serve.httperrors import Receive, Scope, Send, error_body, send_json, status_of
from rlm_runtime.serve.service import Service
from rlm_runtime.serve.tokens import OWNER, Caller
from rlm_runtime.utf8safe import utf8safe

log = logging.getLogger(__name__)

#: Seconds without an event after which a comment is sent (proxies close silent streams).
KEEPALIVE_S = 15.0
_SESSION = "session"
_ITERATION = "iteration"


def progress_of(event: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """What a client is told of a run event (its name and data): the root run's model calls,
    cells started and turns ended (None for the rest, and for every child run's)."""
    kind = event.get("type")
    if event.get("depth") or kind not in ("model_call", "cell_start", "iteration"):
        return None
    turn = int(event.get("iteration") or 0)
    if kind == "model_call":
        tokens = event.get("prompt_tokens")
        return "model", {"iteration": turn, "prompt_tokens": int(tokens) if isinstance(tokens, int) else None}
    if kind == "cell_start":
        return "cell", {"iteration": turn}
    seconds = event.get("duration_s")
    return _ITERATION, {"iteration": turn, "cells": len(event.get("code_blocks") or []),
                        "seconds": round(float(seconds), 3) if isinstance(seconds, int | float) else None}


class AskStream:
    """An ASGI response that runs one question and streams its progress (see the module docstring).

    Args:
        service: the server's operations.
        question: the question.
        contexts: the contexts it names.
        client: the key of the caller's session (None: a session for this question alone).
        caller: who asks (``tokens.Caller``).
    """

    def __init__(self, service: Service, question: str, contexts: Sequence[str], client: Hashable | None,
                 caller: Caller = OWNER) -> None:
        self.service = service
        self.caller = caller
        self.question = question
        self.contexts = list(contexts)
        self.client = client
        self._sessions: list[Any] = []
        self._gone = threading.Event()
        self._done = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        sender, events = anyio.create_memory_object_stream[tuple[str, Any]](max_buffer_size=math.inf)
        outcome: dict[str, Any] = {}

        def put(kind: str, data: Any) -> None:
            try:
                anyio.from_thread.run_sync(sender.send_nowait, (kind, data))
            except Exception:  # noqa: BLE001 - the request is over (the stream closed, the loop gone)
                pass

        def listener(event: dict[str, Any]) -> None:
            if self._gone.is_set():  # the client left before the run could be cancelled
                self._cancel()
            shown = progress_of(event)
            if shown is not None:
                put(*shown)

        def on_session(session: Any) -> None:
            self._sessions.append(session)
            put(_SESSION, None)

        ask = functools.partial(self.service.ask, self.question, self.contexts, client=self.client, listener=listener,
                                on_session=on_session, caller=self.caller)

        async def run() -> None:
            async with sender:
                try:
                    outcome["result"] = utf8safe(await anyio.to_thread.run_sync(ask, abandon_on_cancel=True))
                except Exception as e:  # noqa: BLE001 - every failure is told to the client, below
                    outcome["error"] = e

        async with anyio.create_task_group() as group:
            group.start_soon(run)
            group.start_soon(self._watch, receive, group.cancel_scope)
            async with events:
                started = False
                async for kind, _ in events:
                    started = kind == _SESSION
                    break
                if not started:  # refused before the question began: an ordinary answer
                    self._done = True
                    await self._answer(send, outcome)
                    group.cancel_scope.cancel()
                    return
                await send({"type": "http.response.start", "status": 200,
                            "headers": [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache"),
                                        (b"x-accel-buffering", b"no")]})
                while True:
                    with anyio.move_on_after(KEEPALIVE_S) as waited:
                        try:
                            kind, data = await events.receive()
                        except anyio.EndOfStream:
                            break
                    if waited.cancelled_caught:
                        await _write(send, b": keep-alive\n\n")
                    elif kind != _SESSION:
                        await _write(send, _event(kind, data))
                self._done = True
                if "result" in outcome:
                    last = _event("result", outcome["result"])
                else:
                    last = _event("error", self._error(outcome.get("error")))
                await send({"type": "http.response.body", "body": last, "more_body": False})
                group.cancel_scope.cancel()

    async def _watch(self, receive: Receive, scope: anyio.CancelScope) -> None:
        """Cancel the question when the client disconnects before its answer was sent."""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
        if not self._done:
            self._gone.set()
            await anyio.to_thread.run_sync(self._cancel)
            scope.cancel()

    def _cancel(self) -> None:
        for session in self._sessions:
            session.cancel()

    async def _answer(self, send: Send, outcome: dict[str, Any]) -> None:
        if "result" in outcome:  # cannot happen (a session comes first), but is an answer all the same
            await send_json(send, 200, outcome["result"])
            return
        body = self._error(outcome.get("error"))
        await send_json(send, body["status"], body)

    @staticmethod
    def _error(error: BaseException | None) -> dict[str, Any]:
        if error is None:
            return {"error": "the question ended without an answer", "status": 500, "type": "InternalError"}
        if status_of(error) == 500:
            log.error("ask failed", exc_info=error)
        return error_body(error)


def _event(name: str, data: Any) -> bytes:
    # json.dumps escapes newlines: one data line per event.
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


async def _write(send: Send, data: bytes) -> None:
    await send({"type": "http.response.body", "body": data, "more_body": True})

