"""Helpers of the orchestrator tests: scripted replies, haystacks, small limits, traces.

Every test drives the real loop (``RLM.run`` or ``rlm ask``) with the scripted client, the
same client users select with ``--model scripted:PATH``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlm_runtime.budget import RunLimits
from rlm_runtime.sandbox import CellLimits

#: Distinctive substrings of the prompts the loop sends (brain/prompts/*.md), for "when" rules.
FIRST_TURN = "Start by exploring the context with code."
FEEDBACK = "Output of your code (turn"
FORCED = "You have no turns left."
REPROMPT = "I could not find a code block in your reply."

#: A needle buried in the middle of a haystack of numbered lines.
NEEDLE = "The secret launch code is TANGERINE-4471."


def code(src: str, before: str = "", after: str = "") -> str:
    """A reply holding one ```python block (with optional prose around it)."""
    return f"{before}```python\n{src}\n```{after}"


def haystack(lines: int = 3000, at: int = 1777) -> str:
    rows = [f"line {i}: nothing to see here, just filler text number {i * 7 % 1000}" for i in range(1, lines + 1)]
    rows[at - 1] = NEEDLE
    return "\n".join(rows) + "\n"


def fast(**changes: Any) -> RunLimits:
    """Small limits that keep a test quick."""
    return RunLimits(**{"max_iterations": 4, "max_wall_s": 60.0, **changes})


#: Cell limits of the timeout tests: one second, then half a second of grace.
QUICK_CELLS = CellLimits(cell_timeout_s=1, kill_grace_s=0.5)


def prompt_text(name: str, **values: object) -> str:
    """A prompt exactly as the loop sends it (from the shipped brain/prompts/NAME.md)."""
    from rlm_runtime import brain
    from rlm_runtime.config import paths_from_env

    return brain.prompt(name, paths_from_env().brain_dirs, **values)


def last_messages(client: Any) -> list[str]:
    """The last message of every prompt a scripted client received, in order."""
    return [p[-1]["content"] for p in client.prompts]


def read_trace(path: str | Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def ask_once(tmp_path: Path, replies: list[str], question: str, text: Path, assists: str) -> tuple[str | None, Any, list]:
    """One question of a Session over ``text`` with the scripted ``replies`` and ``assists``:
    its answer, the client (what the model was sent) and the trace's events."""
    import uuid

    from rlm_runtime import Session
    from rlm_runtime.llm import ScriptedClient

    client = ScriptedClient(replies)
    trace = tmp_path / f"t{uuid.uuid4().hex[:8]}.jsonl"
    with Session(client, contexts=[text], limits=fast(assists=assists), trace=trace) as s:
        result = s.ask(question)
    return result.answer, client, read_trace(trace)


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


@dataclass
class CLIResult:
    """What one ``rlm`` command did: its exit status and what it printed."""

    code: int
    out: str
    err: str

    def json(self) -> dict[str, Any]:
        lines = [line for line in self.out.splitlines() if line.strip()]
        assert len(lines) == 1, f"expected one JSON line on stdout, got: {self.out!r}"
        value = json.loads(lines[0])
        assert isinstance(value, dict)
        return value
