"""How far a llama.cpp server has read a prompt, from what it streams before the first token.

Asked with ``"return_progress": true`` (``REQUEST``), llama.cpp's server (xllamacpp's, or a
``llama-server`` binary) sends chunks carrying ``prompt_progress: {total, cache, processed,
time_ms}`` before a streamed reply's first token: one when it starts reading (``processed``
equal to ``cache``, the tokens its prompt cache already held), one after each batch it reads
(``engines.PREFILL_BATCH`` tokens), and one when it has read the whole prompt. ``Reporter``
reads them from a stream's raw chunks and hands them, thinned to one per ``EVERY_S``, to
``base.progressed``; the first and the last always pass, so a display learns the prompt's
size at once and when the reading ended. A provider that sends no such field reports nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rlm_runtime.llm.base import Prefill, progressed

#: What a streamed request adds to its body to be sent the reports.
REQUEST: dict[str, Any] = {"return_progress": True}
#: Reports passed on at most this often (a fast server reads a batch in milliseconds).
EVERY_S = 0.25


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value or value < 0:
        return None
    return int(min(value, 1 << 40))


def parse(chunk: Any) -> Prefill | None:
    """The ``Prefill`` a raw stream chunk carries (an object with a ``prompt_progress``
    attribute, as the OpenAI SDK keeps unknown fields, or a dict), or None."""
    raw = chunk.get("prompt_progress") if isinstance(chunk, dict) else getattr(chunk, "prompt_progress", None)
    if not isinstance(raw, dict):
        return None
    total, cached, processed, elapsed = (_count(raw.get(k)) for k in ("total", "cache", "processed", "time_ms"))
    if total is None or processed is None or not total:
        return None
    # Clamped: a display divides and subtracts these, and the server's word is all we have.
    processed = min(processed, total)
    cached = min(cached or 0, processed)
    return Prefill(total=total, cached=cached, processed=processed, elapsed_ms=elapsed or 0)


class Reporter:
    """Reads one stream's chunks (``see``) and reports its prefill, thinned.

    Args:
        report: where a report goes (default ``base.progressed``, the listening display).
        every_s: the least time between two reports, the first and the last excepted.
        clock: ``time.monotonic`` (tests pass their own).
    """

    def __init__(self, report: Callable[[Prefill], None] = progressed, *, every_s: float = EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._report = report
        self._every_s = every_s
        self._clock = clock
        self._last: float | None = None
        self._finished = False

    def see(self, chunk: Any) -> None:
        """One raw chunk of the stream; reported if it carries progress and its turn has come."""
        if self._finished:
            return
        prefill = parse(chunk)
        if prefill is None:
            return
        now = self._clock()
        if self._last is not None and not prefill.done and now - self._last < self._every_s:
            return
        self._last = now
        self._finished = prefill.done
        self._report(prefill)
