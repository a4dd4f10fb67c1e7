"""The ``rlm`` command.

Exit codes (one table, ``EXIT_CODES``, maps error classes to them): 0 success; 1 the checked
or run code failed or was refused, grep found nothing, or ``ask`` found no answer (budget,
iterations, errors); 2 bad usage (unknown option, missing file, invalid policy or pattern,
unknown model, missing API key); 3 the model's server is unreachable; 4 the sandbox could
not run (no worker could start, the worker pool is exhausted); 130 interrupted. Errors are one line on stderr, never a traceback (an
unexpected exception is reported as an internal error, exit 1; ``RLM_DEBUG=1`` adds the
traceback); with ``--json`` the error is also the one JSON object on stdout.

Text a cell, a model or a context file wrote reaches the terminal through ``termsafe``:
its control characters are shown escaped, never obeyed. JSON output needs no such step.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

from rlm_runtime import private
from rlm_runtime.errors import ConfigError, ContextError, MissingAPIKey, ModelUnavailable, RLMError, SandboxError, UnknownModel
from rlm_runtime.termsafe import one_line, printable

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNAVAILABLE, EXIT_SANDBOX, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130


class _Usage(Exception):
    """Bad usage found after argument parsing (a missing file, say)."""


class _OutputClosed(Exception):
    """The reader of our stdout went away (``rlm grep ... | head``): not an error of ours."""


#: The help of --assists (ask, repl).
_ASSISTS_HELP = ("the small-model assists (rlm_runtime.assist): auto (default: the measured set for a small model, none for "
                 "others), small (that set for any model), none, or names, comma-separated")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rlm", description="A sandboxed recursive-LM REPL runtime.")
    parser.add_argument("--version", action="version", version=f"rlm_runtime {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    policy = commands.add_parser("policy", help="sandbox policies").add_subparsers(dest="action", required=True, metavar="ACTION")
    pc = policy.add_parser("check", help="check a file of Python against a policy (exit 0 allowed, 1 refused)")
    pc.add_argument("file", help="a Python file, or - for standard input")
    pc.add_argument("--policy", default="default", help="policy name or TOML path (default: default)")
    pc.add_argument("--json", action="store_true", help="print the report as one JSON object")
    pc.set_defaults(run=_policy_check)

    sandbox = commands.add_parser("sandbox", help="the sandboxed worker").add_subparsers(dest="action", required=True, metavar="ACTION")
    sr = sandbox.add_parser("run", help="run one cell in a fresh sandbox (exit 0 clean, 1 failed or refused)")
    sr.add_argument("file", help="a Python file, or - for standard input")
    sr.add_argument("--policy", default="default", help="policy name or TOML path (default: default)")
    sr.add_argument("--timeout", type=float, metavar="S", help="cell timeout in seconds")
    sr.add_argument("--memory-mb", type=int, metavar="N", help="worker memory cap in MB")
    sr.add_argument("-c", "--context", action="append", default=[], metavar="PATH",
                    help="a file or folder the cell sees as `context` (repeatable: `contexts`)")
    sr.add_argument("--json", action="store_true", help="print exactly one JSON object with the cell result")
    sr.set_defaults(run=_sandbox_run)

    ask = commands.add_parser("ask", help="answer a question over contexts with a recursive LM")
    ask.add_argument("question")
    ask.add_argument("-c", "--context", action="append", default=[], metavar="PATH",
                     help="a file or folder (repeatable); memory: or memory:STORE searches the memory store")
    ask.add_argument("--memory", nargs="?", const=True, default=None, metavar="STORE",
                     help="search the memory store too (default store: $RLM_HOME/brain/memory.db)")
    ask.add_argument("--remember", action="store_true", help="store the answer in the memory store (implies --memory)")
    ask.add_argument("--model", help="root model, e.g. openai/gpt-4o-mini or scripted:PATH (default: $RLM_MODEL)")
    ask.add_argument("--sub-model", help="model of llm_query and child RLMs (default: --model)")
    ask.add_argument("--api-base", help="server URL for an OpenAI-compatible model")
    ask.add_argument("--max-depth", type=int, help="rlm_query recursion depth (default 1)")
    ask.add_argument("--max-iterations", type=int, help="model turns per RLM (default 20)")
    ask.add_argument("--budget-usd", type=float, help="stop when the run has cost this much")
    ask.add_argument("--max-calls", type=int, help="model calls in the whole run (default 200)")
    ask.add_argument("--max-tokens", type=int, help="input tokens in the whole run (default 2,000,000)")
    ask.add_argument("--policy", default="default", help="sandbox policy name or TOML path")
    ask.add_argument("--profile", help="a profile (rlm profile list) or a profile TOML path; flags win over it")
    ask.add_argument("--assists", help=_ASSISTS_HELP)
    ask.add_argument("--trace", help="trajectory JSONL file (default: a new file under $RLM_HOME/traces)")
    ask.add_argument("--json", action="store_true", help="print one JSON object with the result")
    ask.add_argument("-q", "--quiet", action="store_true", help="do not show iterations as they happen")
    ask.set_defaults(run=_ask)

    rp = commands.add_parser("repl", help="an interactive session: questions, Python cells, slash commands, a live HUD")
    rp.add_argument("-c", "--context", action="append", default=[], metavar="PATH",
                    help="a file or folder (repeatable; more with /context add); memory: or memory:STORE searches the memory store")
    rp.add_argument("--model", help="root model, e.g. openai/gpt-4o-mini or scripted:PATH (default: $RLM_MODEL)")
    rp.add_argument("--sub-model", help="model of llm_query and child RLMs (default: --model)")
    rp.add_argument("--memory", nargs="?", const=True, default=None, metavar="STORE",
                    help="search the memory store too (default store: $RLM_HOME/brain/memory.db)")
    rp.add_argument("--remember", action=argparse.BooleanOptionalAction, default=None,
                    help="store each answer in the memory store (default: on when a memory store is in use)")
    rp.add_argument("--budget-usd", type=float, help="cap on the whole session's cost (each question's: /limits max_cost_usd=X)")
    rp.add_argument("--policy", default="default", help="sandbox policy name or TOML path")
    rp.add_argument("--profile", help="a profile (rlm profile list) or a profile TOML path; /profile changes it")
    rp.add_argument("--assists", help=_ASSISTS_HELP)
    rp.add_argument("--trace", help="trajectory JSONL file (default: a new file under $RLM_HOME/traces)")
    rp.add_argument("-q", "--quiet", action="store_true", help="do not show iterations as they happen")
    rp.add_argument("--allow-commands", action="store_true",
                    help="piped lines are a script you wrote: run all their slash commands (without it they run questions, "
                         "cells and read-only commands only; a /load'ed file never runs others without asking)")
    rp.set_defaults(run=_repl)

    trace = commands.add_parser("trace", help="read trajectories").add_subparsers(dest="action", required=True, metavar="ACTION")
    ts = trace.add_parser("show", help="print a trajectory as a tree")
    ts.add_argument("file")
    ts.set_defaults(run=_trace_show)
    th = trace.add_parser("html", help="write a trajectory as one self-contained HTML page")
    th.add_argument("file")
    th.add_argument("-o", "--output", required=True, help="the HTML file to write")
    th.set_defaults(run=_trace_html)

    model = commands.add_parser("model", help="embedded local models").add_subparsers(dest="action", required=True, metavar="ACTION")
    mi = model.add_parser("install", help="download, assemble and verify a local model")
    mi.add_argument("name", help="qwen2.5-coder-1.5b or qwen2.5-coder-0.5b")
    mi.set_defaults(run=_model_install)
    ml = model.add_parser("list", help="local models: installed or not, sizes, licence")
    ml.set_defaults(run=_model_list)
    mr = model.add_parser("remove", help="delete an installed local model")
    mr.add_argument("name")
    mr.set_defaults(run=_model_remove)

    pr = commands.add_parser("probe", help="the shape of a file or folder, and whether to load it")
    pr.add_argument("path")
    pr.add_argument("--keyword", "-k", action="append", default=[], help="a relevance keyword (repeatable)")
    pr.add_argument("--json", action="store_true", help="print the probe as one JSON object")
    pr.set_defaults(run=_probe)

    pk = commands.add_parser("peek", help="the first characters of a context, as a model sees them")
    pk.add_argument("path")
    pk.add_argument("-n", type=int, default=2000, help="characters (default 2000)")
    pk.set_defaults(run=_peek)

    gr = commands.add_parser("grep", help="matching lines of a context (RE2), as a model sees them")
    gr.add_argument("pattern")
    gr.add_argument("path")
    gr.add_argument("-C", "--context-lines", type=int, default=0, help="lines of context around each match")
    gr.add_argument("-m", "--max-matches", type=int, default=100, help="stop after this many matching lines")
    gr.add_argument("-i", "--ignore-case", action="store_true")
    gr.add_argument("-c", "--count", action="store_true", help="print only the number of matching lines")
    gr.set_defaults(run=_grep)

    ch = commands.add_parser("chunk", help="one chunk of a context, with navigation info")
    ch.add_argument("path")
    ch.add_argument("index", type=int, help="0-based chunk index")
    ch.add_argument("--size", type=int, help="chunk size in units (default: 200 lines, 8000 chars, 2000 tokens)")
    ch.add_argument("--unit", choices=["lines", "chars", "tokens"], default="lines")
    ch.set_defaults(run=_chunk)

    sd = sandbox.add_parser("doctor", help="show which isolation layers are active on this machine")
    sd.add_argument("--policy", default="default", help="policy name or TOML path (default: default)")
    sd.add_argument("--json", action="store_true", help="print the layers as JSON")
    sd.set_defaults(run=_sandbox_doctor)

    from rlm_runtime.cli_eval import add_eval_commands
    from rlm_runtime.cli_memory import add_memory_commands  # here: they import this module
    from rlm_runtime.cli_profile import add_profile_commands

    add_eval_commands(commands)
    add_memory_commands(commands)
    add_profile_commands(commands)
    return parser


def _version() -> str:
    from rlm_runtime import __version__

    return __version__


def _write(text: str, stream: Any) -> None:
    try:
        print(text, file=stream)
    except BrokenPipeError as e:
        raise _OutputClosed() from e


def _say(text: object, *, err: bool = False) -> None:
    """Print text for a person: someone else may have written it (a cell, a model, a file),
    so its terminal controls are shown escaped."""
    _write(printable(str(text)), sys.stderr if err else sys.stdout)


def _print_json(args: argparse.Namespace, value: object) -> None:
    """Print the command's one JSON object (json.dumps escapes every control character)."""
    _write(json.dumps(value, default=str), sys.stdout)
    args.json_printed = True  # the error handler must not add a second object


