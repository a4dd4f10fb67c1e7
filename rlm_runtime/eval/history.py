"""Every run's headline figures over time, read from the runs themselves, and a remembered baseline.

``rlm eval history`` looks for runs (folders holding a ``results.jsonl``) under the folders it
is given (default ``./eval-runs``), at most ``MAX_DEPTH`` folders down and ``MAX_RUNS`` runs,
and gives each one's headline figures by method: tasks, mean score, tokens a task, the
reduction against loading everything (``report.load_all_savings``) and the median time, in
the order the runs ended. Nothing is kept beside the runs: the figures are recomputed from
their results each time, so a hand-edited table cannot drift from them.

``rlm eval baseline DIR`` remembers one run as the baseline (``$RLM_HOME/eval/baseline.json``,
its folder and its figures when it was chosen); ``history`` marks it, and ``rlm eval compare
DIR`` with one run compares it with the baseline.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlm_runtime import private
from rlm_runtime.errors import ConfigError

#: Runs ``find_runs`` returns at most, and how deep it looks under a folder.
MAX_RUNS = 500
MAX_DEPTH = 3
#: The baseline's file is small; one larger than this is not read.
_BASELINE_MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class Headline:
    """One run's figures: ``methods`` maps a method to its tasks, mean score, tokens a task,
    reduction against loading everything (percent, None when not counted) and median seconds."""

    folder: str
    ended: str
    models: tuple[str, ...]
    methods: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"folder": self.folder, "ended": self.ended, "models": list(self.models), "methods": self.methods}


def headline(folder: Path) -> Headline | None:
    """The figures of the run in ``folder`` (None: no valid results there)."""
    from rlm_runtime.eval.report import load, load_all_savings, table

    records = load(folder)
    if not records:
        return None
    savings = {x["method"]: x for x in load_all_savings(records) if x["family"] == "(all)"}
    methods = {}
    for row in table(records):
        if row.family != "(all)":
            continue
        saved = savings.get(row.method)
        methods[row.method] = {"tasks": row.n, "correct": row.correct, "accuracy": round(row.accuracy, 4),
                               "tokens_per_task": round(row.input_tokens + row.output_tokens),
                               "load_all_reduction_percent": saved["reduction_percent"] if saved else None,
                               "median_s": round(row.median_s, 1)}
    ended = max((str(r.get("ended") or "") for r in records), default="")
    models = tuple(sorted({str(r.get("model")) for r in records if r.get("model")}))
    return Headline(str(folder), ended, models, methods)


def find_runs(roots: list[Path]) -> list[Path]:
    """The run folders (holding ``results.jsonl``) at or under ``roots``, sorted; symlinked
    folders are not followed."""
    found: list[Path] = []
    for root in roots:
        stack = [(root, 0)]
        while stack and len(found) < MAX_RUNS:
            folder, depth = stack.pop()
            if (folder / "results.jsonl").is_file():
                found.append(folder)
                continue
            if depth >= MAX_DEPTH:
                continue
            try:
                entries = sorted(os.scandir(folder), key=lambda e: e.name, reverse=True)
            except OSError:
                continue
            stack += [(Path(e.path), depth + 1) for e in entries if e.is_dir(follow_symlinks=False)]
    return sorted(set(found))


def history(roots: list[Path]) -> list[Headline]:
    """The headline of every run found under ``roots``, the earliest ended first."""
    heads = [h for h in (headline(f) for f in find_runs(roots)) if h is not None]
    return sorted(heads, key=lambda h: (h.ended, h.folder))


def baseline_path(home: Path) -> Path:
    return home / "eval" / "baseline.json"


def set_baseline(home: Path, folder: Path) -> Headline:
    """Remember the run in ``folder`` as the baseline.

    Raises:
        ConfigError: no results in ``folder``.
    """
    head = headline(folder)
    if head is None:
        raise ConfigError(f"no results in {folder} (expected {folder / 'results.jsonl'})")
    path = baseline_path(home)
    private.make_dir(path.parent)
    private.write_text(path, json.dumps({"folder": str(folder.resolve()), "set_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
                                         "figures": head.to_dict()}, indent=1) + "\n")
    return head


def get_baseline(home: Path) -> dict[str, Any] | None:
    """The baseline remembered (its folder, when it was set, its figures then), or None.

    Raises:
        ConfigError: the file is not one ``set_baseline`` wrote.
    """
    path = baseline_path(home)
    try:
        if path.stat().st_size > _BASELINE_MAX_BYTES:
            raise ConfigError(f"{path} is not a baseline this version wrote (too large): rlm eval baseline DIR sets it again")
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ConfigError(f"{path} cannot be read ({e}): rlm eval baseline DIR sets it again") from e
    if not isinstance(value, dict) or not isinstance(value.get("folder"), str):
        raise ConfigError(f"{path} is not a baseline this version wrote: rlm eval baseline DIR sets it again")
    return value
