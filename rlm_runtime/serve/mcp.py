"""The MCP server: ``Service``'s operations as tools and resources (the official SDK, ``mcp``).

Tools: ``ask``, ``peek``, ``grep``, ``chunk``, ``search``, ``remember``, ``memory_edit``,
``contexts_list``, ``context_add``. Resources: each registered context (its entry and probe, as JSON) and each
trajectory (its events as JSON, its HTML page). ``ask`` sends a progress notification at
each iteration of the root run; a client's cancellation stops the question
(``Session.cancel``). One MCP connection keeps one runtime session (its worker and
variables) between its ``ask`` calls over the same contexts; ``Service.sessions`` closes it
when idle, and every session closes with the server.

Every tool runs the service on a worker thread, so that a long question leaves the server
free to answer other requests. What a tool raises on purpose (an ``RLMError``) reaches the
client as a tool error with its message; anything else reaches it as a generic error, its
text and traceback kept in the server's log. Answers and messages reach it with lone
surrogates replaced (``utf8safe``): the SDK cannot serialize them.

Who calls: over HTTP each message carries its request, whose scope holds the caller the
``auth.Guard`` let through (``tokens.Caller``); the tools that search or write hand it to
the service (a read-only token's writes are tool errors; a token's own store is the one
searched). Over stdio there is no token: the client is the user who launched the server
(``OWNER``). A server built for HTTP (``http=True``) refuses a message without a caller.
"""

from __future__ import annotations

import functools
import json
import re
import threading
import uuid
import weakref
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

from rlm_runtime.errors import ContextError, RLMError
from rlm_runtime.memory.edits import KEEP, Edit
from rlm_runtime.serve.auth import caller_of
from rlm_runtime.serve.service import Service
from rlm_runtime.serve.tokens import OWNER, Caller
from rlm_runtime.utf8safe import utf8safe

T = TypeVar("T")
#: Registered contexts ``resources/list`` names at most (the registry is bounded; a list this
#: long is already more than a picker shows).
LISTED_CONTEXTS = 500

INSTRUCTIONS = """\
rlm answers questions over contexts too long for a prompt (large files, folders, a memory store) by
having a model write code that reads them. Find what is available with contexts_list. For a question
that needs reading across a whole context, call ask. To look yourself, use peek (the start), grep
(matching lines, RE2 syntax), chunk (one piece at a time) and search (ranked passages across contexts
and the memory store). Name a registered context as ctx:ID or by its id."""

ContextRef = Annotated[str, Field(description="a registered context as ctx:ID (or its bare id), or a path under the server's roots")]


