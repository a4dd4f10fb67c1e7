"""The sandbox: policy check, isolated worker processes, and the host side that drives them.

Public names: ``Sandbox``, ``CellResult``, ``Policy``, ``PolicyReport``, ``Limits``,
``load_policy`` and ``check``.
"""

from rlm_runtime.sandbox.limits import Limits
from rlm_runtime.sandbox.policy import Policy, PolicyReport, check, load_policy
from rlm_runtime.sandbox.supervisor import CellResult, Sandbox

__all__ = ["CellResult", "Limits", "Policy", "PolicyReport", "Sandbox", "check", "load_policy"]
