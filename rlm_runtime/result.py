"""What a run produced: ``RunResult``, and ``raise_for`` (its answer, or its failure raised).

The loop makes them, the session and the orchestrator hand them out; a program reads them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from rlm_runtime.errors import RLMError


@dataclass
class RunResult:
    """What a run produced. ``answer`` is None when it failed; then ``error`` says why,
    ``error_type`` names the class and ``exception`` holds it (an ``RLMError``). ``value``:
    the answer as data, when FINAL gave a list, a dict, a number or a bool."""

    answer: str | None
    usage: dict[str, dict[str, Any]] = field(default_factory=dict)
    iterations: int = 0
    max_depth_reached: int = 0
    trajectory: str | None = None
    error: str | None = None
    error_type: str | None = None
    partial: str | None = None
    duration_s: float = 0.0
    #: Seconds the contexts' probes took before the first turn (``duration_s`` holds them).
    probe_s: float = 0.0
    exception: RLMError | None = field(default=None, repr=False, compare=False)
    #: The answer as JSON data when FINAL was given a list, a dict, a number or a bool (and
    #: ``answer`` is its text): ``["INC-101", "INC-112"]`` where ``answer`` is that list's repr.
    value: Any = None

    @classmethod
    def failed(cls, error: RLMError, *, iterations: int = 0, partial: str | None = None) -> RunResult:
        partial = getattr(error, "partial", None) or partial
        return cls(None, error=str(error), error_type=type(error).__name__, partial=partial, iterations=iterations,
                   exception=error)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (without ``exception``)."""
        out = asdict(self.__class__(**{k: v for k, v in self.__dict__.items() if k != "exception"}))
        out.pop("exception", None)
        return out


def raise_for(result: RunResult) -> str:
    """The answer of ``result``, or its failure raised as the ``RLMError`` it was."""
    if result.answer is not None:
        return result.answer
    raise result.exception or RLMError(result.error or "no answer")
