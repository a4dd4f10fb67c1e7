"""Red-team findings against the Python layer (default policy), fixed: each test replays one attack and proves it is refused."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hostile import Attacker

from rlm_runtime.sandbox import CellLimits, Sandbox

CONTEXT_TEXT = "the only text this worker may read\n"

# A str whose startswith() lies: guarded setattr()/delattr() test the name with isinstance()
# and name.startswith("_"), so this passes as a name without an underscore.
LYING_STR = "class S(str):\n    def startswith(self, prefix):\n        return False\n"


@pytest.fixture
def with_context(secret: dict[str, str]) -> Iterator[Attacker]:
    with Sandbox("default", CellLimits(cell_timeout_s=5, kill_grace_s=0.5, memory_mb=256), contexts=[CONTEXT_TEXT]) as sb:
        yield Attacker(sb, secret)


def test_final_rebound_by_a_generator_finalizer(attacker: Attacker) -> None:
    """It denies rebinding FINAL for later cells from a finalizer that runs while the reserved names are restored.

    The worker restores FINAL, FINAL_VAR, SHOW_VARS in that order with ns.update(); dropping the
    cell's value for SHOW_VARS finalizes a suspended generator, whose finally clause rebinds FINAL
    after it was restored. The next cell's FINAL is the attacker's.
    """
    plant = (
        "def g():\n"
        "    try:\n"
        "        yield 1\n"
        "    finally:\n"
        "        global FINAL\n"
        "        FINAL = lambda answer: print('hijacked:', answer)\n"
        "gen = g()\n"
        "next(gen)\n"
        "SHOW_VARS = gen\n"
        "del gen\n"
    )
    attacker.run(plant)
    r = attacker.run("FINAL('the honest answer')")
    assert "hijacked" not in r.stdout, r.stdout
    assert r.has_final and r.final == "the honest answer", r


def test_final_rebound_by_a_del_method(attacker: Attacker) -> None:
    """It denies the same rebinding from a __del__ method (set with a lying str, see below)."""
    plant = (
        LYING_STR
        + "def hijack(self):\n"
        "    global FINAL\n"
        "    FINAL = lambda answer: print('hijacked:', answer)\n"
        "class Evil:\n"
        "    pass\n"
        "setattr(Evil, S('__del__'), hijack)\n"
        "SHOW_VARS = Evil()\n"
    )
    attacker.run(plant)
    r = attacker.run("FINAL('the honest answer')")
    assert "hijacked" not in r.stdout, r.stdout
    assert r.has_final and r.final == "the honest answer", r


def test_setattr_of_a_dunder_named_by_a_lying_str(attacker: Attacker) -> None:
    """It denies setattr() with a str subclass whose startswith() lies (guarded_setattr trusts it)."""
    code = (
        LYING_STR
        + "class U:\n    pass\n"
        "setattr(U, S('__getattr__'), lambda self, name: 'dunder set: ' + name)\n"
        "print(U().anything)"
    )
    attacker.refused(code, "SandboxPermissionError", "TypeError")


def test_delattr_of_a_dunder_named_by_a_lying_str(attacker: Attacker) -> None:
    """It denies delattr() with a lying str name."""
    code = LYING_STR + "class U:\n    def __init__(self):\n        self.x = 1\ndelattr(U, S('__init__'))\nprint(U())"
    attacker.refused(code, "SandboxPermissionError", "TypeError")


def test_singledispatch_registry_hands_out_the_real_type(attacker: Attacker) -> None:
    """It denies the real `type` back from singledispatch's registry after register(type, f).

    The register() wrapper unwraps the stand-in (real_class) and the registry keys then hold the
    real metaclass: three-argument type(), fixed for the `type` name, works again.
    """
    code = (
        "import functools\n"
        "d = functools.singledispatch(repr)\n"
        "d.register(type, repr)\n"
        "T = [k for k in d.registry if k is not object][0]\n"
        "C = T('C', (), {'__module__': 'anything', '__init_subclass__': print})\n"
        "print(C, C.mro())"
    )
    r = attacker.refused(code, "SandboxPermissionError")
    assert "anything.C" not in r.stdout


def test_arbitrary_setattr_through_userdict_copy(attacker: Attacker) -> None:
    """It denies setattr on objects user code does not own (module views) through copy's _reconstruct.

    UserDict.copy() on a subclass runs copy.copy(self) unguarded; a __reduce_ex__ (set with the
    lying str) returns (factory, args, (None, slotstate)) and copy then calls the real setattr(y,
    key, value) on whatever the factory returns. The module view is cached: later cells see it too.
    """
    code = (
        LYING_STR
        + "import collections, json\n"
        "class D(collections.UserDict):\n    pass\n"
        "setattr(D, S('__reduce_ex__'), lambda self, proto: (lambda: json, (), (None, {'loads': 'pwned'})))\n"
        "setattr(D, S('__copy__'), None)\n"
        "try:\n"
        "    D().copy()\n"
        "except AttributeError:\n"
        "    pass\n"
        "print(json.loads)"
    )
    attacker.refused(code, "SandboxPermissionError", "TypeError")
    r = attacker.run("import json\nprint(json.loads('[1]'))")
    assert r.error is None and r.stdout == "[1]\n", r


def test_context_handle_class_rewritten_for_later_cells(with_context: Attacker) -> None:
    """It denies rewriting the context handle's class (the same copy gadget): peek() then lies to later cells."""
    code = (
        LYING_STR
        + "import collections\n"
        "class D(collections.UserDict):\n    pass\n"
        "fake = {'peek': lambda self, n=2000: 'attacker text'}\n"
        "setattr(D, S('__reduce_ex__'), lambda self, proto: (lambda: type(context), (), (None, fake)))\n"
        "setattr(D, S('__copy__'), None)\n"
        "try:\n"
        "    D().copy()\n"
        "except AttributeError:\n"
        "    pass\n"
    )
    with_context.refused(code, "SandboxPermissionError", "TypeError")
    r = with_context.run("print(peek(100))")
    assert "attacker text" not in r.stdout and "the only text" in r.stdout, r


def test_context_close_breaks_later_cells(with_context: Attacker) -> None:
    """It denies context.close(): the reserved handle is released for every later cell (peek, grep, chunk fail)."""
    with_context.run("context.close()")
    r = with_context.run("print(peek(100), end='')")
    assert r.error is None, r
    assert "the only text" in r.stdout, r
