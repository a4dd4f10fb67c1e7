"""A reply streaming in, as whole lines: what the live views (``rlm ask``, the REPL) show
while a model writes.

A turn's reply reaches ``on_event`` in pieces (``model_text`` live events, any size, a line
split anywhere); a view shows it a line at a time, so ``ReplyLines`` joins the pieces of each
run and hands back the lines they complete. A line longer than ``LONG_LINE`` characters is
handed back in parts as it grows: a model that never writes a newline cannot make the
buffer grow without bound, and the person still sees it write. It also knows whether each
run's latest turn streamed, so a view shows the code of a turn that did not (a client that
cannot stream) when the turn's ``iteration`` event arrives. ``prefill_of`` reads the
``model_progress`` live event both views show while a local model reads its prompt.
"""

from __future__ import annotations

from typing import Any

from rlm_runtime.llm.base import Prefill

#: A line held back longer than this is shown in parts.
LONG_LINE = 400


class ReplyLines:
    """The lines of the replies streaming in, per run. Not thread-safe: a view calls it
    from one thread, or under its own lock."""

    def __init__(self) -> None:
        self._held: dict[str, str] = {}
        self._streamed: set[str] = set()  # runs whose latest turn streamed

    def begin(self, event: dict[str, Any]) -> None:
        """A ``model_call``: the run's next turn begins (it has streamed nothing yet)."""
        self._streamed.discard(str(event.get("run_id")))

    def feed(self, event: dict[str, Any]) -> list[str]:
        """The lines a ``model_text`` event completes (without their line breaks)."""
        run = str(event.get("run_id"))
        self._streamed.add(run)
        text = self._held.pop(run, "") + str(event.get("text") or "")
        *lines, rest = text.split("\n")
        if len(rest) > LONG_LINE:  # cut once (a loop of rest = rest[LONG_LINE:] copied it over and over)
            parts = (len(rest) - 1) // LONG_LINE
            lines += [rest[k * LONG_LINE:(k + 1) * LONG_LINE] for k in range(parts)]
            rest = rest[parts * LONG_LINE:]
        if rest:
            self._held[run] = rest
        return lines

    def flush(self, run_id: Any) -> list[str]:
        """What is held of ``run_id``'s reply (its last line, unfinished), as a line."""
        rest = self._held.pop(str(run_id), "")
        return [rest] if rest.strip() else []

    def streamed(self, event: dict[str, Any]) -> bool:
        """Whether the turn this ``iteration`` event ends was shown as it streamed."""
        return str(event.get("run_id")) in self._streamed

    def end(self, run_id: Any) -> None:
        """The run ended: forget it."""
        self._streamed.discard(str(run_id))
        self._held.pop(str(run_id), None)


def prefill_of(event: dict[str, Any]) -> Prefill:
    """The report a ``model_progress`` live event carries."""
    total = int(event.get("total") or 0)
    processed = min(int(event.get("processed") or 0), total)
    return Prefill(total=total, cached=min(int(event.get("cached") or 0), processed), processed=processed,
                   elapsed_ms=int(event.get("elapsed_ms") or 0))
