"""The REPL's slash commands: one function each, a table of them, and the dispatcher.

A command returns True when it did what it was asked and False when it could not (the
reason already printed): the non-interactive REPL turns a False into its exit status.
Nothing here raises to the user: a bad argument is a message, and the REPL goes on.
"""

from __future__ import annotations

import difflib
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rlm_runtime import private
from rlm_runtime.config import user_path
from rlm_runtime.errors import RLMError
from rlm_runtime.termsafe import one_line

if TYPE_CHECKING:
    from rlm_runtime.memory.store import MemoryStore
    from rlm_runtime.repl.controller import Repl


@dataclass(frozen=True)
class Command:
    name: str
    usage: str
    help: str
    run: Callable[[Repl, str], bool]


#: Columns /help fits in (an 80-column terminal), and the usage column's width within it.
HELP_WIDTH = 79
HELP_USAGE = 26


def _help(repl: Repl, arg: str) -> bool:
    import textwrap

    for line in textwrap.wrap("A line is a question for the model; '>>> code' (or F2 for python mode) runs a cell in "
                              "the same namespace. Commands:", HELP_WIDTH):
        repl.display.info(line)
    pad = " " * (HELP_USAGE + 4)
    for command in COMMANDS.values():
        text = textwrap.wrap(command.help, HELP_WIDTH - len(pad))
        if len(command.usage) <= HELP_USAGE:  # the usage, then its text beside it
            repl.display.out(f"  {command.usage:<{HELP_USAGE}}  {text[0]}")
        else:  # a long usage on a line of its own, its text beneath
            repl.display.out(f"  {command.usage}")
            repl.display.out(pad + text[0])
        for more in text[1:]:
            repl.display.out(pad + more)
    for line in textwrap.wrap("Keys: Enter sends (a cell goes on while it is incomplete), Meta+Enter (Esc Enter) always "
                              "sends, F2 toggles python mode, Ctrl-C cancels a run or clears the line, Ctrl-D exits.",
                              HELP_WIDTH):
        repl.display.info(line)
    return True


def _context(repl: Repl, arg: str) -> bool:
    words = _split(repl, arg)
    if words is None:
        return False
    if not words or words[0] == "list":
        handles = repl.session.contexts
        if not handles:
            repl.display.info("no contexts (add one with /context add PATH [NAME])")
        for n, handle in enumerate(handles):
            label = "context" if n == 0 and len(handles) == 1 else f"contexts[{n}]"
            size = getattr(handle, "n_bytes", None)
            repl.display.out(f"  {label:12} {handle.name}  ({getattr(handle, 'kind', '?')}"
                             + (f", {size:,} bytes)" if isinstance(size, int) else ")"))
        return True
    if words[0] in ("rm", "remove", "drop") and len(words) == 2:
        which: int | str = int(words[1]) if words[1].isdigit() else words[1]
        handle = repl.session.remove_context(which)
        repl.display.info(f"removed {handle.name}; a fresh worker holds the other contexts (variables are gone)")
        return True
    if words[0] == "refresh" and len(words) == 1:
        changed = repl.session.refresh_contexts()
        if not changed:
            repl.display.info("no context changed on disk since it was read (each question checks too)")
        for name, what in changed:
            repl.display.info(f"{one_line(name)}: {one_line(what)}")
        return True
    if words[0] != "add" or len(words) not in (2, 3):
        repl.display.error("usage: /context add PATH [NAME] | /context rm NAME|N | /context refresh | /context list")
        return False
    from rlm_runtime.registry import is_ref

    source: str | Path = words[1]
    if not is_ref(words[1]):  # ctx:ID, a registered context, is resolved by the session
        source = user_path(words[1])
        if not source.exists():
            repl.display.error(f"no such file or folder: {words[1]}")
            return False
    handle = repl.session.add_context(source, words[2] if len(words) == 3 else None)
    n = len(repl.session.contexts) - 1
    repl.display.info(f"added {handle.name} as " + ("context" if n == 0 else f"contexts[{n}]"))
    return True


def _model(repl: Repl, arg: str, *, sub: bool = False) -> bool:
    name = arg.strip()
    setup = repl.session.setup
    if not name:
        repl.display.info(f"model: {setup.client.model}; sub-model: {setup.sub_client.model}")
        return True
    try:  # set_models checks a name before switching (the check rlm ask makes before any work)
        if sub:
            repl.session.set_models(sub_model=name)
        else:
            repl.session.set_models(model=name)
    except (RLMError, OSError, ValueError) as e:
        current = setup.sub_client.model if sub else setup.client.model
        repl.display.error(f"{'/sub-model' if sub else '/model'}: {one_line(str(e))} (still using {current})")
        return False
    setup = repl.session.setup
    repl.hud.model = setup.client.model
    repl.display.info(f"model: {setup.client.model}; sub-model: {setup.sub_client.model} (for the next questions)")
    return True


