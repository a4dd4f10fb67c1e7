"""What ``rlm ask`` shows on stderr while a question runs.

Each turn's reply appears as the model writes it, a line at a time (``model_text`` live
events, joined by ``ReplyLines``), then its cells' output and how long the turn took. Before
the model's first token, which on a small machine's local model can be a minute of prompt
prefill, a terminal gets a status line that counts the seconds and names the prompt's size;
when the server reports its reading (``model_progress``, a local llama.cpp server), the line
also says how much is read (and was cached), the rate and the time left. A rate measured on an
earlier call to the same model stands in, marked ``~``, until this call's first batch is read.
A pipe gets one line saying the model was called and, when the server reported its reading,
one when it has read the prompt (tokens, seconds, rate: where a slow turn's time went). What
an assist did is said in brackets: a note after a turn's output, an answer it questioned.
Everything shown was written by the model, its cells or a document, so every line is
escaped (``termsafe``).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from rlm_runtime.cli.common import plural
from rlm_runtime.llm.base import Prefill
from rlm_runtime.termsafe import one_line, printable, printable_lines
from rlm_runtime.trajectory.live import ReplyLines, prefill_of

#: Lines of a cell's output shown (the trace has them all).
OUTPUT_LINES = 8
#: Lines of a turn's code shown when it did not stream.
CODE_LINES = 15
#: Characters of one output line shown.
LINE_CHARS = 160
#: How often the status line is redrawn.
TICK_S = 1.0


def reading(prompt_tokens: int, seconds: float, prefill: Prefill | None, since_report_s: float = 0.0,
            earlier_rate: float | None = None) -> str:
    """The status line's text (unescaped: numbers only) while the model reads its prompt.

    Args:
        prompt_tokens: the runtime's count of the prompt (the server's replaces it once reported).
        seconds: since the call began.
        prefill: the server's latest report, if any.
        since_report_s: seconds since that report (the time left counts down between reports).
        earlier_rate: tokens a second measured on an earlier call to this model.
    """
    if prefill is None:
        return f"the model is reading {prompt_tokens:,} tokens of prompt ({seconds:.0f}s)"
    cached = f", {prefill.cached:,} cached" if prefill.cached else ""
    parts = [f"{prefill.processed:,} done"]
    rate, mark = prefill.rate, ""
    if rate is None and earlier_rate:
        rate, mark = earlier_rate, "~"
    if rate:
        parts.append(f"{mark}{rate:.0f} tok/s")
        left = (prefill.total - prefill.processed) / rate - since_report_s
        if left >= 1:
            parts.append(f"~{left:.0f}s left")
    return f"reading {prefill.total:,} tokens of prompt{cached}: {', '.join(parts)} ({seconds:.0f}s)"


def read_line(prefill: Prefill) -> str:
    """The pipe's one line when the server has read the whole prompt."""
    cached = f" ({prefill.cached:,} cached)" if prefill.cached else ""
    rate = f", {prefill.rate:.0f} tok/s" if prefill.rate else ""
    return f"read {prefill.total:,} tokens of prompt{cached} in {prefill.elapsed_ms / 1000:.1f}s{rate}"


