"""rlm_runtime: a sandboxed recursive-language-model REPL runtime.

The public API: ``RLM`` and ``retrieve`` (answer questions over contexts), ``RunLimits`` (the
budget of a run), ``open_context`` (handles), ``Sandbox`` with ``CellLimits`` and
``Policy`` (the isolated REPL), and ``RLMError`` (the root of every error we raise).
``Limits`` is the deprecated old name of ``RunLimits``.
"""

from typing import Any

from rlm_runtime._version import __version__
from rlm_runtime.budget import RunLimits
from rlm_runtime.context import open_context
from rlm_runtime.errors import RLMError
from rlm_runtime.orchestrator import RLM, RunResult, retrieve
from rlm_runtime.sandbox import CellLimits, CellResult, Policy, PolicyReport, Sandbox, load_policy

__all__ = [
    "RLM", "CellLimits", "CellResult", "Policy", "PolicyReport", "RLMError", "RunLimits", "RunResult", "Sandbox",
    "load_policy", "open_context", "retrieve",
]



def __getattr__(name: str) -> Any:
    if name == "Limits":
        from rlm_runtime._deprecated import renamed

        return renamed("rlm_runtime.Limits", "RunLimits", RunLimits)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
