"""print: allowed, captured into the cell's output; ``file=`` goes through the attribute guard."""

from __future__ import annotations

import pytest

from rlm_runtime.sandbox import Sandbox
from rlm_runtime.sandbox.policy import Policy, check


@pytest.mark.parametrize("source", ["print('hi')", "print('a', 'b', sep='-', end='')", "print(*rows)", "p = print",
                                    "print('x', file=sink)", "print('x', flush=True)"])
def test_allows_print(any_policy: Policy, source: str) -> None:
    """It allows print, with any arguments, and print as a value."""
    report = check(source, any_policy)
    assert report.ok
    assert report.warnings == ()


def test_allows_print_output_at_runtime(sandbox: Sandbox) -> None:
    """It allows print's sep and end arguments, captured in stdout."""
    r = sandbox.execute("print('a', 'b', sep='-', end='!\\n')\nprint('c')")
    assert r.stdout == "a-b!\nc\n", r


def test_allows_print_inside_a_function(sandbox: Sandbox) -> None:
    """It allows print inside a function (RestrictedPython binds a printer per scope)."""
    assert sandbox.execute("def f():\n    print('inner')\nf()").stdout == "inner\n"


def test_allows_print_to_file_none(sandbox: Sandbox) -> None:
    """It allows `file=None`, which prints to the cell's output."""
    assert sandbox.execute("print('to out', file=None)").stdout == "to out\n"


def test_allows_print_to_an_object_with_write(sandbox: Sandbox) -> None:
    """It allows `file=` an object with a write method, which receives the text."""
    r = sandbox.execute(
        "import collections\nparts = []\nSink = collections.namedtuple('Sink', ['write'])\n"
        "print('hello', 'world', file=Sink(parts.append))\nparts")
    assert r.stdout == "['hello', ' ', 'world', '\\n']\n", r


def test_denies_print_to_an_object_without_write(sandbox: Sandbox) -> None:
    """It denies `file=5`: the write method is looked up first and is missing."""
    r = sandbox.execute("print('x', file=5)")
    assert r.error_type == "AttributeError"
    assert r.stdout == ""


def test_denies_print_to_a_guarded_object(sandbox: Sandbox) -> None:
    """It denies `file=` a generator: its write is looked up through the attribute guard."""
    r = sandbox.execute("print('x', file=(i for i in []))")
    assert r.error_type == "SandboxPermissionError"
    assert "generator objects" in r.error


def test_denies_assigning_printed(any_policy: Policy) -> None:
    """It denies `printed = 1`: RestrictedPython reserves the name."""
    assert check("printed = 1", any_policy).errors[0].message == '"printed" is a reserved name.'


def test_allows_reading_printed_with_a_warning(default: Policy) -> None:
    """It allows reading `printed` inside a function, with RestrictedPython's warning and line."""
    report = check("def f():\n    return printed", default)
    assert report.ok
    assert [(w.message, w.line) for w in report.warnings] == [("Doesn't print, but reads 'printed' variable.", 1)]


def test_allows_reading_printed_at_top_level_with_a_clean_warning(default: Policy) -> None:
    """It allows reading `printed` at top level, with a warning free of a 'Line None:' prefix."""
    report = check("x = printed", default)
    assert report.ok
    assert [(w.message, w.line) for w in report.warnings] == [("Doesn't print, but reads 'printed' variable.", None)]