def _profile(repl: Repl, arg: str) -> bool:
    from rlm_runtime.profiles import list_profiles

    name = arg.strip()
    current = repl.session.profile
    if not name or name == "list":
        repl.display.info(f"profile: {current.name if current else 'none'}")
        for p in list_profiles(repl.session.paths.brain_dirs):
            repl.display.out(f"  {p.name:18} {p.description}")
        return True
    repl.session.set_profile(None if name == "none" else name)
    kept = ""
    if repl.limit_overrides:  # what /limits set wins over the profile's, as flags do on the command line
        from rlm_runtime.budget import RunLimits

        repl.session.set_limits(RunLimits(**{**repl.session.limits.model_dump(), **repl.limit_overrides}))
        kept = "; kept from /limits: " + ", ".join(f"{k}={v}" for k, v in repl.limit_overrides.items())
    limits = repl.session.limits
    repl.hud.model = repl.session.setup.client.model
    repl.display.info(f"profile: {name} (for the next questions): {limits.max_iterations} turns, depth {limits.max_depth}, "
                      f"sub-model {repl.session.setup.sub_client.model}{kept}")
    return True


def _budget(repl: Repl, arg: str) -> bool:
    totals = repl.session.budget.totals()
    cap = repl.session.budget.limits.max_cost_usd
    limits = repl.session.limits
    asked = repl.session.usage()["questions"]
    repl.display.out(f"  used: {int(totals['calls'])} model calls, {int(totals['input_tokens'])} tokens in / "
                     f"{int(totals['output_tokens'])} out, ${totals['cost_usd']:.4f} over {asked} question{'' if asked == 1 else 's'}")
    if cap is not None:
        repl.display.out(f"  left: ${max(0.0, cap - totals['cost_usd']):.4f} of the session's ${cap:g}")
    else:
        repl.display.out("  left: no session cost cap (start with --budget-usd X for one)")
    per = f"${limits.max_cost_usd:g}" if limits.max_cost_usd is not None else "no cost cap"
    repl.display.out(f"  each question: {limits.max_llm_calls} model calls, {limits.max_input_tokens:,} tokens in, "
                     f"{limits.max_output_tokens:,} out, {per}, {limits.max_wall_s:g}s (change with /limits)")
    return True


def _limits(repl: Repl, arg: str) -> bool:
    from pydantic import ValidationError

    from rlm_runtime.budget import RunLimits

    current = repl.session.limits
    fields = list(RunLimits.model_fields)
    if not arg.strip():
        for name in fields:
            repl.display.out(f"  {name} = {getattr(current, name)}")
        return True
    changes: dict[str, object] = {}
    for word in arg.split():
        key, sep, value = word.partition("=")
        if not sep or not value:
            repl.display.error(f"expected KEY=VALUE, got {word!r} (for example /limits max_iterations=10)")
            return False
        if key not in fields:
            repl.display.error(f"unknown limit {key!r}{_nearest(key, fields)}; the limits are: {', '.join(fields)}")
            return False
        changes[key] = None if value.lower() in ("none", "off", "null") else value
    try:
        limits = RunLimits(**{**current.model_dump(), **changes})
    except ValidationError as e:
        detail = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
        repl.display.error(f"invalid limit: {detail}")
        return False
    repl.session.set_limits(limits)
    repl.limit_overrides.update({k: getattr(limits, k) for k in changes})
    repl.display.info("limits: " + ", ".join(f"{k}={getattr(limits, k)}" for k in changes) + " (for the next questions)")
    return True


def _vars(repl: Repl, arg: str) -> bool:
    result = repl.session.execute("SHOW_VARS()")
    repl.display.cell(result)
    repl.refresh_names()
    return result.ok


def _reset(repl: Repl, arg: str) -> bool:
    repl.session.reset()
    repl.names = []
    repl.display.info("a fresh worker: variables and the conversation are gone; contexts and the budget are kept")
    return True


MEMORY_USAGE = "/memory search QUERY | show ID [--history] | edit ID --text T ..."
#: ``/memory edit``'s options, as ``rlm memory edit`` names them.
EDIT_OPTIONS = ("--text", "--kind", "--tag", "--untag", "--summary", "--confidence")