def _read_source(name: str) -> bytes:
    if name == "-":
        return sys.stdin.buffer.read()
    path = Path(name)
    try:
        return path.read_bytes()
    except FileNotFoundError as e:
        raise _Usage(f"no such file: {name}") from e
    except IsADirectoryError as e:
        raise _Usage(f"is a directory, not a file: {name}") from e
    except OSError as e:
        raise _Usage(f"cannot read {name}: {e.strerror or e}") from e


def _policy_check(args: argparse.Namespace) -> int:
    from rlm_runtime.sandbox.policy import check, load_policy

    policy = load_policy(args.policy)
    report = check(_read_source(args.file), policy)
    if args.json:
        _print_json(args, report.to_dict())
    else:
        _say(report.text())
    return EXIT_OK if report.ok else EXIT_FAILED


def _sandbox_run(args: argparse.Namespace) -> int:
    from rlm_runtime.sandbox import Sandbox
    from rlm_runtime.sandbox.policy import load_policy

    policy = load_policy(args.policy).with_limits(cell_timeout_s=args.timeout, memory_mb=args.memory_mb)
    source = _read_source(args.file)
    for path in args.context:
        if not Path(path).exists():
            raise _Usage(f"no such context file or folder: {path}")
    with Sandbox(policy, contexts=[Path(p) for p in args.context]) as sandbox:
        result = sandbox.execute(source)
    if args.json:
        _print_json(args, result.to_dict())
    else:
        if result.stdout:  # print ends the last line (a CR of a CRLF left alone would show escaped)
            _say(result.stdout[:-2] if result.stdout.endswith("\r\n") else result.stdout.removesuffix("\n"))
        for warning in result.warnings:
            _say(f"warning: {warning}", err=True)
        if result.error:
            _say(result.error, err=True)
        if result.has_final:
            _say(f"FINAL: {result.final}")
    return EXIT_OK if result.ok else EXIT_FAILED


