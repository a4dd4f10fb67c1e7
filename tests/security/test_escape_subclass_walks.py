"""Subclass walks: from any object up to ``object``, then down to every class in the process."""

from __future__ import annotations

from hostile import Attacker

# What an attacker does once it holds the list of all classes: find one whose methods'
# globals hold the os module, and read the environment or a file through it.
LOOT = (
    "    for c in subs:\n"
    "        if c.__name__ == '_wrap_close':\n"
    "            g = c.__init__.__globals__\n"
    "            print(g['environ'], g['open']({path!r}).read())\n"
)
# The same, spelled with getattr so that only the run-time guard can stop it.
LOOT_AT_RUN_TIME = (
    "    for c in subs:\n"
    "        if getattr(c, '__name__') == '_wrap_close':\n"
    "            g = getattr(getattr(c, '__init__'), '__globals__')\n"
    "            print(g['environ'], g['open']({path!r}).read())\n"
)


def test_dunder_subclass_walk(attacker: Attacker) -> None:
    """It denies ().__class__.__bases__[0].__subclasses__()."""
    code = "if True:\n    subs = ().__class__.__bases__[0].__subclasses__()\n" + LOOT.format(path=attacker.secret["path"])
    attacker.refused(code, "PolicyViolation")


def test_subclass_walk_via_type_builtin(attacker: Attacker) -> None:
    """It denies type(()).__base__ reached through getattr at run time."""
    code = "if True:\n    subs = getattr(getattr(type(()), '__base__'), '__subclasses__')()\n"
    code += LOOT_AT_RUN_TIME.format(path=attacker.secret["path"])
    r = attacker.refused(code, "AttributeError")
    assert "__base__" in r.error


def test_subclass_walk_via_mro(attacker: Attacker) -> None:
    """It denies type(()).mro()[-1].__subclasses__() (static check)."""
    code = "if True:\n    subs = type(()).mro()[-1].__subclasses__()\n" + LOOT.format(path=attacker.secret["path"])
    attacker.refused(code, "PolicyViolation")


def test_subclass_walk_via_mro_and_getattr(attacker: Attacker) -> None:
    """It denies getattr(type(()).mro()[-1], '__subclasses__') at run time."""
    code = "if True:\n    subs = getattr(type(()).mro()[-1], '__subclasses__')()\n" + LOOT_AT_RUN_TIME.format(path=attacker.secret["path"])
    r = attacker.refused(code, "AttributeError", "SandboxPermissionError")
    assert "__subclasses__" in r.error or "'mro' is not available" in r.error


def test_subclass_walk_via_metaclass(attacker: Attacker) -> None:
    """It denies the real type, reached as type(type(1)), listing the subclasses of object."""
    code = "if True:\n    subs = getattr(type(type(1)), '__subclasses__')(object)\n" + LOOT_AT_RUN_TIME.format(path=attacker.secret["path"])
    attacker.refused(code, "AttributeError")


def test_three_argument_type(attacker: Attacker) -> None:
    """It denies type() with three arguments."""
    r = attacker.refused("X = type('X', (object,), {'leak': 1})", "SandboxPermissionError")
    assert "three arguments" in r.error


def test_dir_and_hasattr_hide_dunders(attacker: Attacker) -> None:
    """It denies dunder names to dir() and hasattr(), so they cannot be discovered either."""
    r = attacker.run("print(dir(()), hasattr((), '__class__'), hasattr(type(1), '__subclasses__'), hasattr(FINAL, '__self__'))")
    assert r.error is None
    assert "__" not in r.stdout and r.stdout.endswith("False False False\n"), r.stdout