def _memory(repl: Repl, arg: str) -> bool:
    action, _, rest = arg.strip().partition(" ")
    if action not in ("search", "show", "edit") or not rest.strip():
        repl.display.error(f"usage: {MEMORY_USAGE}")
        return False
    store = repl.session.memory
    if store is None:
        repl.display.error("no memory store in this session: start with --memory (or --memory STORE)")
        return False
    try:
        if action == "show":
            return _memory_show(repl, store, rest)
        if action == "edit":
            return _memory_edit(repl, store, rest)
        hits = store.search(rest.strip(), k=10, record=False)
    except RLMError as e:
        repl.display.error(one_line(str(e)))
        return False
    if not hits:
        repl.display.info("no memory chunk matches")
    for hit in hits:
        repl.display.out(f"  m{hit.chunk_id}  {hit.score:.2f}  {hit.source}:{hit.start_line}-{hit.end_line}  "
                         f"{' '.join(hit.snippet.split())[:160]}")
    return True


def _chunk_id(word: str) -> int | None:
    """A chunk id as search shows it (``m42``) or as a number; None when it is neither."""
    digits = word[1:] if word[:1] in ("m", "M") else word
    return int(digits) if digits.isascii() and digits.isdigit() and len(digits) <= 18 else None


def _memory_show(repl: Repl, store: MemoryStore, rest: str) -> bool:
    words = rest.split()
    chunk_id = _chunk_id(words[0])
    if chunk_id is None or any(w != "--history" for w in words[1:]):
        repl.display.error("usage: /memory show ID [--history]")
        return False
    view = store.read(chunk_id, record=False)
    repl.display.out(f"  m{view.chunk_id}  {view.kind}  {one_line(view.source)}:{view.start_line}-{view.end_line}"
                     + (f"  tags: {one_line(', '.join(view.tags))}" if view.tags else "")
                     + (f"  summary: {one_line(view.summary)}" if view.summary else "")
                     + (f"  confidence {view.confidence:.2f}" if view.confidence is not None else ""))
    for line in view.text.splitlines() or [""]:
        repl.display.out("    " + one_line(line))
    if "--history" in words:
        versions = store.history(chunk_id)[:-1]
        if not versions:
            repl.display.info("no earlier version (never edited)")
        for version in versions:
            repl.display.out(f"  version {version.version} ({one_line(version.kind)}"
                             + (f"; tags: {one_line(', '.join(version.tags))}" if version.tags else "") + ")")
            for line in version.text.splitlines() or [""]:
                repl.display.out("    " + one_line(line))
    return True


def _memory_edit(repl: Repl, store: MemoryStore, rest: str) -> bool:
    """``/memory edit ID --text T --kind K --tag A,B --untag A,B --summary S --confidence X``:
    ``rlm memory edit`` from the REPL, on the session's store."""
    from rlm_runtime.memory.edits import KEEP, Edit

    usage = "usage: /memory edit ID [--text TEXT] [--kind KIND] [--tag A,B] [--untag A,B] [--summary TEXT] [--confidence X]"
    try:
        words = shlex.split(rest)
    except ValueError as e:
        repl.display.error(f"{e}: {usage}")
        return False
    chunk_id = _chunk_id(words[0]) if words else None
    given: dict[str, list[str]] = {}
    pairs = words[1:]
    if chunk_id is None or len(pairs) % 2 or any(p not in EDIT_OPTIONS for p in pairs[::2]):
        repl.display.error(usage)
        return False
    for option, value in zip(pairs[::2], pairs[1::2], strict=True):
        given.setdefault(option, []).append(value)
    single = {k: v[-1] for k, v in given.items()}
    confidence: object = KEEP
    if "--confidence" in single:
        raw = single["--confidence"]
        try:
            confidence = None if raw == "none" else float(raw)
        except ValueError:
            repl.display.error(f"--confidence is a number from 0 to 1, or none (got {one_line(raw)[:40]})")
            return False

    def tags(option: str) -> tuple[str, ...]:
        return tuple(t.strip() for v in given.get(option, []) for t in v.split(",") if t.strip())

    edit = Edit(text=single.get("--text", KEEP), kind=single.get("--kind", KEEP), add_tags=tags("--tag"),
                remove_tags=tags("--untag"), summary=single["--summary"] or None if "--summary" in single else KEEP,
                confidence=confidence)
    if edit == Edit():
        repl.display.error(usage)
        return False
    done = store.edit(chunk_id, edit)
    if not done.changed:
        repl.display.info(f"m{done.chunk_id} already holds that: nothing changed")
    else:
        repl.display.info(f"edited m{done.chunk_id}: {', '.join(done.changed)}; the version before is kept "
                          f"(/memory show {done.chunk_id} --history)")
    return True


def _remember(repl: Repl, arg: str) -> bool:
    value = arg.strip().lower()
    if value not in ("on", "off", ""):
        repl.display.error("usage: /remember on|off")
        return False
    if value == "on" and repl.session.memory is None:
        repl.display.error("no memory store in this session: start with --memory (or --memory STORE) to remember answers")
        return False
    if value:
        repl.session.remember = value == "on"
    repl.display.info("remembering answers: " + ("on" if repl.session.remember else "off"))
    return True


