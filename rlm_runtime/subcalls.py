"""The built-in tools of a run: ``llm_query``, ``llm_query_batched`` and ``rlm_query``,
plus the wrapper that puts a program's own tools on the budget and in the trajectory, and
the table that routes a sandbox's host functions to the run using it now (``ToolTable``).

``llm_query`` is one budgeted call to the sub-model. ``llm_query_batched`` runs many at once,
capped by the tree's slots (the governor's figure, and a local server's parallel slots).
``rlm_query`` starts a child run at depth+1 with its own worker, drawn from the same worker
pool under the same key as its ancestors; at the depth limit, or when no worker can be had
without waiting on its own ancestors, it is a plain call with the text appended.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from rlm_runtime import hostwrites, redact
from rlm_runtime.context import CorpusHandle, TextHandle, open_context
from rlm_runtime.errors import BudgetExceeded, Cancelled, HostCallError, LLMError, RLMError, WorkersBusy
from rlm_runtime.llm.base import Usage
from rlm_runtime.sandbox import Sandbox
from rlm_runtime.tools import Tool

if TYPE_CHECKING:
    from rlm_runtime.loop import Run
    from rlm_runtime.setup import Setup

#: Characters of a prompt or reply kept in a sub_call event.
EVENT_TEXT_CHARS = 4000
#: Prompts of an ``llm_query_batched`` list sent between two looks at the budget.
_BATCH_WINDOW = 256


def builtin_tools(run: Run) -> dict[str, Callable[..., Any]]:
    """The host built-ins of ``run``, by name."""

    def llm_query(prompt: str) -> str:
        """Ask the sub-model; returns its reply."""
        return sub_call(run, "llm_query", prompt)

    def llm_query_batched(prompts: list[str]) -> list[str]:
        """Ask many prompts concurrently; a failed prompt yields "[ERROR] ..." in its place."""
        if not isinstance(prompts, list) or not all(isinstance(p, str) for p in prompts):
            raise HostCallError("llm_query_batched takes a list of str")
        if not prompts:
            return []

        def one(p: str) -> str:
            try:
                return sub_call(run, "llm_query", p)
            except Cancelled:
                raise  # the question ends: no prompt after it is sent
            except BudgetExceeded as e:
                return hostwrites.host_error(f"[ERROR] budget: {e}")
            except Exception as e:  # a failed prompt's error goes into the worker: redacted and short
                return hostwrites.host_error(f"[ERROR] {type(e).__name__}: {e}")

        # A list can hold a million prompts: they go in windows, with a look at the budget
        # between two, so that cancel() stops the batch, and a spent budget answers the rest
        # at once instead of one refused call (and event) per prompt.
        replies: list[str] = []
        with ThreadPoolExecutor(max_workers=min(run.tree.slots.size, len(prompts))) as pool:
            for start in range(0, len(prompts), _BATCH_WINDOW):
                try:
                    with run.tree.budget.reserve(0, 0):  # cancelled, out of time, or no call left?
                        pass
                except BudgetExceeded as e:
                    run.budget_error = run.budget_error or e
                    refused = hostwrites.host_error(f"[ERROR] budget: {e}")
                    return replies + [refused] * (len(prompts) - start)
                replies += pool.map(one, prompts[start:start + _BATCH_WINDOW])
        return replies

    def rlm_query(prompt: str, context: Any = None) -> str:
        """A child RLM over ``context`` (str or list of str) at depth+1."""
        if not isinstance(prompt, str):
            raise HostCallError("rlm_query takes a prompt str")
        if run.depth + 1 > run.tree.setup.limits.max_depth:
            return _plain(run, prompt, context, "rlm_query (plain call at max depth)")
        handles = [] if context is None else [_child_context(context, run.tree.budget.check_time)]
        try:
            child = run.child(prompt, handles)
        except WorkersBusy as e:
            run.emit({"type": "worker_wait", "waited_s": 0.0, "pool_size": e.pool_size,
                      "detail": f"no worker for rlm_query: {e}; a plain call instead"})
            return _plain(run, prompt, context, "rlm_query (plain call: no worker free)")
        if child.answer is None:
            if child.error_type == "BudgetExceeded":
                run.budget_error = BudgetExceeded(child.error or "budget exhausted", limit="child", partial=run.partial)
            raise HostCallError(hostwrites.host_error(f"rlm_query found no answer: {child.error}"))
        return child.answer

    def search_chunks(query: str, k: int = 10, kind: str | None = None, tags: list[str] | None = None,
                      source: str | None = None, mode: str | None = None) -> list[dict[str, Any]]:
        """Ranked search over the session's contexts and memory (``mode``: hybrid, bm25, vector)."""
        search = run.tree.search
        if search is None:
            raise HostCallError("search_chunks is not available in this run")
        _in_time(run)
        began = time.monotonic()
        hits = _timed(run, lambda stop: search.search(query, k, kind, tags, source, run_id=run.run_id, stop=stop, mode=mode))
        run.emit({"type": "tool_call", "name": "search_chunks", "args": _short_repr(query), "result": f"{len(hits)} hits",
                       "error": None, "duration_s": time.monotonic() - began})
        return hits

    def semantic_grep(query: str, k: int = 10, context: int = 0) -> list[dict[str, Any]]:
        """One context's paragraphs ranked by meaning, with their line numbers."""
        search = run.tree.search
        if search is None:
            raise HostCallError("semantic_grep is not available in this run")
        _in_time(run)
        began = time.monotonic()
        hits = _timed(run, lambda stop: search.semantic_grep(query, k, context, stop=stop))
        run.emit({"type": "tool_call", "name": "semantic_grep", "args": _short_repr(query), "result": f"{len(hits)} hits",
                  "error": None, "duration_s": time.monotonic() - began})
        return hits

    def read_chunk(chunk_id: str, around: int = 0) -> str:
        """One chunk's text (and ``around`` neighbours each side)."""
        search = run.tree.search
        if search is None:
            raise HostCallError("read_chunk is not available in this run")
        _in_time(run)
        return str(_timed(run, lambda stop: search.read(chunk_id, around, stop=stop)))

    def related(chunk_id: str, k: int = 10) -> list[dict[str, Any]]:
        """The chunks linked to one, strongest link first (``ChunkSearch.related``)."""
        search = run.tree.search
        if search is None:
            raise HostCallError("related is not available in this run")
        _in_time(run)
        began = time.monotonic()
        found = _timed(run, lambda stop: search.related(chunk_id, k, stop=stop))
        run.emit({"type": "tool_call", "name": "related", "args": _short_repr(chunk_id), "result": f"{len(found)} linked",
                  "error": None, "duration_s": time.monotonic() - began})
        return found

    calls: dict[str, Callable[..., Any]] = {"llm_query": llm_query, "llm_query_batched": llm_query_batched,
                                            "rlm_query": rlm_query}
    if not run.tree.setup.limits.sub_calls:
        calls = {name: _switched_off(name) for name in calls}
    return {**calls, "search_chunks": search_chunks, "read_chunk": read_chunk, "semantic_grep": semantic_grep, "related": related}


