"""Subscripts and slices: reads go through _getitem_, writes through _write_."""

from __future__ import annotations

import pytest

from rlm_runtime.sandbox import Sandbox
from rlm_runtime.sandbox.policy import Policy, check


@pytest.mark.parametrize("source", ["x[1]", "x[1:2]", "x[::2]", "x[a:b:c]", "x[1, 2]", "x[...]", "x[1] = 2", "x[1:2] = y",
                                    "del x[1]", "del x[1:]", "x['k']['j'] = 1", "list[int]"])
def test_allows_subscripts_and_slices(any_policy: Policy, source: str) -> None:
    """It allows reading, writing and deleting items and slices."""
    assert check(source, any_policy).ok


@pytest.mark.parametrize("source", ["x[_i]", "x[o._k]", "x[1:_n]"])
def test_denies_underscore_names_inside_subscripts(any_policy: Policy, source: str) -> None:
    """It denies underscore names inside an index or a slice."""
    assert not check(source, any_policy).ok


def test_allows_reads_and_slices_at_runtime(sandbox: Sandbox) -> None:
    """It allows indexing and slicing strings and lists at runtime."""
    r = sandbox.execute("t = 'abcdef'\n(t[1:4], t[::-1], t[slice(0, 2)], t[-2:], [1, 2, 3][1])")
    assert r.stdout == "('bcd', 'fedcba', 'ab', 'ef', 2)\n", r


def test_allows_item_writes_at_runtime(sandbox: Sandbox) -> None:
    """It allows item and slice assignment and deletion on lists and dicts."""
    r = sandbox.execute("d = {'a': 1}\nd['a'] = 2\nd['b'] = 3\ndel d['b']\nx = [1, 2, 3]\nx[0:2] = [9]\ndel x[-1]\n(d, x)")
    assert r.stdout == "({'a': 2}, [9])\n", r


def test_allows_item_writes_on_library_objects_at_runtime(sandbox: Sandbox) -> None:
    """It allows item assignment on a collections.Counter (items, not attributes)."""
    r = sandbox.execute("import collections\nc = collections.Counter('aab')\nc['z'] = 3\nc['z']")
    assert r.stdout == "3\n", r
