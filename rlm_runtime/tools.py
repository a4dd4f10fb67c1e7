"""Tools: host functions the model calls from its code, and the list the prompt shows.

A tool is a plain Python callable that runs on the host. The sandboxed code calls it by
name; its arguments and its result cross the boundary as plain data (str, int, float,
bool, None, lists and dicts of them), checked on the host like every host function. Its
signature and the first paragraph of its docstring are rendered into the system prompt's
list of functions, from the same ``Tool`` that is bound in the sandbox, so the prompt and
the namespace cannot drift apart.

The built-ins use the same mechanism: ``llm_query``, ``llm_query_batched`` and
``rlm_query`` are ``Tool``s the loop builds per run (see ``subcalls.py``); their
descriptions, and those of the functions that run inside the worker (``grep``, ``peek``...),
are text files in ``brain/prompts/functions/``.

A tool may cost budget: ``calls`` model calls and ``cost_usd`` dollars per use, reserved
before it runs (refused when the run has none left) and settled after, under the name
``tool:<name>`` in the usage.

Example::

    def lookup_price(sku: str) -> float:
        \"\"\"The current price of a product, by its SKU.\"\"\"
        return PRICES[sku]

    with Session("openai/gpt-4o-mini", contexts=["orders.csv"], tools=[lookup_price]) as s:
        s.ask("What do the open orders cost at today's prices?")
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from rlm_runtime.errors import ConfigError

#: Names the runtime binds in every sandbox; a tool cannot take them.
RUNTIME_NAMES = frozenset({
    "context", "contexts", "peek", "grep", "chunk", "chunks", "records", "FINAL", "FINAL_VAR", "SHOW_VARS",
    "llm_query", "llm_query_batched", "rlm_query", "search_chunks", "read_chunk", "semantic_grep", "related",
})


@dataclass(frozen=True)
class Tool:
    """A host function the model can call.

    Args:
        name: the name in the sandbox (an identifier, not a runtime name).
        fn: the callable; receives and returns plain data.
        doc: what the prompt says it does (default: the docstring's first paragraph).
        signature: how the prompt writes its parameters (default: from ``fn``).
        calls: model calls one use counts against the run's budget.
        cost_usd: dollars one use counts against the run's budget.
    """

    name: str
    fn: Callable[..., Any]
    doc: str = ""
    signature: str = ""
    calls: int = 0
    cost_usd: float = 0.0

    @property
    def costs_budget(self) -> bool:
        return self.calls > 0 or self.cost_usd > 0

    def prompt_entry(self) -> str:
        """The tool's line(s) in the prompt's list of functions."""
        lines = (self.doc or "(no description)").strip().splitlines()
        text = "\n  ".join(line.strip() for line in lines if line.strip())
        return f"- {self.name}{self.signature}: {text}"


def tool(fn: Callable[..., Any] | None = None, *, name: str | None = None, doc: str | None = None,
         calls: int = 0, cost_usd: float = 0.0) -> Any:
    """Make ``fn`` a ``Tool``; usable bare (``@tool``) or with options (``@tool(calls=1)``)."""

    def make(f: Callable[..., Any]) -> Tool:
        return as_tool(f, name=name, doc=doc, calls=calls, cost_usd=cost_usd)

    return make(fn) if fn is not None else make


def as_tool(obj: Tool | Callable[..., Any], *, name: str | None = None, doc: str | None = None,
            calls: int = 0, cost_usd: float = 0.0) -> Tool:
    """A ``Tool`` from a callable (or a Tool, with the options applied), validated."""
    if isinstance(obj, Tool):
        t = obj
        changes: dict[str, Any] = {k: v for k, v in (("name", name), ("doc", doc)) if v is not None}
        if calls or cost_usd:
            changes.update(calls=calls, cost_usd=cost_usd)
        t = replace(t, **changes) if changes else t
    elif callable(obj):
        t = Tool(name=name or str(getattr(obj, "__name__", "")), fn=obj, doc=doc if doc is not None else _first_paragraph(obj),
                 signature=_signature(obj), calls=calls, cost_usd=cost_usd)
    else:
        raise ConfigError(f"a tool must be a callable or a Tool, not {type(obj).__name__}")
    if not t.signature:
        t = replace(t, signature=_signature(t.fn))
    if not t.name.isidentifier() or t.name.startswith("_"):
        raise ConfigError(f"tool name {t.name!r} is not a public Python identifier")
    if t.name in RUNTIME_NAMES:
        raise ConfigError(f"tool name {t.name!r} is a name the runtime binds itself; give the tool another name")
    if t.calls < 0 or t.cost_usd < 0:
        raise ConfigError(f"tool {t.name!r}: calls and cost_usd cannot be negative")
    return t


def as_tools(objs: Iterable[Tool | Callable[..., Any]]) -> list[Tool]:
    """Validated tools, with their names unique."""
    tools = [as_tool(o) for o in objs]
    seen: set[str] = set()
    for t in tools:
        if t.name in seen:
            raise ConfigError(f"two tools are named {t.name!r}")
        seen.add(t.name)
    return tools


def _first_paragraph(fn: Callable[..., Any]) -> str:
    doc = inspect.getdoc(fn) or ""
    return doc.split("\n\n", 1)[0].strip()


def _signature(fn: Callable[..., Any]) -> str:
    """``(a, b=1)``: parameters without annotations, as a model would call it."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return "(...)"
    parts = []
    for p in sig.parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            parts.append(f"*{p.name}")
        elif p.kind is p.VAR_KEYWORD:
            parts.append(f"**{p.name}")
        elif p.default is not p.empty:
            parts.append(f"{p.name}={p.default!r}")
        else:
            parts.append(p.name)
    return "(" + ", ".join(parts) + ")"
