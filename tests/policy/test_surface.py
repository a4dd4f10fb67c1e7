"""The reviewed surface: every public name of every module a shipped policy allows has a
verdict, and what has none is refused (``rlm_runtime/sandbox/surface.py``)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from rlm_runtime.errors import ConfigError
from rlm_runtime.sandbox import Sandbox, surface
from rlm_runtime.sandbox.policy import Policy, load_policy

SHIPPED = sorted(p.stem for p in (Path(__file__).parents[2] / "sandbox_policies").glob("*.toml"))
SHIPPED_MODULES = sorted({m for name in SHIPPED for m in load_policy(name).allowed_imports})


def test_shipped_policies_found() -> None:
    """It finds the shipped policies and their modules (the tests below would pass on nothing)."""
    assert {"default", "strict"} <= set(SHIPPED) and "json" in SHIPPED_MODULES


@pytest.mark.parametrize("module", SHIPPED_MODULES)
def test_every_public_name_has_a_verdict(module: str) -> None:
    """It has a verdict for every public attribute the running Python gives the module."""
    real = importlib.import_module(module)
    missing = [n for n in dir(real) if not n.startswith("_") and n not in surface.REVIEWED[module]]
    assert not missing, f"{module}: no verdict in rlm_runtime/sandbox/surface.py for {missing}"


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_policies_use_reviewed_modules_only(name: str) -> None:
    """It ships no policy that allows an unreviewed module."""
    policy = load_policy(name)
    assert policy.unreviewed_imports == ()
    assert all(surface.is_reviewed(m) for m in policy.allowed_imports)


@pytest.mark.parametrize("module", SHIPPED_MODULES)
def test_view_holds_only_what_the_table_hands_out(module: str) -> None:
    """It builds each module view from allowed and wrapped names only, and never a module."""
    view = surface.view(module)
    public = {n for n in vars(view) if not n.startswith("_")}
    assert public <= {n for n, v in surface.REVIEWED[module].items() if v in (surface.ALLOW, surface.WRAP)}
    assert not any(type(getattr(view, n)).__name__ == "module" for n in public)


def test_unknown_name_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    """It refuses a name a new Python release adds to a reviewed module."""
    monkeypatch.setattr(json, "brand_new_helper", lambda: "hi", raising=False)
    monkeypatch.setattr(surface, "_views", {})
    assert "brand_new_helper" not in vars(surface.view("json"))
    assert "not in the sandbox's reviewed surface" in (surface.refusal("json", "brand_new_helper") or "")


def test_unknown_name_refused_in_the_worker(sandbox: Sandbox) -> None:
    """It refuses an unknown name of a reviewed module in a cell, by attribute and by import."""
    for code in ("import json\njson.no_such_thing", "from json import no_such_thing"):
        result = sandbox.execute(code)
        assert result.error_type in ("SandboxPermissionError", "PolicyViolation") and "reviewed surface" in (result.error or "")


def test_denied_names_say_why(sandbox: Sandbox) -> None:
    """It names the reason when it refuses a reviewed, denied name."""
    result = sandbox.execute("import datetime\ndatetime.datetime_CAPI")
    assert result.error_type == "SandboxPermissionError" and "C capsule" in (result.error or "")


def test_policy_allowing_an_unreviewed_module_refused(tmp_path: Path) -> None:
    """It refuses a policy that allows a module with no review unless the policy says so."""
    path = tmp_path / "p.toml"
    path.write_text('[imports]\nallow = ["re", "csv"]\n')
    with pytest.raises(ConfigError, match=r"csv.*reviewed surface.*unreviewed"):
        load_policy(str(path))


def test_policy_marking_a_module_unreviewed(tmp_path: Path) -> None:
    """It allows an unreviewed module the policy lists under [imports] unreviewed, real and whole."""
    path = tmp_path / "p.toml"
    path.write_text('[imports]\nallow = ["re"]\nunreviewed = ["csv"]\n')
    policy = load_policy(str(path))
    assert policy.allowed_imports == ("re", "csv") and policy.unreviewed_imports == ("csv",)
    with Sandbox(policy) as sb:
        assert sb.execute("import csv\nprint(csv.QUOTE_ALL, csv.reader(['a,b']).__next__ is None)").error_type == "PolicyViolation"
        assert sb.execute("import csv\nprint(list(csv.reader(['a,b'])))").stdout == "[['a', 'b']]\n"


def test_programmatic_policy_checked_too() -> None:
    """It applies the same rule to a Policy built in Python."""
    with pytest.raises(ValueError, match="reviewed surface"):
        Policy(allowed_imports=("os",))
    assert Policy(allowed_imports=("os",), unreviewed_imports=("os",)).unreviewed_imports == ("os",)
