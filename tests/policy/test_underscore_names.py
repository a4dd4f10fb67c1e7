"""Names and attributes starting with an underscore, refused by RestrictedPython's rules."""

from __future__ import annotations

import pytest

from rlm_runtime.sandbox import Sandbox
from rlm_runtime.sandbox.policy import Policy, check

VARIABLE = 'is an invalid variable name because it starts with "_"'
ATTRIBUTE = 'is an invalid attribute name because it starts with "_"'


@pytest.mark.parametrize("source", ["_x = 1", "x = _y", "_x += 1", "del _x", "for _x in y: pass", "(_w := 3)",
                                    "a, _b = c", "[_x for _x in y]", "with x as _f: pass"])
def test_denies_underscore_variables(any_policy: Policy, source: str) -> None:
    """It denies a variable whose name starts with an underscore, stored, read or deleted."""
    report = check(source, any_policy)
    assert not report.ok
    assert all(VARIABLE in f.message for f in report.errors)
    assert report.errors[0].line == 1


def test_denies_underscore_exception_name(any_policy: Policy) -> None:
    """It denies `except E as _e`, with the line of the handler."""
    report = check("try:\n    pass\nexcept Exception as _e:\n    pass", any_policy)
    assert [(f.message, f.line) for f in report.errors] == [(f'"_e" {VARIABLE}', 3)]


@pytest.mark.parametrize("source", ["x._y = 1", "x = y._z", "del x._y", "x.__y", "f(x._private)", "with x as y._z: pass"])
def test_denies_underscore_attributes(any_policy: Policy, source: str) -> None:
    """It denies an attribute whose name starts with an underscore, stored, read or deleted."""
    report = check(source, any_policy)
    assert not report.ok
    assert ATTRIBUTE in report.errors[0].message


@pytest.mark.parametrize("source", ["def f(_a): pass", "def f(*_a): pass", "def f(**_k): pass", "def f(*, _k=1): pass",
                                    "def f(__a): pass", "lambda _a: 1"])
def test_denies_underscore_function_arguments(any_policy: Policy, source: str) -> None:
    """It denies a positional, star, keyword-only or lambda argument starting with an underscore."""
    report = check(source, any_policy)
    assert VARIABLE in report.errors[0].message


def test_denies_each_underscore_argument(any_policy: Policy) -> None:
    """It denies every underscore argument of a signature, one finding each."""
    report = check("def f(*_a, **_k): pass", any_policy)
    assert [f.message.split()[0] for f in report.errors] == ['"_a"', '"_k"']


def test_denies_underscore_function_name(any_policy: Policy) -> None:
    """It denies `def _helper(): ...`."""
    assert VARIABLE in check("def _helper():\n    return 1", any_policy).errors[0].message


def test_denies_underscore_class_name(default: Policy) -> None:
    """It denies `class _C: pass` in default, where classes are otherwise allowed."""
    report = check("class _C:\n    pass", default)
    assert [(f.message, f.line) for f in report.errors] == [(f'"_C" {VARIABLE}', 1)]


def test_denies_underscore_class_attribute(default: Policy) -> None:
    """It denies a class body name starting with an underscore."""
    report = check("class C:\n    _hidden = 1", default)
    assert [(f.message, f.line) for f in report.errors] == [(f'"_hidden" {VARIABLE}', 2)]


@pytest.mark.parametrize("source", ["x__roles__ = 1", "y = x.a__roles__"])
def test_denies_roles_suffix(any_policy: Policy, source: str) -> None:
    """It denies names ending in `__roles__` (RestrictedPython's Zope security names)."""
    assert 'ends with "__roles__"' in check(source, any_policy).errors[0].message


@pytest.mark.parametrize("source", ["a_ = 1", "a__b = 2", "x = a.b_", "import re as r_", "_ = 1", "for _ in range(3): pass",
                                    "f(_x=1)"])
def test_allows_underscores_that_are_not_leading(any_policy: Policy, source: str) -> None:
    """It allows trailing and inner underscores, the bare `_` name and underscore keyword names."""
    assert check(source, any_policy).ok


@pytest.mark.parametrize("name", ["_private", "__class__", "__dict__"])
def test_denies_underscore_attributes_through_getattr_at_runtime(sandbox: Sandbox, name: str) -> None:
    """It denies `getattr(obj, '_name')` at runtime, where the static check cannot see the name."""
    r = sandbox.execute(f"getattr('text', {name!r})")
    assert r.error_type == "AttributeError"
    assert f'"{name}" {ATTRIBUTE}' in r.error


def test_denies_underscore_names_through_setattr_at_runtime(sandbox: Sandbox) -> None:
    """It denies `setattr(obj, '_name', v)` and `delattr(obj, '_name')` at runtime."""
    r = sandbox.execute("setattr([], '_x', 1)")
    assert r.error_type == "SandboxPermissionError" and "starting with '_'" in r.error
    r = sandbox.execute("delattr([], '_x')")
    assert r.error_type == "SandboxPermissionError" and "starting with '_'" in r.error


def test_denies_dir_a_view_of_underscore_names(sandbox: Sandbox) -> None:
    """It denies dir() the underscore names: they are filtered out."""
    r = sandbox.execute("[n for n in dir('') if n.startswith('_')]")
    assert r.stdout == "[]\n", r
