"""``RLM`` and ``retrieve``: one question at a time, each a one-question ``Session``.

``RLM`` holds the configuration (models, limits, policy, tools, trace) and answers one
question per ``run`` in a fresh session (a fresh worker), so runs never share variables;
use ``Session`` to keep a worker, variables and a conversation across questions.
``retrieve`` is the shortest path: a question in, the answer text out, errors raised.
The loop itself lives in ``loop.py``, the harness in ``harness.py``, the built-in tools in
``subcalls.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rlm_runtime import profiles
from rlm_runtime.budget import Governor, RunLimits
from rlm_runtime.config import Paths, paths_from_env
from rlm_runtime.context.brief import load_probe_config
from rlm_runtime.errors import SessionClosed
from rlm_runtime.harness import parse_code_blocks, prose_final
from rlm_runtime.llm import LLMClient, make_client
from rlm_runtime.loop import Event
from rlm_runtime.profiles import Profile
from rlm_runtime.result import RunResult, raise_for
from rlm_runtime.sandbox import CellLimits, Policy, load_policy
from rlm_runtime.session import Session
from rlm_runtime.tools import Tool, as_tools

__all__ = ["RLM", "RunResult", "parse_code_blocks", "prose_final", "retrieve"]


class RLM:
    """A recursive language model over contexts.

    Args:
        model: the root model (a model name string, see ``rlm_runtime.llm.make_client``, or
            a client).
        sub_model: the model of ``llm_query`` and of child RLMs (default: ``model``).
        limits: the budget of a whole run (``rlm_runtime.RunLimits``; default: ``RunLimits.for_model``
            of the model, the small-model defaults for ``local:`` models).
        policy: the sandbox policy (name, path or Policy).
        cell_limits: per-cell sandbox limits (default: the policy's).
        tools: the program's own functions the model may call (see ``rlm_runtime.tools``).
        trace: a JSONL path for trajectories, or a folder (one file per run); default
            ``$RLM_HOME/traces``; ``False`` writes none.
        on_event: called with every trajectory event as it happens (for live display).
        governor: concurrency caps (default: from this machine's memory and CPUs).
        probe: a ``ProbeConfig`` (default: ``[probe]`` of the nearest rlm.toml / pyproject.toml).
        memory: the memory store searched with the contexts (True: the default store; a
            path; a ``MemoryStore``); see ``Session``.
        remember: store each answer in the memory store.
        profile: a profile name, ``.toml`` path or ``Profile`` (see ``Session``).

    A context manager: leaving it closes the clients it made.
    """

    def __init__(self, model: str | LLMClient, sub_model: str | LLMClient | None = None, *,
                 limits: RunLimits | None = None, policy: str | Path | Policy = "default",
                 cell_limits: CellLimits | None = None, tools: Sequence[Tool | Callable[..., Any]] = (),
                 trace: str | Path | bool | None = None, on_event: Callable[[Event], None] | None = None,
                 governor: Governor | None = None, probe: Any = None, paths: Paths | None = None,
                 memory: Any = None, remember: bool = False, profile: str | Path | Profile | None = None) -> None:
        self.paths = paths or paths_from_env()
        self.profile = profile if profile is None or isinstance(profile, Profile) \
            else profiles.load_profile(profile, self.paths.brain_dirs)
        base = profiles.resolve(self.profile, RunLimits(), self.paths.brain_dirs) if self.profile else None
        options = {"temperature": base.temperature} if base is not None and base.temperature is not None else {}
        self.client = make_client(model, **options)
        if sub_model is None and base is not None and base.sub_model is not None:
            sub_model = base.sub_model
        self.sub_client = make_client(sub_model, **options) if sub_model is not None else self.client
        if limits is None:
            limits = RunLimits.for_model(self.client.model)
            if self.profile is not None:
                limits = profiles.resolve(self.profile, limits, self.paths.brain_dirs).limits
        self.limits = limits
        self.policy = load_policy(policy)
        self.cell_limits = cell_limits
        self.tools = as_tools(tools)
        self.on_event = on_event
        self.trace = trace
        # Read [probe] settings once, not once per run.
        self.probe = probe if probe is not None else load_probe_config()
        self.memory = memory
        self.remember = remember
        worker_mb = (cell_limits or self.policy.limits).memory_mb
        self.governor = governor or Governor.from_system(worker_mb=worker_mb, ceiling=self.limits.max_concurrency)
        self._closed = False

    def __enter__(self) -> RLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def session(self, contexts: Sequence[Any] = ()) -> Session:
        """A ``Session`` with this RLM's configuration (its clients stay open when it closes)."""
        if self._closed:
            raise SessionClosed("this RLM is closed")
        return Session(self.client, self.sub_client, contexts=contexts, limits=self.limits, policy=self.policy,
                       cell_limits=self.cell_limits, tools=self.tools, trace=self.trace, on_event=self.on_event,
                       governor=self.governor, probe=self.probe, paths=self.paths, memory=self.memory,
                       remember=self.remember, profile=self.profile)

    def run(self, query: str, context: Any = None, *, contexts: list[Any] | None = None) -> RunResult:
        """Answer ``query`` over ``context`` (one source) or ``contexts`` (several)."""
        sources = ([context] if context is not None else []) + list(contexts or [])
        with self.session(sources) as session:
            return session.ask(query)

    async def arun(self, query: str, context: Any = None, *, contexts: list[Any] | None = None) -> RunResult:
        """``run`` without blocking the event loop (it runs in a worker thread)."""
        return await asyncio.to_thread(self.run, query, context, contexts=contexts)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.client.close()
        if self.sub_client is not self.client:
            self.sub_client.close()


def retrieve(query: str, context: Any = None, *, model: str | LLMClient | None = None,
             contexts: list[Any] | None = None, **options: Any) -> str:
    """Answer ``query`` over the given contexts and return the answer text.

    For programs: raises the run's failure as its ``RLMError`` class (``BudgetExceeded``
    with ``.partial``, ``NoAnswer``, ``TooManyErrors``, an ``LLMError``...). ``options`` go
    to ``RLM`` (sub_model, limits, policy, tools, trace, ``memory=True`` to search the memory
    store too...).
    """
    from rlm_runtime.config import default_model

    with RLM(model or default_model()[0], **options) as rlm:
        return raise_for(rlm.run(query, context, contexts=contexts))
