"""The task file of ``rlm eval``: JSONL, one task per line, validated with pydantic.

A line::

    {"id": "n1", "question": "What is the access code of Velorin?", "context": "contexts/n1.txt",
     "answer": "KX-4821", "scorer": "contains", "metadata": {"family": "needle", "length": 10000}}

Fields:
    id: unique within the file.
    question: what the model is asked.
    context: where the answer is to be found (exactly one of these forms):
        ``"path"``: a file or a folder, relative to the task file (or absolute);
        ``["path", ...]``: several files or folders (the model sees ``contexts``);
        ``{"text": "..."}``: inline text;
        ``"memory:"`` / ``"memory:STORE"``: the default memory store / the store file STORE
        (relative to the task file), searched with ``search_chunks``;
        ``null``: no context.
        A string is never inline text, so a path that does not exist is an error, not a
        question about the path's name.
    answer: a string, a list of accepted strings, or a number. For the ``set`` scorer a list
        is the set of items expected (all of them), not alternatives.
    scorer: ``exact``, ``contains``, ``numeric``, ``f1``, ``regex``, ``set`` or ``judge`` (see
        ``scorers.py``); default ``numeric`` for a number answer, else ``exact``.
    options: scorer settings (``tolerance``, ``decay``, ``item_pattern``, ``group``...).
    metadata: free-form; the report groups by ``family`` and ``length`` (characters).

``load_tasks(path)`` returns the valid tasks and one ``TaskError`` per bad line (its line
number, the field and the message), so a file with one broken line still runs.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

Scorer = Literal["exact", "contains", "numeric", "f1", "regex", "set", "judge"]
SCORERS: tuple[str, ...] = ("exact", "contains", "numeric", "f1", "regex", "set", "judge")
#: The prefix of a memory-store context.
MEMORY_PREFIX = "memory:"


class InlineText(BaseModel):
    """``{"text": "..."}``: a context given in the task line itself."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    text: str