def build_server(service: Service, *, name: str = "rlm", http: bool = False) -> Any:
    """An ``MCPServer`` over ``service`` (not started: ``run_stdio`` runs it on stdio,
    ``rest.build_app`` serves it over streamable HTTP behind the ``Guard``).

    Args:
        http: it is served over HTTP: a message that carries no caller is refused (over
            stdio, no request: the ``OWNER``).
    """
    from rlm_runtime import __version__

    # WARNING: at INFO the SDK logs every request, and over stdio its log is the user's stderr.
    server: Any = MCPServer(name, version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")

    async def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        try:
            with service.request():
                answer: T = utf8safe(await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs)))
        except RLMError as e:
            raise ToolError(utf8safe(str(e))) from e
        return answer

    async def read(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        try:
            answer: T = utf8safe(await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs)))
        except RLMError as e:
            raise ResourceError(utf8safe(str(e))) from e
        return answer

    def who(ctx: Any) -> Caller:
        try:
            return _caller(ctx, http)
        except LookupError as e:
            raise ToolError(str(e)) from e

    def reader(ctx: Any) -> Caller:
        try:
            return _caller(ctx, http)
        except LookupError as e:
            raise ResourceError(str(e)) from e

    @server.tool(description="Answer a question over one or more contexts: a model reads them with code, "
                             "in a sandbox, and returns the answer with how many iterations and tokens it took "
                             "and the id of its trajectory. Slow (seconds to minutes): prefer peek/grep for a lookup "
                             "you can do yourself.")
    async def ask(question: Annotated[str, Field(description="the question, in plain words")],
                  contexts: Annotated[list[str], Field(description="contexts to read: ctx:ID, ids, or paths under the roots")],
                  ctx: Context,
                  session: Annotated[str | None, Field(description="a name of your choosing: questions under the same name "
                                                                   "and contexts share a worker, its variables and the "
                                                                   "conversation, so a follow-up can build on an answer")]
                  = None) -> dict[str, Any]:
        return await _ask(service, question, contexts, session, ctx, who(ctx))

    @server.tool(description="The first characters of a context, and its length in characters.")
    async def peek(context: ContextRef,
                   chars: Annotated[int, Field(description="how many characters", ge=1)] = 2000) -> dict[str, Any]:
        return await call(service.peek, context, chars)

    @server.tool(description="Lines of a context matching a regular expression (RE2 syntax: no backreferences), "
                             "with their line numbers; 'complete' is false when max_matches cut the list.")
    async def grep(context: ContextRef, pattern: Annotated[str, Field(description="an RE2 regular expression")],
                   context_lines: Annotated[int, Field(description="lines shown around each match", ge=0)] = 0,
                   max_matches: Annotated[int, Field(description="stop after this many matching lines", ge=1)] = 100,
                   ignore_case: bool = False) -> dict[str, Any]:
        return await call(service.grep, context, pattern, context_lines, max_matches, ignore_case)

    @server.tool(description="One chunk of a context cut into pieces of 'size' lines, characters or tokens, with the "
                             "number of chunks ('total') and the neighbours' indexes ('prev', 'next').")
    async def chunk(context: ContextRef, index: Annotated[int, Field(description="0-based chunk number", ge=0)],
                    size: Annotated[int | None, Field(description="units a chunk (default: 200 lines, 8000 chars, "
                                                                  "2000 tokens)", ge=1)] = None,
                    unit: Annotated[str, Field(description="lines, chars or tokens")] = "lines") -> dict[str, Any]:
        return await call(service.chunk, context, index, size, unit)

    @server.tool(description="Ranked search for passages across contexts (default: every registered context) and the "
                             "memory store, by words and by meaning fused; each hit names its file and the file's lines.")
    async def search(query: Annotated[str, Field(description="words to look for, in plain text")], ctx: Context,
                     k: Annotated[int, Field(description="how many passages", ge=1)] = 10,
                     contexts: Annotated[list[str] | None, Field(description="limit to these contexts")] = None,
                     mode: Annotated[Literal["hybrid", "bm25", "vector"] | None,
                                     Field(description="hybrid (default): words and meaning; bm25: words only; "
                                                       "vector: meaning only")] = None) -> dict[str, Any]:
        return await call(service.search, query, k, contexts, mode, caller=who(ctx))

    @server.tool(description="Store a note in the memory store, where search (and the model's search_chunks) finds it later.")
    async def remember(text: Annotated[str, Field(description="the note")], ctx: Context,
                       tags: Annotated[list[str], Field(description="labels to filter by later")] = []) -> dict[str, Any]:  # noqa: B006 - the SDK reads the default for the schema
        return await call(service.remember, text, tags, caller=who(ctx))

    @server.tool(description="Change a chunk of the memory store in place: a note's text, or any chunk's kind, tags, "
                             "summary or confidence. Its id, links and statistics stay, and the version it replaces is "
                             "kept. Arguments left out stay as they are; 'clear' empties the summary or confidence.")
    async def memory_edit(id: Annotated[int, Field(description="the chunk's id (what remember answered; a search hit "
                                                                "m42 is 42)", ge=1)],
                          ctx: Context,
                          text: Annotated[str | None, Field(description="the new text (a note's only)")] = None,
                          kind: Annotated[str | None, Field(description="the new kind: decision, fact, answer...")] = None,
                          add_tags: Annotated[list[str], Field(description="tags to add")] = [],  # noqa: B006
                          remove_tags: Annotated[list[str], Field(description="tags to remove")] = [],  # noqa: B006
                          summary: Annotated[str | None, Field(description="a one-line summary shown with the chunk")] = None,
                          confidence: Annotated[float | None, Field(description="how sure the note is, 0 to 1",
                                                                    ge=0, le=1, allow_inf_nan=False, strict=True)] = None,
                          clear: Annotated[list[Literal["summary", "confidence"]],
                                           Field(description="fields to empty")] = []) -> dict[str, Any]:  # noqa: B006
        if summary is not None and "summary" in clear or confidence is not None and "confidence" in clear:
            raise ToolError("a field cannot be given and cleared at once")
        edit = Edit(text=KEEP if text is None else text, kind=KEEP if kind is None else kind, add_tags=tuple(add_tags),
                    remove_tags=tuple(remove_tags),
                    summary=None if "summary" in clear else KEEP if summary is None else summary,
                    confidence=None if "confidence" in clear else KEEP if confidence is None else confidence)
        return await call(service.memory_edit, id, edit, caller=who(ctx))

    @server.tool(description="The registered contexts: id, name, kind (file, folder, text, memory), type (identity, "
                             "project, temporal, document, memory, tool_result), size, lines, tokens, shape and how often "
                             "each was used.")
    async def contexts_list(kind: Annotated[str | None, Field(description="only this kind")] = None,
                            tag: Annotated[str | None, Field(description="only contexts with this tag")] = None,
                            type: Annotated[str | None, Field(description="only this type")] = None) -> list[dict[str, Any]]:
        return await call(service.contexts_list, kind, tag, type)

    @server.tool(description="Register a file or folder (under the server's roots) as a context; returns its entry, "
                             "whose id names it from then on (ctx:ID).")
    async def context_add(path: Annotated[str, Field(description="a file or folder under the server's roots")], ctx: Context,
                          name: Annotated[str | None, Field(description="a display name")] = None,
                          tags: Annotated[list[str], Field(description="labels")] = []) -> dict[str, Any]:  # noqa: B006
        return await call(service.context_add, path, name, tags, caller=who(ctx))

    @server.resource("rlm://context/{context_id}", name="context", mime_type="application/json",
                     description="A registered context: its entry, probe and access statistics.")
    async def context_resource(context_id: str) -> str:
        return json.dumps(await read(service.context_show, context_id), ensure_ascii=False)

    fixed_resources = server.list_resources

    async def list_resources() -> list[Any]:
        """``resources/list``: each registered context as ``rlm://context/ID`` (the first
        ``LISTED_CONTEXTS``), so an editor's resource picker shows them, after any fixed one."""
        from mcp_types import Resource

        entries = await read(service.contexts_list)
        listed = [Resource(uri=f"rlm://context/{e['id']}", name=str(e["name"]), mime_type="application/json",
                           description=f"registered context ({e['kind']}): its entry, probe and access statistics")
                  for e in entries[:LISTED_CONTEXTS]]
        return [*await fixed_resources(), *listed]

    server.list_resources = list_resources

    @server.resource("rlm://trajectory/{trace_id}.json", name="trajectory", mime_type="application/json",
                     description="A trajectory's events (every iteration, cell and sub-call of a session's questions).")
    async def trajectory_json(trace_id: str, ctx: Context) -> str:
        return await read(service.trajectory, trace_id, "json", caller=reader(ctx))

    @server.resource("rlm://trajectory/{trace_id}.html", name="trajectory page", mime_type="text/html",
                     description="A trajectory as one self-contained HTML page (summary, timeline, each iteration).")
    async def trajectory_html(trace_id: str, ctx: Context) -> str:
        return await read(service.trajectory, trace_id, "html", caller=reader(ctx))

    return server


