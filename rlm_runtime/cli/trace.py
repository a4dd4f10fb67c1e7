"""``rlm trace show|html``: read a trajectory (the JSONL file every run writes)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rlm_runtime import private
from rlm_runtime.cli.common import EXIT_OK, UsageError, add_actions, add_command, say


def add_commands(commands: Any) -> None:
    """Register ``rlm trace ...`` on ``rlm``'s subcommand table."""
    trace = add_actions(add_command(
        commands, "trace", help="read trajectories: a tree, or one HTML page",
        description="Read a trajectory: the JSONL file of events a run writes (rlm ask --trace FILE; by default a "
                    "new file under $RLM_HOME/traces).",
        examples=("rlm trace show run.jsonl", "rlm trace html run.jsonl -o run.html")))
    ts = add_command(trace, "show", help="print a trajectory as a tree",
                     examples=("rlm trace show run.jsonl", "rlm ask q -c notes.txt --trace run.jsonl && rlm trace show run.jsonl"))
    ts.add_argument("file")
    ts.set_defaults(run=_trace_show)
    th = add_command(trace, "html", help="write a trajectory as one self-contained HTML page",
                     examples=("rlm trace html run.jsonl", "rlm trace html run.jsonl -o page.html"))
    th.add_argument("file")
    th.add_argument("-o", "--output", help="the HTML file to write (default: beside FILE, its name ending .html)")
    th.set_defaults(run=_trace_html)


def _trace_show(args: argparse.Namespace) -> int:
    from rlm_runtime.trajectory import read_events, render_tree

    say(render_tree(read_events(args.file)))  # already escaped; escaping twice changes nothing
    return EXIT_OK


def _trace_html(args: argparse.Namespace) -> int:
    from rlm_runtime.trajectory import read_events, render_html

    page = render_html(read_events(args.file), title=f"rlm trajectory: {Path(args.file).name}")
    output = Path(args.output) if args.output else Path(args.file).with_suffix(".html")
    if not args.output and output == Path(args.file):  # a trajectory named x.html is never overwritten
        output = Path(f"{args.file}.html")
    try:
        private.write_text(output, page)  # the trajectory's text, 0600 like it
    except OSError as e:
        raise UsageError(f"cannot write {output}: {e.strerror or e}") from e
    say(f"wrote {output}")
    return EXIT_OK
