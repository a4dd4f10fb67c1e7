"""del statements: names, items and attributes (attributes of objects the user does not own are refused at runtime)."""

from __future__ import annotations

import pytest

from rlm_runtime.sandbox import Sandbox
from rlm_runtime.sandbox.policy import Policy, check


@pytest.mark.parametrize("source", ["del x", "del x, y", "del x[1]", "del x[1:3]", "del x.y", "del x['a'], x['b']"])
def test_allows_del(any_policy: Policy, source: str) -> None:
    """It allows deleting names, items, slices and attributes statically."""
    assert check(source, any_policy).ok


@pytest.mark.parametrize("source", ["del _x", "del x._y", "del x.__dict__"])
def test_denies_del_of_underscore_names(any_policy: Policy, source: str) -> None:
    """It denies deleting underscore names and attributes."""
    assert not check(source, any_policy).ok


def test_allows_del_of_a_name_at_runtime(sandbox: Sandbox) -> None:
    """It allows `del x`: the name is gone afterwards."""
    r = sandbox.execute("x = 1\ndel x\nx")
    assert r.error_type == "NameError"
    assert "line 3" in r.error


def test_allows_del_of_items_at_runtime(sandbox: Sandbox) -> None:
    """It allows deleting list items, slices and dict keys."""
    r = sandbox.execute("x = [1, 2, 3, 4]\ndel x[0]\ndel x[1:]\nd = {'a': 1, 'b': 2}\ndel d['a']\n(x, d)")
    assert r.stdout == "([2], {'b': 2})\n", r


@pytest.mark.parametrize("source", ["import re\ndel re.compile", "def f():\n    pass\ndel f.x", "o = object()\ndel o.x"])
def test_denies_del_of_attributes_the_user_does_not_own(sandbox: Sandbox, source: str) -> None:
    """It denies deleting attributes of modules, functions and builtin objects at runtime."""
    r = sandbox.execute(source)
    assert r.error_type == "SandboxPermissionError", r
    assert "cannot delete attributes" in r.error


def test_denies_del_of_reserved_names_beyond_the_cell(sandbox: Sandbox) -> None:
    """It denies `del FINAL` a lasting effect: reserved names come back in the next cell."""
    sandbox.execute("del FINAL")
    assert sandbox.execute("FINAL(1)").has_final
