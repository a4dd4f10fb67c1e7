"""The CLI never prints a traceback: every exception, expected or not, becomes one line on
stderr (and the one JSON object with ``--json``) and a documented exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import rlm_runtime.context
import rlm_runtime.sandbox
from rlm_runtime.cli import main
from rlm_runtime.errors import (
    BudgetExceeded,
    ConfigError,
    ContextError,
    HostCallError,
    ModelUnavailable,
    NoAnswer,
    ProtocolError,
    SandboxError,
    WorkersBusy,
)

ROOT = Path(__file__).resolve().parents[1]
INTERNAL = "(please report; RLM_DEBUG=1 shows the traceback)"


@pytest.fixture
def text_file(tmp_path: Path) -> Path:
    path = tmp_path / "notes.txt"
    path.write_text("some text\n")
    return path


def _raise(error: BaseException) -> object:
    def fail(*args: object, **kwargs: object) -> object:
        raise error

    return fail


def test_an_unexpected_exception_is_one_line_exit_1(text_file: Path, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """It reports an unexpected exception as one "internal error" line and exits 1."""
    monkeypatch.setattr(rlm_runtime.context, "open_context", _raise(RuntimeError("boom")))
    assert main(["peek", str(text_file)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"rlm: internal error: RuntimeError: boom {INTERNAL}\n"


def test_an_unexpected_exception_with_json_is_one_object(text_file: Path, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """It prints exactly one JSON object with an "error" field for an unexpected exception under --json."""
    monkeypatch.setattr(rlm_runtime.context, "probe_path", _raise(KeyError("gone")))
    assert main(["probe", str(text_file), "--json"]) == 1
    out, err = capsys.readouterr()
    assert out.count("\n") == 1
    assert json.loads(out) == {"error": "internal error: KeyError: 'gone'", "error_type": "KeyError"}
    assert err.count("\n") == 1 and "Traceback" not in err


def test_rlm_debug_shows_the_traceback(text_file: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """It adds the traceback when RLM_DEBUG=1, still ending with the one line."""
    monkeypatch.setattr(rlm_runtime.context, "open_context", _raise(RuntimeError("boom")))
    monkeypatch.setenv("RLM_DEBUG", "1")
    assert main(["peek", str(text_file)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last)")
    assert err.endswith(f"rlm: internal error: RuntimeError: boom {INTERNAL}\n")


@pytest.mark.parametrize("json_flag", [[], ["--json"]], ids=["text", "json"])
def test_an_interrupt_exits_130(json_flag: list[str], text_file: Path, capsys: pytest.CaptureFixture[str],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    """It reports Ctrl-C as "rlm: interrupted" and exits 130 (with --json, as the one JSON object too)."""
    monkeypatch.setattr(rlm_runtime.context, "probe_path", _raise(KeyboardInterrupt()))
    assert main(["probe", str(text_file), *json_flag]) == 130
    out, err = capsys.readouterr()
    assert err == "rlm: interrupted\n"
    if json_flag:
        assert json.loads(out) == {"error": "interrupted", "error_type": "KeyboardInterrupt"}
    else:
        assert out == ""


@pytest.mark.parametrize(("error", "code"), [
    (SandboxError("the sandbox worker did not start"), 4),
    (WorkersBusy("no worker free", pool_size=1), 4),
    (NoAnswer("no FINAL"), 1),
    (BudgetExceeded("spent", limit="max_llm_calls"), 1),
    (ProtocolError("forged frame"), 1),
    (HostCallError("bad call"), 1),
    (ConfigError("bad policy"), 2),
    (ContextError("bad pattern"), 2),
    (ModelUnavailable("server gone"), 3),
], ids=lambda v: type(v).__name__ if isinstance(v, Exception) else str(v))
def test_rlm_errors_get_their_documented_exit_code(error: Exception, code: int, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """It reports an RLMError as "rlm: error: MESSAGE" with the documented exit code (1 failed, 2 usage, 3 unavailable, 4 no sandbox)."""
    cell = tmp_path / "cell.py"
    cell.write_text("print(1)\n")
    monkeypatch.setattr(rlm_runtime.sandbox, "Sandbox", _raise(error))
    assert main(["sandbox", "run", str(cell)]) == code
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"rlm: error: {error}\n")
    assert main(["sandbox", "run", str(cell), "--json"]) == code
    assert json.loads(capsys.readouterr().out) == {"error": str(error), "error_type": type(error).__name__}


def test_an_error_quoting_cell_text_is_one_escaped_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """It puts an error message that quotes cell text on one line with its terminal controls escaped."""
    cell = tmp_path / "cell.py"
    cell.write_text("print(1)\n")
    monkeypatch.setattr(rlm_runtime.sandbox, "Sandbox", _raise(ProtocolError("bad frame: \x1b]0;pwned\x07\nall tests passed\r")))
    assert main(["sandbox", "run", str(cell)]) == 1
    assert capsys.readouterr().err == "rlm: error: bad frame: \\x1b]0;pwned\\x07 / all tests passed\\x0d\n"
    assert main(["sandbox", "run", str(cell), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["error"] == "bad frame: \x1b]0;pwned\x07\nall tests passed\r"


def _run(code: str, *args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    """``python -c CODE ARGS`` where CODE ends by calling the console script's entry point."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=60,
                          **kwargs)  # type: ignore[call-overload]


