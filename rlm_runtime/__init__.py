"""rlm_runtime: a sandboxed recursive-language-model REPL runtime."""

from rlm_runtime.errors import RLMError
from rlm_runtime.sandbox import CellResult, Limits, Policy, PolicyReport, Sandbox, load_policy

__all__ = ["CellResult", "Limits", "Policy", "PolicyReport", "RLMError", "Sandbox", "load_policy"]
__version__ = "0.1.0"