def _caller(ctx: Any, http: bool) -> Caller:
    """Who sent this message: the caller in its HTTP request's scope (``auth.Guard`` put it
    there), or over stdio (no request) the ``OWNER``.

    Raises:
        LookupError: an HTTP request without a caller, or no request on a server built for HTTP.
    """
    request = getattr(ctx.request_context, "request", None)
    if request is None:
        if http:
            raise LookupError("this message carries no caller: it did not come through the server's Guard")
        return OWNER
    scope = getattr(request, "scope", None)
    if not isinstance(scope, dict):
        raise LookupError("this message carries no caller: its request has no scope")
    return caller_of(scope)


async def _ask(service: Service, question: str, contexts: list[str], name: str | None, ctx: Any, caller: Caller) -> dict[str, Any]:
    """Run ``service.ask`` on a thread; progress goes back to the client, a cancellation stops the run."""
    sessions: list[Any] = []
    limit = {"iterations": 0}

    def listener(event: dict[str, Any]) -> None:
        if event.get("type") == "run_start" and not event.get("depth"):
            limit["iterations"] = int((event.get("limits") or {}).get("max_iterations") or 0)
        if event.get("type") != "iteration" or event.get("depth"):
            return
        n = int(event.get("iteration") or 0)
        cells = len(event.get("code_blocks") or [])
        message = f"iteration {n}: {cells} cell{'s' if cells != 1 else ''}"
        try:
            anyio.from_thread.run(ctx.report_progress, n, limit["iterations"] or None, message)
        except Exception:  # noqa: BLE001 - a client gone or not listening does not stop the run
            pass

    try:
        key = _client_key(ctx, name)
    except RLMError as e:
        raise ToolError(str(e)) from e
    run = functools.partial(service.ask, question, contexts, client=key, listener=listener, on_session=sessions.append,
                            caller=caller)
    try:
        answer: dict[str, Any] = utf8safe(await anyio.to_thread.run_sync(run, abandon_on_cancel=True))
    except anyio.get_cancelled_exc_class():
        for session in sessions:
            session.cancel()
        raise
    except RLMError as e:
        raise ToolError(utf8safe(str(e))) from e
    return answer


#: A key for each MCP connection seen, forgotten with the connection (an ``id()`` could be
#: reused by a later connection, which would then inherit another client's variables).
_KEYS: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
_KEYS_LOCK = threading.Lock()
SESSION_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _client_key(ctx: Any, name: str | None) -> str | None:
    """The key of the client's runtime session.

    A session the client named is kept under that name. Otherwise a connection of the
    handshake protocols (stdio, or HTTP with an ``Mcp-Session-Id``) keeps one session for
    its life; the stateless protocol (2026-07-28) has no connection to keep it for, so the
    question gets a session of its own.
    """
    if name is not None:
        if not SESSION_NAME.fullmatch(name):
            raise ContextError("a session name is 1 to 64 letters, digits, '_' or '-'")
        return f"mcp:{name}"
    try:
        request = ctx.request_context
        if request.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return None
        connection = request.session._connection
    except Exception:  # noqa: BLE001 - outside a request, or an SDK without connections: a session for this call alone
        return None
    with _KEYS_LOCK:
        try:
            return _KEYS.setdefault(connection, f"mcp-{uuid.uuid4().hex}")
        except TypeError:  # not weak-referenceable
            return None


def run_stdio(service: Service) -> None:
    """Serve MCP on standard input and output until the client closes them (the SDK points
    file descriptor 1 at stderr meanwhile, so nothing the runtime prints can corrupt the
    protocol); the caller closes ``service``."""
    build_server(service).run("stdio")
