"""The REST API of ``rlm serve --http`` (FastAPI): ``Service``'s operations under ``/api``.

Every endpoint is a thin adapter: it checks the shape of the request (422 when wrong), runs
the service's operation on a worker thread (the event loop stays free for other clients),
and answers its plain data as JSON, lone surrogates replaced (``utf8safe``: a file name that
is not UTF-8). Errors are ``{"error", "status", "type"}`` (``httperrors.py``); the schema
documents each operation's (``ERROR_STATUSES``). A context in a path is a registered one
(``ID`` or ``ctx:ID``); a question's JSON body may also name paths under the server's roots.

In front of it all: ``auth.Guard`` (the Host check and the bearer token, whose ``Caller`` each
route hands to the service: ``CallerOf``) and ``BodyLimit``
(a request body over ``MAX_BODY_BYTES`` is refused with 413 before anything reads it). An
MCP server given to ``build_app`` is served at ``/mcp`` behind the same two, its session
manager running in the app's lifespan.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal, TypeVar

import anyio
import anyio.to_thread
from fastapi import Depends, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.security import HTTPBearer
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from rlm_runtime.errors import Cancelled, RLMError, UnknownContext
from rlm_runtime.memory.edits import KEEP, Edit
from rlm_runtime.serve.auth import Guard, caller_of
from rlm_runtime.serve.httperrors import ASGIApp, Receive, Scope, Send, error_body, send_json, status_of
from rlm_runtime.serve.service import Service
from rlm_runtime.serve.stream import AskStream
from rlm_runtime.serve.tokens import Caller
from rlm_runtime.utf8safe import utf8safe

log = logging.getLogger(__name__)
T = TypeVar("T")

#: How a search ranks: by words and meaning fused (the default), by words, or by meaning.
_Mode = Literal["hybrid", "bm25", "vector"] | None
_MODE_HELP = "hybrid (default): words and meaning fused; bm25: words only; vector: meaning only"

#: How often a plain ask checks that its client is still there.
DISCONNECT_POLL_S = 0.5
#: The largest request body accepted (a question, a note, a path to register; MCP messages).
MAX_BODY_BYTES = 1 << 20
#: What a 422 answer repeats of the request: this many problems, each cut to this many characters.
_MAX_PROBLEMS = 20
_PROBLEM_CHARS = 200
#: A trajectory page runs no code from elsewhere and sends nothing anywhere.
_PAGE_POLICY = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; "
                "connect-src 'none'; form-action 'none'; frame-ancestors 'none'")

SESSION_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
ContextId = Annotated[str, Path(description="a registered context's id (or ctx:ID)", max_length=200)]


class AskBody(BaseModel):
    """A question for ``POST /api/ask``."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(description="the question, in plain words")
    contexts: list[str] = Field(default_factory=list, description="contexts to read: ctx:ID, ids, or paths under the roots")
    session: str | None = Field(None, pattern=SESSION_PATTERN,
                                description="the caller's session name: a later ask with it reuses the worker and variables")
    stream: bool = Field(False, description="answer with server-sent events: iteration events, then the result")


class RegisterBody(BaseModel):
    """A file or folder to register, for ``POST /api/context/register``."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="a file or folder under the server's roots")
    name: str | None = Field(None, description="a display name")
    tags: list[str] = Field(default_factory=list, description="labels")


class Problem(BaseModel):
    """One problem of a malformed request (a 422)."""

    where: str = Field(description="where in the request: body.question, query.k, path.index...")
    problem: str = Field(description="what is wrong there")


class ErrorBody(BaseModel):
    """What every error answers (``httperrors.py``)."""

    error: str = Field(description="what went wrong, for the person who sent the request")
    status: int = Field(description="the HTTP status of the answer")
    type: str = Field(description="the kind of error: ContextError, TooLarge, RequestValidationError...")
    suggestion: str | None = Field(None, description="what to do instead, when there is something to say")
    problems: list[Problem] | None = Field(None, description="a malformed request's problems (422)")


#: What each error status means; every error is an ``ErrorBody``.
ERROR_STATUSES = {
    400: "bad input: a value the schema allows but the server cannot use (an empty question, a pattern that is not "
         "RE2, a path that is not there)",
    401: "no token, or a wrong one",
    403: "a path outside the roots or in $RLM_HOME, a Host or Origin that is not the server's, a write (a note, an "
         "edit, a registration) with a read-only token, or a note or edit on a server started with --no-memory",
    404: "an unknown context, trajectory or memory chunk",
    409: "the session named is answering another question",
    413: "over a limit of this server: a size asked for, the text an answer would hold, the request body",
    422: "a malformed request (a field missing, of the wrong type or out of range): problems says where",
    500: "the server failed on this request (its log has the details)",
    502: "the model failed",
    503: "no session place came free in time, or the model is unavailable",
}
#: The errors of every request: the Guard's, BodyLimit's, and the unexpected.
_ANY_REQUEST = (401, 403, 413, 500)


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The schema's responses for these error statuses and those of every request."""
    return {status: {"model": ErrorBody, "description": ERROR_STATUSES[status]}
            for status in sorted({*statuses, *_ANY_REQUEST})}


