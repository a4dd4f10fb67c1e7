"""String formatting that walks attributes: str.format, format_map, Formatter, and their wrappers."""

from __future__ import annotations

from hostile import Attacker

# Read through format: the worker's own globals, reached from FINAL (a bound method).
WORKER_GLOBALS = "{0.__func__.__globals__[os].environ} {0.__self__.sock}"


def test_str_format_attribute_walk(attacker: Attacker) -> None:
    """It denies '{0.__class__.__mro__}'.format(x)."""
    attacker.refused(f"print({WORKER_GLOBALS!r}.format(FINAL))", "NotImplementedError")


def test_str_format_map_attribute_walk(attacker: Attacker) -> None:
    """It denies '{x.__class__}'.format_map({...})."""
    attacker.refused("print('{x.__func__.__globals__}'.format_map({'x': FINAL}))", "NotImplementedError")


def test_unbound_str_format(attacker: Attacker) -> None:
    """It denies str.format reached through the type: str.format(template, x)."""
    attacker.refused(f"print(str.format({WORKER_GLOBALS!r}, FINAL))", "NotImplementedError")


def test_str_format_through_type_of_a_string(attacker: Attacker) -> None:
    """It denies type('').format_map, the type reached from an instance."""
    attacker.refused("print(type('').format_map('{x.__func__.__globals__}', {'x': FINAL}))", "NotImplementedError")


def test_string_formatter_get_field(attacker: Attacker) -> None:
    """It denies string.Formatter().get_field('0.__class__', ...)."""
    code = "import string\nprint(string.Formatter().get_field('0.__func__.__globals__', [FINAL], {}))"
    attacker.refused(code, "SandboxPermissionError")


def test_string_formatter_from_import(attacker: Attacker) -> None:
    """It denies from string import Formatter."""
    attacker.refused("from string import Formatter\nprint(Formatter().vformat('{0.__self__}', [FINAL], {}))", "PolicyViolation")


def test_userstring_format(attacker: Attacker) -> None:
    """It denies collections.UserString(template).format(x), a str.format in disguise (fixed in guards.py)."""
    code = f"import collections\nprint(collections.UserString({WORKER_GLOBALS!r}).format(FINAL))"
    r = attacker.refused(code, "SandboxPermissionError")
    assert "socket" not in r.stdout


def test_userstring_format_map_unbound(attacker: Attacker) -> None:
    """It denies collections.UserString.format_map reached through the class (fixed in guards.py)."""
    code = "import collections\nu = collections.UserString('{x.__self__.sock}')\nprint(collections.UserString.format_map(u, {'x': FINAL}))"
    attacker.refused(code, "SandboxPermissionError")


def test_str_format_through_super_of_a_subclass(attacker: Attacker) -> None:
    """It denies super(S, s).format for a str subclass S, which the name check missed (fixed in guards.py)."""
    code = (
        "S = type(type(1))('S', (str,), {})\n"
        f"s = S({WORKER_GLOBALS!r})\n"
        "print(super(S, s).format(FINAL))"
    )
    r = attacker.refused(code, "SandboxPermissionError")
    assert "socket" not in r.stdout


def test_f_string_attribute_walk(attacker: Attacker) -> None:
    """It denies f'{x.__class__}': f-string fields are ordinary attribute access."""
    attacker.refused("print(f'{FINAL.__func__.__globals__}')", "PolicyViolation")


def test_format_builtin_spec(attacker: Attacker) -> None:
    """It denies the format() builtin walking attributes through its spec."""
    attacker.refused("print(format(FINAL, '{0.__func__.__globals__}'))", "TypeError")
