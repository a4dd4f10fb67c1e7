"""Modules: introspection and OS modules, reached by import or through allowed modules."""

from __future__ import annotations

import pytest
from hostile import Attacker

# What an attacker does with os or sys once it has them.
READ_SECRET = "print(m.environ.get({env!r}), m.open({path!r}).read())"


@pytest.mark.parametrize(
    "module",
    ["sys", "inspect", "gc", "os", "posix", "subprocess", "socket", "ctypes", "pickle", "marshal",
     "importlib", "builtins", "operator", "typing", "io", "codecs", "signal", "threading", "_thread", "types"],
)
def test_import_of_a_forbidden_module(attacker: Attacker, module: str) -> None:
    """It denies importing a module outside the allow-list."""
    code = f"import {module} as m\n" + READ_SECRET.format(env=attacker.secret["env"], path=attacker.secret["path"])
    r = attacker.refused(code, "PolicyViolation")
    assert f"import of '{module}' is not allowed" in r.error


@pytest.mark.parametrize(
    "code",
    [
        "import statistics\nm = statistics.sys.modules['os']",
        "import json\nm = json.codecs",
        "import re\nm = re.copyreg",
        "import datetime\nm = datetime.sys.modules['os']",
        "import fractions\nm = getattr(fractions, 'sys').modules['os']",
    ],
    ids=["statistics.sys", "json.codecs", "re.copyreg", "datetime.sys", "getattr-fractions.sys"],
)
def test_forbidden_module_as_an_attribute(attacker: Attacker, code: str) -> None:
    """It denies a forbidden module reached as an attribute of an allowed one."""
    code += "\n" + READ_SECRET.format(env=attacker.secret["env"], path=attacker.secret["path"])
    r = attacker.refused(code, "SandboxPermissionError", "PolicyViolation")
    assert "not allowed" in r.error


@pytest.mark.parametrize(
    "code",
    [
        "from statistics import sys\nm = sys.modules['os']",
        "from json import codecs as m",
        "from re import copyreg as m",
        "from datetime import sys\nm = sys.modules['os']",
        "from fractions import sys\nm = sys.modules['posix']",
    ],
    ids=["statistics-sys", "json-codecs", "re-copyreg", "datetime-sys", "fractions-sys"],
)
def test_forbidden_module_through_from_import(attacker: Attacker, code: str) -> None:
    """It denies 'from allowed import forbidden_module', which bypassed _getattr_ (fixed in guards.py)."""
    code += "\n" + READ_SECRET.format(env=attacker.secret["env"], path=attacker.secret["path"])
    r = attacker.refused(code, "SandboxPermissionError", "PolicyViolation")
    assert "not allowed" in r.error


def test_private_module_reference(attacker: Attacker) -> None:
    """It denies random._os (static check)."""
    code = "import random\nm = random._os\n" + READ_SECRET.format(env=attacker.secret["env"], path=attacker.secret["path"])
    attacker.refused(code, "PolicyViolation")


def test_private_module_reference_through_getattr(attacker: Attacker) -> None:
    """It denies getattr(collections, '_sys') and getattr(random, '_os') at run time."""
    code = "import collections, random\nm = getattr(random, '_os') or getattr(collections, '_sys')\n"
    attacker.refused(code + READ_SECRET.format(env=attacker.secret["env"], path=attacker.secret["path"]), "AttributeError")


def test_private_name_through_from_import(attacker: Attacker) -> None:
    """It denies from random import _os."""
    attacker.refused("from random import _os as m\n" + READ_SECRET.format(env="X", path="/"), "PolicyViolation")


@pytest.mark.parametrize(
    "code",
    [
        "from functools import *",
        "from . import sandbox",
        "import os as json",
        "import json.decoder",
        "from string import Formatter",
        "from functools import update_wrapper",
    ],
    ids=["star", "relative", "alias", "submodule", "denied-attribute", "denied-function"],
)
def test_import_forms(attacker: Attacker, code: str) -> None:
    """It denies star, relative, aliased and submodule imports and denied names."""
    attacker.refused(code, "PolicyViolation")


@pytest.mark.parametrize(
    "code",
    [
        "m = __import__('os')",
        "m = __builtins__['__import__']('os')",
        "m = __loader__.load_module('os')",
        "m = __spec__.loader.load_module('os')",
        "m = __builtins__['open']",
    ],
    ids=["__import__", "__builtins__-subscript", "__loader__", "__spec__", "__builtins__-open"],
)
def test_import_machinery(attacker: Attacker, code: str) -> None:
    """It denies the import machinery: __import__, __builtins__, __loader__, __spec__."""
    attacker.refused(code + "\n" + READ_SECRET.format(env=attacker.secret["env"], path=attacker.secret["path"]), "PolicyViolation")


def test_import_machinery_through_getattr(attacker: Attacker) -> None:
    """It denies the loader and the sys.modules of an allowed module at run time."""
    code = "import json\nloader = getattr(json, '__loader__')\nm = loader.load_module('os')"
    attacker.refused(code, "AttributeError")
