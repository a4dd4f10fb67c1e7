"""The last-expression echo: a cell ending in an expression prints its repr, like a prompt."""

from __future__ import annotations

import pytest

from rlm_runtime.sandbox import Sandbox
from rlm_runtime.sandbox.guards import SHOW_NAME
from rlm_runtime.sandbox.policy import Policy, check


def _names(report: object) -> tuple[str, ...]:
    return report.code.co_names  # type: ignore[attr-defined]


@pytest.mark.parametrize("source", ["x = 1\nx", "x = 1; x", "1 + 1", "'text'", "f(1)"])
def test_allows_a_trailing_expression_and_echoes_it(any_policy: Policy, source: str) -> None:
    """It allows a cell ending in an expression and compiles it with the echo call."""
    report = check(source, any_policy)
    assert report.ok
    assert report.code is not None and report.compiled
    assert SHOW_NAME in _names(report)


@pytest.mark.parametrize("source", ["x = 1", "x = 1\nx\ny = 2", "if True:\n    x", "def f():\n    return 1", "x += 1", "del x", "pass"])
def test_denies_the_echo_to_a_cell_not_ending_in_an_expression(any_policy: Policy, source: str) -> None:
    """It denies the echo to a cell ending in an assignment or any other statement."""
    report = check(source, any_policy)
    assert report.ok
    assert SHOW_NAME not in _names(report)


def test_denies_user_code_the_echo_name(any_policy: Policy) -> None:
    """It denies user code from naming the echo function (it starts with an underscore)."""
    assert not check(f"{SHOW_NAME}(1)", any_policy).ok


def test_denies_a_trailing_expression_that_breaks_the_rules(any_policy: Policy) -> None:
    """It denies a trailing expression the rules refuse: the echo comes after the check."""
    report = check("x = 1\nx.__class__", any_policy)
    assert not report.ok
    assert report.code is None and report.compiled is None


def test_allows_the_echo_at_runtime(sandbox: Sandbox) -> None:
    """It allows the trailing expression's repr to be printed, once."""
    r = sandbox.execute("x = 'hi'\nx * 2")
    assert r.stdout == "'hihi'\n", r


def test_denies_an_echo_after_an_assignment_at_runtime(sandbox: Sandbox) -> None:
    """It denies any output to a cell ending in an assignment."""
    assert sandbox.execute("x = 41\ny = x + 1").stdout == ""


def test_denies_an_echo_of_none_at_runtime(sandbox: Sandbox) -> None:
    """It denies echoing None, so a trailing print() shows its text only."""
    assert sandbox.execute("print('a')").stdout == "a\n"
    assert sandbox.execute("None").stdout == ""


def test_allows_the_echo_only_at_top_level_at_runtime(sandbox: Sandbox) -> None:
    """It allows no echo from an expression inside a block."""
    assert sandbox.execute("if True:\n    42").stdout == ""
