"""What every ``rlm`` command shares: exit codes and the table that maps errors to them, the
usage error, printing (escaped) and JSON printing, reading a source file or standard input,
how a command's parser is made (a description and examples on its ``--help``), and the error
handler every command runs under.

Exit codes (``EXIT_CODES`` maps error classes to them): 0 success; 1 the checked or run code
failed or was refused, grep found nothing, or ``ask`` found no answer (budget, iterations,
errors); 2 bad usage (unknown option, missing file, invalid policy or pattern, unknown model,
missing API key, an unknown ``ctx:ID`` or a refusal of the registry of contexts:
``RegistryError``); 3 the model's server is unreachable; 4 the sandbox could not run (no
worker could start, the worker pool is exhausted); 130 interrupted. Errors are one line on stderr,
never a traceback (an unexpected exception is reported as an internal error, exit 1;
``RLM_DEBUG=1`` adds the traceback); with ``--json`` the error is also the one JSON object on
stdout.

Text a cell, a model or a context file wrote reaches the terminal through ``termsafe``: its
control characters are shown escaped, never obeyed. JSON output needs no such step.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlm_runtime import strictjson
from rlm_runtime.errors import (
    ConfigError,
    ContextError,
    MissingAPIKey,
    ModelUnavailable,
    RegistryError,
    RLMError,
    SandboxError,
    UnknownModel,
)
from rlm_runtime.termsafe import one_line, printable

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNAVAILABLE, EXIT_SANDBOX, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130


class UsageError(Exception):
    """Bad usage found after argument parsing (a missing file, say): exit 2."""


class OutputClosed(Exception):
    """The reader of our stdout went away (``rlm grep ... | head``): not an error of ours."""


# ---------------------------------------------------------------------------------- parsers


def add_command(commands: Any, name: str, *, help: str, description: str | None = None,
                examples: Sequence[str] = (), notes: str = "", **kwargs: Any) -> argparse.ArgumentParser:
    """Add the subcommand ``name`` to ``commands`` (an ``add_subparsers()`` table): ``help`` is
    its line in the parent's list, ``description`` (default: ``help``) heads its ``--help``,
    and its epilog lists ``examples`` (command lines) then ``notes``, laid out as written."""
    epilog = "\n".join(["examples:", *(f"  {e}" for e in examples)]) if examples else ""
    if notes:
        epilog = f"{epilog}\n\n{notes}" if epilog else notes
    parser = commands.add_parser(name, help=help, description=paragraphs(description or _sentence(help)), epilog=epilog or None,
                                 formatter_class=argparse.RawDescriptionHelpFormatter, **kwargs)
    parser.set_defaults(_parser=parser)  # the deepest command's: its usage heads an unknown flag's error
    return parser


def add_actions(parser: argparse.ArgumentParser) -> Any:
    """The ``ACTION`` subcommand table of a command group (``rlm trace show|html``, say)."""
    return parser.add_subparsers(dest="action", required=True, metavar="ACTION")


def plural(n: int, word: str) -> str:
    """``1 question``, ``2 questions``, ``1,200 chunks``."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def paragraphs(text: str, width: int = 90) -> str:
    """``text`` for a raw-layout help: each paragraph (blank lines part them) that is one
    line is wrapped at ``width``; one already laid out in lines is kept as written."""
    return "\n\n".join(p if "\n" in p else textwrap.fill(p, width) for p in text.split("\n\n"))


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def version() -> str:
    from rlm_runtime import __version__

    return __version__


# ---------------------------------------------------------------------------------- output


def write(text: str, stream: Any) -> None:
    """Print one line to ``stream``; a closed pipe raises ``OutputClosed``."""
    try:
        print(text, file=stream)
    except BrokenPipeError as e:
        raise OutputClosed() from e


def say(text: object, *, err: bool = False) -> None:
    """Print text for a person: someone else may have written it (a cell, a model, a file),
    so its terminal controls are shown escaped."""
    write(printable(str(text)), sys.stderr if err else sys.stdout)


def print_json(args: argparse.Namespace, value: object) -> None:
    """Print the command's one JSON object (json.dumps escapes every control character; a
    number that is not finite, read from a store or registry file, is null: ``strictjson.dumps``)."""
    write(strictjson.dumps(value, default=str), sys.stdout)
    args.json_printed = True  # the error handler must not add a second object


