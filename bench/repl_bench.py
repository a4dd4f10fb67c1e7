"""How fast ``rlm repl`` starts, and what its HUD and live display cost per event.

Start: ``rlm repl`` is spawned on a pseudo-terminal (as a person starts it) with a scripted
model, and timed from spawn to the first ``rlm>`` prompt on the terminal; next to it, in the
same run, ``python -c "import prompt_toolkit"`` and ``python -c pass`` from spawn to exit.
The worker is not started before the first cell, so no zygote is needed for the prompt.

HUD: ``Hud.on_event`` on a realistic iteration event (what every event costs the run's
thread), ``Hud.fragments`` (one redraw, with its cached probes, and with fresh ones), and
``Display.event`` for the same iteration (the live display: escaping, highlighting, printing
to a buffer), for scale.

    .venv/bin/python bench/repl_bench.py [--json] [--repeat N]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pty
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import machine, quantile

ROOT = Path(__file__).resolve().parent.parent


def _spawn_to_exit(args: list[str]) -> float:
    began = time.perf_counter()
    subprocess.run(args, check=True, capture_output=True)
    return time.perf_counter() - began


def _repl_to_prompt(home: Path, script: Path) -> float:
    """Seconds from spawning ``rlm repl`` on a pty to its first prompt; then Ctrl-D."""
    env = {**os.environ, "RLM_HOME": str(home), "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "30"}
    began = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:  # the child: become rlm repl
        os.chdir(home)
        os.execve(sys.executable, [sys.executable, "-m", "rlm_runtime.cli", "repl", "--model", f"scripted:{script}"], env)
    seen = b""
    elapsed = float("nan")
    try:
        deadline = began + 30
        while time.perf_counter() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if not ready:
                continue
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
            if b"rlm> " in seen:
                elapsed = time.perf_counter() - began
                break
        os.write(fd, b"\x04")
        end = time.monotonic() + 10
        while time.monotonic() < end:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            try:
                if select.select([fd], [], [], 0.1)[0]:
                    os.read(fd, 65536)
            except OSError:
                pass
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    finally:
        os.close(fd)
    return elapsed


def start_latency(repeat: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        script = home / "s.jsonl"
        script.write_text('{"content": "```python\\nFINAL(1)\\n```"}\n')
        _repl_to_prompt(home, script)  # warm the page cache and the .pyc files
        rows: dict[str, list[float]] = {"repl": [], "import_prompt_toolkit": [], "python_pass": []}
        for _ in range(repeat):  # interleaved, so a busy moment hits all three alike
            rows["repl"].append(_repl_to_prompt(home, script))
            rows["import_prompt_toolkit"].append(_spawn_to_exit([sys.executable, "-c", "import prompt_toolkit"]))
            rows["python_pass"].append(_spawn_to_exit([sys.executable, "-c", "pass"]))
    med = {k: statistics.median(v) for k, v in rows.items()}
    return {"median_s": med, "p90_s": {k: quantile(v, 0.9) for k, v in rows.items()},
            "beyond_prompt_toolkit_s": med["repl"] - med["import_prompt_toolkit"],
            "ratio_to_prompt_toolkit": med["repl"] / med["import_prompt_toolkit"], "n": repeat}


def _iteration_event() -> dict[str, Any]:
    code = "hits = grep('launch code', max_matches=20)\nfor h in hits:\n    print(h)\nprint(len(hits))"
    return {"type": "iteration", "run_id": "abcd1234", "parent_id": None, "depth": 0, "iteration": 3, "forced": False,
            "response": "Let me search.\n```python\n" + code + "\n```", "code_blocks": [code],
            "outputs": [{"stdout": "\n".join(f"{n}: line {n} of the haystack with text" for n in range(20)), "error": None,
                         "error_type": None, "duration_s": 0.01, "worker_restarted": False, "warnings": []}],
            "duration_s": 0.4, "model_s": 0.3, "usage": {"calls": 1, "input_tokens": 2400, "output_tokens": 80, "cost_usd": 0.0004}}


def _per_call_us(fn: Any, n: int) -> float:
    began = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - began) / n * 1e6


def hud_cost() -> dict[str, float]:
    from rlm_runtime.repl.display import Display, PlainPrinter
    from rlm_runtime.repl.hud import Hud

    event = _iteration_event()
    hud = Hud("openai/gpt-4o-mini", worker_rss=lambda: os.getpid() and _rss(), budget=lambda: (0.01, 1.0), in_flight=lambda: 0)
    hud.start("question", 20)
    on_event = _per_call_us(lambda: hud.on_event(event), 20_000)
    cached = _per_call_us(hud.fragments, 5_000)

    def fresh() -> None:
        hud._probed_at = -10.0  # force the probes (worker RSS, free memory)
        hud.fragments()

    uncached = _per_call_us(fresh, 500)
    sink = io.StringIO()
    plain = Display(PlainPrinter(sink), color=False)
    colored = Display(PlainPrinter(sink), color=True)
    display_plain = _per_call_us(lambda: plain.event(event), 2_000)
    display_color = _per_call_us(lambda: colored.event(event), 500)
    return {"hud_on_event_us": on_event, "hud_redraw_cached_us": cached, "hud_redraw_probed_us": uncached,
            "hud_per_second_at_4hz_us": 4 * uncached, "display_event_plain_us": display_plain,
            "display_event_highlighted_us": display_color}


def _rss() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9, help="starts measured (default 9)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    began = time.perf_counter()
    start = start_latency(args.repeat)
    cost = hud_cost()
    result = {"machine": machine(), "start": start, "per_event": cost, "wall_s": time.perf_counter() - began,
              "targets": {"beyond_prompt_toolkit_s": 0.3, "hud_per_iteration_ms": 1.0}}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    med, p90 = start["median_s"], start["p90_s"]
    print(f"machine: {result['machine']['cpus']} CPUs, load {result['machine']['load_1min']}, python {result['machine']['python']}")
    print(f"start to first prompt (median of {start['n']}, p90):")
    for key, label in (("repl", "rlm repl"), ("import_prompt_toolkit", 'python -c "import prompt_toolkit"'),
                       ("python_pass", "python -c pass")):
        print(f"  {label:36} {med[key] * 1000:7.0f} ms  (p90 {p90[key] * 1000:.0f} ms)")
    print(f"  beyond prompt_toolkit: {start['beyond_prompt_toolkit_s'] * 1000:.0f} ms (target < 300 ms); "
          f"ratio {start['ratio_to_prompt_toolkit']:.2f}x")
    print("per event / redraw:")
    for key, value in cost.items():
        print(f"  {key:32} {value:9.1f} us")
    print(f"  HUD per iteration (on_event): {cost['hud_on_event_us'] / 1000:.4f} ms (target < 1 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
