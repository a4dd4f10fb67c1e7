"""Memory bombs, huge integers and deep recursion under a small memory cap."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from rlm_runtime.sandbox import Sandbox

from ._support import SLACK_S, assert_aftermath, assert_kept, assert_works, plant, run
from .conftest import GRACE_S, TIMEOUT_S

BOMBS = {
    "string repeat": "x = 'x' * 10**10",
    "list repeat": "x = [0] * 10**10",
    "bytearray": "x = bytearray(10**10)",
    "doubling loop": "s = 'x'\nwhile True:\n    s = s + s",
    "dict growth": "d = {}\nwhile True:\n    d[len(d)] = 1",
}


@pytest.mark.parametrize("code", list(BOMBS.values()), ids=list(BOMBS))
def test_memory_bomb_gives_memory_error(sb: Sandbox, code: str) -> None:
    """It turns an allocation past the cap into a MemoryError; the sandbox works afterwards."""
    plant(sb)
    result, took = run(sb, code)
    assert result.error_type == "MemoryError", result
    assert result.error is not None and "MemoryError" in result.error
    assert took < TIMEOUT_S + GRACE_S + SLACK_S
    assert_aftermath(sb, result)


def test_append_loop_gives_memory_error(sb: Sandbox) -> None:
    """It turns a list-append loop that fills the cap into a MemoryError and keeps the worker."""
    plant(sb)
    result, took = run(sb, "l = []\nwhile True:\n    l.append('x' * 100000)")
    assert result.error_type == "MemoryError", result
    assert "del" in (result.error or "")  # the message says how to get the memory back
    assert took < TIMEOUT_S + GRACE_S + SLACK_S
    # The list still fills memory until the model deletes it, as the message says.
    assert sb.execute("del l").ok
    assert_aftermath(sb, result)


@pytest.mark.slow
def test_small_int_append_loop_ends_in_bounded_time(make_sandbox: Callable[..., Sandbox]) -> None:
    """It ends a loop filling the cap with small ints within timeout + grace, and recovers.

    Depending on where the allocation fails this is a MemoryError, a worker that died
    replying, or CPython 3.11 spinning in exception_unwind (gh-132508) until the kill.
    """
    sandbox = make_sandbox(memory_mb=32, cell_timeout_s=3)
    plant(sandbox)
    result, took = run(sandbox, "l = []\nadd = l.append\nwhile True:\n    add(len(l))")
    assert result.error_type in ("MemoryError", "WorkerCrashed", "TimeoutError"), result
    assert took < 3 + GRACE_S + SLACK_S
    assert_aftermath(sandbox, result)


def test_int_to_str_digit_limit_is_a_clear_value_error(sb: Sandbox) -> None:
    """It reports str(10**100000) as a ValueError about the digit limit, worker intact."""
    plant(sb)
    result, took = run(sb, "str(10**100000)")
    assert result.error_type == "ValueError", result
    assert result.error is not None and "4300 digits" in result.error
    assert result.worker_restarted is False
    assert took < SLACK_S
    assert_kept(sb)
    assert_works(sb)


@pytest.mark.slow
def test_huge_power_of_two_is_refused_or_killed(sb: Sandbox) -> None:
    """It ends 2**(10**9) (a 125 MB int) with a MemoryError or a kill, within timeout + grace."""
    plant(sb)
    result, took = run(sb, "x = 2**(10**9)")
    assert result.error_type in ("MemoryError", "TimeoutError"), result
    assert took < TIMEOUT_S + GRACE_S + SLACK_S
    assert_aftermath(sb, result)


def test_deep_recursion_is_a_recursion_error(sb: Sandbox) -> None:
    """It reports runaway recursion as RecursionError with a short traceback; the worker lives."""
    plant(sb)
    result, took = run(sb, "def f(n):\n    return f(n + 1)\nf(0)")
    assert result.error_type == "RecursionError", result
    assert result.error is not None and "maximum recursion depth" in result.error
    assert len(result.error) < 2000, len(result.error)
    assert result.worker_restarted is False
    assert took < SLACK_S
    assert_kept(sb)
    assert_works(sb)


def test_repr_of_deeply_nested_data_is_a_recursion_error(sb: Sandbox) -> None:
    """It reports repr() of a 100000-deep list as RecursionError, and the data can be dropped."""
    plant(sb)
    result, took = run(sb, "a = []\nfor _ in range(100000):\n    a = [a]\nrepr(a)")
    assert result.error_type == "RecursionError", result
    assert result.worker_restarted is False
    assert took < SLACK_S
    for code in ("a", "SHOW_VARS()", "FINAL(a)"):
        shown = sb.execute(code)
        assert shown.error is None or "RecursionError" in shown.error, shown
    assert sb.execute("a = None").ok
    assert_kept(sb)
    assert_works(sb)