class ScorerOptions(BaseModel):
    """Settings of a scorer (each scorer reads the ones it knows; see ``scorers.py``).

    Args:
        tolerance: ``numeric``: an absolute difference scored 1.0.
        rel_tolerance: ``numeric``: a relative difference scored 1.0.
        decay: ``numeric``: beyond the tolerance the score is ``decay ** |gold - prediction|``
            (OOLONG's 0.75; 0 makes it exact).
        ignore_case: ``regex``: match case-insensitively.
        item_pattern: ``set``: a regex; the items of an answer are its matches (otherwise
            the answer is split on commas, semicolons, new lines and "and").
        group: ``set``: items taken this many at a time, unordered (2 for pairs).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    tolerance: float = Field(0.0, ge=0)
    rel_tolerance: float = Field(0.0, ge=0)
    decay: float = Field(0.75, ge=0, le=1)
    ignore_case: bool = True
    item_pattern: str | None = None
    group: int = Field(1, ge=1, le=8)


class Task(BaseModel):
    """One evaluation task (see the module docstring for each field)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=200)
    question: str = Field(min_length=1)
    context: str | list[str] | InlineText | None = None
    answer: str | list[str] | int | float
    scorer: Scorer | None = None
    options: ScorerOptions = Field(default_factory=ScorerOptions)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("id", "question")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    @field_validator("context")
    @classmethod
    def _context_form(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            raise ValueError("an empty path: give a path, a list of paths, {\"text\": ...}, \"memory:\" or null")
        if isinstance(value, list):
            if not value:
                raise ValueError("an empty list of paths")
            if any(not p.strip() or p.startswith(MEMORY_PREFIX) for p in value):
                raise ValueError("a list holds file or folder paths only (memory: stands alone)")
        return value

    @field_validator("answer")
    @classmethod
    def _answer_form(cls, value: Any) -> Any:
        if isinstance(value, list) and not value:
            raise ValueError("an empty list of accepted answers")
        if isinstance(value, bool):
            raise ValueError("a bool is not an answer: use a string")
        return value

    @field_validator("scorer")
    @classmethod
    def _scorer_fits(cls, scorer: str | None, info: ValidationInfo) -> str | None:
        answer = info.data.get("answer")
        golds = answer if isinstance(answer, list) else [answer] if answer is not None else []
        if scorer == "numeric":
            for gold in golds:
                if _number(gold) is None:
                    raise ValueError(f"numeric needs a number answer, not {gold!r}")
        if scorer == "regex":
            import re

            for gold in golds:
                try:
                    re.compile(str(gold))
                except re.error as e:
                    raise ValueError(f"the answer {gold!r} is not a valid regex: {e}") from e
        return scorer

    @property
    def scorer_name(self) -> str:
        if self.scorer is not None:
            return self.scorer
        return "numeric" if isinstance(self.answer, (int, float)) else "exact"

    @property
    def golds(self) -> list[str]:
        """The accepted answers as strings (a number as written)."""
        if isinstance(self.answer, list):
            return list(self.answer)
        return [_show_number(self.answer) if isinstance(self.answer, (int, float)) else self.answer]

    @property
    def family(self) -> str:
        return str(self.metadata.get("family") or "custom")

    @property
    def length(self) -> int | None:
        value = self.metadata.get("length")
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    def digest(self) -> str:
        """A hash of everything the task says (the same line gives the same digest)."""
        data = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(data.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class TaskError:
    """A line of a task file that is not a valid task."""

    line: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.field}: {self.message}"


@dataclass
class TaskFile:
    """A loaded task file: its valid tasks (in file order) and its bad lines."""

    path: Path
    tasks: list[Task] = field(default_factory=list)
    errors: list[TaskError] = field(default_factory=list)

    @property
    def base(self) -> Path:
        """The folder context paths are relative to."""
        return self.path.parent

    def sources(self, task: Task) -> tuple[list[Any], Any]:
        """(context sources for ``open_context``, memory store or None) of ``task``."""
        return context_sources(task, self.base)


def context_sources(task: Task, base: Path) -> tuple[list[Any], Any]:
    """The context sources of ``task`` resolved against ``base``: a list of paths (or one
    inline text) and the memory store (True for the default one, a path, or None)."""
    ctx = task.context
    if ctx is None:
        return [], None
    if isinstance(ctx, InlineText):
        return [ctx.text], None
    if isinstance(ctx, str) and ctx.startswith(MEMORY_PREFIX):
        store = ctx.removeprefix(MEMORY_PREFIX)
        return [], (_resolve(store, base) if store else True)
    paths = [ctx] if isinstance(ctx, str) else ctx
    return [_resolve(p, base) for p in paths], None


def _resolve(path: str, base: Path) -> Path:
    p = Path(path).expanduser()
    return p if p.is_absolute() else base / p


def load_tasks(path: str | Path) -> TaskFile:
    """Read a JSONL task file: every valid line becomes a ``Task``, every bad one a ``TaskError``.

    Raises:
        OSError: the file cannot be read (the caller reports it).
    """
    path = Path(path)
    out = TaskFile(path)
    seen: dict[str, int] = {}
    with path.open(encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            if not line.strip() or line.lstrip().startswith("//"):
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as e:
                out.errors.append(TaskError(number, "(line)", f"not JSON: {e.msg} at column {e.colno}"))
                continue
            if not isinstance(data, dict):
                out.errors.append(TaskError(number, "(line)", f"expected a JSON object, got {type(data).__name__}"))
                continue
            try:
                task = Task.model_validate(data)
            except ValidationError as e:
                first = e.errors()[0]
                loc = ".".join(str(part) for part in first["loc"] if not _is_union_branch(part)) or "(task)"
                out.errors.append(TaskError(number, loc, first["msg"].removeprefix("Value error, ")))
                continue
            if task.id in seen:
                out.errors.append(TaskError(number, "id", f"duplicate id {task.id!r} (first on line {seen[task.id]})"))
                continue
            missing = _missing_context(task, out.base)
            if missing:
                out.errors.append(TaskError(number, "context", missing))
                continue
            seen[task.id] = number
            out.tasks.append(task)
    return out


def _is_union_branch(part: Any) -> bool:
    """pydantic names the union branch it tried (``str``, ``list[str]``...): not a field."""
    return isinstance(part, str) and (part in ("str", "int", "float", "InlineText", "none") or "[" in part)


def _missing_context(task: Task, base: Path) -> str | None:
    paths, memory = context_sources(task, base)
    if isinstance(task.context, InlineText):
        return None
    for p in paths:
        if not Path(p).exists():
            return f"no such file or folder: {p}"
    if isinstance(memory, Path) and not memory.exists():
        return f"no such memory store: {memory}"
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    try:
        return float(str(value).replace(",", "").strip())
    except ValueError:
        return None


def _show_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def dump_task(task: Task) -> str:
    """One JSONL line for ``task`` (defaults left out)."""
    return json.dumps(task.model_dump(mode="json", exclude_defaults=True), ensure_ascii=False)
