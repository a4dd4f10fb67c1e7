"""The ``rlm eval`` commands: run a task file or a built-in suite under several methods, make
suites, check task files, build reports and compare runs. Thin over ``rlm_runtime.eval``.

    rlm eval TASKS.jsonl|SUITE [--split dev|heldout] --model M [--sub-model M] [--method rlm,direct] [--profile P]
             [--concurrency N] [--out DIR] [--resume] [--budget-usd X] [--executor local|ray [--address ADDR]] [--json]
    rlm eval suites [--json]
    rlm eval make SUITE [--lengths 10000,100000] [--n 5] [--seed 1] [--split dev|heldout] -o tasks.jsonl
    rlm eval check TASKS.jsonl [--context-root DIR] [--allow-memory]
    rlm eval report DIR
    rlm eval compare DIR_A DIR_B [--json]

``rlm eval`` takes either a subcommand or a task file / suite name as its first word, so its
arguments are parsed here (argparse's subcommands cannot take "a file or a subcommand").

Exit codes (those of ``rlm``): 0 the run finished (whatever the scores); 1 stopped by the
budget, or a task file with no valid task; 2 bad usage (unknown suite or method, missing
file, results already in --out without --resume, --executor ray without Ray installed, a Ray
cluster that cannot be reached); 130 interrupted (the results written so far stay;
``--resume`` continues).

A task file's contexts must resolve inside its own folder (``eval/confine.py``):
``--context-root DIR`` confines them to DIR instead, ``--allow-memory`` allows ``memory:``
contexts (the user's own store). A refused context is a bad line: ``check`` lists each one and
exits 1; a run skips the task and says why.

``--executor ray`` runs the jobs on a Ray cluster (``eval/ray_executor.py``): a local one
started for the run, or the one at ``--address``; ``--concurrency`` is then per node.
"""

from __future__ import annotations

import argparse
import signal
from pathlib import Path
from typing import Any

from rlm_runtime.cli.common import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, UsageError, print_json, say, unreadable
from rlm_runtime.termsafe import one_line

SUBCOMMANDS = ("suites", "make", "check", "report", "compare", "history", "baseline")


def add_commands(commands: Any) -> None:
    """Register ``rlm eval ...`` on ``rlm``'s subcommand table (``add_subparsers()``)."""
    # Every word after "eval" is handed to _main unparsed (no prefix character is "-").
    ev = commands.add_parser("eval", help="batch evaluation: run tasks or a suite under methods, make suites, reports",
                             add_help=False, prefix_chars="\x00")  # rlm eval --help is the run parser's (_main)
    ev.add_argument("argv", nargs="*")
    ev.set_defaults(run=_main)


def _parser(prog: str, description: str, examples: tuple[str, ...], notes: str = "") -> argparse.ArgumentParser:
    """A parser of ``rlm eval``'s: its description, then examples (and notes) laid out as written."""
    epilog = "\n".join(["examples:", *(f"  {e}" for e in examples)]) + (f"\n\n{notes}" if notes else "")
    return argparse.ArgumentParser(prog=prog, description=description, epilog=epilog,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)


