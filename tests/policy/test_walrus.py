"""Assignment expressions (:=)."""

from __future__ import annotations

import pytest

from rlm_runtime.sandbox import Sandbox
from rlm_runtime.sandbox.policy import Policy, check


@pytest.mark.parametrize("source", ["if (n := 10) > 5:\n    pass", "[y := f(x) for x in data]", "[y for x in d if (y := x * 2)]",
                                    "while (line := next(it, None)) is not None:\n    pass"])
def test_allows_walrus(any_policy: Policy, source: str) -> None:
    """It allows := in conditions and comprehensions."""
    assert check(source, any_policy).ok


def test_denies_walrus_to_an_underscore_name(any_policy: Policy) -> None:
    """It denies `(_w := 3)`."""
    assert [f.message for f in check("(_w := 3)", any_policy).errors] == ['"_w" is an invalid variable name because it starts with "_"']


def test_allows_walrus_at_runtime(sandbox: Sandbox) -> None:
    """It allows := to bind in the session and inside a comprehension."""
    r = sandbox.execute("if (n := 10) > 5:\n    r = n\n(r, [y for x in range(3) if (y := x * 2) > 0], y)")
    assert r.stdout == "(10, [2, 4], 4)\n", r
