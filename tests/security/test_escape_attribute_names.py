"""Attribute names the static check cannot see: computed, captured, or spelled in Unicode."""

from __future__ import annotations

import pytest
from hostile import Attacker


def test_concatenated_name(attacker: Attacker) -> None:
    """It denies getattr(x, '__cl' + 'ass__')."""
    r = attacker.refused("c = getattr((), '__cl' + 'ass__')\nprint(c.mro())", "AttributeError")
    assert "__class__" in r.error


def test_chr_built_name(attacker: Attacker) -> None:
    """It denies getattr with a name built from chr() codes."""
    code = "name = ''.join(map(chr, [95, 95, 103, 108, 111, 98, 97, 108, 115, 95, 95]))\nprint(getattr(FINAL, name))"
    attacker.refused(code, "AttributeError")


def test_name_from_str_subclass_that_lies(attacker: Attacker) -> None:
    """It denies a getattr name of a str subclass whose startswith() lies."""
    code = (
        "class S(str):\n    def startswith(self, prefix):\n        return False\n"
        "print(getattr((), S('__class__')))"
    )
    r = attacker.refused(code, "TypeError")
    assert "must be str" in r.error


def test_reduce_getattr_chain(attacker: Attacker) -> None:
    """It denies functools.reduce(getattr, [...]) walking dunder names."""
    code = "import functools\nprint(functools.reduce(getattr, ['__class__', '__base__', '__subclasses__'], ())())"
    attacker.refused(code, "AttributeError")


def test_getattr_captured_as_default_argument(attacker: Attacker) -> None:
    """It denies dunders through getattr captured in a default argument: it is the guarded one."""
    code = "def f(g=getattr):\n    return g(f, '__globals__')\nprint(f())"
    attacker.refused(code, "AttributeError")


def test_getattr_captured_by_a_decorator(attacker: Attacker) -> None:
    """It denies a decorator that captures getattr and reads the decorated function's globals."""
    code = (
        "def grab(fn, g=getattr, h=hasattr):\n"
        "    return g(fn, '__globals__') if h(fn, 'x') or True else None\n"
        "@grab\n"
        "def target():\n"
        "    pass\n"
        "print(target['__builtins__'])"
    )
    attacker.refused(code, "AttributeError")


def test_failed_lookup_does_not_hand_out_its_target(attacker: Attacker) -> None:
    """It denies AttributeError.obj, which held a bound method's __func__ (fixed in guards.py)."""
    code = (
        "leaked = []\n"
        "for target in (FINAL, SHOW_VARS, FINAL_VAR):\n"
        "    try:\n"
        "        target.no_such_attribute\n"
        "    except AttributeError as e:\n"
        "        leaked.append(e.obj)\n"
        "print(leaked)"
    )
    r = attacker.refused(code, "SandboxPermissionError")
    assert "'AttributeError.obj' is not accessible" in (r.error or "") and "function" not in r.stdout


@pytest.mark.parametrize(
    ("code", "error_type"),
    [
        ("ｅｘｅｃ('import os')", "PolicyViolation"),  # NFKC: exec
        ("ｅｖａｌ('1')", "PolicyViolation"),  # NFKC: eval
        ("ｏｐｅｎ({path!r}).read()", "NameError"),  # NFKC: open, not a builtin here
        ("ｇｌｏｂａｌｓ()['__builtins__']", "NameError"),  # NFKC: globals
        ("_﹍import﹍_('os')", "PolicyViolation"),  # U+FE4D DASHED LOW LINE -> '_'
        ("print(()._﹍class﹍_)", "PolicyViolation"),  # NFKC: __class__
        ("print(().＿＿class＿＿)", "PolicyViolation"),  # fullwidth low line: not an identifier character
    ],
    ids=["fullwidth-exec", "fullwidth-eval", "fullwidth-open", "fullwidth-globals", "dashed-low-line-import",
         "dashed-low-line-class", "fullwidth-underscores"],
)
def test_unicode_identifiers(attacker: Attacker, code: str, error_type: str) -> None:
    """It denies names spelled with Unicode characters that NFKC folds to a blocked name."""
    attacker.refused(code.format(path=attacker.secret["path"]), error_type)


def test_fullwidth_underscores_in_a_getattr_string(attacker: Attacker) -> None:
    """It denies getattr names in fullwidth underscores: strings are not NFKC-normalised."""
    r = attacker.refused("print(getattr((), '＿＿class＿＿'))", "AttributeError")
    assert "has no attribute" in r.error