def _parsers() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    run = _parser(
        "rlm eval", "Run a task file or a built-in suite under one or more methods; results append to\n"
        "DIR/results.jsonl as each task ends, then DIR/report.md and report.html are written.",
        ("rlm eval needle -m local:qwen2.5-coder-1.5b --method rlm,direct --n 2",
         "rlm eval tasks.jsonl -m openai/gpt-4o-mini --budget-usd 2 --out runs/mini",
         "rlm eval tasks.jsonl -m openai/gpt-4o-mini --out runs/mini --resume"),
        "other forms: rlm eval suites | make SUITE -o FILE | check FILE | report DIR | compare DIR_A DIR_B\n"
        "(each with --help).\n\n"
        "exit codes: 0 finished (whatever the scores); 1 stopped by the budget; 2 bad usage;\n"
        "130 interrupted (the results so far stay; --resume continues)")
    run.add_argument("tasks", metavar="TASKS.jsonl|SUITE", help="a task file, or a suite name (rlm eval suites)")
    run.add_argument("-m", "--model", help="the model, e.g. local:qwen2.5-coder-1.5b or scripted:PATH (default: $RLM_MODEL)")
    run.add_argument("--sub-model", help="model of llm_query and child RLMs (default: --model)")
    run.add_argument("--method", default="rlm", help="comma-separated: rlm, rlm-nosub, rlm-words, direct, rag (default: rlm)")
    run.add_argument("--profile", help="a profile name or TOML path (rlm profile list)")
    run.add_argument("--policy", default="default", help="sandbox policy name or TOML path")
    run.add_argument("--concurrency", type=int, help="tasks at once (default: from the governor; 1 for local: models)")
    run.add_argument("--cold", action="store_true", help="start a local: model's engine afresh for each task, one task at a "
                     "time: a task's run then does not depend on the tasks before it (slower: each first prompt is read cold)")
    run.add_argument("--out", help="the run's folder (default: eval-runs/<task file or suite>)")
    run.add_argument("--resume", action="store_true", help="skip tasks done with the same configuration")
    run.add_argument("--budget-usd", type=float, help="stop starting tasks once this run has cost this much")
    run.add_argument("--max-iterations", type=int, help="model turns per task (default: the model's)")
    run.add_argument("--max-depth", type=int, help="rlm_query depth (default: the model's)")
    run.add_argument("--max-wall-s", type=float, help="seconds per task")
    run.add_argument("--assists", help="the small-model assists: auto (default: the measured set for a small model), small, none, "
                     "or names, comma-separated (in the "
                     "configuration hash)")
    run.add_argument("--window", type=int, help="the model's window in tokens for direct and rag (default: known per model)")
    run.add_argument("--judge-model", help="the model of the judge scorer (default: --model)")
    run.add_argument("--rag-k", type=int, default=8, help="chunks the rag method retrieves (default 8)")
    run.add_argument("--executor", choices=["local", "ray"], default="local",
                     help="where tasks run: local threads, or a Ray cluster (pip install 'rlm_runtime[ray]')")
    run.add_argument("--address", help="with --executor ray: an existing cluster (HOST:PORT, auto, ray://HOST:10001); "
                     "default: start a local one for the run")
    _add_source_flags(run)
    run.add_argument("--lengths", default="10000,100000", help="for a suite: context lengths in characters")
    run.add_argument("--n", type=int, default=3, help="for a suite: tasks per length and family (default 3)")
    run.add_argument("--split", choices=("dev", "heldout"), help="for core, needle, aggregation, multi-hop: the dev "
                     "or held-out part over text shapes (as rlm eval make --split)")
    run.add_argument("--seed", type=int, default=1, help="for a suite: the seed (default 1)")
    run.add_argument("--no-report", action="store_true", help="do not write the report at the end")
    run.add_argument("--json", action="store_true", help="print one JSON object with the summary")
    run.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")

    subs: dict[str, argparse.ArgumentParser] = {}
    p = subs["suites"] = _parser("rlm eval suites", "List the built-in suites, and the text shapes and question wordings\n"
                                 "of their dev and held-out splits.", ("rlm eval suites", "rlm eval suites --json"))
    p.add_argument("--json", action="store_true")
    p = subs["make"] = _parser("rlm eval make", "Write a built-in suite as a task file, its contexts as files beside it\n"
                               "(<name>_contexts/).", ("rlm eval make needle -o needle.jsonl",
                                                       "rlm eval make core --split heldout --lengths 20000 --n 3 -o core.jsonl"))
    p.add_argument("suite")
    p.add_argument("--lengths", default="10000,100000", help="context lengths in characters, comma-separated")
    p.add_argument("--n", type=int, default=5, help="tasks per length and family (default 5)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--split", choices=("dev", "heldout"), help="for core, needle, aggregation, multi-hop: the same "
                   "families over several text shapes and question wordings, the dev or the held-out part (no shape and "
                   "template pair in both; rlm eval suites lists them); default: the suites as they always were")
    p.add_argument("-o", "--output", required=True, help="the task file to write (.jsonl)")
    p.add_argument("--json", action="store_true")
    p = subs["check"] = _parser("rlm eval check", "Validate a task file (exit 1 on a bad line, a context outside the\n"
                                "allowed folder included).", ("rlm eval check tasks.jsonl",
                                                             "rlm eval check tasks.jsonl --context-root ~/corpora --json"))
    p.add_argument("tasks")
    _add_source_flags(p)
    p.add_argument("--json", action="store_true")
    p = subs["report"] = _parser("rlm eval report", "(Re)build DIR/report.md and report.html from DIR/results.jsonl.",
                                 ("rlm eval report eval-runs/needle",))
    p.add_argument("dir")
    p.add_argument("--json", action="store_true")
    p = subs["compare"] = _parser("rlm eval compare", "Per-family differences between two runs (B minus A); given one run,\n"
                                  "against the baseline (rlm eval baseline).",
                                  ("rlm eval compare runs/before runs/after", "rlm eval compare runs/after --json"))
    p.add_argument("a")
    p.add_argument("b", nargs="?")
    p.add_argument("--json", action="store_true")
    p = subs["history"] = _parser("rlm eval history", "Every run's headline figures by method (tasks, score, tokens a task, the\n"
                                  "reduction against loading everything, median time), the earliest first, read\n"
                                  "from the runs' results under DIR (default ./eval-runs); the baseline is marked.",
                                  ("rlm eval history", "rlm eval history eval-runs bench/runs --json"))
    p.add_argument("dirs", nargs="*", metavar="DIR")
    p.add_argument("--json", action="store_true")
    p = subs["baseline"] = _parser("rlm eval baseline", "Remember the run in DIR as the baseline (rlm eval history marks it;\n"
                                   "rlm eval compare DIR compares with it); without DIR, show it.",
                                   ("rlm eval baseline eval-runs/core-0612", "rlm eval baseline --json"))
    p.add_argument("dir", nargs="?")
    p.add_argument("--json", action="store_true")
    return run, subs