def _switched_off(name: str) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise HostCallError(f"{name}() is switched off in this run (limits.sub_calls is false): answer with code alone")

    refuse.__name__ = name
    return refuse


def _plain(run: Run, prompt: str, context: Any, kind: str) -> str:
    text = prompt if context is None else run.tree.setup.prompts.text("sub_context", prompt=prompt, context=_as_text(context))
    return sub_call(run, kind, text)


def sub_call(run: Run, kind: str, prompt: str) -> str:
    """One budgeted call of the sub-model, recorded as a ``sub_call`` event."""
    if not isinstance(prompt, str):
        raise HostCallError(f"{kind} takes a str prompt, not {type(prompt).__name__}")
    tree = run.tree
    cap = tree.setup.limits.sub_call_max_chars
    if len(prompt) > cap:
        note = tree.setup.prompts.notes["sub_call_cut"].replace("{cut}", str(len(prompt) - cap)).replace("{limit}", str(cap))
        prompt = prompt[:cap] + "\n" + note
    client = tree.setup.sub_client
    began = time.monotonic()
    error = None
    text = None
    usage: dict[str, Any] = {}
    try:
        with tree.slots.hold():
            completion = tree.call(run, client, [{"role": "user", "content": prompt}], code=False)
        text = completion.text
        usage = completion.usage.to_dict()
        return text
    except BudgetExceeded as e:
        run.budget_error = run.budget_error or e
        error = hostwrites.host_error(str(e))
        raise HostCallError(f"budget exhausted: {error}") from e
    except LLMError as e:
        # A provider's message can quote the api_base's user:password@ or echo the key.
        error = hostwrites.host_error(str(e))
        raise HostCallError(f"{kind} failed: {error}") from e
    finally:
        run.emit({"type": "sub_call", "kind": kind,
                   "model": client.model, "prompt": prompt[:EVENT_TEXT_CHARS],
                   "response": None if text is None else text[:EVENT_TEXT_CHARS], "error": error,
                   "usage": usage if error is None else {}, "duration_s": time.monotonic() - began})


