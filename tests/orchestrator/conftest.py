"""Fixtures of the orchestrator tests: JSONL scripts in tmp_path and the ``rlm`` CLI.

Every test drives the real loop (``RLM.run`` or ``rlm ask``) with the scripted client, the
same client users select with ``--model scripted:PATH``.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .support import CLIResult


@pytest.fixture
def write_script(tmp_path: Path) -> Callable[..., Path]:
    """Write a JSONL script: each item a reply string or a dict (``{"when": ..., "content": ...}``)."""
    count = 0

    def write(*items: str | dict[str, Any], name: str | None = None) -> Path:
        nonlocal count
        count += 1
        path = tmp_path / (name or f"script{count}.jsonl")
        rows = [{"content": i} if isinstance(i, str) else i for i in items]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        return path

    return write


@pytest.fixture
def rlm_cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Callable[..., CLIResult]:
    """Run ``rlm ARGS...`` through the console script's entry point (``rlm_runtime.cli:entry``)."""
    from rlm_runtime.cli import entry

    def run(*args: str | Path, stdin: bytes = b"") -> CLIResult:
        """``stdin``: what ``-c -`` reads. Without a descriptor of its own it is never read
        otherwise, whatever the test runner's standard input is (a pipe, with ``pytest -s``)."""
        capsys.readouterr()
        monkeypatch.setattr(sys, "argv", ["rlm", *map(str, args)])
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        with pytest.raises(SystemExit) as exit_info:
            entry()
        captured = capsys.readouterr()
        status = exit_info.value.code
        return CLIResult(0 if status is None else status if isinstance(status, int) else 1, captured.out, captured.err)

    return run
