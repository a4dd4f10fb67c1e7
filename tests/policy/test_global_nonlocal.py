"""global and nonlocal: default allows global and denies nonlocal; strict denies both."""

from __future__ import annotations

import pytest

from rlm_runtime.sandbox import Sandbox
from rlm_runtime.sandbox.policy import Policy, check

NONLOCAL = "def f():\n    x = 1\n    def g():\n        nonlocal x\n        x = 2\n    g()\n    return x"


@pytest.mark.parametrize("source", ["global x", "def f():\n    global counter\n    counter = 1"])
def test_allows_global_in_default(default: Policy, source: str) -> None:
    """It allows global statements in default."""
    assert check(source, default).ok


@pytest.mark.parametrize(("source", "line"), [("global x", 1), ("def f():\n    global counter\n    counter = 1", 2)])
def test_denies_global_in_strict(strict: Policy, source: str, line: int) -> None:
    """It denies global statements in strict, with their line."""
    assert [(f.message, f.line) for f in check(source, strict).errors] == [("Global is not allowed by this policy", line)]


def test_denies_nonlocal_in_default(default: Policy) -> None:
    """It denies nonlocal in default (RestrictedPython refuses it)."""
    assert [(f.message, f.line) for f in check(NONLOCAL, default).errors] == [("Nonlocal statements are not allowed.", 4)]


def test_denies_nonlocal_in_strict(strict: Policy) -> None:
    """It denies nonlocal in strict (the policy refuses it before RestrictedPython runs)."""
    assert [(f.message, f.line) for f in check(NONLOCAL, strict).errors] == [("Nonlocal is not allowed by this policy", 4)]


def test_allows_global_at_runtime(sandbox: Sandbox) -> None:
    """It allows a function to set a session variable through global."""
    r = sandbox.execute("def outer():\n    global counter\n    counter = 7\nouter()\ncounter")
    assert r.stdout == "7\n", r
    assert sandbox.execute("counter + 1").stdout == "8\n"


def test_denies_global_in_strict_at_runtime(strict_sandbox: Sandbox) -> None:
    """It denies global in a strict sandbox cell with a PolicyViolation."""
    assert strict_sandbox.execute("def f():\n    global g\n    g = 1").error_type == "PolicyViolation"
