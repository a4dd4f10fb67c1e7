"""Async code: denied by strict (policy rules) and by default (RestrictedPython's rules)."""

from __future__ import annotations

import pytest

from rlm_runtime.sandbox import Sandbox
from rlm_runtime.sandbox.policy import Policy, check


@pytest.mark.parametrize(("source", "kinds"), [
    ("async def f():\n    pass", {("AsyncFunctionDef", 1)}),
    ("async def f():\n    await g()", {("AsyncFunctionDef", 1), ("Await", 2)}),
    ("async def f():\n    async for x in y:\n        pass\n    async with z:\n        pass",
     {("AsyncFunctionDef", 1), ("AsyncFor", 2), ("AsyncWith", 4)}),
    ("await g()", {("Await", 1)}),
    ("async for x in y:\n    pass", {("AsyncFor", 1)}),
    ("async with y as z:\n    pass", {("AsyncWith", 1)}),
])
def test_denies_async_code_in_strict(strict: Policy, source: str, kinds: set[tuple[str, int]]) -> None:
    """It denies async def, await, async for and async with in strict, each node with its line."""
    report = check(source, strict)
    assert {(f.message, f.line) for f in report.errors} == {(f"{k} is not allowed by this policy", n) for k, n in kinds}


@pytest.mark.parametrize(("source", "message", "line"), [
    ("async def f():\n    pass", "AsyncFunctionDef statements are not allowed.", 1),
    ("x = 1\nawait g()", "Await statements are not allowed.", 2),
    ("async for x in y:\n    pass", "AsyncFor statements are not allowed.", 1),
    ("async with y as z:\n    pass", "AsyncWith statements are not allowed.", 1),
])
def test_denies_async_code_in_default(default: Policy, source: str, message: str, line: int) -> None:
    """It denies async code in default too: RestrictedPython refuses the async nodes."""
    report = check(source, default)
    assert [(f.message, f.line) for f in report.errors] == [(message, line)]


def test_denies_an_async_comprehension_outside_async_code(any_policy: Policy) -> None:
    """It denies `[x async for x in y]` in a plain function (a compile error)."""
    report = check("def f():\n    return [x async for x in y]", any_policy)
    assert not report.ok
    assert "asynchronous comprehension outside of an asynchronous function" in report.errors[0].message


def test_denies_async_code_at_runtime(sandbox: Sandbox) -> None:
    """It denies async code in a default sandbox cell before it runs."""
    assert sandbox.execute("async def f():\n    return 1").error_type == "PolicyViolation"
