"""rlm_runtime: a sandboxed recursive-language-model REPL runtime.

The public API: ``Session`` (many questions and cells over the same contexts and worker),
``RLM`` and ``retrieve`` (one question at a time), ``RunLimits`` / ``SessionLimits`` (the
budget of a question / of a session), ``Tool`` and ``tool`` (a program's own functions for the
model), ``open_context`` (handles), ``LLMClient`` and ``make_client`` (models), ``Sandbox``
with ``CellLimits`` and ``Policy`` (the isolated REPL), and the errors programs branch on,
all under ``RLMError``.
``Limits`` is the deprecated old name of ``RunLimits``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from rlm_runtime.errors import (
    BudgetExceeded,
    Cancelled,
    ConfigError,
    ContextError,
    LLMError,
    NoAnswer,
    RLMError,
    RunFailed,
    SandboxError,
    SessionBusy,
    SessionClosed,
    TooManyErrors,
)

if TYPE_CHECKING:
    from rlm_runtime._version import __version__ as __version__
    from rlm_runtime.budget import RunLimits, SessionLimits
    from rlm_runtime.context import open_context
    from rlm_runtime.llm import LLMClient, make_client
    from rlm_runtime.orchestrator import RLM, retrieve
    from rlm_runtime.result import RunResult
    from rlm_runtime.sandbox import CellLimits, CellResult, Policy, PolicyReport, Sandbox, load_policy
    from rlm_runtime.session import Session
    from rlm_runtime.tools import Tool, tool

__all__ = [
    "RLM", "BudgetExceeded", "Cancelled", "CellLimits", "CellResult", "ConfigError", "ContextError", "LLMClient", "LLMError", "NoAnswer",
    "Policy", "PolicyReport", "RLMError", "RunFailed", "RunLimits", "RunResult", "Sandbox", "SandboxError", "Session",
    "SessionBusy", "SessionClosed", "SessionLimits", "TooManyErrors", "Tool", "load_policy", "make_client", "open_context",
    "retrieve", "tool",
]

#: Where each public name lives. They are imported on first use, so that ``import
#: rlm_runtime.cli`` (every ``rlm`` command, ``rlm repl``'s start) pays only for what it uses.
_LAZY = {
    "__version__": "rlm_runtime._version",
    "RunLimits": "rlm_runtime.budget", "SessionLimits": "rlm_runtime.budget",
    "open_context": "rlm_runtime.context",
    "LLMClient": "rlm_runtime.llm", "make_client": "rlm_runtime.llm",
    "RunResult": "rlm_runtime.loop",
    "RLM": "rlm_runtime.orchestrator", "retrieve": "rlm_runtime.orchestrator",
    "CellLimits": "rlm_runtime.sandbox", "CellResult": "rlm_runtime.sandbox", "Policy": "rlm_runtime.sandbox",
    "PolicyReport": "rlm_runtime.sandbox", "Sandbox": "rlm_runtime.sandbox", "load_policy": "rlm_runtime.sandbox",
    "Session": "rlm_runtime.session",
    "Tool": "rlm_runtime.tools", "tool": "rlm_runtime.tools",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value
    if name == "Limits":
        from rlm_runtime._deprecated import renamed
        from rlm_runtime.budget import RunLimits

        return renamed("rlm_runtime.Limits", "RunLimits", RunLimits)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, "__version__"})
