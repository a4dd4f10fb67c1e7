"""The trace schema: one typed record per kind of event a run or a session writes.

Schema 2 (this module). A file starts with ``trace_start`` (its ``schema`` number, the
``rlm_runtime`` version that wrote it, the session and its models); every event has ``type``
and ``t`` (unix time); events of a run carry ``run_id``, ``parent_id`` (None for a root
run) and ``depth``. A child RLM is a run of its own whose ``run_start`` names its parent.

* ``run_start``: the question, models, limits, the question's ``turn`` in its session, and
  per context the probe's summary and decision (load / excerpt / skip) with its reason.
* ``system_prompt``: the system prompt, once per run.
* ``iteration``: one model turn: prompt size, reply, code blocks and their outputs,
  timings (the whole turn and the model call) and tokens.
* ``sub_call``: ``llm_query`` and friends; ``tool_call``: a host tool the user supplied.
* ``assist``: an assist added a note or made the last answer; ``answer_check``: an assist
  questioned an answer before it was taken, or replaced it.
* ``context_stats``: how the code read each context (peeks, greps, chunks, full loads...).
* ``cell``: a cell typed by a person in a session; ``worker_wait``: time spent waiting for
  a worker from the process's pool; ``models``: the session switched models.
* ``run_end``: answer or error, the whole tree's usage and the run's own; ``session_end``.

Schema 1 (files without ``trace_start``) had ``run_start`` / ``iteration`` / ``sub_call`` /
``run_end`` with fewer fields and ``contexts`` as a list of names; ``reader`` maps them
onto these models. Every model allows extra fields, so a file from a later minor change
still reads; an event of a type this version does not know is kept as an ``UnknownEvent``.
"""

from __future__ import annotations

import functools
from importlib import metadata
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

#: The schema this module writes, and the newest one ``reader`` reads.
SCHEMA_VERSION = 2


def package_version() -> str:
    """``rlm_runtime.__version__`` (looked up late: the package imports this module)."""
    import rlm_runtime

    version = getattr(rlm_runtime, "__version__", None)  # None while the package is still importing
    return str(version) if version else _installed_version()


@functools.cache
def _installed_version() -> str:
    try:
        return metadata.version("rlm_runtime")
    except metadata.PackageNotFoundError:
        return "0+unknown"


class _Part(BaseModel):
    """A nested part of an event (usage, one cell's output, one context...)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: what the writer writes and what ``on_event`` callbacks receive."""
        return self.model_dump(mode="json", by_alias=True, fallback=str)


class Usage(_Part):
    """Model usage: calls, tokens and cost (``Usage.to_dict()`` of ``rlm_runtime.llm``)."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0


class CellOutput(_Part):
    """What one code block did: its captured output, error and duration."""

    stdout: str = ""
    error: str | None = None
    error_type: str | None = None
    duration_s: float = 0.0
    worker_restarted: bool = False
    warnings: list[str] = Field(default_factory=list)


class ContextInfo(_Part):
    """One context as the run saw it at its start: the probe's summary and decision."""

    name: str
    summary: str | None = None
    decision: str | None = None  # load | excerpt | skip (None: not probed, or schema 1)
    reason: str | None = None
    inline_chars: int | None = None  # characters put in the prompt itself, if any
    skipped_documents: list[str] = Field(default_factory=list)