def test_the_real_entry_point_prints_no_traceback(text_file: Path) -> None:
    """It exits 1 with one line and no traceback in a real process whose command raised unexpectedly."""
    code = ("import rlm_runtime.context as c\n"
            "def boom(*a, **k):\n    raise ZeroDivisionError('division by zero')\n"
            "c.open_context = boom\n"
            "from rlm_runtime.cli import entry\nentry()\n")
    done = _run(code, "grep", "x", str(text_file))
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr == f"rlm: internal error: ZeroDivisionError: division by zero {INTERNAL}\n"


def test_a_closed_stdout_is_not_an_error(tmp_path: Path) -> None:
    """It ends quietly, without a traceback or an "Exception ignored" message, when its reader closes the pipe."""
    big = tmp_path / "big.txt"
    big.write_text("".join(f"line {i} of a long file\n" for i in range(200_000)))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "rlm_runtime.cli", "peek", str(big), "-n", "4000000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.read(100)
    proc.stdout.close()  # like `| head`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 1
    assert err == ""


@pytest.mark.parametrize(("flag", "value", "said"), [("--max-iterations", "-3", "--max-iterations -3: must be"),
                                                     ("--max-depth", "-1", "--max-depth -1: must be"),
                                                     ("--budget-usd", "-1", "--budget-usd -1.0: must be")])
def test_a_bad_limit_names_its_flag_and_value(text_file: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str,
                                              said: str) -> None:
    """``rlm ask --max-iterations -3`` says which flag and value are wrong, in one line, exit 2."""
    capsys.readouterr()
    assert main(["ask", "q?", "-c", str(text_file), "-m", "scripted:/nothing", flag, value]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rlm: error: {said}") and err.count("\n") == 1


def test_trace_html_without_output_writes_beside_the_trajectory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``rlm trace html run.jsonl`` writes run.html beside it (0600) and says where; a
    trajectory whose own name ends .html is never overwritten."""
    run = tmp_path / "run.jsonl"
    run.write_text(json.dumps({"type": "run_start", "run_id": "r", "depth": 0, "query": "q?", "t": 0.0}) + "\n")
    assert main(["trace", "html", str(run)]) == 0
    page = tmp_path / "run.html"
    assert page.is_file() and "<html" in page.read_text().lower() and capsys.readouterr().out == f"wrote {page}\n"
    assert oct(page.stat().st_mode & 0o777) == "0o600"
    odd = tmp_path / "odd.html"
    odd.write_text(run.read_text())
    assert main(["trace", "html", str(odd)]) == 0
    assert (tmp_path / "odd.html.html").is_file() and odd.read_text() == run.read_text()


def test_ctrl_c_leaves_a_trace_with_the_code_that_ran_and_the_mark(tmp_path: Path) -> None:
    """Ctrl-C while a cell runs (``rlm ask`` through the console script, SIGINT): exit 130, and
    the trace holds the turn with its code, marked stopped by KeyboardInterrupt, and a run_end
    that says it was interrupted; ``rlm trace show`` says so in words."""
    import signal
    import time

    script = tmp_path / "s.jsonl"
    script.write_text(json.dumps({"content": "```python\nn = 0\nwhile True:\n    n += 1\n```"}) + "\n")
    doc = tmp_path / "doc.txt"
    doc.write_text("hello\n")
    trace = tmp_path / "t.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "rlm_runtime.cli", "ask", "q?", "-c", str(doc), "-m", f"scripted:{script}",
                             "--trace", str(trace), "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not trace.exists() or '"system_prompt"' not in trace.read_text()):
            time.sleep(0.1)
        time.sleep(1.0)  # the cell is running
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    (turn,) = [e for e in events if e["type"] == "iteration"]
    assert turn["stopped"] == "KeyboardInterrupt" and "while True" in turn["code_blocks"][0]
    (end,) = [e for e in events if e["type"] == "run_end"]
    assert end["error_type"] == "KeyboardInterrupt"
    shown = subprocess.run([sys.executable, "-m", "rlm_runtime.cli", "trace", "show", str(trace)], capture_output=True,
                           text=True, timeout=60).stdout
    assert "iteration 1 (interrupted by Ctrl-C, before its cells ended)" in shown