def read_source(name: str) -> bytes:
    """The bytes of the file ``name``, or of standard input for ``-``.

    Raises:
        UsageError: no such file, a folder, or unreadable.
    """
    if name == "-":
        return sys.stdin.buffer.read()
    path = Path(name)
    try:
        return path.read_bytes()
    except OSError as e:
        raise unreadable(name, e) from e


def unreadable(name: str, error: OSError, what: str = "file") -> UsageError:
    """The usage error for a file named on the command line that could not be read."""
    if isinstance(error, FileNotFoundError):
        return UsageError(f"no such {what}: {name}")
    if isinstance(error, IsADirectoryError):
        return UsageError(f"is a directory, not a {what}: {name}")
    return UsageError(f"cannot read {name}: {error.strerror or error}")


# ---------------------------------------------------------------------------------- errors

#: Error classes to exit codes, first match wins; any other error is a failed run (1).
EXIT_CODES: tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], int], ...] = (
    (ModelUnavailable, EXIT_UNAVAILABLE),
    ((UsageError, RegistryError, ConfigError, ContextError, UnknownModel, MissingAPIKey), EXIT_USAGE),
    (SandboxError, EXIT_SANDBOX),
    (KeyboardInterrupt, EXIT_INTERRUPTED),
)


def exit_code(error: BaseException) -> int:
    """The documented exit code of an error (see the module docstring and ``EXIT_CODES``)."""
    for kinds, code in EXIT_CODES:
        if isinstance(error, kinds):
            return code
    return EXIT_FAILED  # the run failed: a budget ran out, no answer, a model call was refused


def report_error(args: argparse.Namespace | None, line: str, message: str, error_type: str, code: int) -> int:
    """``rlm: LINE`` on stderr, and with ``--json`` one JSON object on stdout whose ``error``
    is ``message`` (unescaped: JSON escapes it, and a program gets the original text).
    Returns ``code``."""
    try:
        if args is not None and getattr(args, "json", False) and not getattr(args, "json_printed", False):
            print_json(args, {"error": message, "error_type": error_type})
        print(f"rlm: {one_line(line)}", file=sys.stderr)
    except (OSError, OutputClosed):  # the streams themselves are gone: the exit status still tells
        pass
    return code


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None,
                  line: str | None = None) -> None:
    """Warnings name context files and quote their text: one escaped line each, without the
    source line of rlm_runtime that Python would print under it."""
    try:
        say(f"rlm: warning: {one_line(str(message))}", err=True)
    except OutputClosed:
        pass


def _quiet_broken_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def run_guarded(parser: argparse.ArgumentParser, argv: list[str] | None) -> int:
    """Parse ``argv`` and run the command it names (its ``run`` default); every exception
    ends here as one line and an exit code."""
    args: argparse.Namespace | None = None
    try:
        for stream in (sys.stdout, sys.stderr):
            # Sandboxed code can print lone surrogates; show them escaped rather than crash.
            reconfigure = getattr(stream, "reconfigure", None)
            if reconfigure is not None:
                reconfigure(errors="backslashreplace")
        words = sys.argv[1:] if argv is None else argv
        if not words:  # `rlm` alone: the commands, as git and llm list them
            sys.stderr.write(parser.format_help())
            return EXIT_USAGE
        args, extra = parser.parse_known_args(words)
        if extra:  # said by the command they were given to, with its usage (not the top level's)
            getattr(args, "_parser", parser).error(f"unrecognized arguments: {' '.join(extra)}")
        with warnings.catch_warnings():  # restores the default display when the command returns
            warnings.showwarning = _show_warning
            code: int = args.run(args)
        try:
            sys.stdout.flush()  # here, not at exit, so a closed pipe is caught below
        except BrokenPipeError as e:
            raise OutputClosed() from e
        return code
    except OutputClosed:
        _quiet_broken_stdout()
        return EXIT_FAILED
    except KeyboardInterrupt:
        return report_error(args, "interrupted", "interrupted", "KeyboardInterrupt", EXIT_INTERRUPTED)
    except (UsageError, RLMError) as e:
        kind = "UsageError" if isinstance(e, UsageError) else type(e).__name__
        return report_error(args, f"error: {e}", str(e), kind, exit_code(e))
    except Exception as e:
        from rlm_runtime.config import debug_enabled

        if debug_enabled():
            import traceback

            traceback.print_exc()
        message = f"internal error: {type(e).__name__}: {e}"
        return report_error(args, f"{message} (please report; RLM_DEBUG=1 shows the traceback)", message, type(e).__name__, EXIT_FAILED)
