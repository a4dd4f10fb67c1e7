"""Fixtures of the REPL tests: scripted models and a REPL driven through prompt-toolkit's pipe input.

``drive`` runs the real terminal front end (``run_terminal``) with keys from a pipe input and
a ``DummyOutput`` (as ptpython's and prompt-toolkit's own tests do); what the REPL prints
goes to a ``PlainPrinter`` so a test reads it as text.
"""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prompt_toolkit.history import History, InMemoryHistory
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from rlm_runtime.repl.app import run_terminal
from rlm_runtime.repl.controller import ReplConfig
from rlm_runtime.repl.display import PlainPrinter

ENTER = "\r"
CTRL_C = "\x03"
CTRL_D = "\x04"
F2 = "\x1bOQ"
META_ENTER = "\x1b\r"
TAB = "\t"


def code(src: str) -> str:
    """A model reply holding one ```python block."""
    return f"```python\n{src}\n```"


@dataclass(frozen=True)
class Until:
    """A pause among ``drive``'s keys that lasts until the REPL has printed ``text`` (at most
    ``timeout`` seconds): keys that must reach a running cell wait for proof that it runs."""

    text: str
    timeout: float = 60.0


def _send_later(pipe: Any, items: list[str | float | Until], stop: threading.Event, printed: Callable[[], str]) -> None:
    """Send ``items`` (a float: wait that long; an ``Until``: wait for its text in ``printed()``)
    until ``stop`` is set. The caller sets it and joins this thread before the pipe closes: the
    pipe writes to a raw descriptor number, which a later test's subprocess pipe may reuse once
    it is closed (a stray Ctrl-D once landed in another REPL's stdin that way)."""
    for item in items:
        if isinstance(item, float):
            if stop.wait(item):
                return
        elif isinstance(item, Until):
            deadline = time.monotonic() + item.timeout
            while item.text not in printed():
                if stop.wait(0.05) or time.monotonic() > deadline:
                    return
        elif stop.is_set():
            return
        else:
            try:
                pipe.send_text(item)
            except OSError:  # the REPL has already ended and closed its input
                return


@dataclass
class Driven:
    status: int
    out: str
    err: str


@pytest.fixture
def write_script(tmp_path: Path) -> Callable[..., Path]:
    """A JSONL script for ``scripted:PATH``: each item a reply or a ``{"when", "content"}`` dict."""
    count = 0

    def write(*items: str | dict[str, Any]) -> Path:
        nonlocal count
        count += 1
        path = tmp_path / f"script{count}.jsonl"
        rows = [{"content": i} if isinstance(i, str) else i for i in items]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        return path

    return write


@pytest.fixture
def drive(tmp_path: Path, _rlm_home: Path) -> Callable[..., Driven]:
    """Run ``rlm repl`` on keys: ``drive(script, "question\\r", CTRL_D, contexts=[...])``."""

    def run(script: Path | str | Any, *keys: str | float | Until, history: History | str | None = None, **config: Any) -> Driven:
        """A float among the keys waits that many seconds before sending the next ones; an
        ``Until`` waits for what it names to be printed.
        ``history="project"``: the real per-project file history; default: in memory.
        ``script`` may be a client (a ``ScriptedClient`` whose prompts the test reads)."""
        out, err = io.StringIO(), io.StringIO()
        model = f"scripted:{script}" if isinstance(script, Path) else script
        with create_pipe_input() as pipe:
            # Keys up to the first pause go now; the rest from a thread, after each pause.
            items = [*keys, CTRL_D] if not keys or keys[-1] != CTRL_D else list(keys)
            first = next((n for n, k in enumerate(items) if isinstance(k, (float, Until))), len(items))
            for key in items[:first]:
                pipe.send_text(key)
            stop = threading.Event()
            sender = threading.Thread(target=_send_later, args=(pipe, items[first:], stop, out.getvalue), daemon=True)
            sender.start()
            try:
                status = run_terminal(ReplConfig(model=model, trace=str(tmp_path / "trace.jsonl"), **config), home=_rlm_home,
                                      input=pipe, output=DummyOutput(), printer=PlainPrinter(out, err),
                                      history=None if history == "project" else history or InMemoryHistory())
            finally:
                stop.set()
                sender.join()
        return Driven(status, out.getvalue(), err.getvalue())

    return run
