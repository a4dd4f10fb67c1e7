"""Class statements: allowed by default (with RestrictedPython's limits), denied by strict."""

from __future__ import annotations

import pytest

from rlm_runtime.sandbox import Sandbox
from rlm_runtime.sandbox.policy import Policy, check


@pytest.mark.parametrize("source", [
    "class C:\n    pass",
    "class C(object):\n    x = 1\n    def m(self):\n        return self.x",
    "class C:\n    def __init__(self, v):\n        self.v = v",
    "class C:\n    @property\n    def v(self):\n        return 1",
    "@decorate\nclass C:\n    pass",
])
def test_allows_classes_in_default(default: Policy, source: str) -> None:
    """It allows class statements in default, including `__init__` (RestrictedPython allows a few dunder methods)."""
    assert check(source, default).ok


@pytest.mark.parametrize(("source", "line"), [("class C:\n    pass", 1), ("x = 1\n@decorate\nclass C:\n    pass", 3),
                                              ("def f():\n    class Inner:\n        pass", 2)])
def test_denies_classes_in_strict(strict: Policy, source: str, line: int) -> None:
    """It denies every class statement in strict, top level or nested, with its line."""
    report = check(source, strict)
    assert [(f.message, f.line) for f in report.errors] == [("ClassDef is not allowed by this policy", line)]


def test_denies_a_metaclass_keyword(default: Policy) -> None:
    """It denies `class C(metaclass=M)`."""
    assert check("class C(metaclass=M):\n    pass", default).errors[0].message == 'The keyword argument "metaclass" is not allowed.'


@pytest.mark.parametrize("method", ["__enter__", "__getattr__", "__del__", "__reduce__", "__class_getitem__"])
def test_denies_other_dunder_methods(default: Policy, method: str) -> None:
    """It denies defining dunder methods outside RestrictedPython's short list."""
    report = check(f"class C:\n    def {method}(self, *a):\n        pass", default)
    assert [(f.message, f.line) for f in report.errors] == [(f'"{method}" is an invalid variable name because it starts with "_"', 2)]


def test_denies_type_as_a_class_factory_in_strict(strict_sandbox: Sandbox) -> None:
    """It denies `type(name, bases, ns)` in strict, so classes cannot be made another way."""
    r = strict_sandbox.execute("C = type('C', (), {})")
    assert r.error_type == "SandboxPermissionError"


def test_denies_classes_in_strict_at_runtime(strict_sandbox: Sandbox) -> None:
    """It denies a class statement in a strict sandbox cell with a PolicyViolation."""
    r = strict_sandbox.execute("class C:\n    pass")
    assert r.error_type == "PolicyViolation"
    assert "ClassDef is not allowed by this policy" in r.error


def test_allows_classes_in_default_at_runtime(sandbox: Sandbox) -> None:
    """It allows a class statement in a default sandbox cell, and attributes of its instances."""
    r = sandbox.execute("class P:\n    def __init__(self, v):\n        self.v = v\np = P(1)\np.w = 2\n(p.v, p.w)")
    assert r.stdout == "(1, 2)\n", r
