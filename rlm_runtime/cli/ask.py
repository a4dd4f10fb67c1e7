"""``rlm ask`` (one question over contexts, one answer) and ``rlm repl`` (an interactive session).

``ask`` refuses what it can before any work: an empty question, a missing context path, a
model name no provider knows or whose key is not set (``llm.checked_client``, for the model
and the sub-model); then it reads standard input when that is a context (``stdin.py``) and
runs one RLM, showing its turns on stderr as they happen (``live.py``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rlm_runtime.cli.common import EXIT_FAILED, EXIT_OK, UsageError, add_command, exit_code, print_json, say
from rlm_runtime.termsafe import one_line

#: The help of --assists (ask, repl).
ASSISTS_HELP = ("the small-model assists (rlm_runtime.assist): auto (default: the measured set for a small model, none for "
                "others), small (that set for any model), none, or names, comma-separated")

ASK_DESCRIPTION = """\
Answer a question over contexts with a recursive LM: the model reads the contexts through
Python cells run in a sandbox, and may hand parts of them to sub-calls. The answer goes to
stdout; the model's turns go to stderr as they happen (-q hides them).

Contexts are files and folders (-c PATH, repeatable), registered contexts (-c ctx:ID, see
rlm context), the memory store (--memory), and standard input when it is a pipe or a file (cat notes.txt | rlm ask ...) or with -c -:
read as text named "stdin" (UTF-8, or UTF-16/UTF-32 with a byte-order mark; at most
256 MB; empty adds nothing). Without -c -, a terminal, /dev/null or a socket on standard
input is left alone."""

ASK_EXIT_CODES = """\
exit codes:
  0    an answer was printed
  1    no answer: the budget, the turns or the errors ran out, or a model call failed
       (stderr says why, with the partial answer when there is one); or an internal error
  2    bad usage: an unknown option, an empty question, a missing context path or
       ctx:ID, standard input that is not text or is over 256 MB, an invalid policy,
       profile or limit, an unknown model, a missing API key (model names and keys are
       checked before the run starts, as far as the provider's name list tells)
  3    the model's server cannot be reached
  4    the sandbox could not run (no worker could start)
  130  interrupted (Ctrl-C)"""

REPL_DESCRIPTION = """\
An interactive session over one sandbox: questions for the model, Python cells (">>> code",
or F2 for python mode) in the same namespace, slash commands (/help lists them), and a
toolbar with the budget, the worker's memory and the calls in flight. exit, quit, /exit and
Ctrl-D leave. Lines piped in (rlm repl < script.txt) run as a script, one entry a line."""


def add_commands(commands: Any) -> None:
    """Register ``rlm ask`` and ``rlm repl`` on ``rlm``'s subcommand table."""
    ask = add_command(commands, "ask", help="answer a question over contexts with a recursive LM",
                      description=ASK_DESCRIPTION, notes=ASK_EXIT_CODES,
                      examples=('rlm ask "What is the launch code?" -c notes.txt -m openai/gpt-4o-mini',
                                'git log | rlm ask "Who changed the parser most often?"',
                                'rlm ask "Which open issues mention the sandbox?" -c issues/ --memory --json'))
    ask.add_argument("question", help="the question, quoted (an empty one is a usage error)")
    ask.add_argument("-c", "--context", action="append", default=[], metavar="PATH",
                     help="a file or folder (repeatable); ctx:ID a registered context (rlm context list); - reads standard "
                          "input; memory: or memory:STORE searches the memory store")
    ask.add_argument("--memory", nargs="?", const=True, default=None, metavar="STORE",
                     help="search the memory store too (default store: $RLM_HOME/brain/memory.db)")
    ask.add_argument("--remember", action="store_true", help="store the answer in the memory store (implies --memory)")
    ask.add_argument("-m", "--model", help="root model, e.g. openai/gpt-4o-mini or scripted:PATH (default: $RLM_MODEL)")
    ask.add_argument("--sub-model", help="model of llm_query and child RLMs (default: --model)")
    ask.add_argument("--api-base", help="server URL for an OpenAI-compatible model")
    ask.add_argument("--max-depth", type=int, help="rlm_query recursion depth (default 1)")
    ask.add_argument("--max-iterations", type=int, help="model turns per RLM (default 20)")
    ask.add_argument("--budget-usd", type=float, help="stop when the run has cost this much")
    ask.add_argument("--max-calls", type=int, help="model calls in the whole run (default 200)")
    ask.add_argument("--max-tokens", type=int, help="input tokens in the whole run (default 2,000,000)")
    ask.add_argument("--policy", default="default", help="sandbox policy name or TOML path")
    ask.add_argument("--profile", help="a profile (rlm profile list) or a profile TOML path; flags win over it")
    ask.add_argument("--assists", help=ASSISTS_HELP)
    ask.add_argument("--trace", help="trajectory JSONL file (default: a new file under $RLM_HOME/traces)")
    ask.add_argument("--json", action="store_true", help="print one JSON object with the result")
    ask.add_argument("-q", "--quiet", action="store_true", help="do not show iterations as they happen")
    ask.add_argument("--strict", action="store_true",
                     help="stop with exit status 1, before the model runs, when no context has text to read")
    ask.add_argument("--server", action="store_true",
                     help="ask the running rlm serve --http (its worker and model already warm); the contexts must be "
                          "registered or under its roots")
    ask.set_defaults(run=run_ask)

    rp = add_command(commands, "repl", help="an interactive session: questions, Python cells, slash commands, a live HUD",
                     description=REPL_DESCRIPTION,
                     examples=("rlm repl -c notes/ -m local:qwen2.5-coder-1.5b",
                               "rlm repl --memory --budget-usd 0.50",
                               "rlm repl -c data.csv < questions.txt"))
    rp.add_argument("-c", "--context", action="append", default=[], metavar="PATH",
                    help="a file or folder (repeatable; more with /context add); ctx:ID a registered context; memory: or "
                         "memory:STORE searches the memory store")
    rp.add_argument("-m", "--model", help="root model, e.g. openai/gpt-4o-mini or scripted:PATH (default: $RLM_MODEL)")
    rp.add_argument("--sub-model", help="model of llm_query and child RLMs (default: --model)")
    rp.add_argument("--memory", nargs="?", const=True, default=None, metavar="STORE",
                    help="search the memory store too (default store: $RLM_HOME/brain/memory.db)")
    rp.add_argument("--remember", action=argparse.BooleanOptionalAction, default=None,
                    help="store each answer in the memory store (default: on when a memory store is in use)")
    rp.add_argument("--fill-quality", action="store_true",
                    help="while no question runs, give the memory store's chunks their quality vectors (search by "
                         "meaning; rlm model install minilm-l6), at idle priority (implies --memory)")
    rp.add_argument("--budget-usd", type=float, help="cap on the whole session's cost (each question's: /limits max_cost_usd=X)")
    rp.add_argument("--policy", default="default", help="sandbox policy name or TOML path")
    rp.add_argument("--profile", help="a profile (rlm profile list) or a profile TOML path; /profile changes it")
    rp.add_argument("--assists", help=ASSISTS_HELP)
    rp.add_argument("--trace", help="trajectory JSONL file (default: a new file under $RLM_HOME/traces)")
    rp.add_argument("-q", "--quiet", action="store_true", help="do not show iterations as they happen")
    rp.add_argument("--allow-commands", action="store_true",
                    help="piped lines are a script you wrote: run all their slash commands (without it they run questions, "
                         "cells and read-only commands only; a /load'ed file never runs others without asking)")
    rp.set_defaults(run=run_repl)


def _contexts(values: list[str], memory: Any, *, stdin: bool = False) -> tuple[list[str], Any]:
    """The context paths of ``-c`` (``-`` kept where it stands when ``stdin``; a ``ctx:ID``
    kept as it is, after checking that it resolves), and the memory store asked for
    (``memory:``, ``memory:STORE`` or a registered memory store among them, else ``memory``).

    Raises:
        UsageError: a path that does not exist, or ``-`` given twice.
        UnknownContext: a ``ctx:ID`` no context is registered as.
    """
    from rlm_runtime.registry import Registry, is_ref

    paths = []
    registry = None
    for path in values:
        if is_ref(path):
            registry = registry or Registry.open()
            resolved = registry.resolve(path)  # an unknown id fails here, before any work
            if resolved.entry.kind == "memory":
                memory = str(resolved.path)
            else:
                paths.append(path)
        elif path.startswith("memory:"):
            named = path.removeprefix("memory:")
            if named and isinstance(memory, str) and memory != named:
                raise UsageError(f"-c {path} and --memory {memory} name two memory stores: a run searches one")
            # memory: alone is the store --memory named, if it named one; else the default store.
            memory = named or (memory if memory is not None else True)
        elif stdin and path == "-":
            if "-" in paths:
                raise UsageError("-c - is given twice: standard input can be read once")
            paths.append(path)
        elif not Path(path).exists():
            raise UsageError(f"no such context file or folder: {path}")
        else:
            paths.append(path)
    if registry is not None:
        registry.close()
    return paths, memory


def run_ask(args: argparse.Namespace) -> int:
    from rlm_runtime.budget import RunLimits
    from rlm_runtime.cli.live import LiveView
    from rlm_runtime.cli.stdin import NAME, read_stdin, stdin_is_input
    from rlm_runtime.config import default_model
    from rlm_runtime.context.sources import nothing_to_read
    from rlm_runtime.llm import checked_client
    from rlm_runtime.registry import is_ref

    if not args.question.strip():
        raise UsageError("the question is empty")
    if args.server:
        return _through_server(args)
    paths, memory = _contexts(args.context, args.memory, stdin=True)
    if args.remember and memory is None:
        memory = True
    overrides = {"max_depth": args.max_depth, "max_iterations": args.max_iterations, "max_cost_usd": args.budget_usd,
                 "max_llm_calls": args.max_calls, "max_input_tokens": args.max_tokens, "assists": args.assists}
    name = args.model
    if not name:
        name, note = default_model()
        if note and not args.quiet:
            say(f"rlm: {note}", err=True)
    profile = settings = None
    if args.profile:
        from rlm_runtime import profiles
        from rlm_runtime.config import paths_from_env

        brain_dirs = paths_from_env().brain_dirs
        profile = profiles.load_profile(args.profile, brain_dirs)
        settings = profiles.resolve(profile, RunLimits.for_model(name), brain_dirs)
    try:
        limits = RunLimits.for_model(name, **overrides) if settings is None else \
            RunLimits(**{**settings.limits.model_dump(), **{k: v for k, v in overrides.items() if v is not None}})
    except ValueError as e:
        raise UsageError(_limit_error(e)) from e
    options: dict[str, Any] = {"api_base": args.api_base} if args.api_base else {}
    if settings is not None and settings.temperature is not None:
        options["temperature"] = settings.temperature
    sub_name = args.sub_model or (settings.sub_model if settings is not None else None)
    # The names are checked here, before the sandbox starts and the first turn is shown.
    model = checked_client(name, **options)
    sub = checked_client(sub_name, **options) if sub_name else None
    contexts: list[Any] = [p if is_ref(p) else Path(p) for p in paths if p != "-"]
    if "-" in paths or stdin_is_input():
        text = read_stdin()
        if text.strip():
            from rlm_runtime.context import open_context

            handle = open_context(text, name=NAME, as_text=True)
            # -c - stands where it was given; a piped standard input comes after the -c paths.
            contexts.insert(paths.index("-") if "-" in paths else len(contexts), handle)
    for c in contexts:
        if isinstance(c, Path) and not c.is_dir():
            # A file that cannot be a context (binary, a device, missing) is an error before
            # anything else is said about it.
            from rlm_runtime.context import open_context

            open_context(c)
    if not contexts and memory is None:
        say("rlm: warning: no context (-c PATH, -c ctx:ID, --memory or standard input): the model answers from "
            "the question alone", err=True)
    if contexts and (why := nothing_to_read(contexts)) is not None:
        if args.strict:
            say(f"rlm: error: no context has text to read: {one_line(why)}", err=True)
            return EXIT_FAILED
        say(f"rlm: warning: no context has text to read ({one_line(why)}); the model sees none of it "
            "(--strict stops here instead)", err=True)
    return _answer(args, model, sub, limits, memory, profile, contexts, None if args.quiet else LiveView())


#: The flag of each limit ``rlm ask`` takes, for an error that names what was typed.
_LIMIT_FLAGS = {"max_depth": "--max-depth", "max_iterations": "--max-iterations", "max_cost_usd": "--budget-usd",
                "max_llm_calls": "--max-calls", "max_input_tokens": "--max-tokens", "assists": "--assists"}


def _limit_error(e: ValueError) -> str:
    """A limit's validation error as the flag that set it and the value given."""
    errors = getattr(e, "errors", None)
    if not callable(errors) or not errors():
        return f"invalid limit: {e}"
    first = errors()[0]
    field = str(first.get("loc", ("",))[0]) if first.get("loc") else ""
    flag = _LIMIT_FLAGS.get(field, field or "a limit")
    message = str(first.get("msg", "invalid")).replace("Input should be", "must be").replace("Value error, ", "")
    return f"{flag} {one_line(repr(first.get('input')))}: {message}"


def _through_server(args: argparse.Namespace) -> int:
    """``rlm ask --server``: what a running server cannot take is refused here, before anything is sent."""
    from rlm_runtime.cli.attach import ask_through_server

    unsupported = [name for name, value in (("--memory", args.memory), ("--remember", args.remember),
                                            ("--sub-model", args.sub_model), ("--api-base", args.api_base),
                                            ("--profile", args.profile), ("--trace", args.trace), ("--assists", args.assists),
                                            ("--max-depth", args.max_depth), ("--max-iterations", args.max_iterations),
                                            ("--budget-usd", args.budget_usd), ("--max-calls", args.max_calls),
                                            ("--max-tokens", args.max_tokens)) if value]
    if unsupported:
        raise UsageError(f"--server: the server's own settings apply; {', '.join(unsupported)} cannot be sent to it")
    if args.policy != "default":
        raise UsageError("--server: the server's own settings apply; --policy cannot be sent to it")
    if "-" in args.context or any(c.startswith("memory:") for c in args.context):
        raise UsageError("--server: send files, folders or ctx:ID; standard input and memory: stay with a local run")
    paths, _ = _contexts(args.context, None)
    return ask_through_server(args, paths)


def _answer(args: argparse.Namespace, model: Any, sub: Any, limits: Any, memory: Any, profile: Any, contexts: list[Any],
            show: Any) -> int:
    """Run the question and print its answer (or why there is none); the exit status."""
    from rlm_runtime.orchestrator import RLM

    rlm = RLM(model, sub, limits=limits, policy=args.policy, trace=args.trace, on_event=show, memory=memory,
              remember=args.remember, profile=profile)
    try:
        result = rlm.run(args.question, contexts=contexts)
    finally:
        rlm.close()
        if show is not None:
            show.close()
    if args.json:
        print_json(args, result.to_dict())
    elif result.answer is not None:
        say(result.answer)
    if result.answer is None:
        if not args.json:
            say(f"rlm: no answer: {one_line(str(result.error))}", err=True)
            if result.partial:
                say(f"rlm: partial output: {result.partial[:500]}", err=True)
        return exit_code(result.exception) if result.exception is not None else EXIT_FAILED
    return EXIT_OK


def run_repl(args: argparse.Namespace) -> int:
    from rlm_runtime.config import default_model, paths_from_env
    from rlm_runtime.repl import ReplConfig, main

    paths, memory = _contexts(args.context, args.memory)
    if (args.remember or args.fill_quality) and memory is None:
        memory = True
    if args.budget_usd is not None and args.budget_usd < 0:
        raise UsageError("--budget-usd must be 0 or more")
    name, note = (args.model, None) if args.model else default_model()
    from rlm_runtime.llm import checked_client

    # The names are checked before the REPL starts, as rlm ask checks them: not at the first question.
    for model in filter(None, (name, args.sub_model)):
        checked_client(model).close()
    config = ReplConfig(model=name, sub_model=args.sub_model, contexts=paths, memory=memory, remember=args.remember,
                        budget_usd=args.budget_usd, policy=args.policy, trace=args.trace, live=not args.quiet,
                        profile=args.profile, allow_commands=args.allow_commands, assists=args.assists,
                        fill_quality=args.fill_quality)
    notes: tuple[str, ...] = (f"rlm: {note}",) if note else ()
    if args.fill_quality:
        notes += ("rlm: the memory store's quality vectors fill while no question runs (rlm memory stats shows how far)",)
    return main(config, home=paths_from_env().home, notes=notes)
