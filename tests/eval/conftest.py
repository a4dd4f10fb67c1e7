"""Fixtures of the eval tests: task files, scripts for the scripted model, the ``rlm`` CLI.

Every run drives the real runner with the scripted client (``scripted:PATH``), the model
users select for plumbing runs.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.orchestrator.support import CLIResult

#: A first-turn reply that finds every planted value of the needle suite and answers with its lines.
NEEDLE_RLM = ("```python\nhits = grep(r'[A-Z]{2}-\\d{4}|SN\\d{6}|\\d{2}-\\d{2}-\\d{2}')\n"
              "FINAL(' '.join(m.line for m in hits))\n```")


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def script(tmp_path: Path) -> Path:
    """A script that answers every rlm first turn with NEEDLE_RLM and every direct/rag prompt 'unknown'."""
    return write_jsonl(tmp_path / "script.jsonl", [
        {"when": "Start by exploring the context with code.", "content": NEEDLE_RLM},
        {"when": "Answer with the answer alone", "content": "unknown"},
    ])


@pytest.fixture
def needle_tasks(tmp_path: Path) -> Path:
    from rlm_runtime.eval.suites import write_suite

    path = tmp_path / "tasks.jsonl"
    write_suite("needle", path, lengths=(4000, 8000), n=2, seed=3)
    return path


@pytest.fixture
def rlm_cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Callable[..., CLIResult]:
    """Run ``rlm ARGS...`` through the console script's entry point (``rlm_runtime.cli:entry``)."""
    from rlm_runtime.cli import entry

    def run(*args: str | Path) -> CLIResult:
        capsys.readouterr()
        monkeypatch.setattr(sys, "argv", ["rlm", *map(str, args)])
        with pytest.raises(SystemExit) as exit_info:
            entry()
        captured = capsys.readouterr()
        status = exit_info.value.code
        return CLIResult(0 if status is None else status if isinstance(status, int) else 1, captured.out, captured.err)

    return run
