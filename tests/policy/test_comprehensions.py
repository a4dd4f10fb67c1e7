"""Comprehensions, generator expressions and generator functions (yield: denied in strict)."""

from __future__ import annotations

import pytest

from rlm_runtime.sandbox import Sandbox
from rlm_runtime.sandbox.policy import Policy, check


@pytest.mark.parametrize("source", ["[x for x in y]", "{k: v for k, v in d.items()}", "{x for x in y}", "(x for x in y)",
                                    "[x * z for x in y if x for z in x]", "[[c for c in row] for row in grid]",
                                    "sum(x for x in y)", "[_ for _ in y]"])
def test_allows_comprehensions(any_policy: Policy, source: str) -> None:
    """It allows list, dict, set and generator comprehensions, nested and filtered."""
    assert check(source, any_policy).ok


@pytest.mark.parametrize("source", ["[_x for _x in y]", "{k: v for k, _v in d}", "[x.__class__ for x in y]"])
def test_denies_underscore_names_in_comprehensions(any_policy: Policy, source: str) -> None:
    """It denies underscore targets and attributes inside a comprehension."""
    assert not check(source, any_policy).ok


def test_allows_comprehensions_at_runtime(sandbox: Sandbox) -> None:
    """It allows comprehensions with tuple unpacking at runtime."""
    r = sandbox.execute("d = {k: v for k, v in [('a', 1), ('b', 2)]}\n(d, [x * x for x in range(4) if x], {c for c in 'aab'} == {'a', 'b'})")
    assert r.stdout == "({'a': 1, 'b': 2}, [1, 4, 9], True)\n", r


def test_allows_generator_expressions_at_runtime(sandbox: Sandbox) -> None:
    """It allows consuming a generator expression."""
    assert sandbox.execute("sum(i * i for i in range(4))").stdout == "14\n"


@pytest.mark.parametrize("source", ["def g():\n    yield 1", "def g():\n    yield from y", "def g():\n    x = yield"])
def test_allows_yield_in_default(default: Policy, source: str) -> None:
    """It allows generator functions in default."""
    assert check(source, default).ok


@pytest.mark.parametrize(("source", "kind"), [("def g():\n    yield 1", "Yield"), ("def g():\n    yield from y", "YieldFrom"),
                                              ("f = lambda: (yield)", "Yield"), ("x = [(yield) for y in z]", "Yield")])
def test_denies_yield_in_strict(strict: Policy, source: str, kind: str) -> None:
    """It denies yield and yield from in strict, wherever they appear."""
    report = check(source, strict)
    assert f"{kind} is not allowed by this policy" in [f.message for f in report.errors]


def test_allows_generator_expressions_in_strict(strict: Policy) -> None:
    """It allows generator expressions in strict: only yield is denied."""
    assert check("total = sum(x for x in range(10))", strict).ok


def test_allows_generator_functions_at_runtime(sandbox: Sandbox) -> None:
    """It allows running a generator function in default."""
    assert sandbox.execute("def g():\n    yield 1\n    yield from [2, 3]\nlist(g())").stdout == "[1, 2, 3]\n"


def test_denies_yield_outside_a_function(default: Policy) -> None:
    """It denies `yield` at top level (a compile error)."""
    report = check("x = (yield)", default)
    assert not report.ok
    assert "'yield' outside function" in report.errors[0].message
