"""PolicyReport: data first (ok, errors, warnings, used_names), and text fit to show a model."""

from __future__ import annotations

import json

from rlm_runtime.sandbox.policy import Finding, Policy, check


def test_allows_a_clean_report(default: Policy) -> None:
    """It allows clean code: ok, no findings, compiled code, and a one-line text."""
    report = check("import re\nx = len(y)", default)
    assert report.ok and report.errors == () and report.warnings == ()
    assert report.code is not None and isinstance(report.compiled, bytes)
    assert report.text() == str(report) == "Code allowed by sandbox policy 'default'."


def test_allows_used_names_to_be_reported(default: Policy) -> None:
    """It allows the names a cell reads to be listed, as RestrictedPython collects them (not those it only binds)."""
    assert check("import re\nx = len(y)", default).used_names == frozenset({"len", "y"})
    assert check("x = 1\nprint(x)", default).used_names == frozenset({"x"})


def test_denies_with_every_reason_in_the_text(default: Policy) -> None:
    """It denies with a text that names the policy and lists every reason with its line."""
    report = check("import os\nimport sys", default)
    assert not report.ok and report.code is None and report.compiled is None
    lines = report.text().splitlines()
    assert lines[0] == "Code refused by sandbox policy 'default':"
    assert sorted(lines[1:]) == sorted(f"  - {f}" for f in report.errors)
    assert {f.line for f in report.errors} == {1, 2}
    assert all("is not allowed" in line for line in lines[1:])


def test_denies_with_reasons_in_source_order(default: Policy) -> None:
    """It denies with its reasons listed in the order of the source lines."""
    report = check("import os\nimport sys\nimport socket", default)
    assert [f.line for f in report.errors] == [1, 2, 3]


def test_allows_warnings_in_the_text(default: Policy) -> None:
    """It allows code with warnings, listing them under 'Warnings:'."""
    report = check("try:\n    pass\nexcept:\n    pass", default)
    assert report.ok
    assert report.text().splitlines()[:2] == ["Warnings:", f"  - line 3: {report.warnings[0].message}"]


def test_allows_the_report_as_json(default: Policy) -> None:
    """It allows to_dict() to be dumped as JSON with every field."""
    data = json.loads(json.dumps(check("import os\nx = 1", default).to_dict()))
    assert set(data) == {"ok", "policy", "errors", "warnings", "used_names"}
    assert data["ok"] is False and data["policy"] == "default"
    assert data["errors"][0]["line"] == 1 and "'os'" in data["errors"][0]["message"]


def test_allows_findings_without_a_line() -> None:
    """It allows a finding with no line: its text is the bare message."""
    assert (str(Finding("too big")), str(Finding("bad", 4))) == ("too big", "line 4: bad")


def test_denies_with_policy_errors_before_restricted_python_errors(default: Policy) -> None:
    """It denies on the policy's own rules first; RestrictedPython's findings come once those pass."""
    report = check("import os\n_x = 1", default)
    assert [f.line for f in report.errors] == [1]