def _ask(args: argparse.Namespace) -> int:
    from rlm_runtime.budget import RunLimits
    from rlm_runtime.cli_live import LiveView
    from rlm_runtime.config import default_model
    from rlm_runtime.llm import make_client
    from rlm_runtime.orchestrator import RLM

    memory: Any = args.memory
    paths = []
    for path in args.context:
        if path.startswith("memory:"):
            memory = path.removeprefix("memory:") or True
        elif not Path(path).exists():
            raise _Usage(f"no such context file or folder: {path}")
        else:
            paths.append(path)
    if args.remember and memory is None:
        memory = True
    overrides = {"max_depth": args.max_depth, "max_iterations": args.max_iterations, "max_cost_usd": args.budget_usd,
                 "max_llm_calls": args.max_calls, "max_input_tokens": args.max_tokens, "assists": args.assists}
    name = args.model
    if not name:
        name, note = default_model()
        if note and not args.quiet:
            _say(f"rlm: {note}", err=True)
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
        raise _Usage(f"invalid limit: {e.errors()[0]['msg'] if hasattr(e, 'errors') else e}") from e
    options: dict[str, Any] = {"api_base": args.api_base} if args.api_base else {}
    if settings is not None and settings.temperature is not None:
        options["temperature"] = settings.temperature
    sub_name = args.sub_model or (settings.sub_model if settings is not None else None)
    model = make_client(name, **options)
    sub = make_client(sub_name, **options) if sub_name else None
    show = None if args.quiet else LiveView()
    rlm = RLM(model, sub, limits=limits, policy=args.policy, trace=args.trace, on_event=show, memory=memory,
              remember=args.remember, profile=profile)
    try:
        result = rlm.run(args.question, contexts=[Path(p) for p in paths])
    finally:
        rlm.close()
        if show is not None:
            show.close()
    if args.json:
        _print_json(args, result.to_dict())
    elif result.answer is not None:
        _say(result.answer)
    if result.answer is None:
        if not args.json:
            _say(f"rlm: no answer: {one_line(str(result.error))}", err=True)
            if result.partial:
                _say(f"rlm: partial output: {result.partial[:500]}", err=True)
        return _exit_code(result.exception) if result.exception is not None else EXIT_FAILED
    return EXIT_OK


