"""A local server's prefill reports: read from raw stream chunks, thinned, handed to the listener."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rlm_runtime.llm.base import Prefill, listening, progressed
from rlm_runtime.llm.progress import REQUEST, Reporter, parse


def _chunk(**report: object) -> dict[str, object]:
    return {"choices": [{"delta": {"content": None}}], "prompt_progress": report}


def test_it_reads_a_report_from_a_dict_or_an_sdk_object() -> None:
    """It reads llama.cpp's prompt_progress from a dict and from an object keeping unknown fields as attributes."""
    report = {"total": 5673, "cache": 0, "processed": 2048, "time_ms": 26572}
    expected = Prefill(total=5673, cached=0, processed=2048, elapsed_ms=26572)
    assert parse(_chunk(**report)) == expected
    assert parse(SimpleNamespace(prompt_progress=report)) == expected
    assert REQUEST == {"return_progress": True}


@pytest.mark.parametrize("chunk", [
    {"choices": [{"delta": {"content": "hi"}}]},                      # a chunk of text
    SimpleNamespace(choices=[]),                                      # an object without the field
    _chunk(total=0, cache=0, processed=0, time_ms=0),                 # an empty prompt tells nothing
    _chunk(total="9", cache=0, processed=1, time_ms=1),               # not numbers
    _chunk(total=True, cache=0, processed=1, time_ms=1),
    _chunk(total=-5, cache=0, processed=1, time_ms=1),
    _chunk(total=float("nan"), cache=0, processed=1, time_ms=1),
    {"prompt_progress": [1, 2, 3]},
])
def test_it_ignores_what_is_not_a_report(chunk: object) -> None:
    """It reads no report from text chunks, chunks without the field, and malformed or empty figures."""
    assert parse(chunk) is None


def test_it_clamps_figures_that_do_not_add_up() -> None:
    """It keeps processed within total and cached within processed, so a display's arithmetic holds."""
    assert parse(_chunk(total=100, cache=500, processed=300, time_ms=-1)) == Prefill(100, 100, 100, 0)


def test_the_rate_counts_only_tokens_read_and_waits_for_enough() -> None:
    """It tells tokens read a second, cached ones excluded, once a batch's worth was read."""
    assert Prefill(total=3000, cached=0, processed=1024, elapsed_ms=20_000).rate == pytest.approx(51.2)
    assert Prefill(total=3000, cached=2000, processed=2512, elapsed_ms=10_000).rate == pytest.approx(51.2)
    assert Prefill(total=5673, cached=5672, processed=5673, elapsed_ms=108).rate is None  # one token: overhead, not reading
    assert Prefill(total=3000, cached=0, processed=0, elapsed_ms=0).rate is None


def test_reports_are_thinned_but_the_first_and_last_pass() -> None:
    """It passes the first report, then at most one per interval, the last always, and nothing after it."""
    now = [0.0]
    seen: list[int] = []
    reporter = Reporter(lambda p: seen.append(p.processed), every_s=0.25, clock=lambda: now[0])
    for processed, at in ((0, 0.0), (100, 0.1), (200, 0.2), (300, 0.3), (400, 0.4), (500, 0.6), (1000, 0.61), (1000, 0.7)):
        now[0] = at
        reporter.see(_chunk(total=1000, cache=0, processed=processed, time_ms=int(at * 1000)))
        reporter.see({"choices": [{"delta": {"content": "x"}}]})  # text chunks in between change nothing
    assert seen == [0, 300, 500, 1000]


def test_reports_reach_only_a_listener_and_never_break_the_call() -> None:
    """It hands a report to the listening progress callback, to nobody outside, and drops what that callback raises."""
    got: list[Prefill] = []
    report = Prefill(10, 0, 5, 1)
    progressed(report)  # nobody listening: nothing happens
    with listening(lambda text: None, got.append):
        progressed(report)
    with listening(lambda text: None, lambda p: 1 / 0):
        progressed(report)
    with listening(lambda text: None):
        progressed(report)
    assert got == [report]
