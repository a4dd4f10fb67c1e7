"""Transcripts: what ``/save`` writes and ``/load`` replays, in the format ``rlm repl < FILE`` reads.

A transcript is a REPL script: one entry per line, as a person types them. A question is a
plain line; a cell starts with ``>>> `` and goes on in lines starting with ``... ``; a slash
command is itself. Lines starting with ``#`` are comments (``/save`` writes each answer and
cell result under its entry that way, so the file reads as a record of the session); blank
lines are skipped. Only the commands that change what later entries see are saved
(contexts, models, limits, remembering, reset), so replaying rebuilds the same state.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rlm_runtime import private
from rlm_runtime.termsafe import printable

CELL_PREFIX = ">>>"
MORE_PREFIX = "..."
#: Commands a transcript keeps (they change what later questions see).
REPLAYED_COMMANDS = ("/context add", "/model", "/sub-model", "/profile", "/limits", "/remember", "/reset")


@dataclass
class Entry:
    """One thing a person entered: ``kind`` is question, cell or command."""

    kind: str
    text: str
    result: str = ""  # the answer or the cell's output, saved as comments


@dataclass
class Transcript:
    entries: list[Entry] = field(default_factory=list)

    def add(self, kind: str, text: str, result: str = "") -> None:
        if kind == "command" and not text.strip().startswith(REPLAYED_COMMANDS):
            return
        self.entries.append(Entry(kind, text, result))

    def render(self, model: str) -> str:
        lines = [f"# rlm repl transcript, saved {time.strftime('%Y-%m-%d %H:%M:%S')}; model {model}",
                 "# replay: /load FILE in the REPL, or: rlm repl < FILE"]
        for entry in self.entries:
            lines.append("")
            lines.extend(entry_lines(entry))
            for line in printable(entry.result).splitlines()[:40] if entry.result else ():
                lines.append(f"#   {line}")
        return "\n".join(lines) + "\n"

    def save(self, path: Path, model: str) -> None:
        private.write_text(path, self.render(model))  # questions and answers quote the contexts


def entry_lines(entry: Entry) -> list[str]:
    """How an entry is typed: a cell as ``>>>`` then ``...`` lines, anything multi-line likewise."""
    lines = entry.text.split("\n")
    first = f"{CELL_PREFIX} {lines[0]}" if entry.kind == "cell" else lines[0]
    return [first.rstrip(), *(f"{MORE_PREFIX} {line}".rstrip() for line in lines[1:])]


def read_entries(lines: Iterable[str]) -> Iterator[str]:
    """The entries of a script, one at a time, read lazily (so a pipe is answered as it comes).

    An entry is a line and the ``...`` lines after it, joined by newlines with the prefix
    removed; a cell keeps its ``>>> `` so it is still told apart from a question.
    """
    pending: list[str] | None = None
    for raw in lines:
        line = raw.rstrip("\r\n")
        if pending is not None and (line == MORE_PREFIX or line.startswith(MORE_PREFIX + " ")):
            pending.append(line[len(MORE_PREFIX) + 1:])
            continue
        if pending is not None:
            yield "\n".join(pending)
            pending = None
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        pending = [line]
    if pending is not None:
        yield "\n".join(pending)


def load(path: Path) -> list[str]:
    """The entries of a transcript file, its lines split at ``\n`` only, as piped lines are
    (``str.splitlines`` also split at U+2028, NEL, ``\x1c``...: a saved question holding one
    came back as a question and a command)."""
    return list(read_entries(path.read_text(encoding="utf-8").split("\n")))