def _repl(args: argparse.Namespace) -> int:
    from rlm_runtime.config import default_model, paths_from_env
    from rlm_runtime.repl import ReplConfig, main

    memory: Any = args.memory
    paths = []
    for path in args.context:
        if path.startswith("memory:"):
            memory = path.removeprefix("memory:") or True
        elif not Path(path).exists():
            raise _Usage(f"no such context file or folder: {path}")
        else:
            paths.append(path)
    if args.remember and memory is None:
        memory = True
    if args.budget_usd is not None and args.budget_usd < 0:
        raise _Usage("--budget-usd must be 0 or more")
    name, note = (args.model, None) if args.model else default_model()
    config = ReplConfig(model=name, sub_model=args.sub_model, contexts=paths, memory=memory, remember=args.remember,
                        budget_usd=args.budget_usd, policy=args.policy, trace=args.trace, live=not args.quiet,
                        profile=args.profile, allow_commands=args.allow_commands, assists=args.assists)
    return main(config, home=paths_from_env().home, notes=(f"rlm: {note}",) if note else ())


def _model_install(args: argparse.Namespace) -> int:
    from rlm_runtime.config import paths_from_env
    from rlm_runtime.llm import models

    models.spec(args.name)  # unknown names are a usage error before anything is fetched
    try:
        models.install(args.name, paths_from_env().models, progress=lambda m: _say(m, err=True))
    except models.ModelError as e:
        _say(f"rlm: error: {one_line(str(e))}", err=True)
        return EXIT_FAILED
    return EXIT_OK


