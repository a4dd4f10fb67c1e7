"""`rlm sandbox run` and `rlm sandbox doctor` through the real entry point, in a subprocess."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULT_KEYS = {"stdout", "error", "error_type", "final", "has_final", "duration_s", "truncated", "worker_restarted"}
TRACEBACK = "Traceback (most recent call last)"


def rlm(*args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run `python -m rlm_runtime.cli ARGS`; never a traceback of rlm_runtime on stderr."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "rlm_runtime.cli", *args], input=stdin, capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=timeout)
    assert TRACEBACK not in done.stderr, done.stderr
    assert TRACEBACK not in done.stdout, done.stdout
    return done


def one_json_object(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    """Stdout is exactly one JSON object (one line) with every CellResult field."""
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout
    value = json.loads(lines[0])
    assert isinstance(value, dict)
    assert RESULT_KEYS <= set(value), value
    return value


@pytest.fixture
def cell(tmp_path: Path) -> Callable[[str], str]:
    """Write a cell to a file and return its path."""
    def write(code: str) -> str:
        path = tmp_path / "cell.py"
        path.write_text(code)
        return str(path)

    return write


def test_clean_code_json(cell: Callable[[str], str]) -> None:
    """It exits 0 and prints one JSON object with the cell's output and FINAL for clean code."""
    done = rlm("sandbox", "run", cell("print('hi')\nx = 6\nFINAL({'answer': [x, 2]})\nx * 7\n"), "--json")
    assert done.returncode == 0, done
    result = one_json_object(done)
    assert result["stdout"] == "hi\n42\n"
    assert result["error"] is None and result["error_type"] is None
    assert result["has_final"] is True and result["final"] == {"answer": [6, 2]}
    assert result["truncated"] is False and result["worker_restarted"] is False
    assert done.stderr == ""


@pytest.mark.parametrize("code", [
    "import os\nos.system('id')",
    "().__class__.__bases__[0].__subclasses__()",
], ids=["import-os", "subclasses"])
def test_escape_attempt_exits_1(cell: Callable[[str], str], code: str) -> None:
    """It exits 1 with one JSON object naming the error for an escape attempt."""
    done = rlm("sandbox", "run", cell(code), "--json")
    assert done.returncode == 1, done
    result = one_json_object(done)
    assert result["error_type"] in ("PolicyViolation", "NameError"), result
    assert isinstance(result["error"], str) and result["error"]


@pytest.mark.slow
def test_timeout_exits_1(cell: Callable[[str], str]) -> None:
    """It exits 1 with one JSON object for a cell that overruns --timeout 1."""
    done = rlm("sandbox", "run", cell("while True:\n    pass\n"), "--timeout", "1", "--json")
    assert done.returncode == 1, done
    result = one_json_object(done)
    assert result["error_type"] == "TimeoutError"
    assert "1s" in str(result["error"])


@pytest.mark.slow
def test_killed_worker_exits_1(cell: Callable[[str], str]) -> None:
    """It exits 1 with one JSON object when the worker must be killed (stuck in one C call)."""
    done = rlm("sandbox", "run", cell("sum(range(10**12))"), "--timeout", "1", "--json")
    assert done.returncode == 1, done
    result = one_json_object(done)
    assert result["error_type"] == "TimeoutError"
    assert result["worker_restarted"] is True


def test_lone_surrogate_output_is_valid_json(cell: Callable[[str], str]) -> None:
    """It prints valid JSON when the cell printed a lone surrogate."""
    done = rlm("sandbox", "run", cell("print(chr(0xd800))"), "--json")
    assert done.returncode in (0, 1), done
    one_json_object(done)


def test_memory_bomb_exits_1(cell: Callable[[str], str]) -> None:
    """It exits 1 with one JSON object reporting a MemoryError under --memory-mb 64."""
    done = rlm("sandbox", "run", cell("x = 'x' * 10**9"), "--memory-mb", "64", "--json")
    assert done.returncode == 1, done
    result = one_json_object(done)
    assert result["error_type"] == "MemoryError"


def test_code_from_stdin() -> None:
    """It reads the cell from standard input when FILE is '-'."""
    done = rlm("sandbox", "run", "-", "--json", stdin="print('from stdin')\n")
    assert done.returncode == 0, done
    assert one_json_object(done)["stdout"] == "from stdin\n"


def test_missing_file_exits_2(tmp_path: Path) -> None:
    """It exits 2 with a one-line error on stderr for a missing file, and the error as the JSON object."""
    missing = tmp_path / "nope.py"
    done = rlm("sandbox", "run", str(missing), "--json")
    assert done.returncode == 2, done
    assert json.loads(done.stdout) == {"error": f"no such file: {missing}", "error_type": "UsageError"}
    assert done.stdout.count("\n") == 1
    assert done.stderr.strip().splitlines() == [f"rlm: error: no such file: {missing}"]


@pytest.mark.parametrize("args", [
    ["sandbox", "run", "-", "--bogus"],
    ["sandbox", "run", "-", "--timeout", "-1"],
    ["sandbox", "run", "-", "--policy", "no-such-policy"],
], ids=["unknown-option", "negative-timeout", "unknown-policy"])
def test_bad_usage_exits_2(args: list[str]) -> None:
    """It exits 2 with an error on stderr, and no traceback, for bad usage."""
    done = rlm(*args, stdin="1+1\n")
    assert done.returncode == 2, done
    assert done.stdout == ""
    assert "error" in done.stderr


def test_plain_output_without_json(cell: Callable[[str], str]) -> None:
    """It prints the cell's output on stdout and FINAL after it, without --json."""
    done = rlm("sandbox", "run", cell("print('hello')\nFINAL('done')"))
    assert done.returncode == 0, done
    assert done.stdout == "hello\nFINAL: done\n"
    assert done.stderr == ""


