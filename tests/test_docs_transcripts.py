"""The transcripts the README and docs/repl.md show are what the commands print today: each
is run (the scripted model, from the repository root, through the console script) and its
output compared line by line with the block in the document, times aside. A change of prompt
that moves a token count fails here until the document is brought up to date."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Durations vary from run to run: "(0.0s)", "0.01s (model 0.00s)" are compared as "Ns".
_SECONDS = re.compile(r"\d+\.\d+s\b")


def _blocks_after(doc: Path, marker: str, count: int = 1) -> list[list[str]]:
    """The lines of the first ``count`` fenced blocks (```) after the line holding ``marker``."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    at = next(n for n, line in enumerate(lines) if marker in line)
    blocks = []
    while len(blocks) < count:
        opened = next(n for n in range(at + 1, len(lines)) if lines[n].startswith("```"))
        closed = next(n for n in range(opened + 1, len(lines)) if lines[n] == "```")
        blocks.append(lines[opened + 1:closed])
        at = closed
    return blocks


def _normal(lines: list[str]) -> list[str]:
    return [_SECONDS.sub("Ns", line.rstrip()) for line in lines if line.strip()]


def _run(args: list[str], stdin: str = "") -> list[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RLM_MODEL", "COLUMNS")}
    done = subprocess.run([sys.executable, "-m", "rlm_runtime.cli", *args], input=stdin, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=env, timeout=120)
    return done.stdout.splitlines()  # standard error and output together, in the order written


def test_the_readme_scripted_example_is_what_rlm_ask_prints() -> None:
    """README's scripted example: the turns (stderr), then the answer (stdout)."""
    (shown,) = _blocks_after(ROOT / "README.md", "prints the turns on stderr and the answer on stdout")
    printed = _run(["ask", "Which incidents touched payments?", "-c", "examples/incidents.md", "-m",
                    "scripted:examples/scripted_payments.jsonl"])
    assert _normal(printed) == _normal(shown)


def test_the_piped_repl_session_is_what_rlm_repl_prints() -> None:
    """docs/repl.md's piped session: questions, cells, a refused import and /vars."""
    command, shown = _blocks_after(ROOT / "docs" / "repl.md", "## A session, piped", 2)
    assert command[0].startswith("printf '") and "rlm repl -c examples/incidents.md" in command[1]
    stdin = command[0].split("'")[1].encode().decode("unicode_escape")
    printed = _run(["repl", "-c", "examples/incidents.md", "--model", "scripted:examples/scripted_payments.jsonl"], stdin)
    assert _normal(printed) == _normal(shown)


def _as_shown(tree: str) -> list[str]:
    """``rlm trace show``'s tree as docs/python.md shows it: the probe's detail lines left out,
    run and session ids as "…", lines over 150 characters cut."""
    out = []
    for line in tree.splitlines():
        if re.match(r"^    '|^      ", line):
            continue
        line = re.sub(r"^run [0-9a-f]{8} ", "run … ", line)
        line = re.sub(r"session [0-9a-f]{12};", "session …;", line)
        out.append(line if len(line) <= 150 else line[:147] + "...")
    return out


def test_the_session_demos_trace_is_what_rlm_trace_show_prints(tmp_path: Path) -> None:
    """docs/python.md's trace of examples/session_demo.py (three questions, a tool)."""
    env = {k: v for k, v in os.environ.items() if k != "RLM_MODEL"}
    env["TMPDIR"] = str(tmp_path)
    subprocess.run([sys.executable, "examples/session_demo.py"], cwd=ROOT, env=env, capture_output=True, timeout=120, check=True)
    tree = subprocess.run([sys.executable, "-m", "rlm_runtime.cli", "trace", "show", str(tmp_path / "rlm-session-demo.jsonl")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=True).stdout
    (shown,) = _blocks_after(ROOT / "docs" / "python.md", "prints its one trajectory")
    assert _normal(_as_shown(tree)) == _normal(shown)
