"""The built-in suites of ``rlm eval``: a registry, and ``write_suite`` to make a task file.

One module per family (``needle``, ``aggregation``, ``pairs``, ``multihop``, ``codeqa``),
each exporting ``SUITES``; ``core`` (needle, aggregation, multi-hop: the families of the
small-model goal) and ``all`` combine them. Every task is generated from its own seed
(suite, seed, length, index), so a suite is reproducible and one task can be regenerated
alone; ``text.py`` says which text each uses and its licence.

With a split (``write_suite(..., split="dev" | "heldout")``, ``rlm eval make core --split``)
the core families are generated over several text shapes and question wordings instead
(``shaped.py`` says which shapes and templates each part has); without one, every suite
writes what it always wrote.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlm_runtime.errors import ConfigError
from rlm_runtime.eval.suites import aggregation, codeqa, multihop, needle, pairs, shaped
from rlm_runtime.eval.suites.base import Generated, Suite, task_rng
from rlm_runtime.eval.tasks import Task, dump_task

SUITES: dict[str, Suite] = {s.name: s for m in (needle, aggregation, pairs, multihop, codeqa) for s in m.SUITES}
#: Suites made of others (each family gets ``n`` tasks per length).
COMBINED: dict[str, tuple[str, ...]] = {
    "core": ("needle", "aggregation", "multi-hop"),
    "all": ("needle", "needle-multi", "aggregation", "pairs", "multi-hop", "codeqa"),
}
DEFAULT_LENGTHS = (10_000, 100_000)
MIN_LENGTH, MAX_LENGTH = 2_000, 50_000_000


@dataclass(frozen=True)
class SuiteInfo:
    name: str
    families: tuple[str, ...]
    description: str
    source: str


def list_suites() -> list[SuiteInfo]:
    """Every suite, built-in first, then the combined ones."""
    out = [SuiteInfo(s.name, (s.family,), s.description, s.source) for s in SUITES.values()]
    for name, parts in COMBINED.items():
        sources = sorted({SUITES[p].source for p in parts})
        out.append(SuiteInfo(name, tuple(dict.fromkeys(SUITES[p].family for p in parts)), "combines " + ", ".join(parts),
                             "; ".join(sources)))
    return out


def suite_names() -> list[str]:
    return [*SUITES, *COMBINED]


def members(name: str) -> tuple[str, ...]:
    if name in SUITES:
        return (name,)
    if name in COMBINED:
        return COMBINED[name]
    raise ConfigError(f"unknown suite {name!r}; suites: {', '.join(suite_names())}")


def split_names() -> list[str]:
    return list(shaped.SPLITS)


def _suite(suite: str, split: str | None) -> Suite:
    """The built-in suite ``suite``, or its shaped counterpart for ``split``."""
    if split is None:
        return SUITES[suite]
    if split not in shaped.SPLITS:
        raise ConfigError(f"unknown split {split!r}; splits: {', '.join(shaped.SPLITS)}")
    if suite not in shaped.FAMILIES:
        raise ConfigError(f"--split applies to {', '.join(shaped.FAMILIES)} and core, not {suite!r}")
    return shaped.shaped_suite(suite, split)


def generate_task(suite: str, seed: int, length: int, index: int, split: str | None = None) -> Generated:
    """One task of ``suite`` (a built-in one; its shaped counterpart with a ``split``), as generated before
    anything is written."""
    return _suite(suite, split).generate(task_rng(suite if split is None else f"{suite}@{split}", seed, length, index),
                                         length)


def write_suite(name: str, out: str | Path, *, lengths: tuple[int, ...] = DEFAULT_LENGTHS, n: int = 5, seed: int = 1,
                progress: Any = None, split: str | None = None) -> list[Task]:
    """Generate ``n`` tasks per length of suite ``name`` and write them to the task file
    ``out`` (JSONL), their contexts under ``<out stem>_contexts/`` beside it.

    Args:
        split: ``"dev"`` or ``"heldout"``: the core families over text shapes (``shaped.py``);
            None: the suites as they always were.

    Raises:
        ConfigError: an unknown suite or split, a split for a suite that has none, a length
            out of range, n < 1.
    """
    parts = members(name)
    for suite in parts:
        _suite(suite, split)
    if n < 1:
        raise ConfigError("--n must be at least 1")
    for length in lengths:
        if not MIN_LENGTH <= length <= MAX_LENGTH:
            raise ConfigError(f"length {length} is out of range ({MIN_LENGTH:,} to {MAX_LENGTH:,} characters)")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    folder_name = f"{out.stem}_contexts"
    contexts = out.parent / folder_name
    tasks: list[Task] = []
    for suite in parts:
        for length in lengths:
            for i in range(n):
                gen = generate_task(suite, seed, length, i, split)
                task_id = f"{suite}-{length}-s{seed}-{i}" if split is None else f"{suite}-{split}-{length}-s{seed}-{i}"
                context = _write_context(contexts, task_id, gen.context)
                chars = len(gen.context) if isinstance(gen.context, str) else sum(len(t) for t in gen.context.values())
                meta = {"family": SUITES[suite].family, "suite": suite, "length": length, "chars": chars, "seed": seed,
                        "index": i, **gen.metadata}
                task = Task(id=task_id, question=gen.question, context=f"{folder_name}/{context}", answer=gen.answer,
                            scorer=gen.scorer, options=gen.options, metadata=meta)  # type: ignore[arg-type]
                tasks.append(task)
                if progress is not None:
                    progress(task)
    tmp = out.with_name(out.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for task in tasks:
            f.write(dump_task(task) + "\n")
    os.replace(tmp, out)
    return tasks


def _write_context(folder: Path, task_id: str, context: str | dict[str, str]) -> str:
    """Write one context (a text file, or a folder of files) and return its name under ``folder``."""
    if isinstance(context, str):
        path = folder / f"{task_id}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(context, encoding="utf-8")
        return path.name
    root = folder / task_id
    for rel, body in context.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body, encoding="utf-8")
    return task_id

