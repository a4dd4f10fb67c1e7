"""f-strings (allowed, checked like code) and str.format (refused at runtime: it walks attributes)."""

from __future__ import annotations

import pytest

from rlm_runtime.sandbox import Sandbox
from rlm_runtime.sandbox.policy import Policy, check


@pytest.mark.parametrize("source", ['f"{x}"', 'f"{x!r:>10}"', 'f"{x:>{width}.2f}"', "f'{d[\"k\"]}'", 'f"{x=}"',
                                    "'{}'.format(1)", "'%s' % x", "format(x, '>4')"])
def test_allows_formatting_statically(any_policy: Policy, source: str) -> None:
    """It allows f-strings, `%`, format() and (statically) str.format."""
    assert check(source, any_policy).ok


@pytest.mark.parametrize("source", ['f"{x.__class__}"', 'f"{_x}"', 'f"{x:{y.__class__}}"', 'f"{x._y!r}"'])
def test_denies_underscore_names_inside_f_strings(any_policy: Policy, source: str) -> None:
    """It denies underscore names and attributes inside f-string expressions and format specs."""
    report = check(source, any_policy)
    assert not report.ok
    assert "starts with \"_\"" in report.errors[0].message


def test_allows_f_strings_at_runtime(sandbox: Sandbox) -> None:
    """It allows f-strings with conversions and nested format specs at runtime."""
    r = sandbox.execute('w = 6\nx = 3.14159\nf"{x:>{w}.2f}|{x!r}|{w=}"')
    assert r.stdout == "'  3.14|3.14159|w=6'\n", r


@pytest.mark.parametrize("source", ["'{}'.format(1)", "'{0.__class__}'.format(1)", "f = '{}'.format", "'{a}'.format_map({'a': 1})",
                                    "str.format('{}', 1)", "getattr('{}', 'format')"])
def test_denies_str_format_at_runtime(sandbox: Sandbox, source: str) -> None:
    """It denies str.format and str.format_map at runtime, bound or unbound, called or not."""
    r = sandbox.execute(source)
    assert r.error_type == "NotImplementedError", r
    assert "format*() methods of `str` is not safe" in r.error


def test_denies_user_string_format_at_runtime(sandbox: Sandbox) -> None:
    """It denies `collections.UserString(s).format`, which calls str.format unguarded."""
    r = sandbox.execute("import collections\ncollections.UserString('{}').format(1)")
    assert r.error_type == "SandboxPermissionError"


def test_denies_string_formatter_at_runtime(sandbox: Sandbox) -> None:
    """It denies `string.Formatter().format` (a denied attribute)."""
    r = sandbox.execute("import string\nstring.Formatter().format('{0.real}', 1)")
    assert r.error_type == "SandboxPermissionError"


@pytest.mark.parametrize(("source", "out"), [("format(255, 'x')", "'ff'"), ("'%s-%d' % ('a', 3)", "'a-3'"),
                                             ("import string\nstring.Template('$who').substitute(who='tim')", "'tim'")])
def test_allows_the_safe_alternatives_at_runtime(sandbox: Sandbox, source: str, out: str) -> None:
    """It allows format(), `%` formatting and string.Template at runtime."""
    assert sandbox.execute(source).stdout == out + "\n"
