"""exec, eval, compile, open, breakpoint and the other builtins user code must not have."""

from __future__ import annotations

import pytest

from rlm_runtime.sandbox import Sandbox
from rlm_runtime.sandbox.policy import Policy, check


@pytest.mark.parametrize(("source", "message"), [
    ("exec('1')", "Exec calls are not allowed."),
    ("eval('1')", "Eval calls are not allowed."),
    ("x = 1\nexec('import os')", "Exec calls are not allowed."),
])
def test_denies_exec_and_eval_calls(any_policy: Policy, source: str, message: str) -> None:
    """It denies calls to exec and eval statically, with their line."""
    report = check(source, any_policy)
    assert [(f.message, f.line) for f in report.errors] == [(message, source.count("\n") + 1)]


@pytest.mark.parametrize("source", ["breakpoint()", "builtins.open"])
def test_denies_reserved_names(any_policy: Policy, source: str) -> None:
    """It denies the reserved names `breakpoint` and `builtins`."""
    assert "is a reserved name" in check(source, any_policy).errors[0].message


@pytest.mark.parametrize("source", ["compile('1', 'x', 'exec')", "open('/etc/passwd')", "globals()", "vars()", "x = exec"])
def test_allows_other_builtin_names_statically(any_policy: Policy, source: str) -> None:
    """It allows these names statically: they are simply absent at runtime."""
    assert check(source, any_policy).ok


@pytest.mark.parametrize("name", ["open", "compile", "exec", "eval", "globals", "locals", "vars", "input", "help",
                                  "exit", "quit", "memoryview"])
def test_denies_dangerous_builtins_at_runtime(sandbox: Sandbox, name: str) -> None:
    """It denies the dangerous builtins at runtime: the names are not defined."""
    r = sandbox.execute(f"f = {name}")
    assert r.error_type == "NameError", r
    assert f"name '{name}' is not defined" in r.error


def test_denies_open_at_runtime_with_the_user_line(sandbox: Sandbox) -> None:
    """It denies `open('/etc/passwd')` at runtime, pointing at the user's line."""
    r = sandbox.execute("x = 1\nopen('/etc/passwd').read()")
    assert r.error_type == "NameError"
    assert "line 2" in r.error


def test_denies_a_default_argument_that_names_open(sandbox: Sandbox) -> None:
    """It denies `def f(a=open)` at runtime: the default is evaluated and open is absent."""
    assert sandbox.execute("def f(a=open):\n    pass").error_type == "NameError"