#: The errors of an operation reading a context.
_READING = _errors(400, 404, 422)
#: One server-sent event of a streamed ask (OpenAPI 3.1: the schema of an event stream is an event's).
_ASK_EVENT = {"type": "object", "required": ["event", "data"], "properties": {
    "event": {"enum": ["model", "cell", "iteration", "result", "error"]},
    "data": {"type": "string", "contentMediaType": "application/json",
             "description": "model: {iteration, prompt_tokens}; cell: {iteration}; iteration: {iteration, cells, seconds}; "
                            "result: what a plain ask answers; error: an ErrorBody"}}}


class RememberBody(BaseModel):
    """A note for ``POST /api/memory/remember``."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(description="the note")
    tags: list[str] = Field(default_factory=list, description="labels to filter by later")


class EditBody(BaseModel):
    """A change to a chunk of the memory store, for ``POST /api/memory/edit``: a field left out
    stays as it is."""

    model_config = ConfigDict(extra="forbid")

    id: int = Field(ge=1, le=2**63 - 1, description="the chunk's id (what remember answered; a search hit m42 is 42)")
    text: str | None = Field(None, description="the new text (a note's only: a file's chunk mirrors its file)")
    kind: str | None = Field(None, description="the new kind: decision, fact, answer...")
    add_tags: list[str] = Field(default_factory=list, description="tags to add")
    remove_tags: list[str] = Field(default_factory=list, description="tags to remove")
    summary: str | None = Field(None, description="a one-line summary shown with the chunk (null or \"\" clears it)")
    confidence: float | None = Field(None, ge=0, le=1, allow_inf_nan=False, strict=True,  # true is no number
                                     description="how sure the note is, 0 to 1 (null clears it)")

    def edit(self) -> Edit:
        """The ``Edit`` this body asks for: a field absent (or a null text or kind) is ``KEEP``."""
        given = self.model_fields_set
        return Edit(text=KEEP if self.text is None else self.text, kind=KEEP if self.kind is None else self.kind,
                    add_tags=tuple(self.add_tags), remove_tags=tuple(self.remove_tags),
                    summary=self.summary if "summary" in given else KEEP,
                    confidence=self.confidence if "confidence" in given else KEEP)


async def _request_caller(request: Request) -> Caller:
    """Who sent the request (``auth.Guard`` put it in the scope; none: refused, never the owner)."""
    return caller_of(request.scope)


#: The caller of a request, as a route's parameter.
CallerOf = Annotated[Caller, Depends(_request_caller)]


def build_app(service: Service, *, token: str | Callable[[], str | None], mcp_server: Any = None,
              hosts: Collection[str] = (), hello_key: str | None = None,
              tokens: Callable[[], Mapping[str, Caller]] | None = None) -> FastAPI:
    """The REST API over ``service`` (and ``mcp_server`` at ``/mcp``, if given).

    Args:
        service: the server's operations (the caller closes it).
        token: the bearer token every request must carry (``auth.load_or_create_token``),
            or an ``auth.TokenFile`` (a rotated token is taken while the server runs).
        tokens: the named tokens (``tokens.TokensFile``); None: none.
        hello_key: the key of this server's record (``running.announce``): ``/api/hello``
            proves with it that this is the server the record names. None: no proof (404).
        mcp_server: an ``MCPServer`` (``mcp.build_server``) to serve over streamable HTTP.
        hosts: the ``Host`` header values accepted (``auth.local_hosts`` of the bound
            address); none: every request is refused with 403.
    """
    from rlm_runtime import __version__

    mcp_app = _mcp_app(mcp_server, hosts) if mcp_server is not None else None

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if mcp_app is None:
            yield
            return
        async with mcp_server.session_manager.run():
            yield

    # auto_error=False: the Guard checks the token; this only names the scheme in the schema.
    # docs_url=None: FastAPI's page loads Swagger UI from a CDN (blank offline); ours is rendered here.
    app = FastAPI(title="rlm serve", version=__version__, lifespan=lifespan, redoc_url=None, docs_url=None,
                  dependencies=[Depends(HTTPBearer(auto_error=False))])
    _add_error_handlers(app)

    @app.get("/docs", include_in_schema=False)
    async def docs(request: Request) -> HTMLResponse:
        from rlm_runtime.serve.apidocs import render_api_page

        base = f"{request.url.scheme}://{request.url.netloc}"
        return HTMLResponse(render_api_page(app.openapi(), base), headers={
            "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
            "x-content-type-options": "nosniff"})

    async def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        with service.request():
            answer: T = utf8safe(await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs)))
        return answer

    @app.get("/api/health", summary="The server's version, its client sessions, how far search by meaning is filled, "
                                     "and its memory: what the governor allows and what is in use", responses=_errors())
    async def health(caller: CallerOf) -> dict[str, Any]:
        meaning = await anyio.to_thread.run_sync(service.meaning, caller)
        memory = await anyio.to_thread.run_sync(service.memory_report)
        return {"status": "ok", "version": __version__, "sessions": len(service.sessions), "meaning": meaning,
                "memory": memory}

    @app.get("/api/hello", summary="Proof that this is the server its record names (answered without the token)",
             responses=_errors(404, 422))
    async def hello(challenge: str = Query(..., min_length=16, max_length=128, pattern="^[A-Za-z0-9_-]+$",
                                           description="random text of the client's")) -> dict[str, Any]:
        from rlm_runtime.serve import running

        if hello_key is None:
            raise UnknownContext("this server keeps no record to prove")
        return {"proof": running.proof(hello_key, challenge)}

    # Fixed paths before /api/context/{context_id}, which would take them for ids.
    @app.get("/api/context", summary="The registered contexts", responses=_errors(400, 422))
    async def contexts_list(kind: str | None = Query(None, max_length=32, description="only this kind: file, folder, text or memory"),
                            tag: str | None = Query(None, max_length=64, description="only contexts with this tag"),
                            type: str | None = Query(None, max_length=32, description="only this type: identity, project, "
                                                     "temporal, document, memory or tool_result")) -> list[dict[str, Any]]:
        return await call(service.contexts_list, kind, tag, type)

    @app.get("/api/context/stats", summary="Access statistics of the registry and the server's sessions",
             responses=_errors())
    async def stats() -> dict[str, Any]:
        return await call(service.stats)

    @app.get("/api/context/search/all", summary="Ranked search by words and meaning across contexts and the memory store",
             responses=_READING)
    async def search(query: str = Query(..., min_length=1, description="words to look for, in plain text"),
                     k: int = Query(10, ge=1, description="how many passages"),
                     context: Annotated[list[str] | None, Query(description="limit to these contexts")] = None,
                     mode: Annotated[_Mode, Query(description=_MODE_HELP)] = None, *, caller: CallerOf) -> dict[str, Any]:
        return await call(service.search, query, k, context, mode, caller=caller)

    @app.post("/api/context/register", summary="Register a file or folder under the server's roots",
              responses=_errors(400, 403, 422))
    async def register(body: RegisterBody, caller: CallerOf) -> dict[str, Any]:
        return await call(service.context_add, body.path, body.name, body.tags, caller=caller)

    @app.get("/api/context/{context_id}", summary="A context's whole text (refused with 413 when longer than max_chars)",
             responses=_READING)
    async def load(context_id: ContextId, max_chars: int | None = Query(None, ge=1, description="refuse a longer text (413)")) -> dict[str, Any]:
        return await call(service.load, _ref(context_id), max_chars)

    @app.get("/api/context/{context_id}/info", summary="A registered context's entry and access statistics",
             responses=_READING)
    async def info(context_id: ContextId) -> dict[str, Any]:
        return await call(service.context_show, _ref(context_id))

    @app.get("/api/context/{context_id}/peek", summary="The first characters of a context", responses=_READING)
    async def peek(context_id: ContextId, chars: int = Query(2000, ge=1, description="how many characters")) -> dict[str, Any]:
        return await call(service.peek, _ref(context_id), chars)

    @app.get("/api/context/{context_id}/grep", summary="Lines matching an RE2 pattern, with their numbers", responses=_READING)
    async def grep(context_id: ContextId, pattern: str = Query(..., min_length=1, description="an RE2 regular expression"),
                   context_lines: int = Query(0, ge=0, description="lines shown around each match"),
                   max_matches: int = Query(100, ge=1, description="stop after this many matching lines"),
                   ignore_case: bool = Query(False, description="match regardless of case")) -> dict[str, Any]:
        return await call(service.grep, _ref(context_id), pattern, context_lines, max_matches, ignore_case)

    @app.get("/api/context/{context_id}/chunk/{index}", summary="One chunk of a context and where it sits", responses=_READING)
    async def chunk(context_id: ContextId, index: Annotated[int, Path(ge=0)],
                    size: int | None = Query(None, ge=1, description="units a chunk (default 200 lines, 8000 chars, 2000 tokens)"),
                    unit: Literal["lines", "chars", "tokens"] = "lines") -> dict[str, Any]:
        return await call(service.chunk, _ref(context_id), index, size, unit)

    @app.post("/api/ask", summary="Answer a question over contexts (stream: server-sent events)", response_model=None,
              responses={200: {"content": {"application/json": {}, "text/event-stream": {"schema": _ASK_EVENT}}},
                         **_errors(400, 404, 409, 422, 502, 503)})
    async def ask(body: AskBody, request: Request, caller: CallerOf) -> Any:
        client = ("rest", body.session) if body.session is not None else None
        if body.stream:
            return _Asgi(AskStream(service, body.question, body.contexts, client, caller))
        sessions: list[Any] = []
        gone = threading.Event()

        def on_session(session: Any) -> None:
            sessions.append(session)
            if gone.is_set():  # the client left while the question waited for its session
                raise Cancelled("the client left before the question began")

        def cancel() -> None:
            gone.set()
            for session in sessions:
                session.cancel()

        async def watch(scope: anyio.CancelScope) -> None:
            # A client that disconnects stops its question: the session's place is not held
            # for a reader who left (the streamed ask watches the same way).
            while not await request.is_disconnected():
                await anyio.sleep(DISCONNECT_POLL_S)
            cancel()
            scope.cancel()

        run = functools.partial(service.ask, body.question, body.contexts, client=client, on_session=on_session,
                                caller=caller)
        outcome: dict[str, Any] = {}

        async def answer(scope: anyio.CancelScope) -> None:
            try:
                outcome["result"] = await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
            except Exception as e:  # noqa: BLE001 - raised again below, outside the task group (no ExceptionGroup)
                outcome["error"] = e
            scope.cancel()

        try:
            async with anyio.create_task_group() as group:
                group.start_soon(watch, group.cancel_scope)
                group.start_soon(answer, group.cancel_scope)
        except anyio.get_cancelled_exc_class():  # the server is stopping: stop the question too
            cancel()
            raise
        if "error" in outcome:
            raise outcome["error"]
        if "result" not in outcome:  # the client left: nobody reads this
            return Response(status_code=499)
        return utf8safe(outcome["result"])

    @app.post("/api/memory/remember", summary="Store a note in the memory store", responses=_errors(400, 403, 422))
    async def remember(body: RememberBody, caller: CallerOf) -> dict[str, Any]:
        return await call(service.remember, body.text, body.tags, caller=caller)

    @app.post("/api/memory/edit", summary="Change a chunk of the memory store in place (its id, links and history kept)",
              responses=_errors(400, 403, 404, 422))
    async def memory_edit(body: EditBody, caller: CallerOf) -> dict[str, Any]:
        return await call(service.memory_edit, body.id, body.edit(), caller=caller)

    @app.get("/api/memory/search", summary="Ranked search of the memory store by words and meaning", responses=_errors(400, 422))
    async def memory_search(caller: CallerOf, query: str = Query(..., min_length=1), k: int = Query(10, ge=1),
                            mode: Annotated[_Mode, Query(description=_MODE_HELP)] = None) -> dict[str, Any]:
        return await call(service.search, query, k, [], mode, caller=caller)

    # The .html route first: {trace_id} alone would take "run-....html" whole.
    # response_class=Response: its errors are JSON (HTMLResponse would document them as text/html).
    @app.get("/api/traces/{trace_id}.html", summary="A trajectory as one HTML page", response_class=Response,
             responses={200: {"content": {"text/html": {"schema": {"type": "string"}}}}, **_errors(400, 404, 422)})
    async def trace_page(trace_id: Annotated[str, Path(max_length=64)], caller: CallerOf) -> Response:
        return _page(await call(service.trajectory, trace_id, "html", caller=caller))

    @app.get("/api/traces/{trace_id}", summary="A trajectory's events (format=html: its page)",
             responses={200: {"content": {"application/json": {}, "text/html": {"schema": {"type": "string"}}}},
                        **_errors(400, 404, 422)})
    async def trace(trace_id: Annotated[str, Path(max_length=64)], caller: CallerOf,
                    format: Literal["json", "html"] = "json") -> Response:
        text = await call(service.trajectory, trace_id, format, caller=caller)
        return _page(text) if format == "html" else Response(text, media_type="application/json")

    if mcp_app is not None:
        app.router.routes.extend(mcp_app.routes)
    app.add_middleware(BodyLimit, max_bytes=MAX_BODY_BYTES)
    app.add_middleware(Guard, token=token, hosts=hosts, tokens=tokens)  # added last: runs first
    return app


def _ref(context_id: str) -> str:
    """A path's context as a registry reference: a path segment never names a file."""
    return context_id if context_id.startswith("ctx:") else f"ctx:{context_id}"