class LiveView:
    """An ``on_event`` callback that prints a run to ``stream`` as it happens. ``status``:
    draw the waiting line (default: when ``stream`` is a terminal). Call ``close()`` when
    the run is over (it stops the status line's thread). ``clock``: ``time.monotonic``
    (tests pass their own)."""

    def __init__(self, stream: TextIO | None = None, *, status: bool | None = None, tick_s: float = TICK_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.status = bool(status if status is not None else getattr(self.stream, "isatty", lambda: False)())
        self.lines = ReplyLines()
        self._lock = threading.Lock()
        self._waiting: dict[str, Any] | None = None  # the turn whose model has not written yet
        self._prefill: Prefill | None = None  # its server's latest report
        self._reported = 0.0  # when that report came
        self._rates: dict[str, float] = {}  # model -> tokens a second its last measured prefill read
        self._drawn = False  # a status line is on the screen
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._tick_s = tick_s
        self._clock = clock
        self._assisted: dict[str, list[str]] = {}  # run -> what an assist did in the turn now running
        self._cells: dict[str, dict[str, Any]] = {}  # run -> its cell now running (depth, since)

    # ------------------------------------------------------------------ output

    def _print(self, text: str) -> None:
        """One line (escaped), below a status line that is cleared first."""
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self._drawn = False
        self.stream.write(printable(text) + "\n")
        self.stream.flush()

    def _draw(self) -> None:
        waiting = self._waiting
        if waiting is None:
            self._draw_cell()
            return
        pad = "  " * int(waiting.get("depth") or 0)
        now = self._clock()
        text = reading(int(waiting.get("prompt_tokens") or 0), now - waiting["since"], self._prefill, now - self._reported,
                       self._rates.get(str(waiting.get("model"))))
        self.stream.write(f"\r\x1b[K{pad}  ... {printable(text)}")
        self.stream.flush()
        self._drawn = True

    def _draw_cell(self) -> None:
        """The status line while a cell runs (and no model is being waited on): how long."""
        if not self._cells:
            return
        cell = max(self._cells.values(), key=lambda c: c["depth"])  # the deepest: the one running now
        pad = "  " * int(cell["depth"])
        self.stream.write(f"\r\x1b[K{pad}  ... cell running {self._clock() - cell['since']:.0f}s (Ctrl-C stops it)")
        self.stream.flush()
        self._drawn = True

    def _tick(self) -> None:
        while not self._stop.wait(self._tick_s):
            with self._lock:
                self._draw()

    def close(self) -> None:
        """Stop the status line (cleared) and its thread."""
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        with self._lock:
            if self._drawn:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
                self._drawn = False

    # ------------------------------------------------------------------ events

    def __call__(self, event: dict[str, Any]) -> None:
        with self._lock:
            try:
                self._event(event)
            except (BrokenPipeError, ValueError):  # stderr closed: the run goes on unseen
                pass

    def _event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        pad = "  " * int(event.get("depth") or 0)
        if kind == "model_call":
            self.lines.begin(event)
            tag = "forced answer" if event.get("forced") else f"iteration {event.get('iteration')}"
            self._print(f"{pad}--- {tag}: {event.get('model')}")
            self._waiting = {**event, "since": self._clock()}
            self._prefill = None
            if self.status:
                self._draw()
                if self._ticker is None:
                    self._ticker = threading.Thread(target=self._tick, name="rlm-live-status", daemon=True)
                    self._ticker.start()
            else:
                self._print(f"{pad}  ... sent {event.get('prompt_tokens', 0):,} tokens of prompt")
        elif kind == "model_progress":
            self._progress(event, pad)
        elif kind == "model_text":
            self._waiting = None
            for line in self.lines.feed(event):
                self._print(f"{pad}  | {line}")
        elif kind == "cell_start":
            for line in self.lines.flush(event.get("run_id")):
                self._print(f"{pad}  | {line}")
            self._cells[str(event.get("run_id"))] = {"depth": int(event.get("depth") or 0), "since": self._clock()}
            if self.status:
                self._draw()
        elif kind == "run_start" and event.get("depth"):
            self._print(f"{pad}-> rlm_query (depth {event['depth']}): {one_line(str(event.get('query')))[:80]}")
        elif kind == "iteration":
            self._iteration(event, pad)
        elif kind == "assist":  # shown after the turn's output, which its note follows
            looked = ", ".join(map(str, event.get("lookups") or []))
            self._assisted.setdefault(str(event.get("run_id")), []).append(
                f"{pad}  [assist {one_line(str(event.get('name')))}: a note to the model" + (f"; {one_line(looked)}]" if looked else "]"))
        elif kind == "answer_check":
            self._print(f"{pad}  [assist {one_line(str(event.get('name')))} {one_line(str(event.get('outcome')))} the answer "
                        f"{one_line(str(event.get('answer')))[:LINE_CHARS]!r}]")
        elif kind == "sub_call":
            self._print(f"{pad}  {event.get('kind')}: {event.get('duration_s', 0):.1f}s")
        elif kind == "run_end":
            self.lines.end(event.get("run_id"))
            self._cells.pop(str(event.get("run_id")), None)
            self._assisted.pop(str(event.get("run_id")), None)
            if not event.get("depth"):
                n = event.get("iterations")
                self._print(f"--- done: {plural(n, 'iteration') if isinstance(n, int) else f'{n} iterations'}")

    def _progress(self, event: dict[str, Any], pad: str) -> None:
        waiting = self._waiting
        if waiting is None or waiting.get("run_id") != event.get("run_id"):
            return  # a report for a turn no longer waited on (its text came first)
        prefill = self._prefill = prefill_of(event)
        self._reported = self._clock()
        if prefill.rate:
            self._rates[str(waiting.get("model"))] = prefill.rate
        if self.status:
            self._draw()
        elif prefill.done:
            self._print(f"{pad}  ... {read_line(prefill)}")

    def _iteration(self, event: dict[str, Any], pad: str) -> None:
        self._waiting = None
        self._cells.pop(str(event.get("run_id")), None)
        for line in self.lines.flush(event.get("run_id")):
            self._print(f"{pad}  | {line}")
        streamed = self.lines.streamed(event)
        if not streamed:  # a client that does not stream, or a live view that missed the turn
            tag = "forced answer" if event.get("forced") else f"iteration {event.get('iteration')}"
            self._print(f"{pad}--- {tag}")
        for code, out in zip(event.get("code_blocks", []), event.get("outputs", []), strict=False):
            if not streamed:
                for line in printable_lines(code)[:CODE_LINES]:
                    self._print(f"{pad}  > {line}")
            text = (out.get("stdout") or "") + (out.get("error") or "")
            for line in printable_lines(text)[:OUTPUT_LINES]:
                self._print(f"{pad}    {line[:LINE_CHARS]}")
            if out.get("read_as"):  # the loop took the block as an answer all the same (FINAL(Orrin))
                self._print(f"{pad}    (read as {one_line(str(out['read_as']))[:LINE_CHARS]})")
        if not event.get("code_blocks") and not streamed:
            self._print(f"{pad}  (no code) {one_line(str(event.get('response', '')))[:LINE_CHARS]}")
        self._print(f"{pad}  ({event.get('duration_s', 0):.1f}s)")
        for line in self._assisted.pop(str(event.get("run_id")), []):
            self._print(line)
