"""Building a context's search index is reachable by ``Session.cancel()`` and bounded by
``max_wall_s``: a huge or hostile context indexed on the host for ``search_chunks`` no longer
keeps the question running after it was cancelled or out of time."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from rlm_runtime import Session
from rlm_runtime.llm import ScriptedClient
from tests._timing import SLACK_S

from .support import code, fast

#: Blank lines after a word: the slowest shape per byte for the chunker (linear, about 2 µs a
#: byte on a shared box), so indexing it takes far longer than the bounds below.
BIG = "start\n" + "\n" * (48 << 20)


def _searching_client(call: str = "search_chunks('anything at all')") -> ScriptedClient:
    return ScriptedClient([code(f"hits = {call}\nprint(hits)"), code("FINAL('done')")])


def test_cancel_stops_an_index_build(tmp_path: Path) -> None:
    """It ends a question whose search_chunks is indexing a huge context soon after cancel()."""
    with Session(_searching_client(), limits=fast(max_wall_s=600.0), contexts=[BIG]) as s:
        timer = threading.Timer(3.0, s.cancel)
        timer.start()
        began = time.monotonic()
        result = s.ask("what is in it?")
        took = time.monotonic() - began
        timer.join()
    assert result.error_type == "Cancelled", result.error
    assert took < 3.0 + 10.0 + SLACK_S, took


@pytest.mark.parametrize("call", ["search_chunks('anything at all')", "read_chunk('c0.1')", "related('c0.1')"])
def test_max_wall_s_stops_an_index_build(tmp_path: Path, call: str) -> None:
    """It ends a question whose search_chunks (or read_chunk, or related, of a context's
    chunk: each builds the context's index first) is indexing a huge context at max_wall_s."""
    with Session(_searching_client(call), limits=fast(max_wall_s=3.0), contexts=[BIG]) as s:
        began = time.monotonic()
        result = s.ask("what is in it?")
        took = time.monotonic() - began
    assert result.answer != "done"
    assert result.error_type == "BudgetExceeded", result.error
    assert took < 3.0 + 10.0 + SLACK_S, took
