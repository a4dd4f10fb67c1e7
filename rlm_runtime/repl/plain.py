"""The REPL without a terminal: ``rlm repl < script.txt``, or any pipe.

Entries are read as a transcript is (``transcript.read_entries``: a line, a ``>>>`` cell
with ``...`` continuation lines, ``#`` comments), one at a time, and run as typed ones are.
Answers, cell output and command results go to stdout, plain; each entry as read, the
run's iterations, notes and errors go to stderr (so stdout holds only results). Ctrl-C (a
SIGINT) cancels the running question or cell; between entries it stops the script.

The lines are a replay (``replay.py``): questions, cells and read-only commands run, any
other command is refused with a line naming it (there is no one to ask: stdin is the
script), unless ``rlm repl --allow-commands`` says the script is the person's own, or stdin
is a terminal (only stdout is piped), where the person types the lines.

Exit status: 0 when every entry went well; 1 when any failed (a question without an
answer, a cell that raised, a command that could not be done): all entries run anyway.
"""

from __future__ import annotations

from typing import TextIO

from rlm_runtime.repl.controller import Operation, Repl, ReplConfig
from rlm_runtime.repl.display import Display, PlainPrinter
from rlm_runtime.repl.replay import STDIN
from rlm_runtime.repl.transcript import read_entries


class PlainFrontend:
    """Waits for a run on the main thread, where a SIGINT arrives as ``KeyboardInterrupt``."""

    def __init__(self, display: Display) -> None:
        self.display = display

    def wait(self, op: Operation) -> None:
        while True:
            try:
                if op.done.wait(0.05):
                    return
                op.tick()
            except KeyboardInterrupt:
                self.display.note("cancelling ...")
                op.cancel()

    def confirm(self, question: str) -> bool | None:
        """Nobody can be asked: standard input is the script itself."""
        return None


def run_plain(config: ReplConfig, stdin: TextIO, stdout: TextIO, stderr: TextIO, *, notes: tuple[str, ...] = ()) -> int:
    """Run the entries of ``stdin`` in one session; returns the exit status."""
    display = Display(PlainPrinter(stdout, stderr), color=False, live=config.live)
    for note in notes:
        display.note(note)
    repl = Repl(config, display, PlainFrontend(display), echo=True)
    failed = 0
    # Lines typed at a terminal (only stdout piped) are the person's own, like the prompt's.
    source = None if config.allow_commands or stdin.isatty() else STDIN
    try:
        for entry in read_entries(stdin):
            if not repl.handle(entry, replayed_from=source):
                failed += 1
            if repl.exiting:
                break
    finally:
        repl.close()
    if failed:
        display.note(f"{failed} entr{'y' if failed == 1 else 'ies'} failed")
    return 1 if failed else 0


__all__ = ["PlainFrontend", "run_plain"]
