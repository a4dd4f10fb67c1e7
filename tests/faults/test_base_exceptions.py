"""BaseException subclasses raised by user code end the cell, never the worker."""

from __future__ import annotations

import pytest

from rlm_runtime.sandbox import Sandbox

from ._support import SLACK_S, assert_kept, assert_works, plant, run

RAISED = {
    "SystemExit": ("raise SystemExit(3)", "SystemExit: 3"),
    "KeyboardInterrupt": ("raise KeyboardInterrupt", "KeyboardInterrupt"),
    "GeneratorExit": ("raise GeneratorExit", "GeneratorExit"),
    "BaseException": ("raise BaseException('out')", "BaseException: out"),
    "SystemExit from a function": ("def leave():\n    raise SystemExit('bye')\nleave()", "SystemExit: bye"),
}


@pytest.mark.parametrize("code, last_line", list(RAISED.values()), ids=list(RAISED))
def test_base_exception_is_reported_and_the_worker_survives(sb: Sandbox, code: str, last_line: str) -> None:
    """It reports SystemExit, KeyboardInterrupt, GeneratorExit... as cell errors; variables are kept."""
    plant(sb)
    result, took = run(sb, code)
    name = last_line.split(":")[0]
    assert result.error_type == name, result
    assert result.error is not None and result.error.splitlines()[-1] == last_line
    assert "Traceback (your code):" in result.error and "line " in result.error
    assert result.worker_restarted is False
    assert took < SLACK_S
    assert_kept(sb)
    assert_works(sb)


def test_exit_builtins_are_not_available(sb: Sandbox) -> None:
    """It has no exit() or quit() to call."""
    result = sb.execute("exit(0)")
    assert result.error_type == "NameError", result
    assert_works(sb)
