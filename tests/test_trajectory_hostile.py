"""Hostile trace files: a line nested deeper than any event, or holding a number too long to
read, is a note or a clear error naming its line, never an internal error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlm_runtime.errors import ConfigError
from rlm_runtime.trajectory import read_events, read_trace, render_html, render_tree

HEAD = {"type": "trace_start", "schema": 2, "version": "0.1", "session_id": "s", "t": 0}
RUN = {"type": "run_start", "t": 1, "run_id": "r", "depth": 0, "query": "the question"}


def _deep(n: int) -> str:
    return "[" * n + "]" * n


def _trace(tmp_path: Path, *middle: str) -> Path:
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join([json.dumps(HEAD), *middle, json.dumps(RUN)]) + "\n", encoding="utf-8")
    return path


def _rlm(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RLM_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "rlm_runtime.cli", *args], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("depth", [100_000, 900])
def test_a_deeply_nested_line_is_skipped_with_a_note(tmp_path: Path, depth: int) -> None:
    """It skips a line of 100,000 (or 900) nested lists, says so, and reads the rest of the file."""
    path = _trace(tmp_path, '{"type": "note", "t": 1, "x": ' + _deep(depth) + "}",
                  '{"type": "run_start", "t": 1, "run_id": "q", "depth": 0, "x": ' + _deep(depth) + "}")
    trace = read_trace(path)
    assert trace.notes == [f"line {n} is nested more than 64 levels deep and is skipped" for n in (2, 3)]
    assert [r.run_id for r in trace.roots] == ["r"]
    assert "the question" in render_tree(trace) and "nested more than" in render_html(read_events(path))


def test_an_event_as_deep_as_the_sandbox_allows_is_kept(tmp_path: Path) -> None:
    """It keeps an event holding plain data as deep as may cross the sandbox boundary (32 levels)."""
    path = _trace(tmp_path, '{"type": "note", "t": 1, "x": {"args": ' + _deep(32) + "}}")
    trace = read_trace(path)
    assert trace.notes == [] and len(trace.events) == 3


def test_a_number_too_long_to_read_is_an_error_naming_its_line(tmp_path: Path) -> None:
    """It raises ConfigError naming the line of an integer of 5,000 digits."""
    path = _trace(tmp_path, '{"type": "note", "t": ' + "9" * 5000 + "}")
    with pytest.raises(ConfigError, match=r"t\.jsonl:2: not a trace event \(a number too long to read\)"):
        read_trace(path)


def test_rlm_trace_show_and_html_of_a_hostile_file(tmp_path: Path, _rlm_home: Path) -> None:
    """It prints the tree and writes the page of a file with a 100,000-deep line; no internal error."""
    path = _trace(tmp_path, '{"type": "note", "t": 1, "x": ' + _deep(100_000) + "}")
    shown = _rlm("trace", "show", str(path), home=_rlm_home)
    assert shown.returncode == 0, shown.stderr
    assert "line 2 is nested more than" in shown.stdout and "the question" in shown.stdout
    page = tmp_path / "t.html"
    written = _rlm("trace", "html", str(path), "-o", str(page), home=_rlm_home)
    assert written.returncode == 0, written.stderr
    assert "line 2 is nested more than" in page.read_text()
    big = _trace(tmp_path, '{"type": "note", "t": ' + "9" * 5000 + "}")
    refused = _rlm("trace", "show", str(big), home=_rlm_home)
    assert refused.returncode == 2 and "t.jsonl:2: not a trace event" in refused.stderr
    for done in (shown, written, refused):
        assert "internal error" not in done.stderr and "Traceback" not in done.stderr
