"""Functions, lambdas and decorators."""

from __future__ import annotations

import pytest

from rlm_runtime.sandbox import Sandbox
from rlm_runtime.sandbox.policy import Policy, check


@pytest.mark.parametrize("source", [
    "def f(a, b=2, *args, c, d=4, **kw):\n    return a",
    "def f(a, /, b):\n    return a + b",
    "def outer():\n    def inner():\n        return 1\n    return inner",
    "def f(x: int) -> int:\n    return x",
    "f = lambda x, y=2: x * y",
    "@decorate\ndef f():\n    pass",
    "@a.b(1)\n@c\ndef f():\n    pass",
])
def test_allows_functions_lambdas_and_decorators(any_policy: Policy, source: str) -> None:
    """It allows def (all argument kinds, annotations, nesting), lambda and decorators."""
    assert check(source, any_policy).ok


def test_allows_functions_at_runtime(sandbox: Sandbox) -> None:
    """It allows defining and calling a recursive function."""
    r = sandbox.execute("def fact(n):\n    return 1 if n < 2 else n * fact(n - 1)\nfact(10)")
    assert r.stdout == "3628800\n", r


def test_allows_lambdas_at_runtime(sandbox: Sandbox) -> None:
    """It allows calling a lambda with a default argument."""
    assert sandbox.execute("(lambda x, y=2: x * y)(5)").stdout == "10\n"


def test_allows_user_decorators_at_runtime(sandbox: Sandbox) -> None:
    """It allows a user-written decorator."""
    r = sandbox.execute("def twice(fn):\n    return lambda *a: fn(*a) * 2\n@twice\ndef f(x):\n    return x + 1\nf(1)")
    assert r.stdout == "4\n", r


def test_allows_stdlib_decorators_at_runtime(sandbox: Sandbox) -> None:
    """It allows `@functools.lru_cache` from an allowed module."""
    r = sandbox.execute("import functools\n@functools.lru_cache(maxsize=None)\n"
                        "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\nfib(40)")
    assert r.stdout == "102334155\n", r


def test_denies_a_denied_decorator_at_runtime(sandbox: Sandbox) -> None:
    """It denies `@functools.wraps(f)` at runtime (a denied attribute), pointing at the decorator line."""
    r = sandbox.execute("import functools\ndef f(x):\n    return x\n@functools.wraps(f)\ndef g(x):\n    return x")
    assert r.error_type == "SandboxPermissionError"
    assert "line 4" in r.error


@pytest.mark.parametrize("attr", ["__code__", "__globals__", "__defaults__", "__name__", "__wrapped__"])
def test_denies_function_internals(any_policy: Policy, attr: str) -> None:
    """It denies a function's dunder attributes."""
    assert not check(f"def f():\n    pass\nf.{attr}", any_policy).ok


def test_denies_setting_function_attributes_at_runtime(sandbox: Sandbox) -> None:
    """It denies `f.attr = 1` at runtime: functions are not user-owned objects."""
    r = sandbox.execute("def f():\n    pass\nf.tag = 1")
    assert r.error_type == "SandboxPermissionError"
    assert "cannot set attributes of function objects" in r.error


def test_denies_lambda_as_a_way_to_reach_dunders(any_policy: Policy) -> None:
    """It denies `(lambda: 0).__code__` statically."""
    assert not check("(lambda: 0).__code__", any_policy).ok
