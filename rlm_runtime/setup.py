"""``Setup``: what every question of a session uses (models, limits, policy, prompts, tools,
the governor), built once by ``Session`` and read by the loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlm_runtime.budget import RunLimits
from rlm_runtime.governor import Governor
from rlm_runtime.llm.base import LLMClient
from rlm_runtime.prompts import Prompts
from rlm_runtime.sandbox import CellLimits, Policy
from rlm_runtime.tools import Tool


@dataclass(frozen=True)
class Setup:
    """What every question of a session uses. Built once by ``Session``."""

    client: LLMClient
    sub_client: LLMClient
    limits: RunLimits
    policy: Policy
    cell_limits: CellLimits | None
    prompts: Prompts
    tools: tuple[Tool, ...]
    governor: Governor
    probe: Any = None  # a ProbeConfig, or None for the defaults
    pool: Any = None  # a sandbox WorkerPool, or None for the process's default pool
    protect_host: bool = True
    #: Appended to every system prompt (a profile's addendum and answer style).
    system_addendum: str = ""
    #: The always-on contexts' text, shown with the contexts (``registry.always``; "" for none).
    always: str = ""

    def max_concurrent_calls(self) -> int:
        """Sub-calls in flight: the governor's cap, the limit, and what the sub-model's server
        serves at once when it says (a local server's slots; more would only queue there)."""
        cap = min(self.governor.max_concurrent_calls, self.limits.max_concurrency)
        parallel = getattr(self.sub_client, "parallel", None)
        return max(1, min(cap, parallel)) if isinstance(parallel, int) and parallel > 0 else cap
