"""Allowed library functions that evaluate objects user code built (issue: real builtins from
``functools.singledispatch(f).register(obj)``, which evals ``obj.__annotations__`` in
``obj.__globals__``), and the metaclasses that let user code build such objects.

Each payload, if it worked, would put the real builtins in a dict the cell owns, then read
the planted secret file and the host's environment and print them with ``ESCAPED``.
"""

from __future__ import annotations

import pytest
from hostile import Attacker

REFUSED = ("SandboxPermissionError", "PolicyViolation", "TypeError", "AttributeError")


def _loot(secret: dict[str, str]) -> str:
    """Code that turns stolen builtins in ``g`` into the secret, printed."""
    return (
        "b = g['__builtins__']\n"
        "imp = b['__import__'] if type(b) is dict else getattr(b, '__import__')\n"
        "print('ESCAPED with the real __import__:', imp('os').getpid())\n"
        f"print(imp('os').environ.get({secret['env']!r}), b['open']({secret['path']!r}).read())\n"
    )


EVIL_NAMESPACE = "{'__annotations__': {'x': \"__import__('os')\"}, '__globals__': g}"

PAYLOADS = {
    # The reported route: a class from three-argument type(), an instance to register().
    "singledispatch_register_instance": (
        "import functools\ng = {}\nT = type(type(1))\n"
        f"Evil = T('Evil', (), {EVIL_NAMESPACE})\n"
        "f = functools.singledispatch(lambda v: v)\n"
        "try:\n    f.register(Evil())\nexcept TypeError:\n    pass\n"
    ),
    # The same through the method form.
    "singledispatchmethod_register_instance": (
        "import functools\ng = {}\nT = type(type(1))\n"
        f"Evil = T('Evil', (), {EVIL_NAMESPACE})\n"
        "m = functools.singledispatchmethod(lambda self, v: v)\n"
        "try:\n    m.register(Evil())\nexcept TypeError:\n    pass\n"
    ),
    # A class-level namespace: the class object itself, made by a metaclass subclass.
    "metaclass_subclass": (
        "import functools\ng = {}\n"
        "class Meta(type(int)):\n    pass\n"
        f"Evil = Meta('Evil', (), {EVIL_NAMESPACE})\n"
        "f = functools.singledispatch(lambda v: v)\n"
        "try:\n    f.register(Evil())\nexcept TypeError:\n    pass\n"
    ),
    # Another metaclass reached from an allowed class: ABCMeta behind collections.UserDict.
    "abc_metaclass_of_an_allowed_class": (
        "import collections, functools\ng = {}\n"
        "Meta = type(collections.UserDict)\n"
        f"Evil = Meta('Evil', (), {EVIL_NAMESPACE})\n"
        "f = functools.singledispatch(lambda v: v)\n"
        "try:\n    f.register(Evil())\nexcept TypeError:\n    pass\n"
    ),
    # And the enum metaclass behind re.I, with a plain dict namespace.
    "enum_metaclass_of_a_flag": (
        "import re, functools\ng = {}\n"
        "Meta = type(type(re.I))\n"
        f"Evil = Meta.__call__(Meta, 'Evil', (), {EVIL_NAMESPACE})\n"
    ),
    # register() on a function object a library wrapped: lru_cache copies attributes of
    # what it wraps (update_wrapper), annotations included.
    "lru_cache_copies_annotations": (
        "import functools\ng = {}\n"
        "def annotated(x: \"__import__('os')\"):\n    pass\n"
        "f = functools.singledispatch(lambda v: v)\n"
        "try:\n    f.register(functools.lru_cache(annotated))\nexcept TypeError:\n    pass\n"
    ),
    # update_wrapper forging __module__ so a library class counts as the user's own.
    "update_wrapper_forges_ownership": (
        "import functools, json\ng = {}\n"
        "class Mine:\n    pass\n"
        "functools.update_wrapper(json.JSONDecoder, Mine, assigned=('__module__',))\n"
        "json.JSONDecoder.decode = lambda self, s: g\n"
    ),
    # Modules hidden behind an allowed module's plain names.
    "module_behind_a_plain_name": "import statistics\ng = {'__builtins__': statistics.sys.modules['builtins'].__dict__}\n",
    "module_behind_from_import": "from statistics import sys\ng = {'__builtins__': sys.modules['builtins'].__dict__}\n",
    "recursive_repr_copies_annotations": (
        "import functools\ng = {}\n"
        "w = functools.recursive_repr()(print)\n"
        "f = functools.singledispatch(lambda v: v)\n"
        "f.register(w)\n"
    ),
}


@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_evaluator_payload(attacker: Attacker, secret: dict[str, str], name: str) -> None:
    """It denies every route to an evaluation of a user-built object, and the secret stays put."""
    result = attacker.refused(PAYLOADS[name] + _loot(secret), *REFUSED)
    assert "ESCAPED" not in result.stdout


def test_type_three_arguments(attacker: Attacker) -> None:
    """It denies the three-argument call of type, however type was reached."""
    for expr in ("type", "type(int)", "type(type(1))", "type(type)", "type(type(type))"):
        result = attacker.refused(f"C = {expr}('C', (), {{'__module__': 'x'}})", "SandboxPermissionError")
        assert "three arguments" in (result.error or "")


def test_type_one_argument_still_answers(attacker: Attacker) -> None:
    """It allows type(x), isinstance(x, type) and comparisons with the metaclass."""
    code = ("import collections\nclass A:\n    pass\n"
            "print(type(1) is int, type(A) is type, isinstance(A, type), isinstance(1, type), issubclass(A, object),"
            " type(type(1)) == type, isinstance(collections.UserDict, type(collections.UserDict)))")
    assert attacker.run(code).stdout == "True True True False True True True\n"


def test_singledispatch_with_classes_still_works(attacker: Attacker) -> None:
    """It allows singledispatch and singledispatchmethod keyed on real classes."""
    code = (
        "import functools\n"
        "f = functools.singledispatch(lambda v: 'other')\n"
        "f.register(int, lambda v: 'int')\n"
        "@f.register(str)\ndef on_str(v):\n    return 'str'\n"
        "class K:\n"
        "    m = functools.singledispatchmethod(lambda self, v: 'other')\n"
        "    m.register(int, lambda self, v: 'int')\n"
        "print(f(1), f('a'), f(1.5), K().m(2), K().m('b'))\n"
    )
    assert attacker.run(code).stdout == "int str other int other\n"


def test_library_singledispatch_class_not_reachable(attacker: Attacker) -> None:
    """It denies reaching the library's singledispatchmethod through the wrapper's mro()."""
    result = attacker.refused("import functools\nprint(functools.singledispatchmethod.mro())", "SandboxPermissionError")
    assert "'mro' is not available" in (result.error or "")
