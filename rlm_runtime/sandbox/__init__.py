"""The sandbox: policy check, isolated worker processes, and the host side that drives them.

Public names: ``Sandbox``, ``CellResult``, ``Policy``, ``PolicyReport``, ``CellLimits``,
``load_policy`` and ``check``. ``Limits`` is the deprecated old name of ``CellLimits``.
"""

from typing import Any

from rlm_runtime.sandbox.limits import CellLimits
from rlm_runtime.sandbox.policy import Policy, PolicyReport, check, load_policy
from rlm_runtime.sandbox.supervisor import CellResult, Sandbox

__all__ = ["CellLimits", "CellResult", "Policy", "PolicyReport", "Sandbox", "check", "load_policy"]


def __getattr__(name: str) -> Any:
    if name == "Limits":
        from rlm_runtime._deprecated import renamed

        return renamed("rlm_runtime.sandbox.Limits", "CellLimits", CellLimits)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
