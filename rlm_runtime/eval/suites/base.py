"""What a suite is: a name, a family, the text it uses, and a generator of one task.

A generator takes a ``random.Random`` (seeded from the suite, the seed, the length and the
task's index, so every task is reproducible on its own) and a target length in characters,
and returns a ``Generated``: the question, the answer and its scorer, and the context as a
text or a folder of files. ``write_suite`` turns them into a task file with the contexts as
files beside it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Generated:
    """One generated task before it is written."""

    question: str
    answer: str | list[str] | int | float
    scorer: str
    context: str | dict[str, str]  # a text, or a folder: {relative path: text}
    options: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)


Generator = Callable[[random.Random, int], Generated]


@dataclass(frozen=True)
class Suite:
    """A built-in suite (see ``suites/__init__.py`` for the registry)."""

    name: str
    family: str
    description: str
    source: str
    generate: Generator


def task_rng(suite: str, seed: int, length: int, index: int) -> random.Random:
    """The generator of one task: a str seed is hashed with SHA-512, the same on every run."""
    return random.Random(f"rlm-eval:{suite}:{seed}:{length}:{index}")


def pick(rng: random.Random, templates: tuple[str, ...]) -> tuple[int, str]:
    """A template and its number (recorded in the metadata)."""
    i = rng.randrange(len(templates))
    return i, templates[i]
