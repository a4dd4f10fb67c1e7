"""What a replayed line may run: the rule for lines a person did not type at the prompt.

A replay is a transcript that ``/load`` runs, or the lines piped into ``rlm repl``: a file
someone shared reads exactly like a script of one's own, so neither may act for the person
on the host. In a replay:

* a question runs: its text goes to the session's model, as a typed question's would;
* a cell (``>>>``) runs: in the sandbox, behind the same boundary as the model's own code,
  so it reaches nothing a question's code could not;
* a slash command runs only when it is read-only (``read_only``): it writes no file, adds
  no context, changes no model, profile, limit or remembering, and loads no other file.
  Any other command is asked about on a terminal (y/N; Enter, Ctrl-C and Ctrl-D say no) and
  refused everywhere else, with a line naming it.

``rlm repl --allow-commands`` trusts the piped lines (a script the person wrote); a file
they ``/load`` is a replay all the same.
"""

from __future__ import annotations

from collections.abc import Callable

from rlm_runtime.repl.commands import COMMANDS, split_command
from rlm_runtime.termsafe import one_line

#: The source name of piped lines (``rlm repl < FILE``).
STDIN = "standard input"
#: How much of a refused or asked-about command is shown.
SHOWN_CHARS = 300


def _always(arg: str) -> bool:
    return True


def _no_argument(arg: str) -> bool:
    return not arg.strip()


def _one_of(*words: str, fold: bool = False) -> Callable[[str], bool]:
    """Read-only for exactly these arguments, compared as the command compares them: folded
    to lower case only for a command that folds its argument (/profile LIST switched to a
    profile named LIST while the rule took it for the listing)."""
    return lambda arg: (arg.strip().lower() if fold else arg.strip()) in words


#: The read-only commands, each with the arguments under which it only shows something.
#: A command missing here is never read-only (a new one is asked about until it is added).
READ_ONLY: dict[str, Callable[[str], bool]] = {
    "/help": _always,
    "/clear": _always,
    "/budget": _always,
    "/vars": _always,
    "/memory": lambda arg: arg.split(" ", 1)[0] in ("search", "show"),  # prints here, records nothing
    "/reset": _always,  # a fresh worker: nothing leaves the session
    "/exit": _always,
    "/context": _one_of("", "list"),
    "/model": _no_argument,
    "/sub-model": _no_argument,
    "/limits": _no_argument,
    "/profile": _one_of("", "list"),
    "/remember": _one_of("", "off", fold=True),  # _remember folds its argument
}


def read_only(line: str) -> bool:
    """Whether the command ``line`` may run in a replay without asking (parsed as
    ``commands.run_command`` parses it; an unknown command only prints that it is unknown)."""
    name, arg = split_command(line)
    if name not in COMMANDS:
        return True
    check = READ_ONLY.get(name)
    return check is not None and check(arg)


def shown(line: str) -> str:
    """A command as the person is shown it: escaped, on one line, its length capped (and said)."""
    text = one_line(line)
    if len(text) <= SHOWN_CHARS:
        return text
    return f"{text[:SHOWN_CHARS]}... ({len(text) - SHOWN_CHARS:,} more characters)"


def question(line: str, source: str) -> str:
    """What a terminal asks before a replay runs a command that is not read-only."""
    return f"{source} wants to run: {shown(line)}\n  run it? [y/N] "


def refusal(line: str, source: str) -> str:
    """Why a replayed command did not run, and how the person can run it."""
    how = ("start rlm repl with --allow-commands to run the commands of a script you wrote" if source == STDIN else
           "/load it at a terminal to be asked about each one")
    return (f"not run: {shown(line)} (from {source}: a replay runs questions, cells and read-only commands only; "
            f"{how})")


__all__ = ["READ_ONLY", "STDIN", "question", "read_only", "refusal", "shown"]