def _trace(repl: Repl, arg: str) -> bool:
    from rlm_runtime.trajectory import read_events, render_html

    source = repl.session.trajectory
    if source is None:
        repl.display.error("this session writes no trajectory")
        return False
    target = user_path(arg.strip()) if arg.strip() else Path(source).with_suffix(".html")
    page = render_html(read_events(source), title=f"rlm repl session {repl.session.session_id}")
    private.write_text(target, page)  # the trajectory's text, 0600 like it
    repl.display.info(f"wrote {target}")
    return True


def _save(repl: Repl, arg: str) -> bool:
    if not arg.strip():
        repl.display.error("usage: /save FILE")
        return False
    path = user_path(arg.strip())
    repl.transcript.save(path, repl.session.setup.client.model)
    repl.display.info(f"saved {len(repl.transcript.entries)} entries to {path} (replay with /load {arg.strip()})")
    return True


def _load(repl: Repl, arg: str) -> bool:
    from rlm_runtime.repl import transcript

    if not arg.strip():
        repl.display.error("usage: /load FILE")
        return False
    path = user_path(arg.strip())
    if not path.is_file():
        repl.display.error(f"no such file: {arg.strip()}")
        return False
    return repl.replay(transcript.load(path), source=str(path))


def _clear(repl: Repl, arg: str) -> bool:
    repl.display.clear()
    return True


def _exit(repl: Repl, arg: str) -> bool:
    repl.exiting = True
    return True


COMMANDS: dict[str, Command] = {c.name: c for c in (
    Command("/help", "/help", "this list", _help),
    Command("/context", "/context add PATH [NAME] | rm NAME|N | refresh | list",
            "add a file, a folder or a ctx:ID as the next context; take one out; read again those changed on disk "
            "(each question does); list them", _context),
    Command("/drop", "/drop NAME|N", "take a context out (/context rm)", lambda repl, arg: _context(repl, f"rm {arg}")),
    Command("/clear", "/clear", "clear the screen", _clear),
    Command("/model", "/model NAME", "the root model of the next questions", _model),
    Command("/sub-model", "/sub-model NAME", "the model of llm_query and child RLMs",
            lambda repl, arg: _model(repl, arg, sub=True)),
    Command("/profile", "/profile [NAME|none|list]", "use a profile for the next questions (rlm profile list)", _profile),
    Command("/budget", "/budget", "what the session used and what is left", _budget),
    Command("/limits", "/limits [KEY=VALUE ...]", "show or change the limits of each question", _limits),
    Command("/vars", "/vars", "the variables in the namespace", _vars),
    Command("/reset", "/reset", "a fresh worker (variables and conversation go; contexts stay)", _reset),
    Command("/memory", MEMORY_USAGE, "search the memory store, show a chunk (and its earlier versions), "
            "edit one in place (as rlm memory edit: --text, --kind, --tag, --untag, --summary, --confidence)", _memory),
    Command("/remember", "/remember on|off", "store answers in the memory store", _remember),
    Command("/trace", "/trace [FILE]", "write the session's trajectory as HTML and print its path", _trace),
    Command("/save", "/save FILE", "save a transcript of questions and cells", _save),
    Command("/load", "/load FILE", "replay a saved transcript", _load),
    Command("/exit", "/exit", "leave (Ctrl-D too)", _exit),
)}
ALIASES = {"/quit": "/exit", "/q": "/exit", "/?": "/help", "/h": "/help"}


def split_command(line: str) -> tuple[str, str]:
    """A ``/command args`` line's command name (aliases resolved) and its arguments: the one
    parse, shared by ``run_command`` and the replay rule (``replay.read_only``)."""
    name, _, arg = line.strip().partition(" ")
    return ALIASES.get(name, name), arg


def run_command(repl: Repl, line: str) -> bool:
    """Run one ``/command args`` line; messages for bad input, never an exception."""
    name, arg = split_command(line)
    command = COMMANDS.get(name)
    if command is None:
        repl.display.error(f"unknown command {name}{_nearest(name, [*COMMANDS, *ALIASES])}; /help lists the commands")
        return False
    try:
        return command.run(repl, arg)
    except (RLMError, OSError, ValueError) as e:
        repl.display.error(f"{name}: {one_line(str(e))}")
        return False


def _nearest(word: str, choices: list[str]) -> str:
    match = difflib.get_close_matches(word, choices, n=1, cutoff=0.5)
    return f" (did you mean {match[0]}?)" if match else ""


def _split(repl: Repl, arg: str) -> list[str] | None:
    try:
        return shlex.split(arg)
    except ValueError as e:
        repl.display.error(f"cannot read the arguments: {e}")
        return None
