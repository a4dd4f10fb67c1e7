"""Default argument values: ordinary expressions, checked like any other code."""

from __future__ import annotations

import pytest

from rlm_runtime.sandbox import Sandbox
from rlm_runtime.sandbox.policy import Policy, check


@pytest.mark.parametrize("source", ["def f(a=1, *, b=[]):\n    pass", "def f(a=None, b=(1, 2), c={'k': 1}):\n    pass",
                                    "f = lambda a=len: a", "def f(*, key=lambda x: x):\n    pass"])
def test_allows_default_arguments(any_policy: Policy, source: str) -> None:
    """It allows constants, containers, names and lambdas as defaults."""
    assert check(source, any_policy).ok


@pytest.mark.parametrize("source", ["def f(a=_x):\n    pass", "def f(a=x.__class__):\n    pass", "f = lambda a=_y: a",
                                    "def f(*, k=o._p):\n    pass"])
def test_denies_underscore_names_in_defaults(any_policy: Policy, source: str) -> None:
    """It denies underscore names and attributes inside a default value."""
    report = check(source, any_policy)
    assert not report.ok
    assert "starts with \"_\"" in report.errors[0].message


def test_denies_exec_in_a_default(any_policy: Policy) -> None:
    """It denies `def f(a=exec('1'))`."""
    assert check("def f(a=exec('1')):\n    pass", any_policy).errors[0].message == "Exec calls are not allowed."


def test_allows_defaults_at_runtime(sandbox: Sandbox) -> None:
    """It allows positional and keyword-only defaults at runtime."""
    assert sandbox.execute("def f(a, b=2, *, c=3):\n    return a + b + c\nf(1, c=10)").stdout == "13\n"


def test_allows_a_shared_mutable_default_at_runtime(sandbox: Sandbox) -> None:
    """It allows a mutable default, shared between calls as in plain Python."""
    r = sandbox.execute("def f(a, acc=[]):\n    acc.append(a)\n    return acc\nf(1)\nf(2)")
    assert r.stdout == "[1, 2]\n", r
