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
there and returns what it has, with ``finish_reason="cancelled"``; a call still waiting for
its first token is abandoned (``abandonable``) and returns empty, also ``"cancelled"``. A
client that does not look simply finishes its call.

Live text: inside ``listening(listener, progress)``, a client hands the reply's text to
``heard`` as it arrives (a streaming client piece by piece, any other once, whole), and a
client whose server reports how far it has read the prompt hands each report (a ``Prefill``)
to ``progressed`` before the first token, for a display.
"""

from __future__ import annotations

import atexit
import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

Message = dict[str, str]  # {"role": "system" | "user" | "assistant", "content": "..."}

T = TypeVar("T")

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


#: Tokens a prefill must have read before its rate is told.
RATE_MIN_TOKENS = 256


@dataclass(frozen=True)
class Prefill:
    """How far a server has read a prompt before its first token, as it reported.

    Args:
        total: the prompt's tokens (the server's own count).
        cached: those it found in its prompt cache (not read again).
        processed: those read so far, the cached ones included.
        elapsed_ms: how long it has been reading the rest.
    """

    total: int
    cached: int
    processed: int
    elapsed_ms: int

    @property
    def done(self) -> bool:
        return self.processed >= self.total

    @property
    def rate(self) -> float | None:
        """Tokens read a second, the cached ones not counted; None until ``RATE_MIN_TOKENS``
        were read (a rate over a few tokens measures the request's overhead, not reading)."""
        read = self.processed - self.cached
        if read < RATE_MIN_TOKENS or self.elapsed_ms <= 0:
            return None
        return read * 1000.0 / self.elapsed_ms


_listener: ContextVar[Callable[[str], None] | None] = ContextVar("rlm_stream_listener", default=None)
_progress: ContextVar[Callable[[Prefill], None] | None] = ContextVar("rlm_prefill_listener", default=None)


@contextmanager
def listening(listener: Callable[[str], None], progress: Callable[[Prefill], None] | None = None) -> Iterator[None]:
    """Within the block (in this thread, and in the threads ``abandonable`` starts from it),
    a client hands each piece of a reply's text to ``listener`` as it arrives (``heard``),
    and each report of its server's prefill to ``progress`` (``progressed``)."""
    token = _listener.set(listener)
    progress_token = _progress.set(progress)
    try:
        yield
    finally:
        _progress.reset(progress_token)
        _listener.reset(token)


def heard(text: str) -> None:
    """A client's piece of reply text, for whoever is ``listening`` (a display: what it
    raises is dropped, the call goes on)."""
    listener = _listener.get()
    if listener is not None and text:
        try:
            listener(text)
        except Exception:  # a display must not break a model call
            pass


def progressed(prefill: Prefill) -> None:
    """A server's report of how far it has read the prompt, for whoever is ``listening``
    (what the display raises is dropped, as for ``heard``)."""
    listener = _progress.get()
    if listener is not None:
        try:
            listener(prefill)
        except Exception:  # a display must not break a model call
            pass


#: How often a caller waiting on an abandonable call looks at its stop event.
_POLL_S = 0.05
#: Calls abandoned and maybe still running, and how long the process waits for them at exit.
_abandoned: set[threading.Thread] = set()
_abandoned_lock = threading.Lock()
EXIT_WAIT_S = 3.0


def wait_abandoned(timeout_s: float) -> bool:
    """Wait up to ``timeout_s`` for abandoned calls to end; whether none is left.

    Run at exit (after a local server is stopped, which ends its calls): a daemon thread
    that wakes while the interpreter shuts down can die holding the import lock that a
    finaliser then waits for, and the process never exits.
    """
    end = time.monotonic() + timeout_s
    with _abandoned_lock:
        threads = list(_abandoned)
    for thread in threads:
        thread.join(max(0.0, end - time.monotonic()))
    with _abandoned_lock:
        _abandoned.difference_update(t for t in threads if not t.is_alive())
        return not _abandoned


atexit.register(wait_abandoned, EXIT_WAIT_S)


def abandonable(call: Callable[[], T], on_abandon: Callable[[], T]) -> T:
    """``call()``, or ``on_abandon()`` as soon as this thread's stop event is set.

    Without a stop event (outside ``stoppable``) ``call`` runs here. With one it runs on a
    daemon thread (in a copy of this thread's context, so ``stop_requested`` still works in
    it), and the caller returns when either it ends or the stop event is set: a request that
    is still being prefilled (no token yet to stop a stream at) no longer holds the caller.
    The abandoned request finishes on its own thread, its result dropped; the server may go
    on computing it until then (a local server is stopped with the process).
    """
    event = _stop.get()
    if event is None:
        return call()
    if event.is_set():
        return on_abandon()
    box: dict[str, Any] = {}
    done = threading.Event()
    context = contextvars.copy_context()

    def work() -> None:
        try:
            box["value"] = context.run(call)
        except BaseException as e:  # handed to the caller below
            box["error"] = e
        finally:
            done.set()

    thread = threading.Thread(target=work, name="rlm-model-call", daemon=True)
    thread.start()
    while not done.wait(_POLL_S):
        if event.is_set():
            with _abandoned_lock:
                _abandoned.add(thread)
            return on_abandon()
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


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