class ContextAccess(_Part):
    """How the code read one context: the counters of ``AccessStats.to_dict()``.

    Counters this version does not name are kept as extra fields; ``counters()`` lists
    every numeric one. ``AccessStats``' log of recent reads is dropped: it can hold hundreds
    of entries, and a trace records how much was read, not every read.
    """

    name: str
    peeks: int = 0
    greps: int = 0
    chunks: int = 0
    slices: int = 0
    lines: int = 0
    full_loads: int = 0
    chars_returned: int = 0
    load_to_peek_ratio: float = 0.0

    @model_validator(mode="before")
    @classmethod
    def _without_log(cls, value: Any) -> Any:
        if isinstance(value, dict) and "log" in value:
            return {k: v for k, v in value.items() if k != "log"}
        return value

    @classmethod
    def from_stats(cls, name: str, stats: dict[str, Any]) -> ContextAccess:
        """From ``AccessStats.to_dict()``: its numbers only."""
        numbers = {k: v for k, v in stats.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        return cls.model_validate({**numbers, "name": name})

    def counters(self) -> dict[str, int | float]:
        """Every numeric counter, named ones first."""
        items = self.model_dump(exclude={"name"})
        return {k: v for k, v in items.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


# ----------------------------------------------------------------------- records


class Record(_Part):
    """Every event: its ``type`` and when it happened (``t``, set by the writer if absent)."""

    type: str
    t: float | None = None


class RunRecord(Record):
    """An event of one run. ``iteration``: for an event that happens during one of the
    run's turns (a sub-call, a tool call, an assist, an answer check, a wait for a worker),
    the turn's number (traces written before 2026-11-26 have none)."""

    run_id: str
    parent_id: str | None = None
    depth: int = 0
    iteration: int | None = None


class TraceStart(Record):
    """The first line of every file (and of every writer's part of a file appended to)."""

    type: Literal["trace_start"] = "trace_start"
    schema_version: int = Field(SCHEMA_VERSION, alias="schema")
    version: str | None = Field(default_factory=package_version)  # the rlm_runtime that wrote it
    session_id: str | None = None
    model: str | None = None
    sub_model: str | None = None


class RunStart(RunRecord):
    type: Literal["run_start"] = "run_start"
    model: str | None = None
    sub_model: str | None = None
    query: str = ""
    limits: dict[str, Any] = Field(default_factory=dict)
    turn: int = 0  # the question's index in its session, 0-based
    contexts: list[ContextInfo] = Field(default_factory=list)
    parent_iteration: int | None = None  # a child run: the parent's turn that started it

    @field_validator("contexts", mode="before")
    @classmethod
    def _names_are_contexts(cls, value: Any) -> Any:
        # Schema 1 (and the loop until it writes schema 2) gave the contexts' names only.
        if isinstance(value, list):
            return [{"name": v} if isinstance(v, str) else v for v in value]
        return value


class SystemPrompt(RunRecord):
    type: Literal["system_prompt"] = "system_prompt"
    text: str = ""


class Iteration(RunRecord):
    """One model turn. ``duration_s`` is the whole turn, ``model_s`` the model call."""

    type: Literal["iteration"] = "iteration"
    iteration: int = 0
    forced: bool = False
    prompt_chars: int | None = None
    response: str = ""
    code_blocks: list[str] = Field(default_factory=list)
    outputs: list[CellOutput] = Field(default_factory=list)
    duration_s: float | None = None
    model_s: float | None = None
    usage: Usage = Field(default_factory=Usage)
    finish_reason: str | None = None
    #: The turn did not finish: what stopped it (``KeyboardInterrupt``, ``Cancelled``,
    #: ``BudgetExceeded``); its code blocks are the reply's, its outputs the cells that ended.
    stopped: str | None = None


class SubCall(RunRecord):
    """A plain model call from code: llm_query, an llm_query_batched item, rlm_query at max depth."""

    type: Literal["sub_call"] = "sub_call"
    kind: str = "llm_query"
    model: str | None = None
    prompt: str = ""
    response: str | None = None
    error: str | None = None
    usage: Usage = Field(default_factory=Usage)
    duration_s: float | None = None


class ToolCall(RunRecord):
    """A call of a host tool the user supplied; ``args`` and ``result`` are short reprs."""

    type: Literal["tool_call"] = "tool_call"
    name: str
    args: str = ""
    result: str | None = None
    error: str | None = None
    duration_s: float | None = None


class AssistShown(RunRecord):
    """An assist (``rlm_runtime.assist``) spoke: ``name``, what triggered it (the kind of cell
    after which it added a note: ``empty_grep``, ``cell``, ``repeat``, ``final``, and in traces written
    before 2026-11-26 ``broad``; ``last_turn``; or ``reply``: it changed a reply before its code
    ran, ``changed`` naming what: ``blocks``, ``answer``, ``feedback``, ``restart``, ``notes``,
    ``drop_previous``, ``retract``, ``stop``), the characters it showed the model (or of the answer it
    made), and ``lookups``: what it read of the text to do so (typed lookups, not the model's
    reads)."""

    type: Literal["assist"] = "assist"
    name: str
    trigger: str = ""
    chars: int = 0
    changed: list[str] = Field(default_factory=list)
    lookups: list[str] = Field(default_factory=list)


class AnswerCheck(RunRecord):
    """An assist questioned an answer before it was taken (``outcome`` ``questioned``: the
    model got one more turn), took another in its place (``replaced``), or read one the plain
    loop did not (``read from the cell``: a value written as code; ``read from the last
    reply``: the forced turn's sentence)."""

    type: Literal["answer_check"] = "answer_check"
    name: str
    answer: str = ""
    outcome: str = ""
    lookups: list[str] = Field(default_factory=list)


class ContextStats(RunRecord):
    """Per-context access counters, returned by the worker at the end of a run."""

    type: Literal["context_stats"] = "context_stats"
    contexts: list[ContextAccess] = Field(default_factory=list)


class Cell(Record):
    """A cell typed by a person in a session (not by the model). ``run_id`` is None between
    questions (a person's cell may be outside any run)."""

    type: Literal["cell"] = "cell"
    run_id: str | None = None
    parent_id: str | None = None
    depth: int = 0
    session_id: str | None = None
    turn: int = 0
    code: str = ""
    output: CellOutput = Field(default_factory=CellOutput)


class WorkerWait(Record):
    """Time spent waiting for a worker from the process's pool (``run_id`` None when a
    session waited before any run)."""

    type: Literal["worker_wait"] = "worker_wait"
    run_id: str | None = None
    parent_id: str | None = None
    depth: int = 0
    session_id: str | None = None
    waited_s: float = 0.0
    pool_size: int | None = None
    detail: str | None = None


class RunEnd(RunRecord):
    """``usage``: the whole tree's so far, by model; ``run_usage``: this run's own calls
    (None in schema 1, which did not record it). ``dropped_events`` / ``dropped_bytes``:
    the run's events the writer did not write, past the caps of ``hostwrites``."""

    type: Literal["run_end"] = "run_end"
    answer: str | None = None
    error: str | None = None
    error_type: str | None = None
    iterations: int = 0
    usage: dict[str, Usage] = Field(default_factory=dict)
    run_usage: dict[str, Usage] | None = None
    duration_s: float | None = None
    dropped_events: int = 0
    dropped_bytes: int = 0


class Models(Record):
    """A session switched its root model and/or sub-model (later questions use these)."""

    type: Literal["models"] = "models"
    session_id: str | None = None
    model: str
    sub_model: str


class SessionEnd(Record):
    type: Literal["session_end"] = "session_end"
    session_id: str | None = None
    usage: dict[str, Usage] = Field(default_factory=dict)
    questions: int = 0


class InvalidEvent(Record):
    """What the writer records in place of an event that failed validation: its type, the
    errors, and the event itself as far as it could be made JSON."""

    type: Literal["invalid_event"] = "invalid_event"
    of_type: str | None = None
    errors: list[str] = Field(default_factory=list)
    event: dict[str, Any] = Field(default_factory=dict)


class UnknownEvent(Record):
    """An event of a type this version does not know (kept as it is; renderers skip it)."""


#: Every event type this version knows, by its ``type``.
EVENT_TYPES: dict[str, type[Record]] = {
    cls.model_fields["type"].default: cls
    for cls in (TraceStart, RunStart, SystemPrompt, Iteration, SubCall, ToolCall, AssistShown, AnswerCheck, ContextStats,
                Cell, WorkerWait, RunEnd, Models, SessionEnd, InvalidEvent)
}


def parse_event(data: dict[str, Any]) -> Record:
    """The typed record of one event dict (raises pydantic's ``ValidationError`` if invalid).

    A type this version does not know gives an ``UnknownEvent`` holding every field.
    """
    cls = EVENT_TYPES.get(data.get("type"))  # type: ignore[arg-type]
    return (cls or UnknownEvent).model_validate(data)
