"""Host functions that fail, stall or return what cannot cross the boundary; FINAL of odd values."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from rlm_runtime.sandbox import Sandbox

from ._support import SLACK_S, assert_kept, assert_works, plant, run


def _raises(*args: Any) -> Any:
    raise RuntimeError("the index is offline")


def _slow(x: int) -> int:
    time.sleep(1.5)
    return x * 2


def _returns(value: Any) -> Any:
    return lambda: value


def test_host_function_error_reaches_user_code(make_sandbox: Callable[..., Sandbox]) -> None:
    """It shows a failing host function as HostCallError naming the function and the cause."""
    sandbox = make_sandbox(host_functions={"search": _raises})
    plant(sandbox)
    result, took = run(sandbox, "search('x')")
    assert result.error_type == "HostCallError", result
    assert result.error is not None and "search() failed: RuntimeError: the index is offline" in result.error
    assert took < SLACK_S
    assert_kept(sandbox)
    assert_works(sandbox)


def test_host_function_error_can_be_caught(make_sandbox: Callable[..., Sandbox]) -> None:
    """It lets user code catch a host function's failure as an ordinary Exception."""
    sandbox = make_sandbox(host_functions={"search": _raises})
    result = sandbox.execute("try:\n    search('x')\nexcept Exception as e:\n    print('caught:', e)")
    assert result.stdout == "caught: search() failed: RuntimeError: the index is offline\n", result


@pytest.mark.slow
def test_time_in_a_slow_host_function_does_not_count(make_sandbox: Callable[..., Sandbox]) -> None:
    """It does not count a 1.5 s host callback against a 1 s cell timeout."""
    sandbox = make_sandbox(host_functions={"slow": _slow}, cell_timeout_s=1.0)
    plant(sandbox)
    result, took = run(sandbox, "slow(21)")
    assert result.error is None, result
    assert result.stdout == "42\n"
    assert 1.5 <= took < 1.5 + SLACK_S
    assert_kept(sandbox)
    assert_works(sandbox)


@pytest.mark.parametrize("value, fragment", [
    ({1, 2}, "contains a set"),
    (object(), "contains a object"),
    (b"bytes", "contains a bytes"),
    (10**30, "int too large"),
    ({1: "a"}, "dict key of type int"),
], ids=["set", "object", "bytes", "bigint", "int-key"])
def test_host_function_returning_non_plain_data_is_a_clear_error(make_sandbox: Callable[..., Sandbox], value: Any, fragment: str) -> None:
    """It refuses a host function's non-plain return value with HostCallError saying what is allowed."""
    sandbox = make_sandbox(host_functions={"get": _returns(value)})
    plant(sandbox)
    result, took = run(sandbox, "get()")
    assert result.error_type == "HostCallError", result
    assert result.error is not None and fragment in result.error
    assert "value returned by get()" in result.error
    assert took < SLACK_S
    assert_kept(sandbox)
    assert_works(sandbox)


def test_non_plain_arguments_are_refused_in_the_worker(make_sandbox: Callable[..., Sandbox]) -> None:
    """It refuses to send a function, a set or a deep structure to a host function."""
    sandbox = make_sandbox(host_functions={"echo": lambda x: x})
    for arg, fragment in (("echo", "contains a function"), ("{1}", "contains a set"), ("deep", "nested deeper")):
        result = sandbox.execute(f"deep = []\nfor _ in range(100):\n    deep = [deep]\necho({arg})")
        assert result.error_type == "HostCallError", result
        assert result.error is not None and fragment in result.error
    assert_works(sandbox)


def test_unregistered_names_are_plain_name_errors(sb: Sandbox) -> None:
    """It reports a call to an unregistered host function as a NameError."""
    result = sb.execute("llm_query('hi')")
    assert result.error_type == "NameError", result


@pytest.mark.parametrize("code, final", [
    ("FINAL({1, 2})", "{1, 2}"),
    ("FINAL(10**30)", str(10**30)),
    ("FINAL((1, 'a'))", [1, "a"]),
    ("FINAL({'k': {'n': [1, 2.5, None, True]}})", {"k": {"n": [1, 2.5, None, True]}}),
    ("FINAL({1: 'one'})", "{1: 'one'}"),
    ("FINAL(b'raw')", "b'raw'"),
], ids=["set", "bigint", "tuple", "nested", "int-key", "bytes"])
def test_final_of_non_plain_values_is_stringified(sb: Sandbox, code: str, final: Any) -> None:
    """It keeps plain FINAL values as they are and turns anything else into its str()."""
    result = sb.execute(code)
    assert result.error is None, result
    assert result.has_final is True
    assert result.final == final


def test_final_of_an_object_or_self_referencing_list(sb: Sandbox) -> None:
    """It stringifies FINAL(object()) and a list that contains itself."""
    result = sb.execute("FINAL(object())")
    assert isinstance(result.final, str) and result.final.startswith("<object object at ")
    result = sb.execute("a = [1]\na.append(a)\nFINAL(a)")
    assert result.final == "[1, [...]]", result
    assert_works(sb)


def test_host_function_returning_a_lone_surrogate(make_sandbox: Callable[..., Sandbox]) -> None:
    """It passes a host string holding a lone surrogate through (or refuses it clearly), in step."""
    sandbox = make_sandbox(host_functions={"get": _returns("\ud800")})
    plant(sandbox)
    result, took = run(sandbox, "get()")
    assert result.error_type in (None, "HostCallError"), result
    if result.error is None:
        assert result.stdout == "'\\ud800'\n", result
    assert took < SLACK_S
    assert_kept(sandbox)
    assert_works(sandbox)


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
def test_host_function_raising_base_exception(make_sandbox: Callable[..., Sandbox], exc: type[BaseException]) -> None:
    """It stays in step after a host function raised KeyboardInterrupt or SystemExit, and says what was lost."""
    def interrupt() -> None:
        raise exc()

    sandbox = make_sandbox(host_functions={"interrupt": interrupt})
    plant(sandbox)
    try:
        sandbox.execute("interrupt()")
    except (KeyboardInterrupt, SystemExit):
        pass  # propagating the interrupt is fine; what follows must not be out of step
    result = sandbox.execute("keep")
    if result.stdout != "'still here'\n":
        assert result.worker_restarted is True, result
        assert "lost" in (result.error or "") + " ".join(result.warnings), result
    assert_works(sandbox)
