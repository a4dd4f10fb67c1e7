"""rlm_runtime: a sandboxed recursive-language-model REPL runtime.

The public API: ``RLM`` and ``retrieve`` (answer questions over contexts), ``Limits`` (the
budget of a run), ``open_context`` (handles), ``Sandbox`` with ``CellLimits`` and
``Policy`` (the isolated REPL), and ``RLMError`` (the root of every error we raise).
"""

from rlm_runtime.budget import Limits
from rlm_runtime.context import open_context
from rlm_runtime.errors import RLMError
from rlm_runtime.orchestrator import RLM, RunResult, retrieve
from rlm_runtime.sandbox import CellResult, Policy, PolicyReport, Sandbox, load_policy
from rlm_runtime.sandbox import Limits as CellLimits

__all__ = [
    "RLM", "CellLimits", "CellResult", "Limits", "Policy", "PolicyReport", "RLMError", "RunResult", "Sandbox",
    "load_policy", "open_context", "retrieve",
]
__version__ = "0.1.0"