def _add_source_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--context-root", metavar="DIR", help="contexts may resolve anywhere under DIR (default: only under "
                   "the task file's own folder; symlinks are followed before the check)")
    p.add_argument("--allow-memory", action="store_true", help="allow memory: contexts (your own memory store, "
                   "or a store file under the allowed folder); refused by default")


def _rules(args: argparse.Namespace) -> Any:
    from rlm_runtime.eval.confine import SourceRules

    root = None
    if args.context_root:
        root = Path(args.context_root).expanduser()
        if not root.is_dir():
            raise UsageError(f"--context-root is not a folder: {args.context_root}")
    return SourceRules(root=root, allow_memory=args.allow_memory)


def _main(outer: argparse.Namespace) -> int:
    argv = list(outer.argv)
    run, subs = _parsers()
    if argv and argv[0] in SUBCOMMANDS:
        args = subs[argv[0]].parse_args(argv[1:])
        outer.json = args.json
        handler = {"suites": _suites, "make": _make, "check": _check, "report": _report, "compare": _compare,
                   "history": _history, "baseline": _baseline}[argv[0]]
        return handler(args, outer)
    if not argv or argv[0] in ("-h", "--help"):
        run.print_help()
        return EXIT_OK if argv else EXIT_USAGE
    args = run.parse_args(argv)
    outer.json = args.json
    return _run(args, outer)


def _lengths(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x.replace("_", "").strip()) for x in text.split(",") if x.strip())
    except ValueError as e:
        raise UsageError(f"--lengths takes comma-separated numbers, not {text!r}") from e
    if not values:
        raise UsageError("--lengths is empty")
    return values


