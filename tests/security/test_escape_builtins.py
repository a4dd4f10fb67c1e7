"""Dangerous builtins, and rebinding the names RestrictedPython's guards are called through."""

from __future__ import annotations

import pytest
from hostile import Attacker


@pytest.mark.parametrize(
    ("code", "error_type"),
    [
        ("exec('import os; print(os.environ)')", "PolicyViolation"),
        ("print(eval('__import__(\"os\").environ'))", "PolicyViolation"),
        ("c = compile('import os', 'x', 'exec')", "NameError"),
        ("breakpoint()", "PolicyViolation"),
        ("print(open({path!r}).read())", "NameError"),
        ("print(input())", "NameError"),
        ("print(globals()['__builtins__'])", "NameError"),
        ("print(locals())", "NameError"),
        ("print(vars(FINAL))", "NameError"),
        ("print(memoryview(b'x'))", "NameError"),
        ("help()", "NameError"),
        ("exit(0)", "NameError"),
    ],
    ids=["exec", "eval", "compile", "breakpoint", "open", "input", "globals", "locals", "vars", "memoryview", "help", "exit"],
)
def test_dangerous_builtin(attacker: Attacker, code: str, error_type: str) -> None:
    """It denies exec, eval, compile, breakpoint, open, input, globals, locals, vars and friends."""
    attacker.refused(code.format(path=attacker.secret["path"]), error_type)


def test_builtin_captured_in_a_default_argument(attacker: Attacker) -> None:
    """It denies a default argument capturing a blocked builtin: there is none to capture."""
    attacker.refused("def f(o=open):\n    return o\nprint(f())", "NameError")


@pytest.mark.parametrize(
    "code",
    [
        "def f(_getattr_=lambda o, n: n):\n    return ().__class__",
        "g = lambda _getattr_: _getattr_",
        "def f(x, /, _getiter_=None):\n    return x",
        "def f(*, _write_=None):\n    return 1",
        "def f(*_getitem_):\n    return 1",
        "def f(**_print_):\n    return 1",
        "_getattr_ = lambda o, n, *d: 1",
        "print((_getattr_ := 1))",
        "import json as _getattr_",
        "for _getiter_ in [list]:\n    pass",
        "with open as _write_:\n    pass",
        "try:\n    pass\nexcept Exception as _getattr_:\n    pass",
        "def f():\n    global _getattr_\n    _getattr_ = 1",
        "del _getattr_",
        "_apply_ = 1",
        "_rlm_show_ = print",
        "x = [_getattr_ for _getattr_ in [1]]",
    ],
    ids=["default", "lambda", "positional-only", "keyword-only", "varargs", "varkw", "assign", "walrus", "import-as",
         "for-target", "with-target", "except-target", "global", "del", "apply", "show", "comprehension"],
)
def test_guard_shadowing(attacker: Attacker, code: str) -> None:
    """It denies rebinding a guard name (_getattr_, _getiter_, _write_...) in any binding form."""
    r = attacker.refused(code, "PolicyViolation")
    assert "starts with \"_\"" in r.error or "invalid variable name" in r.error


@pytest.mark.parametrize(
    "code",
    [
        "match ():\n    case object(__class__=c):\n        print(c)",
        "def gen():\n    yield 1\nmatch gen():\n    case object(gi_frame=f):\n        print(f.f_globals)",
        "import functools\nmatch functools.partial(FINAL):\n    case functools.partial(func=f):\n        print(f)",
    ],
    ids=["dunder-keyword", "frame-keyword", "partial-func"],
)
def test_match_class_pattern(attacker: Attacker, code: str) -> None:
    """It denies match statements, whose class patterns read attributes without _getattr_."""
    attacker.refused(code, "PolicyViolation")


def test_monkeypatching_an_allowed_module(attacker: Attacker) -> None:
    """It denies setting attributes on a module (json.dumps = ...)."""
    attacker.refused("import json\njson.dumps = print", "SandboxPermissionError")
    attacker.refused("import json\nsetattr(json, 'loads', print)", "SandboxPermissionError")


def test_setattr_of_a_dunder(attacker: Attacker) -> None:
    """It denies setattr() with a name starting with '_' and delattr() of a runtime object's attribute."""
    attacker.refused("d = {}\nsetattr(d, '__class__', list)", "SandboxPermissionError")
    attacker.refused("delattr(FINAL, 'x')", "SandboxPermissionError")
