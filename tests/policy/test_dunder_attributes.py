"""Dunder and introspection attributes: the classic escape routes through objects."""

from __future__ import annotations

import pytest

from rlm_runtime.sandbox import Sandbox
from rlm_runtime.sandbox.policy import Policy, check


@pytest.mark.parametrize("attr", ["__class__", "__dict__", "__globals__", "__subclasses__", "__mro__", "__bases__",
                                  "__code__", "__closure__", "__builtins__", "__init__", "__getattribute__",
                                  "__reduce_ex__", "__self__", "__func__", "__defaults__", "__name__"])
def test_denies_dunder_attributes(any_policy: Policy, attr: str) -> None:
    """It denies reading any dunder attribute."""
    report = check(f"y = x.{attr}", any_policy)
    assert [(f.message, f.line) for f in report.errors] == [
        (f'"{attr}" is an invalid attribute name because it starts with "_".', 1)]


def test_denies_the_subclasses_chain(any_policy: Policy) -> None:
    """It denies `().__class__.__bases__[0].__subclasses__()`, each step reported."""
    report = check("().__class__.__bases__[0].__subclasses__()", any_policy)
    names = [f.message.split('"')[1] for f in report.errors]
    assert set(names) == {"__class__", "__bases__", "__subclasses__"}


@pytest.mark.parametrize("attr", ["gi_frame", "gi_code", "f_globals", "f_back", "f_locals", "tb_frame", "co_code", "cr_frame"])
def test_denies_frame_and_code_attributes(any_policy: Policy, attr: str) -> None:
    """It denies frame, generator, traceback and code attributes that have no underscore."""
    report = check(f"y = x.{attr}", any_policy)
    assert f'"{attr}" is a restricted name' in report.errors[0].message


@pytest.mark.parametrize("name", ["__builtins__", "__name__", "__import__", "__loader__", "__spec__"])
def test_denies_dunder_globals(any_policy: Policy, name: str) -> None:
    """It denies module-level dunder names such as `__builtins__` and `__import__`."""
    assert "starts with \"_\"" in check(f"y = {name}", any_policy).errors[0].message


@pytest.mark.parametrize("source", ["getattr(1, '__class__')", "getattr(len, '__self__')", "def f(): pass\ngetattr(f, '__globals__')"])
def test_denies_dunder_attributes_through_getattr_at_runtime(sandbox: Sandbox, source: str) -> None:
    """It denies a dunder attribute named by a string at runtime."""
    r = sandbox.execute(source)
    assert r.error_type == "AttributeError", r
    assert "starts with \"_\"" in r.error


@pytest.mark.parametrize("attr", ["gi_frame", "gi_code", "gi_yieldfrom"])
def test_denies_generator_internals_through_getattr_at_runtime(sandbox: Sandbox, attr: str) -> None:
    """It denies every attribute of a generator object reached through getattr."""
    r = sandbox.execute(f"g = (i for i in range(3))\ngetattr(g, {attr!r})")
    assert r.error_type == "SandboxPermissionError"
    assert "attributes of generator objects are not accessible" in r.error


def test_denies_partial_func_at_runtime(sandbox: Sandbox) -> None:
    """It denies `functools.partial(f).func`, which would hand back the wrapped callable."""
    r = sandbox.execute("import functools\np = functools.partial(max, 1)\np.func")
    assert r.error_type == "SandboxPermissionError"


def test_denies_type_with_three_arguments_at_runtime(sandbox: Sandbox) -> None:
    """It denies `type(name, bases, dict)` but allows `type(x)`."""
    r = sandbox.execute("type('X', (), {})")
    assert r.error_type == "SandboxPermissionError"
    assert sandbox.execute("type(1)").stdout == "<class 'int'>\n"