def _model_list(args: argparse.Namespace) -> int:
    from rlm_runtime.config import paths_from_env
    from rlm_runtime.llm import models

    folder = paths_from_env().models
    have = {s.name: size for s, _, size in models.installed(folder)}
    for s in models.MODELS.values():
        state = f"installed, {have[s.name] / 1e9:.2f} GB" if s.name in have else "not installed"
        _say(f"{s.name:22} {state:26} licence: {s.licence}; {s.note}")
    _say(f"(folder: {folder})")
    _say(f"served by: {_engine_line()}")
    return EXIT_OK


def _engine_line() -> str:
    """Which engine serves ``local:`` models here, with its version, or why none can."""
    from rlm_runtime.config import local_engine_choice
    from rlm_runtime.llm.engines import find_engine

    try:
        return find_engine(local_engine_choice()).describe()
    except ConfigError as e:
        return f"no engine: {e}"


def _model_remove(args: argparse.Namespace) -> int:
    from rlm_runtime.config import paths_from_env
    from rlm_runtime.llm import models

    if models.remove(args.name, paths_from_env().models):
        _say(f"removed {args.name}")
        return EXIT_OK
    _say(f"{args.name} is not installed")
    return EXIT_FAILED


def _trace_show(args: argparse.Namespace) -> int:
    from rlm_runtime.trajectory import read_events, render_tree

    _say(render_tree(read_events(args.file)))  # already escaped; escaping twice changes nothing
    return EXIT_OK


def _trace_html(args: argparse.Namespace) -> int:
    from rlm_runtime.trajectory import read_events, render_html

    page = render_html(read_events(args.file), title=f"rlm trajectory: {Path(args.file).name}")
    try:
        private.write_text(args.output, page)  # the trajectory's text, 0600 like it
    except OSError as e:
        raise _Usage(f"cannot write {args.output}: {e.strerror or e}") from e
    _say(f"wrote {args.output}")
    return EXIT_OK


def _open(path: str) -> Any:
    from rlm_runtime.context import open_context

    return open_context(Path(path))


def _probe(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from rlm_runtime.config import load_probe_settings
    from rlm_runtime.context import ProbeConfig, probe_path
    from rlm_runtime.errors import ConfigError

    settings, source = load_probe_settings()
    if args.keyword:
        settings = {**settings, "keywords": [*settings.get("keywords", []), *args.keyword]}  # type: ignore[misc]
    try:
        config = ProbeConfig(**settings)  # type: ignore[arg-type]
    except ValidationError as e:
        detail = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
        raise ConfigError(f"invalid probe settings in {source or 'arguments'}: {detail}") from e
    except TypeError as e:
        raise ConfigError(f"invalid probe settings in {source or 'arguments'}: {e}") from e
    if not Path(args.path).exists():
        raise _Usage(f"no such file or folder: {args.path}")
    result = probe_path(args.path, config)
    if args.json:
        _print_json(args, result.to_dict())
    else:
        _say(result.summary())
    return EXIT_OK


# A context file is as untrusted as a model's output: what peek, grep and chunk show is escaped.


def _peek(args: argparse.Namespace) -> int:
    _say(_open(args.path).peek(args.n))
    return EXIT_OK


def _grep(args: argparse.Namespace) -> int:
    handle = _open(args.path)
    if args.count:
        _say(handle.count(args.pattern, ignore_case=args.ignore_case))
        return EXIT_OK
    result = handle.grep(args.pattern, context_lines=args.context_lines, max_matches=args.max_matches,
                         ignore_case=args.ignore_case)
    _say(repr(result))
    return EXIT_OK if result else EXIT_FAILED


def _chunk(args: argparse.Namespace) -> int:
    _say(repr(_open(args.path).chunk(args.index, args.size, args.unit)))
    return EXIT_OK


def _sandbox_doctor(args: argparse.Namespace) -> int:
    from rlm_runtime.config import paths_from_env
    from rlm_runtime.sandbox.doctor import diagnose, render

    layers = diagnose(args.policy, home=paths_from_env().home)
    if args.json:
        _print_json(args, [{"name": x.name, "active": x.active, "detail": x.detail, "purpose": x.purpose,
                            **({"findings": list(x.findings)} if x.findings else {})} for x in layers])
    else:
        _say(render(layers))
    return EXIT_OK


#: Error classes to exit codes, first match wins; any other error is a failed run (1).
EXIT_CODES: tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], int], ...] = (
    (ModelUnavailable, EXIT_UNAVAILABLE),
    ((_Usage, ConfigError, ContextError, UnknownModel, MissingAPIKey), EXIT_USAGE),
    (SandboxError, EXIT_SANDBOX),
    (KeyboardInterrupt, EXIT_INTERRUPTED),
)


