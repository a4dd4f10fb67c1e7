"""Tab completion: slash commands and their arguments, file paths after ``/context add``,
and in a cell the namespace's names, the context functions and their keyword arguments, and
after `name.` the attributes of a variable whose type is known here (built-ins, grep and
records results).

The namespace's variables come from the REPL's cache (refreshed after each question and
cell), never from a call into the worker while a person types.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Callable, Iterable, Iterator

from prompt_toolkit.completion import CompleteEvent, Completer, Completion, PathCompleter
from prompt_toolkit.document import Document

from rlm_runtime.repl.commands import ALIASES, COMMANDS
from rlm_runtime.repl.transcript import CELL_PREFIX

#: What a cell can call besides its own variables: the sandbox's functions, with their
#: keyword arguments (as the worker defines them; see DESIGN.md, "The sandbox namespace").
FUNCTIONS: dict[str, tuple[str, ...]] = {
    "peek": ("n", "handle"),
    "grep": ("pattern", "handle", "context_lines", "max_matches", "ignore_case"),
    "chunk": ("i", "size", "handle"),
    "chunks": ("size",),
    "records": ("source",),
    "search_chunks": ("query", "k", "mode"),
    "semantic_grep": ("query", "k", "context"),
    "read_chunk": ("chunk_id", "around"),
    "related": ("chunk_id", "k"),
    "llm_query": ("prompt",),
    "llm_query_batched": ("prompts",),
    "rlm_query": ("prompt", "context"),
    "FINAL": ("answer",),
    "FINAL_VAR": ("name",),
    "SHOW_VARS": (),
}
SIGNATURES = {name: f"{name}({', '.join(args)})" for name, args in FUNCTIONS.items()}
NAMES = ("context", "contexts")
_BUILTINS = ("print", "len", "range", "sorted", "enumerate", "list", "dict", "set", "str", "int", "float", "sum", "min",
             "max", "any", "all", "zip", "isinstance", "repr", "type")
_WORD = re.compile(r"[A-Za-z_][A-Za-z_0-9]*$")
_SUBCOMMANDS = {"/context": ("add", "rm", "refresh", "list"), "/remember": ("on", "off"), "/memory": ("search", "show", "edit")}
#: Built-in types whose attributes ``name.`` completes, by the name SHOW_VARS gives them.
_BUILTIN_TYPES = {t.__name__: t for t in (str, list, dict, set, tuple, int, float, bool, bytes, frozenset)}


def attributes(type_name: str) -> list[str]:
    """The public attributes of a variable of the type SHOW_VARS named: a built-in type's, or
    one of the sandbox's own result types (grep's, records'); none for another (its code is
    the worker's, not known here)."""
    from rlm_runtime.context.grep import GrepMatch, GrepResult
    from rlm_runtime.context.records import Record, Records

    known: dict[str, type] = {**_BUILTIN_TYPES, "GrepResult": GrepResult, "GrepMatch": GrepMatch,
                              "Records": Records, "Record": Record}
    cls = known.get(type_name)
    return sorted(a for a in dir(cls) if not a.startswith("_")) if cls is not None else []


class ReplCompleter(Completer):
    """Completes what is being typed; ``python_mode()`` says whether every line is a cell,
    ``names()`` gives the namespace's variables, ``limits()`` the RunLimits fields."""

    def __init__(self, python_mode: Callable[[], bool], names: Callable[[], list[str]],
                 limits: Callable[[], Iterable[str]] = lambda: (), models: Callable[[], Iterable[str]] = lambda: (),
                 types: Callable[[], dict[str, str]] = dict) -> None:
        self.python_mode = python_mode
        self.names = names
        self.types = types
        self.limits = limits
        self.models = models
        self.paths = PathCompleter(expanduser=True)

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterator[Completion]:
        try:
            yield from self._completions(document, complete_event)
        except Exception:  # a completer must never break the prompt
            return

    def _completions(self, document: Document, event: CompleteEvent) -> Iterator[Completion]:
        before = document.text_before_cursor
        stripped = before.lstrip()
        if stripped.startswith("/") and "\n" not in stripped:
            yield from self._command(stripped, document, event)
        elif self.python_mode() or stripped.startswith(CELL_PREFIX):
            yield from self._python(before)

    def _command(self, text: str, document: Document, event: CompleteEvent) -> Iterator[Completion]:
        name, space, rest = text.partition(" ")
        if not space:
            for command in [*COMMANDS, *ALIASES]:
                if command.startswith(name):
                    meta = COMMANDS[ALIASES.get(command, command)].help
                    yield Completion(command, -len(name), display_meta=meta)
            return
        words = rest.split(" ")
        if name == "/context" and len(words) >= 2 and words[0] == "add":
            # The path: complete the text after "add " as a file name.
            path_text = rest[len("add "):]
            if " " not in path_text.strip():
                yield from self.paths.get_completions(Document(path_text, len(path_text)), event)
            return
        if len(words) == 1:
            choices: Iterable[str] = _SUBCOMMANDS.get(name, ())
            if name == "/limits":
                choices = [f"{field}=" for field in self.limits()]
            elif name in ("/model", "/sub-model"):
                choices = self.models()
            for choice in choices:
                if choice.startswith(words[0]):
                    yield Completion(choice, -len(words[0]))
        elif name == "/limits":
            for field in self.limits():
                if f"{field}=".startswith(words[-1]):
                    yield Completion(f"{field}=", -len(words[-1]))

    def _python(self, before: str) -> Iterator[Completion]:
        match = _WORD.search(before)
        word = match.group() if match else ""
        start = before[: len(before) - len(word)]
        if start.endswith("."):
            # ``hits.``: the attributes of a variable whose type is known here (SHOW_VARS named
            # it after the last entry); anything else lives in the worker: no guessing.
            owner = _WORD.search(start[:-1])
            kind = self.types().get(owner.group()) if owner is not None and not start[:owner.start()].endswith(".") else None
            for attr in attributes(kind) if kind else []:
                if attr.startswith(word):
                    yield Completion(attr, -len(word), display_meta=kind)
            return
        call = _open_call(start)
        seen: set[str] = set()
        if call in FUNCTIONS:
            for arg in FUNCTIONS[call]:
                if arg.startswith(word) and (word or start.rstrip().endswith(("(", ","))):
                    seen.add(f"{arg}=")
                    yield Completion(f"{arg}=", -len(word), display_meta=SIGNATURES[call])
        if not word:
            return
        for name in self.names():
            if name.startswith(word) and name not in seen:
                seen.add(name)
                yield Completion(name, -len(word), display_meta="variable")
        for name, signature in SIGNATURES.items():
            if name.startswith(word) and name not in seen:
                seen.add(name)
                yield Completion(name, -len(word), display=signature, display_meta="function")
        for name in (*NAMES, *_BUILTINS, *keyword.kwlist):
            if name.startswith(word) and name not in seen:
                seen.add(name)
                yield Completion(name, -len(word))


def _open_call(text: str) -> str | None:
    """The name of the innermost call whose bracket is still open at the end of ``text``."""
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        char = text[i]
        if char in ")]}":
            depth += 1
        elif char in "([{":
            if depth == 0:
                if char != "(":
                    return None
                match = _WORD.search(text[:i])
                return match.group() if match else None
            depth -= 1
    return None
