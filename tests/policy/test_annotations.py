"""Type annotations: allowed on functions; annotated assignments are refused by RestrictedPython."""

from __future__ import annotations

import pytest

from rlm_runtime.sandbox import Sandbox
from rlm_runtime.sandbox.policy import Policy, check


def test_allows_function_annotations(any_policy: Policy) -> None:
    """It allows argument and return annotations."""
    assert check("def f(x: int, *a: str, **k: float) -> list[int]:\n    return [x]", any_policy).ok


@pytest.mark.parametrize("source", ["x: int = 1", "x: int", "d = {}\nd['k']: int = 1"])
def test_denies_annotated_assignments(any_policy: Policy, source: str) -> None:
    """It denies annotated assignments (RestrictedPython does not support AnnAssign), with a warning saying so."""
    report = check(source, any_policy)
    assert [f.message for f in report.errors] == ["AnnAssign statements are not allowed."]
    assert [w.message for w in report.warnings] == ["AnnAssign statement is not known to RestrictedPython"]


def test_allows_annotated_functions_at_runtime(sandbox: Sandbox) -> None:
    """It allows calling an annotated function."""
    assert sandbox.execute("def f(x: int) -> int:\n    return x * 2\nf(4)").stdout == "8\n"
