"""Progress of an ``rlm eval`` run on stderr: done / failed, running accuracy per method,
tokens, cost and ETA.

A bar from tqdm when it is installed and stderr is a terminal (rich is not used: it is not a
dependency either, and tqdm is the lighter of the two); otherwise one plain line per finished
job, which is also what a log file or CI wants. ``Quiet`` shows nothing (``-q``, ``--json``
keeps the lines on stderr).
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from rlm_runtime.eval.tasks import Task
from rlm_runtime.termsafe import one_line


class Quiet:
    def start(self, total: int, skipped: int, concurrency: int) -> None:
        pass

    def started(self, task: Task, method: str) -> None:
        pass

    def finished(self, record: dict[str, Any] | None, task: Task, method: str) -> None:
        pass

    def close(self, summary: Any) -> None:
        pass


class Display:
    """The tallies, and how they are shown (a tqdm bar or plain lines)."""

    def __init__(self, stream: TextIO | None = None, *, bar: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.total = self.done = self.failed = self.unrecorded = 0
        self.tokens = 0
        self.cost = 0.0
        self.scores: dict[str, list[float]] = {}
        self.began = time.monotonic()
        self.concurrency = 1
        self._bar: Any = None
        self._want_bar = bar if bar is not None else self.stream.isatty()

    def start(self, total: int, skipped: int, concurrency: int) -> None:
        self.total, self.concurrency = total, concurrency
        self.began = time.monotonic()
        note = f" ({skipped} done before, skipped)" if skipped else ""
        self._print(f"rlm eval: {total} jobs{note}, {concurrency} at a time")
        if self._want_bar and total:
            try:
                from tqdm import tqdm
            except ImportError:
                return
            self._bar = tqdm(total=total, file=self.stream, unit="job", dynamic_ncols=True, leave=True)

    def started(self, task: Task, method: str) -> None:
        pass

    def finished(self, record: dict[str, Any] | None, task: Task, method: str) -> None:
        if record is None:
            self.unrecorded += 1
        else:
            self.done += 1
            self.failed += record.get("error") is not None
            self.tokens += int(record.get("input_tokens") or 0) + int(record.get("output_tokens") or 0)
            self.cost += float(record.get("cost_usd") or 0.0)
            self.scores.setdefault(method, []).append(float(record.get("score") or 0.0))
        status = self.status()
        if self._bar is not None:
            self._bar.set_postfix_str(status, refresh=False)
            self._bar.update(1)
            return
        if record is None:
            head = f"{one_line(task.id)} {method}: not recorded (stopped)"
        else:
            err = f" error={one_line(str(record.get('error_type')))}" if record.get("error") else ""
            head = f"{one_line(task.id)} {method}: score={record.get('score'):.2f} {record.get('wall_s', 0):.1f}s{err}"
        self._print(f"[{self.done + self.unrecorded}/{self.total}] {head} | {status}")

    def status(self) -> str:
        acc = " ".join(f"{m}={sum(v) / len(v):.0%}" for m, v in self.scores.items() if v)
        finished = self.done + self.unrecorded
        elapsed = time.monotonic() - self.began
        left = self.total - finished
        eta = f"{elapsed / finished * left:.0f}s" if finished else "?"
        return f"done {self.done} failed {self.failed} | acc {acc or '-'} | {self.tokens:,} tok ${self.cost:.4f} | ETA {eta}"

    def close(self, summary: Any) -> None:
        if self._bar is not None:
            self._bar.close()
        stop = {"budget": "stopped: the budget is spent", "interrupted": "interrupted"}.get(summary.stopped or "", "finished")
        self._print(f"rlm eval: {stop} in {summary.elapsed_s:.1f}s: {self.status()}")
        if summary.stopped:
            self._print("rlm eval: run again with --resume to finish the jobs left")

    def _print(self, text: str) -> None:
        try:
            print(text, file=self.stream, flush=True)
        except (OSError, ValueError):
            pass
