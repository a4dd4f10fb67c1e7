"""``rlm repl``: an interactive session over a ``Session`` (questions, cells, slash commands, a HUD).

Modules, one job each: ``controller`` (what an entry does; no terminal), ``commands`` (the
slash commands), ``display`` (everything printed, escaped), ``hud`` (the toolbar's gauges,
fed by events), ``completion``, ``transcript`` (``/save``, ``/load`` and scripts), ``app``
(the terminal front end, prompt-toolkit) and ``plain`` (lines from a pipe or a file).
"""

from __future__ import annotations

import sys
from pathlib import Path

from rlm_runtime.repl.controller import Repl, ReplConfig


def main(config: ReplConfig, *, home: Path, notes: tuple[str, ...] = ()) -> int:
    """Run the REPL on this process's terminal, or plainly when stdin or stdout is not one."""
    if sys.stdin.isatty() and sys.stdout.isatty():
        from rlm_runtime.repl.app import run_terminal

        return run_terminal(config, home=home, notes=notes)
    from rlm_runtime.repl.plain import run_plain

    return run_plain(config, sys.stdin, sys.stdout, sys.stderr, notes=notes)


__all__ = ["Repl", "ReplConfig", "main"]
