"""The HUD: gauges folded from events, drawn on demand, cheap per event."""

from __future__ import annotations

import time

from rlm_runtime.repl.hud import Hud, human_bytes


def _hud() -> tuple[Hud, list[float]]:
    now = [100.0]
    hud = Hud("scripted:m", worker_rss=lambda: 48 * 1024 * 1024, budget=lambda: (0.25, 1.0), in_flight=lambda: 2,
              free_memory=lambda: 5 * 1024**3, clock=lambda: now[0])
    return hud, now


def test_it_folds_a_run_into_its_gauges() -> None:
    """It shows iteration/max, depth, sub-calls, tokens, cost left, elapsed, worker RSS and free memory."""
    hud, now = _hud()
    hud.start("question", 20)
    hud.on_event({"type": "run_start", "run_id": "r", "depth": 0, "limits": {"max_iterations": 12}})
    hud.on_event({"type": "iteration", "run_id": "r", "depth": 0, "iteration": 3,
                  "usage": {"input_tokens": 1500, "output_tokens": 200, "cost_usd": 0.01}})
    hud.on_event({"type": "run_start", "run_id": "c", "depth": 1})
    hud.on_event({"type": "sub_call", "run_id": "c", "depth": 1, "usage": {"input_tokens": 100, "output_tokens": 20}})
    now[0] += 4.2
    text = hud.text()
    for part in ("model scripted:m", "iter 4/12", "depth 1", "sub-calls 1 done, 2 running", "tokens 1.6k in / 220 out",
                 "cost $0.0100 (left $0.7500)", "4.2s", "worker 48.0 MB", "free 5.0 GB", "Ctrl-C cancels"):
        assert part in text
    hud.on_event({"type": "run_end", "run_id": "c", "depth": 1})
    assert "depth 0" in hud.text()


def test_it_shows_the_prompt_being_read_then_counts_tokens_as_they_stream() -> None:
    """It names the prompt's size until the first token, counts streamed tokens, and takes the turn's own count at its end."""
    hud, _ = _hud()
    hud.start("question", 20)
    hud.on_event({"type": "model_call", "run_id": "r", "depth": 0, "iteration": 1, "prompt_tokens": 3400})
    assert "reading 3.4k-token prompt" in hud.text() and "0 in / 0 out" in hud.text()
    for piece in ("```py", "thon\n", "print(", "grep('x'))"):
        hud.on_event({"type": "model_text", "run_id": "r", "depth": 0, "iteration": 1, "text": piece})
    assert "reading" not in hud.text() and "0 in / 5 out" in hud.text()  # about a token a piece, 4 characters a token
    hud.on_event({"type": "iteration", "run_id": "r", "depth": 0, "iteration": 1,
                  "usage": {"input_tokens": 3400, "output_tokens": 9, "cost_usd": 0.0}})
    assert "3.4k in / 9 out" in hud.text()


def test_it_counts_the_prompt_read_when_the_server_reports() -> None:
    """It shows how much of the prompt a local server has read, the cached part and the rate, and drops it at the first token."""
    hud, _ = _hud()
    hud.start("question", 20)
    hud.on_event({"type": "model_call", "run_id": "r", "depth": 0, "iteration": 1, "prompt_tokens": 3400})
    progress = {"type": "model_progress", "run_id": "r", "depth": 0, "iteration": 1, "total": 3412, "cached": 0}
    hud.on_event({**progress, "processed": 0, "elapsed_ms": 0})
    assert "reading 0/3.4k " in hud.text()
    hud.on_event({**progress, "processed": 1200, "elapsed_ms": 22_000})
    assert "reading 1.2k/3.4k (55 tok/s)" in hud.text()
    hud.on_event({**progress, "cached": 2900, "processed": 3412, "elapsed_ms": 9_000})
    assert "reading 3.4k/3.4k (2.9k cached, 57 tok/s)" in hud.text()
    hud.on_event({"type": "model_text", "run_id": "r", "depth": 0, "iteration": 1, "text": "x"})
    hud.on_event({**progress, "processed": 3412, "elapsed_ms": 9_000})  # late: the reply has begun
    assert "reading" not in hud.text()


def test_it_notes_a_replaced_worker_and_a_cancel() -> None:
    """It remembers that the worker was replaced, and shows that a cancel is under way."""
    hud, _ = _hud()
    hud.start("question", 5)
    hud.on_event({"type": "iteration", "depth": 0, "iteration": 1, "outputs": [{"worker_restarted": True}]})
    hud.cancelling = True
    assert hud.worker_restarted and "cancelling" in hud.text()


def test_probes_are_cached() -> None:
    """It reads the worker's RSS at most once a second, however often it is drawn."""
    calls = []
    hud = Hud("m", worker_rss=lambda: calls.append(1) or 1, free_memory=lambda: 1)
    hud.start("cell")
    for _ in range(50):
        hud.fragments()
    assert len(calls) == 1


def test_an_event_costs_microseconds() -> None:
    """It folds an iteration event in well under a millisecond."""
    hud, _ = _hud()
    hud.start("question", 20)
    event = {"type": "iteration", "run_id": "r", "depth": 0, "iteration": 1, "outputs": [{"stdout": "x" * 1000}],
             "usage": {"input_tokens": 1, "output_tokens": 1, "cost_usd": 0.0}}
    began = time.perf_counter()
    for _ in range(10_000):
        hud.on_event(event)
    assert (time.perf_counter() - began) / 10_000 < 0.0005


def test_human_bytes() -> None:
    assert human_bytes(None) == "-" and human_bytes(512) == "512 B" and human_bytes(3 * 1024**2) == "3.0 MB"
