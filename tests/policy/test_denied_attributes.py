"""Denied module attributes (``[attributes] deny``): reachable without an underscore, so
refused by name, statically for ``from m import x`` and at runtime for every other route."""

from __future__ import annotations

import pytest

from rlm_runtime.sandbox import Sandbox
from rlm_runtime.sandbox.policy import Policy, check


@pytest.mark.parametrize("source", ["from string import Formatter", "from string import Formatter as F",
                                    "from string import ascii_letters, Formatter"])
def test_denies_from_import_of_a_denied_attribute(any_policy: Policy, source: str) -> None:
    """It denies `from string import Formatter` (also aliased, or among other names)."""
    report = check(source, any_policy)
    assert [(f.message, f.line) for f in report.errors] == [("string.Formatter is not allowed", 1)]


@pytest.mark.parametrize("source", ["from functools import wraps", "from functools import update_wrapper",
                                    "from random import SystemRandom"])
def test_denies_the_other_attributes_default_lists(default: Policy, source: str) -> None:
    """It denies every attribute the default policy lists."""
    module, name = source.split()[1], source.split()[3]
    assert check(source, default).errors[0].message == f"{module}.{name} is not allowed"


def test_allows_other_attributes_of_the_same_module(any_policy: Policy) -> None:
    """It allows `from string import ascii_letters, Template`."""
    assert check("from string import ascii_letters, Template", any_policy).ok


def test_allows_plain_attribute_syntax_statically(default: Policy) -> None:
    """It allows `string.Formatter` statically (the name may be rebound), leaving it to the runtime guard."""
    assert check("import string\nstring.Formatter", default).ok


@pytest.mark.parametrize("source", [
    "import string\nstring.Formatter",
    "import string as s\ns.Formatter",
    "import string\ngetattr(string, 'Formatter')",
    "import string\ngetattr(string, 'Formatter', None)",
    "import functools\nfunctools.wraps",
    "import random\nrandom.SystemRandom",
])
def test_denies_a_denied_attribute_at_runtime(sandbox: Sandbox, source: str) -> None:
    """It denies a denied attribute reached by attribute syntax or getattr on the module."""
    r = sandbox.execute(source)
    assert r.error_type == "SandboxPermissionError", r
    assert "is not allowed by the sandbox policy" in r.error


def test_denies_hasattr_from_seeing_a_denied_attribute(sandbox: Sandbox) -> None:
    """It denies hasattr a view of a denied attribute: it answers False."""
    r = sandbox.execute("import string\nhasattr(string, 'Formatter')")
    assert r.stdout == "False\n", r


def test_denies_a_denied_attribute_through_a_reexporting_module(sandbox: Sandbox) -> None:
    """It denies `functools.wraps` reached as `re.functools.wraps`: the view of re holds no module."""
    r = sandbox.execute("import re\nre.functools.wraps")
    assert r.error_type == "SandboxPermissionError"
    assert "'re.functools' is not allowed" in r.error


def test_denies_setting_a_module_attribute(sandbox: Sandbox) -> None:
    """It denies `re.x = 1` and `del re.compile` at runtime."""
    assert "cannot set attributes of module objects" in sandbox.execute("import re\nre.x = 1").error
    assert "cannot delete attributes of module objects" in sandbox.execute("import re\ndel re.compile").error


def test_allows_non_denied_module_attributes_at_runtime(sandbox: Sandbox) -> None:
    """It allows `string.ascii_lowercase` and `string.Template` at runtime."""
    r = sandbox.execute("import string\nstring.Template('$a').substitute(a=string.ascii_lowercase[:3])")
    assert r.stdout == "'abc'\n", r
