"""Augmented assignment: names allowed; attributes and items denied (RestrictedPython's rule)."""

from __future__ import annotations

import pytest

from rlm_runtime.sandbox import Sandbox
from rlm_runtime.sandbox.policy import Policy, check

OPERATORS = ["+=", "-=", "*=", "/=", "//=", "%=", "**=", "<<=", ">>=", "&=", "^=", "|=", "@="]


@pytest.mark.parametrize("op", OPERATORS)
def test_allows_augmented_assignment_of_names(any_policy: Policy, op: str) -> None:
    """It allows every augmented operator on a plain name."""
    assert check(f"x {op} 1", any_policy).ok


@pytest.mark.parametrize("op", ["+=", "-=", "|="])
def test_denies_augmented_assignment_of_attributes(any_policy: Policy, op: str) -> None:
    """It denies `x.y += 1`, as RestrictedPython does."""
    report = check(f"x = 1\nx.y {op} 1", any_policy)
    assert [(f.message, f.line) for f in report.errors] == [("Augmented assignment of attributes is not allowed.", 2)]


@pytest.mark.parametrize("target", ["x[0]", "x['k']", "x[1:2]", "x[a][b]"])
def test_denies_augmented_assignment_of_items_and_slices(any_policy: Policy, target: str) -> None:
    """It denies `x[0] += 1` and slices, as RestrictedPython does."""
    report = check(f"{target} += 1", any_policy)
    assert [f.message for f in report.errors] == ["Augmented assignment of object items and slices is not allowed."]


def test_denies_augmented_assignment_of_underscore_names(any_policy: Policy) -> None:
    """It denies `_x += 1`."""
    assert not check("_x += 1", any_policy).ok


def test_allows_every_numeric_operator_at_runtime(sandbox: Sandbox) -> None:
    """It allows the augmented operators at runtime with Python's results."""
    r = sandbox.execute("x = 10\nx -= 1\nx *= 2\nx //= 4\nx **= 2\nx %= 7\nx <<= 2\nx >>= 1\nx |= 1\nx &= 7\nx ^= 2\nx /= 2\n"
                        "s = 'ab'\ns *= 3\ns += '!'\n(x, s)")
    assert r.stdout == "(3.5, 'ababab!')\n", r


def test_allows_in_place_list_extension_at_runtime(sandbox: Sandbox) -> None:
    """It allows `lst += [...]` to extend the list in place, as in plain Python."""
    assert sandbox.execute("lst = [1]\nalias = lst\nlst += [2]\nalias").stdout == "[1, 2]\n"


def test_allows_the_item_workaround_at_runtime(sandbox: Sandbox) -> None:
    """It allows `x[0] = x[0] + 1`, the spelled-out form of the denied `x[0] += 1`."""
    assert sandbox.execute("x = [1, 2]\nx[0] = x[0] + 5\nx").stdout == "[6, 2]\n"
