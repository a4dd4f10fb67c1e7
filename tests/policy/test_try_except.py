"""try/except: allowed; catching BaseException draws a warning (it also catches the timeout)."""

from __future__ import annotations

import pytest

from rlm_runtime.sandbox import Sandbox
from rlm_runtime.sandbox.policy import Policy, check

WARNING = ("catching BaseException does not stop the cell timeout: the worker is killed and its variables are lost; "
           "catch Exception instead")


@pytest.mark.parametrize("handler", ["except:", "except BaseException:", "except BaseException as e:", "except (BaseException):"])
def test_allows_catching_base_exception_with_a_warning(any_policy: Policy, handler: str) -> None:
    """It allows a bare except and `except BaseException`, with a warning on the handler's line."""
    report = check(f"try:\n    x = 1\n{handler}\n    pass", any_policy)
    assert report.ok
    assert [(w.message, w.line) for w in report.warnings] == [(WARNING, 3)]


@pytest.mark.parametrize("handler", ["except Exception:", "except Exception as e:", "except (ValueError, KeyError):",
                                     "except ZeroDivisionError:"])
def test_allows_catching_exception_without_a_warning(any_policy: Policy, handler: str) -> None:
    """It allows `except Exception` and narrower handlers with no warning."""
    report = check(f"try:\n    x = 1\n{handler}\n    pass", any_policy)
    assert report.ok
    assert report.warnings == ()


def test_allows_one_warning_per_handler(default: Policy) -> None:
    """It allows several broad handlers, one warning each with its own line."""
    report = check("try:\n    pass\nexcept ValueError:\n    pass\nexcept:\n    pass\n"
                   "try:\n    pass\nexcept BaseException:\n    pass", default)
    assert sorted(w.line for w in report.warnings) == [5, 9]


@pytest.mark.parametrize("handler", ["except (ValueError, BaseException):", "except (BaseException,):"])
def test_allows_a_tuple_with_base_exception_with_a_warning(any_policy: Policy, handler: str) -> None:
    """It allows a handler tuple that includes BaseException, with the same warning."""
    report = check(f"try:\n    x = 1\n{handler}\n    pass", any_policy)
    assert [(w.message, w.line) for w in report.warnings] == [(WARNING, 3)]


@pytest.mark.parametrize("source", ["try:\n    pass\nfinally:\n    pass",
                                    "try:\n    pass\nexcept ValueError:\n    pass\nelse:\n    pass\nfinally:\n    pass",
                                    "raise ValueError('x')", "try:\n    pass\nexcept ValueError as e:\n    raise KeyError() from e"])
def test_allows_finally_else_and_raise(any_policy: Policy, source: str) -> None:
    """It allows try/finally, try/except/else/finally and raise ... from."""
    assert check(source, any_policy).ok


def test_denies_except_star(any_policy: Policy) -> None:
    """It denies `except*` (RestrictedPython refuses TryStar)."""
    report = check("try:\n    pass\nexcept* ValueError:\n    pass", any_policy)
    assert report.errors[0].message == "TryStar statements are not allowed."


def test_allows_catching_at_runtime(sandbox: Sandbox) -> None:
    """It allows catching an exception and reading its message."""
    r = sandbox.execute("try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    m = str(e)\nm")
    assert r.stdout == "'division by zero'\n", r


def test_allows_the_warning_to_reach_the_cell_result(sandbox: Sandbox) -> None:
    """It allows a bare except to run, and the cell result carries the warning."""
    r = sandbox.execute("try:\n    1 / 0\nexcept:\n    caught = True\ncaught")
    assert r.ok and r.stdout == "True\n"
    assert r.warnings == [f"line 3: {WARNING}"]


def test_allows_an_uncaught_exception_to_be_reported(sandbox: Sandbox) -> None:
    """It allows raise: the cell fails with the exception type and the user's line."""
    r = sandbox.execute("x = 1\nraise ValueError('bad value')")
    assert r.error_type == "ValueError"
    assert "line 2" in r.error and "bad value" in r.error
