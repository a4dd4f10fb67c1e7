"""with statements: allowed; user code has no way to write its own context manager."""

from __future__ import annotations

import pytest

from rlm_runtime.sandbox import Sandbox
from rlm_runtime.sandbox.policy import Policy, check


@pytest.mark.parametrize("source", ["with x as y:\n    pass", "with x:\n    pass", "with x as (a, b):\n    pass",
                                    "with a as x, b as y:\n    pass", "with (a as x, b as y):\n    pass", "with x as y.z:\n    pass"])
def test_allows_with_statements(any_policy: Policy, source: str) -> None:
    """It allows with statements, with name, tuple, attribute and multiple targets."""
    assert check(source, any_policy).ok


@pytest.mark.parametrize("source", ["with x as _y:\n    pass", "with x as y._z:\n    pass", "with x.__enter__() as y:\n    pass"])
def test_denies_underscore_targets(any_policy: Policy, source: str) -> None:
    """It denies underscore names and attributes in a with statement."""
    assert not check(source, any_policy).ok


def test_denies_defining_a_context_manager(default: Policy) -> None:
    """It denies `__enter__` and `__exit__` in a class body, one finding each."""
    report = check("class CM:\n    def __enter__(self):\n        return 1\n    def __exit__(self, *a):\n        return False", default)
    assert [f.line for f in report.errors] == [2, 4]


def test_denies_a_non_context_manager_at_runtime(sandbox: Sandbox) -> None:
    """It denies `with 1:` at runtime with Python's own TypeError."""
    r = sandbox.execute("with 1 as x:\n    pass")
    assert r.error_type == "TypeError"
    assert "context manager" in r.error