def _suites(args: argparse.Namespace, outer: argparse.Namespace) -> int:
    from rlm_runtime.eval.suites import list_suites, shaped

    rows = list_suites()
    if args.json:
        print_json(outer, {"suites": [{"name": s.name, "families": list(s.families), "description": s.description,
                                       "source": s.source} for s in rows],
                           "splits": {name: {"suites": list(shaped.FAMILIES), "shapes": list(p.shapes),
                                             "templates": list(p.templates)} for name, p in shaped.SPLITS.items()}})
        return EXIT_OK
    for s in rows:
        say(f"{s.name:13} {s.description}")
        say(f"{'':13} text: {s.source}")
    say(f"\n--split (make {', '.join(shaped.FAMILIES)} or core over text shapes; no shape and template pair in both):")
    for line in shaped.describe():
        say(f"  {line}")
    return EXIT_OK


def _make(args: argparse.Namespace, outer: argparse.Namespace) -> int:
    from rlm_runtime.eval.suites import write_suite

    tasks = write_suite(args.suite, args.output, lengths=_lengths(args.lengths), n=args.n, seed=args.seed,
                        split=args.split)
    folder = Path(args.output).parent / f"{Path(args.output).stem}_contexts"
    if args.json:
        print_json(outer, {"tasks": len(tasks), "file": args.output, "contexts": str(folder)})
    else:
        say(f"wrote {len(tasks)} tasks to {args.output} (contexts in {folder})")
    return EXIT_OK


def _load(path: str, rules: Any = None) -> Any:
    from rlm_runtime.eval.tasks import load_tasks

    try:
        return load_tasks(path, rules)
    except OSError as e:
        raise unreadable(str(path), e, "task file") from e


def _check(args: argparse.Namespace, outer: argparse.Namespace) -> int:
    loaded = _load(args.tasks, _rules(args))
    if args.json:
        print_json(outer, {"tasks": len(loaded.tasks), "errors": [{"line": e.line, "field": e.field, "message": e.message}
                                                                   for e in loaded.errors]})
    else:
        for e in loaded.errors:
            say(f"{args.tasks}:{one_line(str(e))}", err=True)
        say(f"{len(loaded.tasks)} valid tasks, {len(loaded.errors)} bad lines")
    return EXIT_OK if not loaded.errors else EXIT_FAILED