def user_tool(run: Run, tool: Tool) -> Callable[..., Any]:
    """``tool`` as a host function of ``run``: budgeted when it costs, recorded as ``tool_call``."""

    def call(*args: Any, **kwargs: Any) -> Any:
        began = time.monotonic()
        result: Any = None
        error: str | None = None
        try:
            if tool.costs_budget:
                with run.tree.budget.reserve(0, 0, calls=tool.calls):
                    result = tool.fn(*args, **kwargs)
                    run.tree.budget.settle(f"tool:{tool.name}", Usage(calls=tool.calls, cost_usd=tool.cost_usd))
            else:
                result = tool.fn(*args, **kwargs)
            return result
        except BudgetExceeded as e:
            run.budget_error = run.budget_error or e
            error = hostwrites.host_error(str(e))
            raise HostCallError(f"budget exhausted: {error}") from e
        except RLMError as e:
            # A tool's error text is the program's, of any size: redacted and cut (``hostwrites``).
            error = hostwrites.host_error(f"{type(e).__name__}: {e}")
            raise HostCallError(f"{tool.name}() failed: {hostwrites.host_error(str(e))}") from e
        except Exception as e:
            error = hostwrites.host_error(f"{type(e).__name__}: {e}")
            raise  # the sandbox's dispatcher redacts and cuts what reaches the cell
        finally:
            run.emit({"type": "tool_call", "name": tool.name, "args": _short_repr((args, kwargs)), "result": _short_repr(result),
                           "error": error, "duration_s": time.monotonic() - began})

    return call


def _short_repr(value: Any, limit: int = 300) -> str:
    try:
        text = repr(value)
    except Exception as e:  # a program's object may have a broken __repr__
        text = f"<repr failed: {type(e).__name__}>"
    return redact.redact_clipped(text, limit - 3, "...") if len(text) > limit else redact.redact(text)


def _as_text(context: Any) -> str:
    if isinstance(context, str):
        return context
    if isinstance(context, list):
        return "\n\n".join(str(c) for c in context)
    raise HostCallError(f"context must be a str or a list of str, not {type(context).__name__}")


#: Texts of an ``rlm_query`` list made into documents between two looks at the budget.
_STOP_EVERY = 1024


def _child_context(context: Any, stop: Callable[[], None]) -> Any:
    """The handle of a child run's context. A list can hold a million texts, each a document
    to make: ``stop`` (``Budget.check_time``) is called between batches, so ``cancel()`` and
    ``max_wall_s`` reach the work (``Cancelled`` ends the run)."""
    if isinstance(context, str):
        return open_context(context, as_text=True, name="sub_context")
    if isinstance(context, list) and all(isinstance(c, str) for c in context):
        docs = []
        for i, text in enumerate(context):
            if i % _STOP_EVERY == 0:
                stop()
            docs.append(TextHandle(text, name=f"doc{i}"))  # text, never a path: what open_context(as_text) makes
        stop()
        return CorpusHandle.from_items(docs)
    raise HostCallError(f"context must be a str or a list of str, not {type(context).__name__}")


T = TypeVar("T")


def _in_time(run: Any) -> None:
    """Refuse a search once the run's time is up. A cell's own clock stops while the host
    serves its calls, so a loop of quick searches would otherwise outlive ``max_wall_s``."""
    _timed(run, lambda stop: stop())


def _timed(run: Any, call: Callable[[Callable[[], None]], T]) -> T:
    """``call(stop)``, ``stop`` being the run's clock (a context's index built for the call
    checks it between files and windows): the time running out, before or during the call,
    ends it as the run's budget error, said to the cell as a failed call."""
    try:
        return call(run.tree.budget.check_time)
    except BudgetExceeded as e:
        run.budget_error = run.budget_error or e
        raise HostCallError(f"budget exhausted: {e}") from e


class ToolTable:
    """The host functions of one sandbox, re-pointed at whichever run uses it now.

    A session's sandbox outlives its runs: the names are registered once, and each call
    goes to the current run's functions."""

    def __init__(self, sandbox: Sandbox, names: Sequence[str]) -> None:
        self.current: dict[str, Callable[..., Any]] = {}
        for name in names:
            sandbox.register(name, self._caller(name))

    def _caller(self, name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            fn = self.current.get(name)
            if fn is None:
                raise HostCallError(f"{name}() works only while a question is being answered")
            return fn(*args, **kwargs)

        call.__name__ = name
        return call


BUILTINS = ("llm_query", "llm_query_batched", "rlm_query", "search_chunks", "read_chunk", "semantic_grep", "related")


def open_sandbox(setup: Setup, contexts: Sequence[Any], *, pool_key: str, on_wait: Callable[[dict[str, Any]], None] | None
                 ) -> tuple[Sandbox, ToolTable]:
    """A sandbox for runs of ``setup``, its host functions registered (not yet started)."""
    sandbox = Sandbox(setup.policy, setup.cell_limits, contexts=contexts, protect_host=setup.protect_host,
                      pool=setup.pool, pool_key=pool_key, on_wait=on_wait)
    table = ToolTable(sandbox, [*BUILTINS, *(t.name for t in setup.tools)])
    return sandbox, table
