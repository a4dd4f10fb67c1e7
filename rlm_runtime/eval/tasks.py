"""The task file of ``rlm eval``: JSONL, one task per line, validated with pydantic.

A line::

    {"id": "n1", "question": "What is the access code of Velorin?", "context": "contexts/n1.txt",
     "answer": "KX-4821", "scorer": "contains", "metadata": {"family": "needle", "length": 10000}}

Fields:
    id: unique within the file.
    question: what the model is asked.
    context: where the answer is to be found (exactly one of these forms):
        ``"path"``: a file or a folder, relative to the task file (or absolute); it must
        resolve inside the task file's folder (``confine.py``: ``--context-root`` widens it);
        ``["path", ...]``: several files or folders (the model sees ``contexts``);
        ``{"text": "..."}``: inline text;
        ``"memory:"`` / ``"memory:STORE"``: the default memory store / the store file STORE
        (relative to the task file), searched with ``search_chunks``; refused unless
        ``--allow-memory``;
        ``"ctx:ID"`` (alone or in a list): a context of the user's registry (``rlm context``),
        confined by its real path as a path is (``confine.confine_ref``: a registered text
        is refused; a registered memory store stands alone and is a ``memory:STORE``). Runs
        of a task file do not count in the registry's usage statistics;
        ``null``: no context.
        A string is never inline text, so a path that does not exist is an error, not a
        question about the path's name.
    answer: a string, a list of accepted strings, or a number. For the ``set`` scorer a list
        is the set of items expected (all of them), not alternatives.
    scorer: ``exact``, ``contains``, ``numeric``, ``f1``, ``regex``, ``set`` or ``judge`` (see
        ``scorers.py``); default ``numeric`` for a number answer, else ``exact``. The patterns
        of ``regex`` and ``item_pattern`` are RE2 (linear time), checked when the file is read.
    options: scorer settings (``tolerance``, ``decay``, ``item_pattern``, ``group``...).
    metadata: free-form; the report groups by ``family`` and ``length`` (characters).

``load_tasks(path)`` returns the valid tasks and one ``TaskError`` per bad line (its line
number, the field and the message; one per refused context path), so a file with one broken
line still runs. Lines are read strictly (``jsonlines.py``: size, UTF-8, finite numbers, depth).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from rlm_runtime.errors import SourceRefused
from rlm_runtime.eval.confine import SourceRules, confine, confine_ref, refuse_memory
from rlm_runtime.eval.jsonlines import parse_line, read_lines
from rlm_runtime.registry.ids import REF_PREFIX

Scorer = Literal["exact", "contains", "numeric", "f1", "regex", "set", "judge"]
SCORERS: tuple[str, ...] = ("exact", "contains", "numeric", "f1", "regex", "set", "judge")
#: The prefix of a memory-store context.
MEMORY_PREFIX = "memory:"
#: The longest regex a task may give (``regex`` answers, ``item_pattern``).
MAX_PATTERN = 4000
#: Memory RE2 may use to compile one pattern (a pattern that needs more is refused).
PATTERN_MEMORY = 8 << 20
#: A metadata ``length`` above this is no length (a report's axis, not a number to trust).
MAX_LENGTH = 10**15


def compile_pattern(pattern: str, ignore_case: bool = True) -> Any:
    """``pattern`` compiled with RE2 (linear-time matching, bounded memory).

    Raises:
        ValueError: the pattern is too long, invalid, or uses what RE2 does not support
            (backreferences, lookaround).
    """
    import re2

    if len(pattern) > MAX_PATTERN:
        raise ValueError(f"a pattern of {len(pattern):,} characters (at most {MAX_PATTERN:,})")
    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = not ignore_case
    options.max_mem = PATTERN_MEMORY
    try:
        return re2.compile(pattern.encode("utf-8"), options)
    except UnicodeEncodeError:
        raise ValueError(f"the pattern {pattern[:80]!r} is not valid text") from None
    except re2.error as e:
        detail = e.args[0].decode("utf-8", "replace") if e.args and isinstance(e.args[0], bytes) else str(e)
        raise ValueError(f"{pattern[:80]!r} is not a regex RE2 runs ({detail}; backreferences and "
                         "lookaround are not supported)") from None


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

    @field_validator("item_pattern")
    @classmethod
    def _pattern_runs(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None:
            compile_pattern(value, bool(info.data.get("ignore_case", True)))
        return value


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
            for gold in golds:
                try:
                    compile_pattern(str(gold))
                except ValueError as e:
                    raise ValueError(f"the answer is not a valid regex: {e}") from None
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
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_LENGTH:
            return None  # NaN fails the range too
        return int(value)

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
    """A loaded task file: its valid tasks (in file order), its bad lines, and the rules its
    contexts were checked by."""

    path: Path
    tasks: list[Task] = field(default_factory=list)
    errors: list[TaskError] = field(default_factory=list)
    rules: SourceRules = field(default_factory=SourceRules)

    @property
    def base(self) -> Path:
        """The folder context paths are relative to."""
        return self.path.parent

    def sources(self, task: Task) -> tuple[list[Any], Any]:
        """(context sources for ``open_context``, memory store or None) of ``task``, checked
        again (a file may have changed since it was read).

        Raises:
            SourceRefused: a context the rules refuse.
        """
        return context_sources(task, self.base, self.rules)


def context_sources(task: Task, base: Path, rules: SourceRules | None = None) -> tuple[list[Any], Any]:
    """The context sources of ``task`` resolved against ``base`` and checked by ``rules``
    (default: confined to ``base``, no memory): a list of resolved paths (or one inline text)
    and the memory store (True for the default one, a path, or None).

    Raises:
        SourceRefused: the first context the rules refuse (``refused`` lists them all).
    """
    rules = rules or SourceRules()
    ctx = task.context
    if ctx is None:
        return [], None
    if isinstance(ctx, InlineText):
        return [ctx.text], None
    if isinstance(ctx, str) and ctx.startswith(MEMORY_PREFIX):
        store = ctx.removeprefix(MEMORY_PREFIX)
        refuse_memory(store, rules)
        return [], (confine(store, base, rules) if store else True)
    if isinstance(ctx, str) and ctx.startswith(REF_PREFIX):
        real, kind = confine_ref(ctx, base, rules)
        if kind == "memory":
            refuse_memory(ctx, rules)
            return [], real
        return [real], None
    paths = [ctx] if isinstance(ctx, str) else ctx
    return [_confined(p, base, rules) for p in paths], None


def _confined(path: str, base: Path, rules: SourceRules) -> Path:
    """A path of a list of contexts, or a ``ctx:ID`` in it (a file or a folder), confined."""
    if not path.startswith(REF_PREFIX):
        return confine(path, base, rules)
    real, kind = confine_ref(path, base, rules)
    if kind == "memory":
        raise SourceRefused(f"{path[:80]} is a memory store: a list holds file or folder contexts only (memory stands alone)")
    return real


def refused(task: Task, base: Path, rules: SourceRules) -> list[str]:
    """Why each context of ``task`` is refused (empty: every one is allowed)."""
    ctx = task.context
    if ctx is None or isinstance(ctx, InlineText):
        return []
    if isinstance(ctx, str) and ctx.startswith((MEMORY_PREFIX, REF_PREFIX)):
        try:
            context_sources(task, base, rules)
        except SourceRefused as e:
            return [str(e)]
        return []
    out = []
    for p in [ctx] if isinstance(ctx, str) else ctx:
        try:
            _confined(p, base, rules)
        except SourceRefused as e:
            out.append(str(e))
    return out


def load_tasks(path: str | Path, rules: SourceRules | None = None) -> TaskFile:
    """Read a JSONL task file: every valid line becomes a ``Task``, every bad one a ``TaskError``
    (a task whose contexts ``rules`` refuse: one per refused context).

    Raises:
        OSError: the file cannot be read (the caller reports it).
    """
    path = Path(path)
    out = TaskFile(path, rules=rules or SourceRules())
    seen: dict[str, int] = {}
    for number, line, bad in read_lines(path):
        if line is None:
            out.errors.append(TaskError(number, "(line)", str(bad)))
            continue
        if not line.strip() or line.lstrip().startswith("//"):
            continue
        try:
            data = parse_line(line)
        except ValueError as e:
            out.errors.append(TaskError(number, "(line)", str(e)))
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
        problems = refused(task, out.base, out.rules)
        if problems:
            out.errors += [TaskError(number, "context", p) for p in problems]
            continue
        seen[task.id] = number
        out.tasks.append(task)
    return out


def _is_union_branch(part: Any) -> bool:
    """pydantic names the union branch it tried (``str``, ``list[str]``...): not a field."""
    return isinstance(part, str) and (part in ("str", "int", "float", "InlineText", "none") or "[" in part)


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