def _run(args: argparse.Namespace, outer: argparse.Namespace) -> int:
    from rlm_runtime.config import default_model
    from rlm_runtime.eval.methods import METHODS
    from rlm_runtime.eval.progress import Display, Quiet
    from rlm_runtime.eval.runner import EvalConfig, Runner, check_run_folder
    from rlm_runtime.eval.suites import suite_names, write_suite

    name = args.model
    if not name:
        name, note = default_model()
        if note and not args.quiet:
            say(f"rlm: {note}", err=True)
    methods = tuple(m.strip() for m in args.method.split(",") if m.strip())
    if not methods or any(m not in METHODS for m in methods):
        unknown = next((m for m in methods if m not in METHODS), "(none)")
        raise UsageError(f"unknown method {unknown!r}; methods: {', '.join(METHODS)}")
    target = args.tasks
    is_suite = target in suite_names() and not Path(target).exists()
    if args.split and not is_suite:
        raise UsageError("--split is for a suite name, not a task file")
    if not is_suite and not Path(target).exists():
        raise UsageError(f"no such task file or suite: {target} (suites: {', '.join(suite_names())})")
    _check_models(args, name)
    made = f"{target}-{args.split}" if args.split else target
    out = Path(args.out) if args.out else Path("eval-runs") / (made if is_suite else Path(target).stem)
    if is_suite:
        check_run_folder(out, "tasks")  # the suite's task file and contexts are written there first
        lengths = _lengths(args.lengths)
        path = out / "tasks" / f"{made}-s{args.seed}.jsonl"
        if not (args.resume and path.exists()):
            write_suite(target, path, lengths=lengths, n=args.n, seed=args.seed, split=args.split)
        target = str(path)
    loaded = _load(target, _rules(args))
    for e in loaded.errors:
        say(f"rlm: {target}:{one_line(str(e))} (skipped)", err=True)
    if not loaded.tasks:
        raise UsageError(f"{target} has no valid task")
    config = EvalConfig(model=name, methods=methods, sub_model=args.sub_model, profile=args.profile,
                        limits={"max_iterations": args.max_iterations, "max_depth": args.max_depth, "max_wall_s": args.max_wall_s,
                                "assists": args.assists},
                        policy=args.policy, concurrency=args.concurrency, out=out, resume=args.resume, budget_usd=args.budget_usd,
                        window=args.window, judge_model=args.judge_model, rag_k=args.rag_k, executor=args.executor,
                        address=args.address, cold=args.cold)
    progress = Quiet() if args.quiet else Display()
    runner = Runner(config, loaded, progress=progress)
    previous = _sigterm_as_interrupt()
    try:
        summary = runner.run()
    finally:
        signal.signal(signal.SIGTERM, previous)
    report_path = None
    if not args.no_report and (out / "results.jsonl").exists():
        from rlm_runtime.eval.report import build_report

        report_path = build_report(out).markdown
    data = {**summary.to_dict(), "report": str(report_path) if report_path else None, "results": str(out / "results.jsonl")}
    if args.json:
        print_json(outer, data)
    else:
        acc = ", ".join(f"{m} {v:.0%}" for m, v in summary.accuracy.items()) or "-"
        say(f"accuracy: {acc}; {summary.done} recorded ({summary.failed} failed), {summary.skipped} skipped; "
            f"results: {out / 'results.jsonl'}" + (f"; report: {report_path}" if report_path else ""))
    if summary.stopped == "interrupted":
        return EXIT_INTERRUPTED
    return EXIT_FAILED if summary.stopped == "budget" else EXIT_OK


def _check_models(args: argparse.Namespace, name: str) -> None:
    """Refuse, before any job, a model, sub-model or judge that cannot run here (an unknown
    name, a local model not installed, a missing key), as ``rlm ask`` does: otherwise every
    job would fail alike and the run read as 0%. A ``local:`` model of a run on an existing Ray
    cluster (``--address``) is the cluster's nodes' to have, and is not checked here."""
    from rlm_runtime.llm import checked_client

    for model in dict.fromkeys(m for m in (name, args.sub_model, args.judge_model) if m):
        if args.address and model.startswith("local:"):
            continue
        checked_client(model).close()


def _sigterm_as_interrupt() -> Any:
    """Let ``kill PID`` stop a run as Ctrl-C does (in the main thread only, where signals land)."""

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        return signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread (a program calling cli.main from a thread)
        return signal.getsignal(signal.SIGTERM)


def _report(args: argparse.Namespace, outer: argparse.Namespace) -> int:
    from rlm_runtime.eval.report import build_report

    folder = Path(args.dir)
    if not (folder / "results.jsonl").exists():
        raise UsageError(f"no results in {folder} (expected {folder / 'results.jsonl'})")
    try:
        built = build_report(folder)
    except OSError as e:  # an unreadable results file (one that is no regular file: SourceRefused)
        raise unreadable(str(folder / "results.jsonl"), e, "results file") from e
    if args.json:
        print_json(outer, built.to_dict())
    else:
        for line in built.skipped[:20]:
            say(f"rlm: {folder / 'results.jsonl'}:{one_line(line)} (skipped)", err=True)
        if len(built.skipped) > 20:
            say(f"rlm: {len(built.skipped) - 20} more bad lines skipped (--json lists them all)", err=True)
        say(f"wrote {built.markdown} and {built.html}" + (f" ({len(built.plots)} plots)" if built.plots else
                                                          " (no plots: pip install 'rlm_runtime[eval]' for matplotlib)"))
    return EXIT_OK


