"""`rlm policy check`, driven through the real entry point (and once as a subprocess)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlm_runtime.cli import main

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def allowed(tmp_path: Path) -> Path:
    path = tmp_path / "allowed.py"
    path.write_text("import re\nwords = re.findall(r'\\w+', 'a b c')\nlen(words)\n")
    return path


@pytest.fixture
def refused(tmp_path: Path) -> Path:
    path = tmp_path / "refused.py"
    path.write_text("x = 1\nimport os\ny = x.__class__\n")
    return path


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


def test_allows_a_clean_file_with_exit_0(allowed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It allows a clean file: exit 0 and one line saying so."""
    assert main(["policy", "check", str(allowed)]) == 0
    out, err = capsys.readouterr()
    assert out == "Code allowed by sandbox policy 'default'.\n"
    assert err == ""


def test_denies_a_bad_file_with_exit_1_and_the_reasons(refused: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It denies a file breaking the rules: exit 1, and every reason with its line on stdout."""
    assert main(["policy", "check", str(refused)]) == 1
    out, err = capsys.readouterr()
    assert out.startswith("Code refused by sandbox policy 'default':\n")
    assert "  - line 2: import of 'os' is not allowed" in out
    assert err == ""


def test_denies_what_only_restricted_python_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It denies a dunder attribute with exit 1 and RestrictedPython's reason."""
    path = tmp_path / "dunder.py"
    path.write_text("x = 1\ny = x.__class__\n")
    assert main(["policy", "check", str(path)]) == 1
    assert '  - line 2: "__class__" is an invalid attribute name' in capsys.readouterr().out


def test_allows_warnings_with_exit_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It allows a file with warnings (exit 0) and prints them."""
    path = tmp_path / "bare.py"
    path.write_text("try:\n    x = 1\nexcept:\n    pass\n")
    assert main(["policy", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Warnings:\n  - line 3: catching BaseException")


@pytest.mark.parametrize("policy", ["strict", "PATH"])
def test_denies_under_the_policy_given_by_name_or_path(tmp_path: Path, capsys: pytest.CaptureFixture[str], policy: str) -> None:
    """It denies under the policy named by --policy, by name or by TOML path."""
    source = tmp_path / "cls.py"
    source.write_text("class C:\n    pass\n")
    if policy == "PATH":
        path = tmp_path / "noclass.toml"
        path.write_text('name = "noclass"\n[code]\ndeny_constructs = ["ClassDef"]\n')
        policy = str(path)
    assert main(["policy", "check", str(source)]) == 0
    capsys.readouterr()
    assert main(["policy", "check", str(source), "--policy", policy]) == 1
    out = capsys.readouterr().out
    assert "line 1: ClassDef is not allowed by this policy" in out
    assert "'strict'" in out or "'noclass'" in out


def test_allows_json_output_as_exactly_one_object(allowed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It allows --json: stdout is exactly one JSON object, on one line."""
    assert main(["policy", "check", str(allowed), "--json"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.endswith("\n")
    data = json.loads(out)
    assert data == {"ok": True, "policy": "default", "errors": [], "warnings": [], "used_names": ["len", "re", "words"]}


def test_denies_with_json_output_as_exactly_one_object(refused: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It denies with --json: exit 1, one JSON object with the reasons and lines."""
    assert main(["policy", "check", str(refused), "--json", "--policy", "strict"]) == 1
    out = capsys.readouterr().out
    data = json.loads(out)
    assert out.count("\n") == 1
    assert data["ok"] is False and data["policy"] == "strict"
    assert [e["line"] for e in data["errors"]] == [2]


def test_allows_reading_from_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """It allows `-` to read the source from standard input."""
    _stdin(monkeypatch, b"import json\njson.dumps([1])\n")
    assert main(["policy", "check", "-"]) == 0
    assert capsys.readouterr().out == "Code allowed by sandbox policy 'default'.\n"


def test_denies_from_stdin_with_json(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """It denies bad input read from stdin, as JSON."""
    _stdin(monkeypatch, b"import socket\n")
    assert main(["policy", "check", "-", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["errors"][0]["line"] == 1


def test_denies_invalid_utf8_with_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It denies a file that is not UTF-8 (exit 1), naming the line."""
    path = tmp_path / "latin.py"
    path.write_bytes(b"x = 1\ns = 'caf\xe9'\n")
    assert main(["policy", "check", str(path)]) == 1
    assert "line 2: source is not valid UTF-8" in capsys.readouterr().out


def test_denies_a_missing_file_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It denies a missing file: exit 2, one error line on stderr, the error as the one JSON object on stdout."""
    assert main(["policy", "check", str(tmp_path / "nope.py"), "--json"]) == 2
    out, err = capsys.readouterr()
    assert json.loads(out) == {"error": f"no such file: {tmp_path / 'nope.py'}", "error_type": "UsageError"}
    assert out.count("\n") == 1
    assert err == f"rlm: error: no such file: {tmp_path / 'nope.py'}\n"


def test_denies_a_directory_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It denies a directory given as the file: exit 2."""
    assert main(["policy", "check", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


def test_denies_an_unknown_policy_with_exit_2(allowed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It denies an unknown policy name: exit 2, and the error lists the available ones."""
    assert main(["policy", "check", str(allowed), "--policy", "nosuch"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "rlm: error: no policy named 'nosuch'; available: default, strict\n"


def test_denies_an_invalid_policy_file_with_exit_2(allowed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It denies a policy file with invalid TOML: exit 2, one line, no traceback."""
    bad = tmp_path / "bad.toml"
    bad.write_text("[code\n")
    assert main(["policy", "check", str(allowed), "--policy", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rlm: error: ") and "invalid TOML" in err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("argv", [["policy", "check"], ["policy", "check", "x.py", "--bogus"], ["policy", "check", "x.py", "--policy"],
                                  ["policy"], ["policy", "lint", "x.py"]])
def test_denies_bad_options_with_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """It denies a missing argument, an unknown option or action: argparse exits 2 with usage."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: rlm") and "error: " in err


def test_allows_the_module_to_run_as_a_program(tmp_path: Path) -> None:
    """It allows `python -m rlm_runtime.cli policy check - --json` from stdin, with real exit codes."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "rlm_runtime.cli", "policy", "check", "-", "--json"]
    ok = subprocess.run(cmd, input=b"import re\nre.escape('a.b')\n", capture_output=True, env=env, cwd=tmp_path, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["ok"] is True
    bad = subprocess.run(cmd, input=b"import os\n", capture_output=True, env=env, cwd=tmp_path, timeout=60)
    assert bad.returncode == 1
    assert json.loads(bad.stdout)["errors"][0]["line"] == 1
    usage = subprocess.run([*cmd[:5], str(tmp_path / "missing.py")], capture_output=True, env=env, cwd=tmp_path, timeout=60)
    assert usage.returncode == 2
    assert usage.stdout == b"" and usage.stderr.startswith(b"rlm: error: no such file")
