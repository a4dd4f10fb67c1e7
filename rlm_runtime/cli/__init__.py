"""The ``rlm`` command: ``main`` (in-process, returns the exit status) and ``entry`` (the
console script). Each command group is a module of this package that adds its parsers
(``add_commands``); what they share, exit codes and the error handler included, is
``common``. ``rlm --help`` lists the commands in the order of use: asking first, the
sandbox's own tools last.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rlm_runtime.cli.common import EXIT_CODES, run_guarded, version

__all__ = ["EXIT_CODES", "build_parser", "entry", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The ``rlm`` parser with every subcommand."""
    from rlm_runtime.cli import ask, contexts, eval, memory, model, profile, registry, sandbox, serve, trace

    parser = argparse.ArgumentParser(
        prog="rlm", description="A sandboxed recursive-LM REPL runtime: ask questions over files and folders with a\n"
        "model that reads them through Python cells run in a sandbox.",
        epilog="examples:\n  rlm ask \"What changed in the release?\" -c CHANGELOG.md -m openai/gpt-4o-mini\n"
               "  rlm repl -c notes/\n  rlm COMMAND --help",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"rlm_runtime {version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in (ask, serve, eval, memory, registry, contexts, trace, model, profile, sandbox):  # the order of `rlm --help`
        group.add_commands(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; every exception ends here as one line and an exit code."""
    return run_guarded(build_parser(), argv)


def entry() -> Any:
    sys.exit(main())