def _history(args: argparse.Namespace, outer: argparse.Namespace) -> int:
    from rlm_runtime.config import paths_from_env
    from rlm_runtime.eval.history import get_baseline, history

    roots = [Path(d) for d in args.dirs] or [Path("eval-runs")]
    for root in roots:
        if not root.is_dir():
            raise UsageError(f"not a folder: {root}" + (" (rlm eval writes its runs under --out; name their folder)"
                                                        if not args.dirs else ""))
    runs = history(roots)
    remembered = get_baseline(paths_from_env().home)
    base = remembered["folder"] if remembered else None
    if args.json:
        print_json(outer, {"runs": [{**h.to_dict(), "baseline": str(Path(h.folder).resolve()) == base} for h in runs],
                           "baseline": remembered})
        return EXIT_OK
    if not runs:
        say(f"no runs (folders holding results.jsonl) under {', '.join(str(r) for r in roots)}")
        return EXIT_FAILED
    for h in runs:
        mark = "  (baseline)" if str(Path(h.folder).resolve()) == base else ""
        say(f"{h.ended or '?'}  {one_line(h.folder)}  {one_line(', '.join(h.models))}{mark}")
        for method, m in h.methods.items():
            saved = m["load_all_reduction_percent"]
            say(f"    {one_line(method):10} {m['correct']}/{m['tasks']} ({m['accuracy']:.0%})  {m['tokens_per_task']:,} tok/task"
                + (f"  {saved:.1f}% fewer than loading everything" if saved is not None else "") + f"  median {m['median_s']} s")
    return EXIT_OK


def _baseline(args: argparse.Namespace, outer: argparse.Namespace) -> int:
    from rlm_runtime.config import paths_from_env
    from rlm_runtime.eval.history import get_baseline, set_baseline

    home = paths_from_env().home
    if args.dir is None:
        remembered = get_baseline(home)
        if args.json:
            print_json(outer, {"baseline": remembered})
        else:
            say(f"baseline: {one_line(remembered['folder'])} (set {remembered.get('set_at', '?')})" if remembered
                else "no baseline (rlm eval baseline DIR sets one)")
        return EXIT_OK if remembered else EXIT_FAILED
    folder = Path(args.dir)
    if not (folder / "results.jsonl").is_file():
        raise UsageError(f"no results in {folder} (expected {folder / 'results.jsonl'})")
    head = set_baseline(home, folder)
    if args.json:
        print_json(outer, {"baseline": head.to_dict()})
    else:
        scores = ", ".join(f"{m}: {v['correct']}/{v['tasks']}" for m, v in head.methods.items())
        say(f"baseline: {one_line(str(folder))} ({one_line(scores)})")
    return EXIT_OK


def _compare(args: argparse.Namespace, outer: argparse.Namespace) -> int:
    from rlm_runtime.config import paths_from_env
    from rlm_runtime.eval.history import get_baseline
    from rlm_runtime.eval.report import compare_runs

    if args.b is None:
        remembered = get_baseline(paths_from_env().home)
        if remembered is None:
            raise UsageError("compare takes two runs, or one and a baseline (rlm eval baseline DIR sets it)")
        args.a, args.b = remembered["folder"], args.a
    for d in (args.a, args.b):
        if not (Path(d) / "results.jsonl").exists():
            raise UsageError(f"no results in {d} (expected {Path(d) / 'results.jsonl'})")
    try:
        result = compare_runs(Path(args.a), Path(args.b))
    except OSError as e:  # an unreadable results file (one that is no regular file: SourceRefused)
        raise unreadable(str(e.filename or args.b), e, "results file") from e
    if args.json:
        print_json(outer, result.to_dict())
    else:
        say(result.text())
    return EXIT_OK

