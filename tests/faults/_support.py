"""Helpers shared by the fault tests: run a cell with a stopwatch, check the aftermath."""

from __future__ import annotations

import time

from _timing import SLACK_S as SLACK_S  # the suite's slack (tests/_timing.py), added to every time bound

from rlm_runtime.sandbox import CellResult, Sandbox

#: A variable planted before each bad cell, to tell "variables kept" from "worker restarted".
KEEP = "keep = 'still here'"


def run(sandbox: Sandbox, code: str | bytes) -> tuple[CellResult, float]:
    """Execute one cell; return its result and the wall-clock seconds the host spent."""
    start = time.monotonic()
    result = sandbox.execute(code)
    return result, time.monotonic() - start


def plant(sandbox: Sandbox) -> None:
    result = sandbox.execute(KEEP)
    assert result.ok, result


def assert_works(sandbox: Sandbox) -> None:
    """The sandbox runs a plain cell afterwards."""
    result = sandbox.execute("1+1")
    assert result.stdout == "2\n", result
    assert result.error is None, result


def assert_kept(sandbox: Sandbox) -> None:
    """The variable planted before the bad cell survived it."""
    result = sandbox.execute("keep")
    assert result.stdout == "'still here'\n", result


def assert_restarted(result: CellResult) -> None:
    """The worker was killed and replaced, and the model is told its variables are gone."""
    assert result.worker_restarted is True, result
    assert result.error is not None and "variable" in result.error and "lost" in result.error, result


def assert_aftermath(sandbox: Sandbox, result: CellResult) -> None:
    """Either the worker survived with its variables, or it was restarted and says so."""
    if result.worker_restarted:
        assert_restarted(result)
    else:
        assert_kept(sandbox)
    assert_works(sandbox)
