"""Syntax errors: refused with Python's message and the line it points at."""

from __future__ import annotations

import pytest

from rlm_runtime.sandbox import Sandbox
from rlm_runtime.sandbox.policy import Policy, check


@pytest.mark.parametrize(("source", "message", "line"), [
    ("x = 1\ny = 1 +\n", "SyntaxError: invalid syntax", 2),
    ("x = 1\ny = (1,\n", "SyntaxError: '(' was never closed", 2),
    ("   x = 1", "SyntaxError: unexpected indent", 1),
    ("def f():\nx = 1", "SyntaxError: expected an indented block after function definition on line 1", 2),
    ("x = 1\n\ns = 'abc", "SyntaxError: unterminated string literal (detected at line 3)", 3),
    ("x = 1\n'''abc", "SyntaxError: unterminated triple-quoted string literal (detected at line 2)", 2),
    ("print 'hi'", "SyntaxError: Missing parentheses in call to 'print'. Did you mean print(...)?", 1),
])
def test_denies_syntax_errors_with_their_line(any_policy: Policy, source: str, message: str, line: int) -> None:
    """It denies code the parser rejects, with Python's message and line."""
    assert [(f.message, f.line) for f in check(source, any_policy).errors] == [(message, line)]


@pytest.mark.parametrize(("source", "message"), [
    ("x = 1\nreturn x", "'return' outside function"),
    ("for x in y:\n    pass\nbreak", "'break' outside loop"),
    ("def f(a, a):\n    pass", "duplicate argument 'a' in function definition"),
])
def test_denies_compile_time_errors(default: Policy, source: str, message: str) -> None:
    """It denies code that parses but does not compile, with the compiler's message."""
    report = check(source, default)
    assert not report.ok
    assert message in report.errors[0].message


@pytest.mark.parametrize(("source", "line"), [("x = 1\nreturn x", 2), ("for x in y:\n    pass\nbreak", 3),
                                              ("x = 1\ny = (yield)", 2)])
def test_denies_compile_time_errors_with_their_line(default: Policy, source: str, line: int) -> None:
    """It denies code that parses but does not compile, with the line in Finding.line."""
    assert check(source, default).errors[0].line == line


def test_denies_syntax_errors_in_a_cell(sandbox: Sandbox) -> None:
    """It denies a syntax error in a sandbox cell as a PolicyViolation naming the line."""
    r = sandbox.execute("x = 1\ny = 1 +")
    assert r.error_type == "PolicyViolation"
    assert "line 2: SyntaxError: invalid syntax" in r.error


def test_denies_nothing_for_an_empty_cell(any_policy: Policy) -> None:
    """It allows an empty cell and a cell of comments."""
    assert check("", any_policy).ok
    assert check("# nothing\n\n", any_policy).ok