def _page(html: str) -> Response:
    return HTMLResponse(html, headers={"content-security-policy": _PAGE_POLICY, "x-content-type-options": "nosniff"})


class _Asgi(Response):
    """A response that is an ASGI app of its own (``AskStream``), returned from an endpoint."""

    def __init__(self, app: ASGIApp) -> None:
        super().__init__()
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:  # type: ignore[override]
        await self._app(scope, receive, send)


def _mcp_app(mcp_server: Any, hosts: Collection[str]) -> Any:
    """The MCP server's streamable HTTP app (its ``/mcp`` route), accepting the same Host and Origin as the Guard."""
    from mcp.server.transport_security import TransportSecuritySettings

    security = TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=sorted(hosts),
                                         allowed_origins=sorted(f"http://{h}" for h in hosts))
    return mcp_server.streamable_http_app(streamable_http_path="/mcp", transport_security=security,
                                          max_request_body_size=MAX_BODY_BYTES)


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RLMError)
    async def refused(request: Request, error: RLMError) -> JSONResponse:
        if status_of(error) >= 500:
            log.warning("%s %s: %s: %s", request.method, request.url.path, type(error).__name__, error)
        return JSONResponse(error_body(error), status_code=status_of(error))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        problems = [_problem(p) for p in error.errors()[:_MAX_PROBLEMS]]
        first = problems[0] if problems else {"where": "request", "problem": "invalid"}
        return JSONResponse({"error": f"invalid request: {first['where']}: {first['problem']}", "status": 422,
                             "type": "RequestValidationError", "problems": problems}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"error": str(error.detail)[:_PROBLEM_CHARS], "status": error.status_code, "type": "HTTPError"},
                            status_code=error.status_code, headers=getattr(error, "headers", None))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, error: Exception) -> JSONResponse:
        # Starlette logs the traceback after this answer is sent; the client gets no detail.
        return JSONResponse(error_body(error), status_code=500)


