"""One budget for a whole call tree, and the gate that caps concurrent calls.

The budget lives in the host, so sandboxed code cannot raise it. Every model call reserves
its worst case (the prompt's tokens and ``max_tokens`` of output) before it starts and
settles the real figures after, so calls in flight count against the limits.

``Governor`` (how many workers and calls this machine takes) lives in ``governor.py``, below
this module and below ``sandbox/`` and ``llm/``, which size themselves with it; it is
importable from here too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rlm_runtime.errors import BudgetExceeded, Cancelled
from rlm_runtime.governor import Governor
from rlm_runtime.llm.base import Usage

__all__ = ["Budget", "Governor", "RunLimits", "SessionBudget", "SessionLimits", "Slots"]


class RunLimits(BaseModel):
    """RunLimits of one run and everything it spawns (the sandbox's per-cell limits are
    ``rlm_runtime.sandbox.CellLimits``).

    Args:
        max_depth: recursion depth of ``rlm_query``; at the limit it is a plain call.
        max_iterations: model turns per RLM (then one forced "answer now" turn).
        max_llm_calls: model calls in the whole tree.
        max_input_tokens / max_output_tokens: tokens in the whole tree.
        max_cost_usd: dollars in the whole tree (None: no limit).
        max_wall_s: seconds for the whole run.
        max_consecutive_errors: cells in a row that fail before the run stops.
        max_output_tokens_per_call: ``max_tokens`` of each model call.
        sub_call_max_chars: a sub-call prompt is cut to this many characters.
        feedback_chars: cell output shown back to the model per iteration.
        max_concurrency: ceiling on concurrent sub-calls (the governor may allow fewer).
        history_chars: in a session, earlier questions and answers shown with a new question.
        inline_context_chars: a context the probe says to load whole, and no longer than
            this, is shown in the system prompt itself (0: never).
        sub_calls: whether ``llm_query``, ``llm_query_batched`` and ``rlm_query`` are offered.
            Off, the prompt does not list them and a cell that calls them gets an error
            saying they are switched off (a baseline without sub-calls, or a session that
            must not spend on them).
        assists: the small-model assists (``rlm_runtime.assist``): ``"auto"`` (the set
            measured for small models when the model is small, none otherwise),
            ``"small"`` (that set for any model), ``"none"`` (the plain loop: the model, its
            cells, FINAL, and the forced last turn as the conversation's own), or names of
            ``assist.REGISTRY`` (a list, or one comma-separated string).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_depth: int = Field(1, ge=0, le=8)
    max_iterations: int = Field(20, ge=1, le=500)
    max_llm_calls: int = Field(200, ge=1)
    max_input_tokens: int = Field(2_000_000, ge=1)
    max_output_tokens: int = Field(200_000, ge=1)
    max_cost_usd: float | None = Field(None, ge=0)
    max_wall_s: float = Field(1800.0, gt=0)
    max_consecutive_errors: int = Field(5, ge=1)
    max_output_tokens_per_call: int = Field(2048, ge=16)
    sub_call_max_chars: int = Field(100_000, ge=100)
    feedback_chars: int = Field(8000, ge=200)
    max_concurrency: int = Field(8, ge=1, le=256)
    history_chars: int = Field(3000, ge=0)
    inline_context_chars: int = Field(6000, ge=0)
    sub_calls: bool = True
    assists: str | tuple[str, ...] = "auto"

    @field_validator("assists", mode="before")
    @classmethod
    def _known_assists(cls, value: object) -> str | tuple[str, ...]:
        from rlm_runtime.assist.registry import normalize

        if value is None:
            return "none"  # what /limits makes of "none" and "off"
        if not isinstance(value, (str, list, tuple)):
            raise ValueError("assists is 'auto', 'small', 'none' or a list of assist names")
        return normalize(value)

    @classmethod
    def for_small_model(cls, **overrides: object) -> RunLimits:
        """Defaults for a small local model: short replies and short feedback keep each
        turn's prefill cheap (a 1.5B model on 2 cores reads ~55 tokens/s), and a few turns
        are all such a model uses well. Sub-calls still run concurrently: a local server
        batches them in its slots (the client says how many)."""
        base: dict[str, object] = {"max_iterations": 8, "max_depth": 0, "max_output_tokens_per_call": 400,
                                   "feedback_chars": 3000, "sub_call_max_chars": 6000,
                                   "history_chars": 1200, "inline_context_chars": 2500}
        return cls(**{**base, **{k: v for k, v in overrides.items() if v is not None}})  # type: ignore[arg-type]

    @classmethod
    def for_model(cls, model: str, **overrides: object) -> RunLimits:
        """The defaults that suit ``model`` (a model name), with ``overrides`` (None ignored):
        the small-model ones for a small model wherever it is served (an embedded ``local:``
        one, Ollama's, or any name stating a size of at most 8B, see
        ``rlm_runtime.llm.sizes.is_small_model``), the general ones otherwise."""
        from rlm_runtime.llm.sizes import is_small_model

        if is_small_model(model):
            return cls.for_small_model(**overrides)
        return cls(**{k: v for k, v in overrides.items() if v is not None})  # type: ignore[arg-type]



class SessionLimits(BaseModel):
    """Totals a whole session may use, over all its questions (None: no limit). Each
    question also has its own ``RunLimits``.

    Args:
        max_llm_calls: model calls (and budgeted tool uses) in the session.
        max_input_tokens / max_output_tokens: tokens in the session.
        max_cost_usd: dollars in the session.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_llm_calls: int | None = Field(None, ge=1)
    max_input_tokens: int | None = Field(None, ge=1)
    max_output_tokens: int | None = Field(None, ge=1)
    max_cost_usd: float | None = Field(None, ge=0)


class SessionBudget:
    """Thread-safe totals of a session, the parent of each question's ``Budget``."""

    def __init__(self, limits: SessionLimits | None = None) -> None:
        self.limits = limits or SessionLimits()
        self._lock = threading.Lock()
        self.calls = self.input_tokens = self.output_tokens = 0
        self.cost_usd = 0.0
        self.by_model: dict[str, Usage] = {}
        self._reserved = [0, 0, 0]  # calls, input tokens, output tokens

    @contextmanager
    def reserve(self, input_tokens: int, max_output: int, calls: int = 1) -> Iterator[None]:
        lim = self.limits
        with self._lock:
            rc, ri, ro = self._reserved
            if lim.max_llm_calls is not None and self.calls + rc + calls > lim.max_llm_calls:
                raise BudgetExceeded(f"the session's limit of {lim.max_llm_calls} model calls is reached", limit="session.max_llm_calls")
            if lim.max_input_tokens is not None and self.input_tokens + ri + input_tokens > lim.max_input_tokens:
                raise BudgetExceeded(f"the session's input-token limit of {lim.max_input_tokens} is reached",
                                     limit="session.max_input_tokens")
            if lim.max_output_tokens is not None and self.output_tokens + ro + max_output > lim.max_output_tokens:
                raise BudgetExceeded(f"the session's output-token limit of {lim.max_output_tokens} is reached",
                                     limit="session.max_output_tokens")
            if lim.max_cost_usd is not None and self.cost_usd >= lim.max_cost_usd:
                raise BudgetExceeded(f"the session's cost limit of ${lim.max_cost_usd:g} is reached", limit="session.max_cost_usd")
            self._reserved = [rc + calls, ri + input_tokens, ro + max_output]
        try:
            yield
        finally:
            with self._lock:
                rc, ri, ro = self._reserved
                self._reserved = [rc - calls, ri - input_tokens, ro - max_output]

    def settle(self, model: str, usage: Usage) -> None:
        with self._lock:
            self.calls += usage.calls
            self.input_tokens += usage.input_tokens
            self.output_tokens += usage.output_tokens
            self.cost_usd += usage.cost_usd
            self.by_model.setdefault(model, Usage()).add(usage)

    def usage(self) -> dict[str, dict[str, float]]:
        with self._lock:
            return {m: u.to_dict() for m, u in self.by_model.items()}

    def totals(self) -> dict[str, float]:
        with self._lock:
            return {"calls": self.calls, "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                    "cost_usd": self.cost_usd}


@dataclass
class Budget:
    """Thread-safe counters for one call tree, checked before every call. With a
    ``parent`` (the session's), every reservation and settlement counts there too."""

    limits: RunLimits
    parent: SessionBudget | None = None
    started: float = field(default_factory=time.monotonic)
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    by_model: dict[str, Usage] = field(default_factory=dict)
    max_depth_reached: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _reserved_in: int = 0
    _reserved_out: int = 0
    _reserved_calls: int = 0

    #: Set by ``cancel()``: every later check (each model call, tool and turn) raises ``Cancelled``.
    cancelled: threading.Event = field(default_factory=threading.Event, repr=False)

    def cancel(self) -> None:
        """Stop this call tree: from any thread; calls in flight end as soon as they can."""
        self.cancelled.set()

    def check_time(self) -> None:
        """Raise ``Cancelled`` after ``cancel()``, ``BudgetExceeded`` past the wall-clock limit."""
        if self.cancelled.is_set():
            raise Cancelled("the run was cancelled")
        elapsed = time.monotonic() - self.started
        if elapsed > self.limits.max_wall_s:
            raise BudgetExceeded(f"wall-clock limit of {self.limits.max_wall_s:g}s reached", limit="max_wall_s")

    def note_depth(self, depth: int) -> None:
        with self._lock:
            self.max_depth_reached = max(self.max_depth_reached, depth)

    @contextmanager
    def reserve(self, input_tokens: int, max_output: int, calls: int = 1) -> Iterator[None]:
        """Hold room for ``calls`` calls while they run; raise BudgetExceeded if there is none."""
        if self.parent is None:
            with self._reserve(input_tokens, max_output, calls):
                yield
        else:
            with self._reserve(input_tokens, max_output, calls), self.parent.reserve(input_tokens, max_output, calls):
                yield

    @contextmanager
    def _reserve(self, input_tokens: int, max_output: int, calls: int) -> Iterator[None]:
        lim = self.limits
        self.check_time()
        with self._lock:
            if self.calls + self._reserved_calls + calls > lim.max_llm_calls:
                raise BudgetExceeded(f"limit of {lim.max_llm_calls} model calls reached", limit="max_llm_calls")
            if self.input_tokens + self._reserved_in + input_tokens > lim.max_input_tokens:
                raise BudgetExceeded(f"input-token limit of {lim.max_input_tokens} reached", limit="max_input_tokens")
            if self.output_tokens + self._reserved_out + max_output > lim.max_output_tokens:
                raise BudgetExceeded(f"output-token limit of {lim.max_output_tokens} reached", limit="max_output_tokens")
            if lim.max_cost_usd is not None and self.cost_usd >= lim.max_cost_usd:
                raise BudgetExceeded(f"cost limit of ${lim.max_cost_usd:g} reached", limit="max_cost_usd")
            self._reserved_calls += calls
            self._reserved_in += input_tokens
            self._reserved_out += max_output
        try:
            yield
        finally:
            with self._lock:
                self._reserved_calls -= calls
                self._reserved_in -= input_tokens
                self._reserved_out -= max_output

    def output_tokens_left(self) -> int:
        with self._lock:
            return max(0, self.limits.max_output_tokens - self.output_tokens - self._reserved_out)

    def settle(self, model: str, usage: Usage) -> None:
        with self._lock:
            self.calls += usage.calls
            self.input_tokens += usage.input_tokens
            self.output_tokens += usage.output_tokens
            self.cost_usd += usage.cost_usd
            self.by_model.setdefault(model, Usage()).add(usage)
        if self.parent is not None:
            self.parent.settle(model, usage)

    def usage(self) -> dict[str, dict[str, float]]:
        with self._lock:
            return {m: u.to_dict() for m, u in self.by_model.items()}


# --------------------------------------------------------------------- governor

class Slots:
    """A counting gate that queues callers beyond its size (a fair semaphore)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._sem = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self.in_use = 0
        self.peak = 0

    @contextmanager
    def hold(self) -> Iterator[None]:
        self._sem.acquire()
        with self._lock:
            self.in_use += 1
            self.peak = max(self.peak, self.in_use)
        try:
            yield
        finally:
            with self._lock:
                self.in_use -= 1
            self._sem.release()


def __getattr__(name: str) -> object:
    if name == "Limits":
        from rlm_runtime._deprecated import renamed

        return renamed("rlm_runtime.budget.Limits", "RunLimits", RunLimits)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