@pytest.mark.parametrize("code", ["print(chr(0xd800))", "FINAL(chr(0xd800))"], ids=["print", "final"])
def test_plain_output_with_a_lone_surrogate(cell: Callable[[str], str], code: str) -> None:
    """It prints output holding a lone surrogate (escaped) without a traceback, and exits 0."""
    done = rlm("sandbox", "run", cell(code))
    assert done.returncode == 0, done


def test_plain_error_goes_to_stderr(cell: Callable[[str], str]) -> None:
    """It prints output on stdout and the error (the user's lines only) on stderr, without --json."""
    done = rlm("sandbox", "run", cell("print('before')\n{}['missing']"))
    assert done.returncode == 1, done
    assert done.stdout == "before\n"
    assert "KeyError: 'missing'" in done.stderr
    assert "line 2" in done.stderr
    assert "rlm_runtime" not in done.stderr and ".py\"" not in done.stderr


def test_doctor_text() -> None:
    """It lists every isolation layer, on or off, and exits 0."""
    done = rlm("sandbox", "doctor")
    assert done.returncode == 0, done
    assert "seccomp" in done.stdout and "landlock" in done.stdout
    assert "[on ]" in done.stdout
    assert "Memory:" in done.stdout and "up to" in done.stdout and "lazy contexts 0 of 256 MB" in done.stdout


def test_doctor_json() -> None:
    """It prints the layers as JSON with name, active and detail; seccomp and Landlock are on here."""
    done = rlm("sandbox", "doctor", "--json")
    assert done.returncode == 0, done
    layers = json.loads(done.stdout)
    assert isinstance(layers, list) and layers
    for layer in layers:
        assert {"name", "active", "detail"} <= set(layer), layer
        assert isinstance(layer["active"], bool) and isinstance(layer["detail"], str)
    by_name = {layer["name"]: layer for layer in layers}
    memory = by_name["memory"]["memory"]
    assert memory["governor"]["max_workers"] >= 1 and memory["governor"]["worker_mb"] > 0
    assert memory["use"]["host_rss_mb"] > 0 and memory["use"]["lazy_cache_budget_mb"] == 256
    if sys.platform.startswith("linux"):
        for name in ("seccomp", "landlock", "rlimits", "process_group", "empty_environment"):
            assert by_name[name]["active"] is True, by_name[name]


# ------------------------------------------------------- terminal escapes in output

#: Raw controls that would act on a terminal (C0 but newline and tab, DEL, C1, bidi controls).
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
#: A cell's text that sets the title (OSC 0/2), writes the clipboard (OSC 52), draws a hyperlink
#: (OSC 8), forges a line (cursor up, erase line, carriage return), uses the C1 CSI and a bidi override.
ATTACK = ("FAILED 3 tests\x1b[1A\x1b[2K\rall tests passed \x1b]0;t0\x07\x1b]2;t2\x07\x1b]52;c;ZXZpbA==\x07"
          "\x1b]8;;https://evil.example/\x1b\\docs\x1b]8;;\x1b\\ \x9b31mred\x07 \u202eevil")
ATTACK_SHOWN = ("FAILED 3 tests\\x1b[1A\\x1b[2K\\x0dall tests passed \\x1b]0;t0\\x07\\x1b]2;t2\\x07\\x1b]52;c;ZXZpbA==\\x07"
                "\\x1b]8;;https://evil.example/\\x1b\\docs\\x1b]8;;\\x1b\\ \\x9b31mred\\x07 \\u202eevil")
ATTACK_CELL = f"ATTACK = {ATTACK!r}\nprint(ATTACK)\n"


def test_plain_output_escapes_terminal_controls(cell: Callable[[str], str]) -> None:
    """It shows a cell's output and FINAL with their terminal controls escaped, never raw."""
    done = rlm("sandbox", "run", cell(ATTACK_CELL + "FINAL(ATTACK)\n"))
    assert done.returncode == 0, done
    assert not RAW_CONTROL.search(done.stdout + done.stderr), done.stdout
    assert done.stdout == f"{ATTACK_SHOWN}\nFINAL: {ATTACK_SHOWN}\n"


def test_plain_error_escapes_terminal_controls(cell: Callable[[str], str]) -> None:
    """It shows a cell's error message with its terminal controls escaped."""
    done = rlm("sandbox", "run", cell(ATTACK_CELL + "raise ValueError(ATTACK)\n"))
    assert done.returncode == 1, done
    assert not RAW_CONTROL.search(done.stdout + done.stderr), done.stderr
    assert done.stdout == f"{ATTACK_SHOWN}\n"
    assert f"ValueError: {ATTACK_SHOWN}" in done.stderr


def test_json_output_round_trips_terminal_controls(cell: Callable[[str], str]) -> None:
    """It keeps --json output raw-control free through JSON's own escapes, and parsing gives the exact text back."""
    done = rlm("sandbox", "run", cell(ATTACK_CELL + "FINAL(ATTACK)\n"), "--json")
    assert done.returncode == 0, done
    assert not RAW_CONTROL.search(done.stdout)
    result = one_json_object(done)
    assert result["stdout"] == ATTACK + "\n" and result["final"] == ATTACK


def test_plain_output_keeps_crlf_line_ends(cell: Callable[[str], str]) -> None:
    """It passes CRLF line ends through (they cannot overwrite text) but escapes a bare carriage return."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "rlm_runtime.cli", "sandbox", "run", cell("print('a\\r\\nb\\rc', end='\\r\\n')")],
                          capture_output=True, env=env, cwd=ROOT, timeout=60)  # bytes: text mode would turn CRLF into LF
    assert done.returncode == 0, done
    assert done.stdout == b"a\r\nb\\x0dc\n"
