"""The LLM client protocol, and the records every client returns.

Lifecycle: a client is built by ``rlm_runtime.llm.make_client(name)`` (through the factory
registered for the name's prefix, see ``registry.py``) and is then usable from
any thread; ``complete`` blocks until the reply is in. It raises only ``LLMError``
subclasses: ``UnknownModel``, ``MissingAPIKey``, ``ModelUnavailable`` (server unreachable or
failing after retries) and ``LLMCallError`` (anything else the provider refused).
``close()`` releases what the client started (a local server, say) and is idempotent.
A client may also have ``parallel: int``, the number of calls its server serves at once (a
local llama.cpp server's slots); the orchestrator then runs no more sub-calls together.

Cancellation: while the orchestrator waits on ``complete``, ``stop_requested()`` (read in
the calling thread) turns true when the run is cancelled; a streaming client stops reading
there and returns what it has, with ``finish_reason="cancelled"``. A client that does not
look simply finishes its call.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

Message = dict[str, str]  # {"role": "system" | "user" | "assistant", "content": "..."}

_stop: ContextVar[threading.Event | None] = ContextVar("rlm_stop_call", default=None)


@contextmanager
def stoppable(event: threading.Event) -> Iterator[None]:
    """Within the block (in this thread), ``stop_requested()`` reports ``event``."""
    token = _stop.set(event)
    try:
        yield
    finally:
        _stop.reset(token)


def stop_requested() -> bool:
    """Whether the call this thread is making should stop early (its run was cancelled)."""
    event = _stop.get()
    return event is not None and event.is_set()


@dataclass
class Usage:
    """What calls to one model cost."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, other: Usage) -> None:
        self.calls += other.calls
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cost_usd += other.cost_usd

    def to_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cost_usd": round(self.cost_usd, 6)}


@dataclass
class Completion:
    """One reply: its text, what it cost, and why generation stopped."""

    text: str
    model: str
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"
    duration_s: float = 0.0


@runtime_checkable
class LLMClient(Protocol):
    """A model that turns a list of messages into one reply."""

    model: str

    def complete(self, messages: list[Message], *, max_tokens: int | None = None,
                 stop_after_code_block: bool = False, timeout_s: float | None = None) -> Completion:
        """One completion. ``stop_after_code_block``: the client may stop generating once a
        fenced code block has closed (a small model's reply is then one block, not several)."""
        ...

    def count_tokens(self, text: str) -> int:
        """Tokens ``text`` costs this model (an estimate where no tokenizer is known). The
        built-in clients share ``rlm_runtime.llm.tokens.count_tokens``, which is memoised:
        the loop counts the whole conversation before every call."""
        ...

    def close(self) -> None:
        ...
