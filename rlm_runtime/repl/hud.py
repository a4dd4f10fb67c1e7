"""The HUD: what the REPL's bottom toolbar shows, kept up to date from a session's events.

``Hud.on_event`` runs on whichever thread emitted the event (the question's, or a
sub-call's), once per event, so it only does arithmetic on a few counters under a lock.
Everything that costs more (the worker's RSS, the machine's free memory) is read when
the toolbar is drawn (``Hud.fragments``), which the application does at most
``REFRESH_S`` apart, and cached for ``PROBE_S``. ``bench/repl_bench.py`` measures both.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from rlm_runtime.llm.base import Prefill
from rlm_runtime.trajectory.live import prefill_of

#: A streamed piece's tokens, estimated (a stream sends about one token a piece; the turn's
#: own count replaces the estimate when it ends).
_CHARS_PER_TOKEN = 4

#: Seconds between two redraws of the toolbar while a run is in flight (at most 4 a second).
REFRESH_S = 0.25
#: Seconds a reading of the worker's RSS and of free memory is reused.
PROBE_S = 1.0

Fragments = list[tuple[str, str]]


def human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def human_count(n: float) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 10_000:
        return f"{n / 1000:.0f}k"
    if n >= 1000:
        return f"{n / 1000:.1f}k"
    return str(int(n))


def short_model(name: str, width: int = 32) -> str:
    """A model name that fits the toolbar: a script's file name, or the name cut in the middle."""
    prefix, sep, rest = name.partition(":")
    if sep and "/" in rest and prefix == "scripted":
        name = f"{prefix}:{rest.rsplit('/', 1)[-1]}"
    return name if len(name) <= width else name[: width // 2 - 1] + "..." + name[-(width // 2 - 2):]


def _free_memory() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:  # no psutil figure on this platform: show none
        return None


class Hud:
    """The gauges of the run in flight (and of the session between runs).

    Args:
        model: the root model's name (``set_model`` changes it).
        worker_rss: returns the session worker's RSS in bytes, or None.
        budget: returns ``(spent_usd, cap_usd or None)`` of the session.
        totals: returns the session's totals (``SessionBudget.totals()``); when given, the
            tokens and cost shown are what was settled since the run began (a model call
            counts as soon as it returns, before its iteration's event), else the events' sums.
        in_flight: returns how many sub-calls are running now, or None if unknown.
        free_memory: returns the bytes of memory available (default: psutil's figure, the
            one ``Governor.from_system`` uses).
        clock: ``time.monotonic`` (tests pass their own).
    """

    def __init__(self, model: str, *, worker_rss: Callable[[], int | None] = lambda: None,
                 budget: Callable[[], tuple[float, float | None]] = lambda: (0.0, None),
                 in_flight: Callable[[], int | None] = lambda: None,
                 totals: Callable[[], dict[str, float]] | None = None,
                 free_memory: Callable[[], int | None] = _free_memory, clock: Callable[[], float] = time.monotonic) -> None:
        self.model = model
        self._worker_rss = worker_rss
        self._budget = budget
        self._in_flight = in_flight
        self._totals = totals
        self._at_start: dict[str, float] = {}
        self._free_memory = free_memory
        self._clock = clock
        self._lock = threading.Lock()
        self._probed_at = -PROBE_S
        self._rss: int | None = None
        self._free: int | None = None
        self.running = False
        self.label = ""  # "question" or "cell"
        self.cancelling = False
        self.started = 0.0
        self.iteration = 0  # the root run's turn under way (1-based)
        self.max_iterations = 0
        self._depths: dict[str, int] = {}
        self.depth = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost_usd = 0.0
        self.sub_calls = 0
        #: Tokens of the prompt the model is reading (prefill) before its first token, the
        #: server's latest report of that reading (a local model's), and the tokens of the
        #: reply streamed so far (until its turn's usage arrives).
        self.reading = 0
        self.prefill: Prefill | None = None
        self.streaming = 0
        self.worker_restarted = False

    # ------------------------------------------------------------------ run state

    def start(self, label: str, max_iterations: int = 0) -> None:
        """A question or a cell begins (called on the REPL's thread)."""
        with self._lock:
            self.running, self.label, self.cancelling = True, label, False
            self.started = self._clock()
            self.iteration, self.max_iterations, self.depth = 0, max_iterations, 0
            self._depths = {}
            self.input_tokens = self.output_tokens = self.sub_calls = 0
            self.reading = self.streaming = 0
            self.prefill = None
            self.cost_usd = 0.0
            self.worker_restarted = False
            self._probed_at = -PROBE_S
        self._at_start = self._read_totals() or {}

    def _read_totals(self) -> dict[str, float] | None:
        if self._totals is None:
            return None
        try:
            return self._totals()
        except Exception:  # the session is closing: fall back on the events' sums
            return None

    def usage(self) -> tuple[int, int, float]:
        """Tokens in, tokens out and dollars of the run so far."""
        now = self._read_totals()
        if now is None or not self._at_start:
            return self.input_tokens, self.output_tokens, self.cost_usd
        start = self._at_start
        return (int(now["input_tokens"] - start["input_tokens"]), int(now["output_tokens"] - start["output_tokens"]),
                float(now["cost_usd"] - start["cost_usd"]))

    def stop(self) -> None:
        with self._lock:
            self.running = False

    def elapsed(self) -> float:
        return self._clock() - self.started if self.started else 0.0

    def on_event(self, event: dict[str, Any]) -> None:
        """Fold one trajectory event into the gauges: a few additions, no I/O."""
        kind = event.get("type")
        with self._lock:
            if kind == "model_call":
                self.reading = int(event.get("prompt_tokens") or 0)
                self.prefill = None
            elif kind == "model_progress":
                if self.reading:  # else the reply has begun: a late report is stale
                    self.prefill = prefill_of(event)
                    self.reading = self.prefill.total
            elif kind == "model_text":
                self.reading = 0
                self.prefill = None
                self.streaming += max(1, len(str(event.get("text") or "")) // _CHARS_PER_TOKEN)
            elif kind == "iteration":
                if not event.get("depth"):  # the event ends a turn: the next one is under way
                    self.iteration = int(event.get("iteration") or 0) + 1
                self.reading = self.streaming = 0  # the turn's usage, counted by the model, replaces the estimate
                self.prefill = None
                self._add_usage(event.get("usage"))
                for out in event.get("outputs") or ():
                    if out.get("worker_restarted") and not event.get("depth"):
                        self.worker_restarted = True
            elif kind == "sub_call":
                self.sub_calls += 1
                self._add_usage(event.get("usage"))
            elif kind == "run_start":
                depth = int(event.get("depth") or 0)
                self._depths[str(event.get("run_id"))] = depth
                self.depth = max(self._depths.values())
                if depth == 0:
                    self.iteration = max(self.iteration, 1)
                    self.max_iterations = int((event.get("limits") or {}).get("max_iterations") or self.max_iterations)
            elif kind == "run_end":
                self._depths.pop(str(event.get("run_id")), None)
                self.depth = max(self._depths.values(), default=0)
            elif kind == "models":
                self.model = str(event.get("model") or self.model)

    def _add_usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            self.input_tokens += int(usage.get("input_tokens") or 0)
            self.output_tokens += int(usage.get("output_tokens") or 0)
            self.cost_usd += float(usage.get("cost_usd") or 0.0)

    # ------------------------------------------------------------------ drawing

    def _probe(self) -> None:
        now = self._clock()
        if now - self._probed_at < PROBE_S:
            return
        self._probed_at = now
        try:
            self._rss = self._worker_rss()
        except Exception:  # the worker is being replaced: show no figure this time
            self._rss = None
        self._free = self._free_memory()

    def fragments(self) -> Fragments:
        """The toolbar while a run is in flight, as prompt-toolkit fragments (one line)."""
        self._probe()
        tokens_in, tokens_out, cost = self.usage()
        with self._lock:
            spent, cap = self._budget()
            parts: Fragments = [("class:hud.key", " model "), ("class:hud", short_model(self.model))]
            if self.label == "question":
                its = f"{self.iteration}/{self.max_iterations}" if self.max_iterations else str(self.iteration)
                parts += [("class:hud.key", "  iter "), ("class:hud", its), ("class:hud.key", "  depth "), ("class:hud", str(self.depth))]
                flight = self._in_flight()
                parts += [("class:hud.key", "  sub-calls "),
                          ("class:hud", f"{self.sub_calls} done" + (f", {flight} running" if flight else ""))]
                parts += [("class:hud.key", "  tokens "),
                          ("class:hud", f"{human_count(tokens_in)} in / {human_count(tokens_out + self.streaming)} out")]
                if self.reading:
                    parts += [("class:hud.key", "  reading "), ("class:hud", self._reading())]
            else:
                parts += [("class:hud.key", "  running a cell")]
            left = f" (left ${max(0.0, cap - spent):.4f})" if cap is not None else ""
            parts += [("class:hud.key", "  cost "), ("class:hud", f"${cost:.4f}{left}")]
            parts += [("class:hud.key", "  "), ("class:hud", f"{self.elapsed():.1f}s")]
            parts += [("class:hud.key", "  worker "), ("class:hud", human_bytes(self._rss))]
            parts += [("class:hud.key", "  free "), ("class:hud", human_bytes(self._free))]
            hint = "  cancelling..." if self.cancelling else "  Ctrl-C cancels"
            parts += [("class:hud.hint", hint + " ")]
            return parts

    def _reading(self) -> str:
        """The prompt being read: its size, or how much of it is read (a local server's report)."""
        prefill = self.prefill
        if prefill is None:
            return f"{human_count(self.reading)}-token prompt"
        notes = [f"{human_count(prefill.cached)} cached"] if prefill.cached else []
        if prefill.rate:
            notes.append(f"{prefill.rate:.0f} tok/s")
        shown = f"{human_count(prefill.processed)}/{human_count(prefill.total)}"
        return shown + (f" ({', '.join(notes)})" if notes else "")

    def text(self) -> str:
        """The toolbar as plain text (tests, the bench)."""
        return "".join(text for _, text in self.fragments())