def _exit_code(error: BaseException) -> int:
    """The documented exit code of an error (see the module docstring and ``EXIT_CODES``)."""
    for kinds, code in EXIT_CODES:
        if isinstance(error, kinds):
            return code
    return EXIT_FAILED  # the run failed: a budget ran out, no answer, a model call was refused


def _report(args: argparse.Namespace | None, line: str, message: str, error_type: str, code: int) -> int:
    """``rlm: LINE`` on stderr, and with ``--json`` one JSON object on stdout whose ``error``
    is ``message`` (unescaped: JSON escapes it, and a program gets the original text)."""
    try:
        if args is not None and getattr(args, "json", False) and not getattr(args, "json_printed", False):
            _print_json(args, {"error": message, "error_type": error_type})
        print(f"rlm: {one_line(line)}", file=sys.stderr)
    except (OSError, _OutputClosed):  # the streams themselves are gone: the exit status still tells
        pass
    return code


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None,
                  line: str | None = None) -> None:
    """Warnings name context files and quote their text: one escaped line each, without the
    source line of rlm_runtime that Python would print under it."""
    try:
        _say(f"rlm: warning: {one_line(str(message))}", err=True)
    except _OutputClosed:
        pass


def _quiet_broken_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def main(argv: list[str] | None = None) -> int:
    """Run one command; every exception ends here as one line and an exit code."""
    args: argparse.Namespace | None = None
    try:
        for stream in (sys.stdout, sys.stderr):
            # Sandboxed code can print lone surrogates; show them escaped rather than crash.
            reconfigure = getattr(stream, "reconfigure", None)
            if reconfigure is not None:
                reconfigure(errors="backslashreplace")
        args = _parser().parse_args(argv)
        with warnings.catch_warnings():  # restores the default display when main returns
            warnings.showwarning = _show_warning
            code: int = args.run(args)
        try:
            sys.stdout.flush()  # here, not at exit, so a closed pipe is caught below
        except BrokenPipeError as e:
            raise _OutputClosed() from e
        return code
    except _OutputClosed:
        _quiet_broken_stdout()
        return EXIT_FAILED
    except KeyboardInterrupt:
        return _report(args, "interrupted", "interrupted", "KeyboardInterrupt", EXIT_INTERRUPTED)
    except (_Usage, RLMError) as e:
        kind = "UsageError" if isinstance(e, _Usage) else type(e).__name__
        return _report(args, f"error: {e}", str(e), kind, _exit_code(e))
    except Exception as e:
        from rlm_runtime.config import debug_enabled

        if debug_enabled():
            import traceback

            traceback.print_exc()
        message = f"internal error: {type(e).__name__}: {e}"
        return _report(args, f"{message} (please report; RLM_DEBUG=1 shows the traceback)", message, type(e).__name__, EXIT_FAILED)


def entry() -> Any:
    sys.exit(main())


if __name__ == "__main__":
    entry()
