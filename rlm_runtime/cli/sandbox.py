"""``rlm policy check`` and ``rlm sandbox run|doctor``: the sandbox's own tools, without a model."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rlm_runtime.cli.common import EXIT_FAILED, EXIT_OK, UsageError, add_actions, add_command, print_json, read_source, say


def add_commands(commands: Any) -> None:
    """Register ``rlm policy ...`` and ``rlm sandbox ...`` on ``rlm``'s subcommand table."""
    policy = add_actions(add_command(
        commands, "policy", help="sandbox policies: check code against one",
        description="Sandbox policies: which imports, attributes and names a cell may use, and its limits "
                    "(shipped: default, strict; or a TOML file of yours).",
        examples=("rlm policy check cell.py", "rlm policy check - --policy strict --json < cell.py")))
    pc = add_command(policy, "check", help="check a file of Python against a policy (exit 0 allowed, 1 refused)",
                     examples=("rlm policy check cell.py", "echo 'import os' | rlm policy check - --policy strict"))
    pc.add_argument("file", help="a Python file, or - for standard input")
    pc.add_argument("--policy", default="default", help="policy name or TOML path (default: default)")
    pc.add_argument("--json", action="store_true", help="print the report as one JSON object")
    pc.set_defaults(run=_policy_check)

    sandbox = add_actions(add_command(
        commands, "sandbox", help="the sandboxed worker: run a cell, check the isolation layers",
        description="The sandboxed worker that runs every cell: run one cell in it, or see which isolation layers "
                    "this machine gives it.",
        examples=("rlm sandbox run cell.py -c notes.txt", "rlm sandbox doctor")))
    sr = add_command(sandbox, "run", help="run one cell in a fresh sandbox (exit 0 clean, 1 failed or refused)",
                     examples=("rlm sandbox run cell.py", "echo 'print(peek(100))' | rlm sandbox run - -c notes.txt --json"))
    sr.add_argument("file", help="a Python file, or - for standard input")
    sr.add_argument("--policy", default="default", help="policy name or TOML path (default: default)")
    sr.add_argument("--timeout", type=float, metavar="S", help="cell timeout in seconds")
    sr.add_argument("--memory-mb", type=int, metavar="N", help="worker memory cap in MB")
    sr.add_argument("-c", "--context", action="append", default=[], metavar="PATH",
                    help="a file or folder the cell sees as `context` (repeatable: `contexts`)")
    sr.add_argument("--json", action="store_true", help="print exactly one JSON object with the cell result")
    sr.set_defaults(run=_sandbox_run)

    sd = add_command(sandbox, "doctor", help="show which isolation layers are active on this machine",
                     examples=("rlm sandbox doctor", "rlm sandbox doctor --policy strict --json"))
    sd.add_argument("--policy", default="default", help="policy name or TOML path (default: default)")
    sd.add_argument("--json", action="store_true", help="print the layers as JSON")
    sd.set_defaults(run=_sandbox_doctor)


def _policy_check(args: argparse.Namespace) -> int:
    from rlm_runtime.sandbox.policy import check, load_policy

    policy = load_policy(args.policy)
    report = check(read_source(args.file), policy)
    if args.json:
        print_json(args, report.to_dict())
    else:
        say(report.text())
    return EXIT_OK if report.ok else EXIT_FAILED


def _sandbox_run(args: argparse.Namespace) -> int:
    from rlm_runtime.sandbox import Sandbox
    from rlm_runtime.sandbox.policy import load_policy

    policy = load_policy(args.policy).with_limits(cell_timeout_s=args.timeout, memory_mb=args.memory_mb)
    source = read_source(args.file)
    for path in args.context:
        if not Path(path).exists():
            raise UsageError(f"no such context file or folder: {path}")
    with Sandbox(policy, contexts=[Path(p) for p in args.context]) as sandbox:
        result = sandbox.execute(source)
    if args.json:
        print_json(args, result.to_dict())
    else:
        if result.stdout:  # print ends the last line (a CR of a CRLF left alone would show escaped)
            say(result.stdout[:-2] if result.stdout.endswith("\r\n") else result.stdout.removesuffix("\n"))
        for warning in result.warnings:
            say(f"warning: {warning}", err=True)
        if result.error:
            say(result.error, err=True)
        if result.has_final:
            say(f"FINAL: {result.final}")
    return EXIT_OK if result.ok else EXIT_FAILED


def _sandbox_doctor(args: argparse.Namespace) -> int:
    from rlm_runtime import memreport
    from rlm_runtime.config import paths_from_env
    from rlm_runtime.governor import Governor
    from rlm_runtime.sandbox import load_policy
    from rlm_runtime.sandbox.doctor import diagnose, render

    layers = diagnose(args.policy, home=paths_from_env().home)
    memory = memreport.report(Governor.from_system(worker_mb=load_policy(args.policy).limits.memory_mb))
    if args.json:
        # The memory report rides as one more entry of the list (name, active, detail), its figures under "memory".
        print_json(args, [*({"name": x.name, "active": x.active, "detail": x.detail, "purpose": x.purpose,
                             **({"findings": list(x.findings)} if x.findings else {})} for x in layers),
                          {"name": "memory", "active": True, "detail": memreport.render(memory).splitlines()[2].strip(),
                           "purpose": "what the governor allows and what is in use (megabytes)", "memory": memory}])
    else:
        say(render(layers))
        say("")
        say(memreport.render(memory))
    return EXIT_OK
