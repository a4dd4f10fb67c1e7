"""Augmented assignment: names allowed; items and attributes allowed when their target is free of calls
(rewritten to a read, an operation and a write before RestrictedPython checks it), denied otherwise."""

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
def test_allows_augmented_assignment_of_plain_attributes(any_policy: Policy, op: str) -> None:
    """It allows `x.y += 1`, checked as `x.y = x.y + 1` (RestrictedPython alone refuses it)."""
    assert check(f"x = 1\nx.y {op} 1", any_policy).ok


@pytest.mark.parametrize("target", ["x[0]", "x['k']", "x[1:2]", "x[a][b]", "x[i + 1]", "x.a[k]"])
def test_allows_augmented_assignment_of_plain_items_and_slices(any_policy: Policy, target: str) -> None:
    """It allows `counts[key] += 1`, the way models count, checked as `counts[key] = counts[key] + 1`."""
    assert check(f"{target} += 1", any_policy).ok


@pytest.mark.parametrize("target", ["x[f()]", "f()[0]", "x[(y := 1)]", "f().a", "x[[g() for g in h]]"])
def test_denies_augmented_assignment_to_a_target_with_calls(any_policy: Policy, target: str) -> None:
    """It still denies an item or attribute target whose evaluation could have effects (it would run twice)."""
    report = check(f"{target} += 1", any_policy)
    assert report.errors and "Augmented assignment of" in report.errors[0].message


@pytest.mark.parametrize("target", ["x.__class__", "x._y", "x[0].__dict__"])
def test_denies_augmented_assignment_of_private_attributes(any_policy: Policy, target: str) -> None:
    """It refuses underscore attributes in a rewritten target as anywhere else."""
    assert not check(f"{target} += 1", any_policy).ok


def test_item_and_attribute_augmented_assignment_at_runtime(sandbox: Sandbox) -> None:
    """It counts in a dict, scales a list item and bumps an attribute with Python's results."""
    r = sandbox.execute("c = {}\nfor w in 'abracadabra':\n    c[w] = c.get(w, 0)\n    c[w] += 1\n"
                        "l = [1, 2]\nl[0] *= 5\nl[1:] += [3]\n"
                        "class K:\n    pass\nk = K()\nk.n = 1\nk.n -= 3\n(c['a'], c['b'], l, k.n)")
    assert r.stdout == "(5, 2, [5, 2, 3], -2)\n", r


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