def _problem(error: Any) -> dict[str, str]:
    """One validation problem, without the input it was about (which may be huge, or a secret)."""
    where = ".".join(str(part)[:64] for part in error.get("loc", ()))
    return {"where": where[:_PROBLEM_CHARS], "problem": str(error.get("msg", "invalid"))[:_PROBLEM_CHARS]}


class BodyLimit:
    """Refuses a request body over ``max_bytes`` (413) by its Content-Length or as it arrives.

    The body is read whole before the app sees it (it is at most ``max_bytes``), then handed
    over as one message; later ``receive`` calls reach the client (a disconnect).
    """

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(send)
            return
        parts: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left
                return
            part = bytes(message.get("body", b""))
            size += len(part)
            if size > self.max_bytes:
                await self._refuse(send)
                return
            parts.append(part)
            if not message.get("more_body", False):
                break
        handed = False

        async def replay() -> dict[str, Any]:
            nonlocal handed
            if handed:
                return dict(await receive())
            handed = True
            return {"type": "http.request", "body": b"".join(parts), "more_body": False}

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send) -> None:
        await send_json(send, 413, {"error": f"the request body is over this server's limit of {self.max_bytes:,} bytes",
                                    "status": 413, "type": "TooLarge"}, [(b"connection", b"close")])


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers") or ():
        if bytes(name).lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None

