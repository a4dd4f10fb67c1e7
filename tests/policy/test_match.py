"""match statements: RestrictedPython does not know them, so both policies deny them."""

from __future__ import annotations

import pytest

from rlm_runtime.sandbox import Sandbox
from rlm_runtime.sandbox.policy import Policy, check

SOURCES = [
    "match x:\n    case 1:\n        pass",
    "match x:\n    case [a, *rest]:\n        pass\n    case {'k': v}:\n        pass\n    case _:\n        pass",
    "match p:\n    case Point(x=0):\n        pass",
    "y = 1\nmatch x:\n    case _y:\n        pass",
]


@pytest.mark.parametrize("source", SOURCES)
def test_denies_match_statements(any_policy: Policy, source: str) -> None:
    """It denies match statements of every pattern kind, with the line of `match`."""
    report = check(source, any_policy)
    line = 2 if source.startswith("y = 1") else 1
    assert [(f.message, f.line) for f in report.errors] == [("Match statements are not allowed.", line)]


def test_denies_match_with_a_warning_saying_why(default: Policy) -> None:
    """It denies match and warns that RestrictedPython does not know the statement."""
    report = check(SOURCES[0], default)
    assert [w.message for w in report.warnings] == ["Match statement is not known to RestrictedPython"]


def test_allows_match_as_an_ordinary_name(any_policy: Policy) -> None:
    """It allows `match` and `case` as variable names (soft keywords)."""
    assert check("match = 1\ncase = match + 1", any_policy).ok


def test_denies_match_at_runtime(sandbox: Sandbox) -> None:
    """It denies a match statement in a sandbox cell with a PolicyViolation."""
    assert sandbox.execute(SOURCES[0]).error_type == "PolicyViolation"
