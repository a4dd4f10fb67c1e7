"""Imports: exact module names from ``[imports] allow``; everything else is refused."""

from __future__ import annotations

import pytest

from rlm_runtime.sandbox import CellLimits, Sandbox
from rlm_runtime.sandbox.policy import Policy, check, parse_policy


@pytest.mark.parametrize("module", ["re", "json", "math", "collections", "itertools", "statistics", "string", "textwrap"])
def test_allows_modules_of_both_policies(any_policy: Policy, module: str) -> None:
    """It allows `import M` for every module both shipped policies list."""
    assert check(f"import {module}", any_policy).ok


@pytest.mark.parametrize("module", ["functools", "random", "datetime", "difflib", "fractions", "heapq", "bisect"])
def test_allows_default_only_modules_in_default(default: Policy, strict: Policy, module: str) -> None:
    """It allows the larger toolbox of default and denies it in strict."""
    assert check(f"import {module}", default).ok
    report = check(f"import {module}", strict)
    assert not report.ok
    assert f"import of '{module}' is not allowed" in report.errors[0].message


@pytest.mark.parametrize("module", ["os", "sys", "subprocess", "socket", "ctypes", "builtins", "importlib", "io", "pickle", "_thread"])
def test_denies_modules_outside_the_list(any_policy: Policy, module: str) -> None:
    """It denies a module not in the allow list, naming the allowed ones and the line."""
    report = check(f"x = 1\nimport {module}", any_policy)
    assert not report.ok
    (finding,) = report.errors
    assert finding.line == 2
    assert finding.message.startswith(f"import of '{module}' is not allowed; allowed modules: ")
    assert ", ".join(sorted(any_policy.allowed_imports)) in finding.message


def test_denies_one_bad_module_in_a_multiple_import(default: Policy) -> None:
    """It denies `import re, os` for the one module that is not allowed."""
    report = check("import re, os", default)
    assert [f.message.split(";")[0] for f in report.errors] == ["import of 'os' is not allowed"]


def test_allows_from_import_of_an_allowed_module(any_policy: Policy) -> None:
    """It allows `from re import compile, sub`."""
    assert check("from re import compile, sub", any_policy).ok


def test_denies_from_import_of_a_denied_module(any_policy: Policy) -> None:
    """It denies `from os import path`, naming the module."""
    report = check("from os import path", any_policy)
    assert "import of 'os' is not allowed" in report.errors[0].message


def test_denies_star_import(any_policy: Policy) -> None:
    """It denies `from re import *` even though re is allowed."""
    report = check("from re import *", any_policy)
    assert not report.ok
    assert '"*" imports are not allowed' in report.text()


@pytest.mark.parametrize("source", ["from . import x", "from .. import x", "from .m import x", "from .re import sub"])
def test_denies_relative_imports(any_policy: Policy, source: str) -> None:
    """It denies relative imports of any level."""
    report = check(source, any_policy)
    assert [(f.message, f.line) for f in report.errors] == [("relative imports are not allowed", 1)]


@pytest.mark.parametrize("source", ["import collections.abc", "import os.path", "from collections.abc import Mapping", "import json.decoder"])
def test_denies_dotted_submodules_not_listed(any_policy: Policy, source: str) -> None:
    """It denies a dotted submodule unless that exact dotted name is allowed."""
    report = check(source, any_policy)
    assert not report.ok
    assert "is not allowed" in report.errors[0].message


def test_allows_dotted_submodule_listed_exactly() -> None:
    """It allows `import os.path` statically when the policy lists 'os.path' exactly."""
    policy = parse_policy({"imports": {"allow": ["os.path"], "unreviewed": ["os.path"]}}, "dotted.toml")
    assert check("import os.path", policy).ok
    assert not check("import os", policy).ok


def test_denies_submodule_reached_by_from_import_at_runtime(sandbox: Sandbox) -> None:
    """It denies `from collections import abc` at runtime: abc is a module not in the list."""
    r = sandbox.execute("from collections import abc")
    assert r.error_type in ("SandboxPermissionError", "PolicyViolation")
    assert "'collections.abc' is not allowed in the sandbox: a module" in r.error


def test_denies_module_reexported_by_an_allowed_module(sandbox: Sandbox) -> None:
    """It denies `from statistics import sys` and `statistics.sys` at runtime."""
    r = sandbox.execute("from statistics import sys")
    assert r.error_type == "PolicyViolation" and "'statistics.sys' is not allowed in the sandbox: a module" in r.error
    r = sandbox.execute("import statistics\nstatistics.sys")
    assert r.error_type == "SandboxPermissionError" and "'statistics.sys' is not allowed in the sandbox: a module" in r.error


def test_denies_module_reexported_in_strict_only_when_not_listed(strict_sandbox: Sandbox) -> None:
    """It denies `re.functools` under strict, where functools is not allowed."""
    r = strict_sandbox.execute("import re\nre.functools")
    assert r.error_type == "SandboxPermissionError"


def test_denies_top_package_of_an_allowed_dotted_import() -> None:
    """It denies reaching `os` through `import os.path` when only 'os.path' is allowed."""
    policy = parse_policy({"imports": {"unreviewed": ["os.path"]}}, "dotted.toml")
    with Sandbox(policy, CellLimits(cell_timeout_s=5, kill_grace_s=0.5, memory_mb=256)) as sb:
        r = sb.execute("import os.path\nos.sep")
    assert not r.ok


def test_allows_import_as(any_policy: Policy) -> None:
    """It allows `import re as r` and `from re import sub as substitute`."""
    assert check("import re as r\nfrom re import sub as substitute", any_policy).ok


def test_denies_import_as_to_disguise_a_module(any_policy: Policy) -> None:
    """It denies `import os as re`: the module name is checked, not the alias."""
    report = check("import os as re", any_policy)
    assert "import of 'os' is not allowed" in report.errors[0].message


@pytest.mark.parametrize("source", ["import re as _r", "from re import compile as _c", "from re import _compile"])
def test_denies_underscore_import_names(any_policy: Policy, source: str) -> None:
    """It denies binding an import to a name starting with an underscore."""
    report = check(source, any_policy)
    assert "starts with \"_\"" in report.errors[0].message


def test_allows_import_as_at_runtime(sandbox: Sandbox) -> None:
    """It allows an aliased import to be used at runtime."""
    r = sandbox.execute("import re as r\nr.sub('a', 'b', 'aaa')")
    assert r.stdout == "'bbb'\n", r


def test_denies_an_import_at_runtime_with_the_policy_error(sandbox: Sandbox) -> None:
    """It denies `import os` in a sandbox cell with a PolicyViolation, not by running it."""
    r = sandbox.execute("import os")
    assert r.error_type == "PolicyViolation"
    assert "import of 'os' is not allowed" in r.error


def test_allows_used_names_to_list_imported_names(default: Policy) -> None:
    """It allows an import and reports the names the cell reads."""
    report = check("import re\nx = re.sub('a', 'b', text)", default)
    assert {"re", "text"} <= report.used_names
