"""Star-args and keyword unpacking in calls, displays and assignments."""

from __future__ import annotations

import pytest

from rlm_runtime.sandbox import Sandbox
from rlm_runtime.sandbox.policy import Policy, check


@pytest.mark.parametrize("source", ["f(*a, **k)", "f(1, *a, x=2, **k)", "print(*rows, sep='')", "[*a, *b]", "{**a, **b}",
                                    "a, *b = c", "for a, *b in rows:\n    pass", "f(**{'_x': 1})"])
def test_allows_star_args(any_policy: Policy, source: str) -> None:
    """It allows star and double-star unpacking in calls, displays and targets."""
    assert check(source, any_policy).ok


@pytest.mark.parametrize("source", ["f(*_a)", "f(**_k)", "a, *_b = c", "[*o._p]"])
def test_denies_underscore_names_in_star_args(any_policy: Policy, source: str) -> None:
    """It denies underscore names under a star."""
    assert not check(source, any_policy).ok


def test_allows_star_args_at_runtime(sandbox: Sandbox) -> None:
    """It allows calls with mixed star-args and keyword unpacking."""
    r = sandbox.execute("def f(*args, **kw):\n    return (args, sorted(kw))\nf(1, *[2, 3], x=1, **{'y': 2})")
    assert r.stdout == "((1, 2, 3), ['x', 'y'])\n", r


def test_allows_starred_unpacking_at_runtime(sandbox: Sandbox) -> None:
    """It allows starred assignment and unpacking in for loops and displays."""
    r = sandbox.execute("a, *b = [1, 2, 3]\nrows = [[a for a, *rest in [(1, 2), (3, 4, 5)]]]\n(a, b, rows, [*b, *b], {**{'k': 1}})")
    assert r.stdout == "(1, [2, 3], [[1, 3]], [2, 3, 2, 3], {'k': 1})\n", r
