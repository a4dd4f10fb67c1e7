"""assert statements."""

from __future__ import annotations

import pytest

from rlm_runtime.sandbox import Sandbox
from rlm_runtime.sandbox.policy import Policy, check


@pytest.mark.parametrize("source", ["assert x", "assert x, 'message'", "assert len(y) == 3, f'got {len(y)}'"])
def test_allows_assert(any_policy: Policy, source: str) -> None:
    """It allows assert, with or without a message."""
    assert check(source, any_policy).ok


def test_denies_underscore_names_in_assert(any_policy: Policy) -> None:
    """It denies underscore names in the test or the message."""
    assert not check("assert x._y", any_policy).ok
    assert not check("assert x, _msg", any_policy).ok


def test_allows_a_failing_assert_at_runtime(sandbox: Sandbox) -> None:
    """It allows assert to run: a failure is an AssertionError with its message."""
    r = sandbox.execute("assert 1 == 2, 'nope'")
    assert r.error_type == "AssertionError"
    assert "nope" in r.error


def test_allows_a_passing_assert_at_runtime(sandbox: Sandbox) -> None:
    """It allows a passing assert (asserts are not stripped)."""
    assert sandbox.execute("assert True\nok = 1\nok").stdout == "1\n"
