"""Sandbox.interrupt(): a running cell stops, the worker and its variables stay; a cell that
swallows the interrupt is killed after the grace period; a stale interrupt hits nothing."""

from __future__ import annotations

import threading
import time

from rlm_runtime.sandbox import CellLimits, Sandbox
from tests._timing import SLACK_S


def _later(seconds: float, fn: object) -> threading.Timer:
    timer = threading.Timer(seconds, fn)  # type: ignore[arg-type]
    timer.start()
    return timer


def test_an_interrupted_loop_ends_and_keeps_the_variables() -> None:
    """It stops a busy loop with KeyboardInterrupt in the same worker: the variables survive."""
    with Sandbox() as sb:
        assert sb.execute("kept = 41").ok
        pid = sb._worker.pid  # type: ignore[union-attr]
        _later(0.3, sb.interrupt)
        result = sb.execute("n = 0\nwhile True:\n    n += 1")
        assert result.error_type == "KeyboardInterrupt"
        assert not result.worker_restarted
        after = sb.execute("print(kept + 1, n > 0)")
        assert after.stdout.strip() == "42 True"
        assert sb._worker.pid == pid  # type: ignore[union-attr]


def test_a_cell_that_swallows_the_interrupt_is_killed_after_the_grace() -> None:
    """It kills a cell that catches the interrupt and goes on, kill_grace_s later."""
    with Sandbox(limits=CellLimits(cell_timeout_s=30, kill_grace_s=0.5)) as sb:
        sb.execute("kept = 1")
        _later(0.3, sb.interrupt)
        began = time.monotonic()
        result = sb.execute("while True:\n    try:\n        while True:\n            pass\n"
                            "    except BaseException:\n        pass")
        took = time.monotonic() - began
        assert result.error_type == "KeyboardInterrupt" and result.worker_restarted
        assert "did not stop" in (result.error or "")
        assert took < 0.3 + 0.5 + 2 + SLACK_S  # not the 30 s timeout
        assert "NameError" in (sb.execute("print(kept)").error or "")


def test_an_interrupt_during_a_host_call_lands_when_the_call_returns() -> None:
    """It raises the interrupt after a host function returns, not inside the host call."""
    returned = threading.Event()

    def slow() -> str:
        time.sleep(0.6)
        returned.set()
        return "done"

    with Sandbox(host_functions={"slow": slow}) as sb:
        _later(0.2, sb.interrupt)
        result = sb.execute("x = slow()\nprint('after the call', x)")
        assert returned.is_set()
        assert result.error_type == "KeyboardInterrupt"
        assert "after the call" not in result.stdout
        assert not result.worker_restarted


def test_interrupt_with_no_cell_running_does_nothing() -> None:
    """It returns False between cells, and the next cell runs to its end."""
    with Sandbox() as sb:
        assert sb.interrupt() is False
        sb.execute("x = 1")
        assert sb.interrupt() is False
        result = sb.execute("n = 0\nfor i in range(200000):\n    n += i\nprint('whole')")
        assert result.ok and result.stdout.strip() == "whole"


def test_an_interrupt_that_came_too_late_does_not_hit_the_next_cell() -> None:
    """It drops an interrupt that reached the worker after its cell ended."""
    with Sandbox() as sb:
        sb.execute("x = 1")
        worker = sb._worker
        assert worker is not None
        import os
        import signal

        # As if interrupt() had raced the cell's end: the signal lands between cells.
        os.kill(worker.pid, signal.SIGUSR1)
        time.sleep(0.2)
        result = sb.execute("print(x + 1)")
        assert result.ok, result.error
        assert result.stdout.strip() == "2"


def test_an_interrupt_while_the_cell_is_on_its_way_stops_it_before_it_runs(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """It does not run a cell interrupted between its policy check and its start, and the next cell runs."""
    from rlm_runtime.sandbox import supervisor

    with Sandbox() as sb:
        sb.execute("x = 1")
        real_check = supervisor.check

        def check_then_interrupt(*args, **kwargs):  # type: ignore[no-untyped-def]
            report = real_check(*args, **kwargs)
            assert sb.interrupt() is True
            return report

        monkeypatch.setattr(supervisor, "check", check_then_interrupt)
        result = sb.execute("x = 2")
        monkeypatch.setattr(supervisor, "check", real_check)
        assert result.error_type == "KeyboardInterrupt" and "before it started" in (result.error or "")
        after = sb.execute("print(x)")
        assert after.stdout.strip() == "1"


def test_asking_again_does_not_postpone_the_kill() -> None:
    """It counts the grace period from the first interrupt, however often it is asked again."""
    with Sandbox(limits=CellLimits(cell_timeout_s=30, kill_grace_s=0.5)) as sb:
        stop = threading.Event()

        def keep_asking() -> None:
            time.sleep(0.3)
            while not stop.is_set():
                sb.interrupt()
                time.sleep(0.05)

        thread = threading.Thread(target=keep_asking)
        thread.start()
        began = time.monotonic()
        try:
            result = sb.execute("while True:\n    try:\n        while True:\n            pass\n"
                                "    except BaseException:\n        pass")
        finally:
            stop.set()
            thread.join()
        assert result.worker_restarted
        assert time.monotonic() - began < 0.3 + 0.5 + 2 + SLACK_S
