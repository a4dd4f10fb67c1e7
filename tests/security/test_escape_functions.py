"""Function internals, and the wrappers that hand back what they wrap without any underscore."""

from __future__ import annotations

import pytest
from hostile import Attacker

LOOT = "print(g['os'].environ, g['__builtins__'])"


def test_function_globals(attacker: Attacker) -> None:
    """It denies FINAL.__func__.__globals__, the worker module's globals."""
    attacker.refused("g = FINAL.__func__.__globals__\n" + LOOT, "PolicyViolation")


def test_function_code_through_getattr(attacker: Attacker) -> None:
    """It denies getattr(f, '__code__') at run time."""
    attacker.refused("def f():\n    pass\nc = getattr(f, '__code__')\nprint(c.co_consts)", "AttributeError")


def test_function_closure(attacker: Attacker) -> None:
    """It denies f.__closure__[0].cell_contents."""
    code = "def outer():\n    x = 1\n    def inner():\n        return x\n    return inner\nprint(outer().__closure__[0].cell_contents)"
    attacker.refused(code, "PolicyViolation")


def test_building_a_function_from_a_code_object(attacker: Attacker) -> None:
    """It denies building a function with type(f)(code, globals): there is no code object to get."""
    code = (
        "def f():\n    pass\n"
        "FunctionType = type(f)\n"
        "CodeType = type(getattr(f, '__code__'))\n"
        "evil = FunctionType(CodeType(0, 0, 0, 0, 0, 0, b'', (), (), (), '', '', '', 0, b'', b''), {})\n"
    )
    attacker.refused(code, "AttributeError")


def test_code_type_from_a_function(attacker: Attacker) -> None:
    """It denies type(f.__code__) and f.__code__.replace(...) (static check)."""
    code = "def f():\n    pass\nCodeType = type(f.__code__)\ng = f.__code__.replace(co_names=('os',))"
    attacker.refused(code, "PolicyViolation")


def test_operator_attrgetter_and_methodcaller(attacker: Attacker) -> None:
    """It denies operator.attrgetter and methodcaller: operator is not importable."""
    code = "from operator import attrgetter, methodcaller\nprint(attrgetter('__func__.__globals__')(FINAL))"
    attacker.refused(code, "PolicyViolation")
    attacker.refused("import operator\nprint(operator.methodcaller('format', FINAL)('{0.__self__}'))", "PolicyViolation")


def test_typing_get_type_hints(attacker: Attacker) -> None:
    """It denies typing.get_type_hints, which evaluates string annotations: typing is not importable."""
    code = "from typing import get_type_hints\ndef f(x: '().__class__'):\n    pass\nprint(get_type_hints(f))"
    attacker.refused(code, "PolicyViolation")


def test_bound_method_self(attacker: Attacker) -> None:
    """It denies getattr(FINAL, '__self__'), the worker object behind FINAL."""
    attacker.refused("w = getattr(FINAL, '__self__')\nprint(w.sock, w.ns)", "AttributeError")


@pytest.mark.parametrize("attr", ["func", "args", "keywords"])
def test_partial_internals(attacker: Attacker, attr: str) -> None:
    """It denies functools.partial(f).func / .args / .keywords, the classic wrapper leak."""
    code = f"import functools\np = functools.partial(FINAL, 1, k=2)\nprint(p.{attr})\nprint(getattr(p, {attr!r}))"
    r = attacker.refused(code, "SandboxPermissionError")
    assert f"partial.{attr}" in r.error


def test_partialmethod_func(attacker: Attacker) -> None:
    """It denies functools.partialmethod(f).func."""
    attacker.refused("import functools\nprint(functools.partialmethod(FINAL).func)", "SandboxPermissionError")


def test_update_wrapper_copies_globals(attacker: Attacker) -> None:
    """It denies functools.update_wrapper, which copies dunder attributes such as __globals__ holders."""
    code = (
        "import functools\n"
        "holder = functools.partial(print)\n"
        "functools.update_wrapper(holder, FINAL, assigned=('__globals__',), updated=())\n"
    )
    attacker.refused(code, "SandboxPermissionError")


def test_wraps_copies_wrapped(attacker: Attacker) -> None:
    """It denies functools.wraps, which sets __wrapped__ and copies attributes between objects."""
    code = "import functools\n@functools.wraps(FINAL)\ndef w():\n    pass\nprint(w)"
    attacker.refused(code, "SandboxPermissionError")


def test_lru_cache_wrapped(attacker: Attacker) -> None:
    """It denies lru_cache(f).__wrapped__ (only the cache's own methods are reachable)."""
    code = "import functools\nc = functools.lru_cache(FINAL)\nprint(c.cache_info())\nprint(getattr(c, '__wrapped__'))"
    r = attacker.refused(code, "AttributeError")
    assert "CacheInfo" in r.stdout


def test_singledispatch_registry_is_only_what_was_registered(attacker: Attacker) -> None:
    """It denies singledispatch's registry anything beyond the functions the cell registered."""
    code = (
        "import functools\n"
        "d = functools.singledispatch(repr)\n"
        "print(sorted(repr(k) for k in d.registry))\n"
        "print(getattr(d.registry[object], '__self__'))"
    )
    r = attacker.refused(code, "AttributeError")
    assert r.stdout == "[\"<class 'object'>\"]\n"


@pytest.mark.parametrize("register", ["functools.singledispatch(repr).register", "functools.singledispatchmethod(repr).register"])
def test_string_annotation_is_not_evaluated(attacker: Attacker, register: str) -> None:
    """It denies code in a string annotation, which singledispatch evaluated unguarded (fixed in policy.py)."""
    walk = (
        "[c for c in ().__class__.__base__.__subclasses__() if c.__name__ == '_wrap_close'][0]"
        f".__init__.__globals__['open']({attacker.secret['path']!r}).read()"
    )
    code = f"import functools\nregister = {register}\ndef g(x: {walk!r}) -> '1/0':\n    return 2\nregister(g)"
    r = attacker.refused(code, "SandboxPermissionError")
    # The annotation was never looked at: the refusal is the only error.
    assert r.error.strip().splitlines()[-1].startswith("SandboxPermissionError: register() takes a class")
    assert "Errno" not in r.error


def test_string_annotation_held_in_a_variable(attacker: Attacker) -> None:
    """It denies an annotation whose string value is computed, so no static check could see it."""
    code = (
        "import functools\n"
        "hint = ''.join(['1', '/', '0'])\n"
        "d = functools.singledispatch(repr)\n"
        "@d.register\n"
        "def h(x: hint):\n"
        "    return 1\n"
    )
    r = attacker.refused(code, "SandboxPermissionError")
    assert "ZeroDivisionError" not in r.error
