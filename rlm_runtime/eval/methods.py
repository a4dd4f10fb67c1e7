"""The methods ``rlm eval`` compares on the same tasks.

* ``rlm``: the runtime: one ``Session`` per task (a fresh worker), with the model, sub-model,
  profile and limits of the run; its trajectory goes to ``DIR/trajectories/``.
* ``rlm-nosub``: the same without sub-calls (``RunLimits.sub_calls`` off, ``max_depth=0``):
  ``llm_query`` / ``llm_query_batched`` / ``rlm_query`` are not in the prompt, and a cell
  that calls them anyway gets an error.
* ``rlm-words``: the same with ``search_chunks`` ranking by words alone (BM25), never by
  meaning: what search by meaning adds to answers, measured on the same tasks.
* ``direct``: the same model with the context pasted into one prompt
  (``brain/prompts/eval/direct.md``), cut to the model's window (``windows.py``) from the end,
  as a plain long-context call would be.
* ``rag``: the question's top chunks from ``ChunkSearch`` (the ``search_chunks`` index) pasted
  into one prompt (``brain/prompts/eval/rag.md``), as many as the window takes.

Every method returns an ``Outcome``: the answer (None on failure), usage per model, iterations,
depth reached, trajectory, the error. A method never raises for a failed task.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlm_runtime.budget import RunLimits, SessionLimits
from rlm_runtime.config import Paths
from rlm_runtime.errors import BudgetExceeded, Cancelled, ConfigError, RLMError
from rlm_runtime.llm.base import Completion, Usage

METHODS = ("rlm", "rlm-nosub", "rlm-words", "direct", "rag")
#: Tokens kept free for the reply of a direct or rag call, and a margin for the chat template.
REPLY_TOKENS = 512
MARGIN_TOKENS = 96
#: The share of the room a ``local:`` model's text may fill: its tokenizer (Qwen's) counts
#: more tokens than the runtime's counter (tiktoken) on the same text (Python source: 35,731
#: against ~32,100, so the server refused a direct prompt cut to a 32K window).
LOCAL_TOKENIZER_SHARE = 0.88


@dataclass
class Outcome:
    """What one method did on one task."""

    answer: str | None
    usage: dict[str, dict[str, Any]] = field(default_factory=dict)
    iterations: int = 0
    depth: int = 0
    trajectory: str | None = None
    error: str | None = None
    error_type: str | None = None
    #: The budget limit a ``BudgetExceeded`` hit (``session.max_cost_usd`` is the batch's).
    limit: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: What pasting the task's whole context into one prompt would cost, in the tokens the
    #: runtime counts for its models (``load_all_tokens``), and the seconds the probes took.
    load_all_tokens: int | None = None
    probe_s: float | None = None


@dataclass(frozen=True)
class MethodSettings:
    """What every method of a run shares.

    Args:
        model / sub_model: model names (``make_client``).
        limits: the limits of an ``rlm`` run (already resolved for the model and profile).
        profile: a profile name or path (its prompt addendum and temperature).
        policy: the sandbox policy.
        window: the model's window in tokens (``windows.context_window``).
        rag_k: chunks the ``rag`` method asks the search for.
        trace_dir: where trajectories go.
        paths: ``RLM_HOME`` and friends.
    """

    model: str
    sub_model: str | None
    limits: RunLimits
    profile: str | None
    policy: str
    window: int
    rag_k: int
    trace_dir: Path
    paths: Paths


class Cancel:
    """A task's stop switch: the runner sets it on Ctrl-C; a method registers what stops it."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self._hooks: list[Callable[[], Any]] = []
        self._lock = threading.Lock()

    def on_cancel(self, hook: Callable[[], Any]) -> None:
        with self._lock:
            self._hooks.append(hook)
            fire = self.event.is_set()
        if fire:
            hook()

    def cancel(self) -> None:
        with self._lock:
            self.event.set()
            hooks = list(self._hooks)
        for hook in hooks:
            try:
                hook()
            except Exception:  # stopping is best effort
                pass


@dataclass(frozen=True)
class Job:
    """One task for one method, as the runner hands it to the method."""

    task_id: str
    question: str
    sources: list[Any]  # paths, or one inline text
    memory: Any  # True, a store path, or None
    trace: Path | None
    cost_cap: float | None  # dollars this task may spend (the batch's remainder), None: no cap
    cancel: Cancel


def run_method(name: str, job: Job, settings: MethodSettings) -> Outcome:
    """Run method ``name`` on ``job``; failures come back in the ``Outcome``."""
    try:
        if name in ("rlm", "rlm-nosub", "rlm-words"):
            return _rlm(job, settings, nosub=name == "rlm-nosub", words=name == "rlm-words")
        if name == "direct":
            return _direct(job, settings)
        if name == "rag":
            return _rag(job, settings)
    except RLMError as e:
        return Outcome(None, error=str(e), error_type=type(e).__name__, limit=getattr(e, "limit", None))
    raise ConfigError(f"unknown method {name!r}; methods: {', '.join(METHODS)}")


# ----------------------------------------------------------------------------- rlm


def _rlm(job: Job, s: MethodSettings, *, nosub: bool = False, words: bool = False) -> Outcome:
    from rlm_runtime.context import open_context
    from rlm_runtime.session import Session

    contexts = [open_context(x, as_text=True, name="context") if isinstance(x, str) else x for x in job.sources]
    limits = s.limits.model_copy(update={"max_depth": 0, "sub_calls": False}) if nosub else s.limits
    session_limits = SessionLimits(max_cost_usd=max(0.0, job.cost_cap)) if job.cost_cap is not None else None
    if job.trace is not None:
        job.trace.unlink(missing_ok=True)  # a run killed before left a partial one
    session = Session(s.model, s.sub_model, contexts=contexts, limits=limits, session_limits=session_limits, policy=s.policy,
                      trace=job.trace if job.trace is not None else False, paths=s.paths, memory=job.memory,
                      profile=s.profile)
    if words:
        session.search.mode = "bm25"
    try:
        job.cancel.on_cancel(session.cancel)
        if job.cancel.event.is_set():
            return Outcome(None, error="cancelled before it started", error_type="Cancelled")
        load_all = load_all_tokens(session.contexts, session.memory)
        result = session.ask(job.question)
    finally:
        session.close()
    limit = getattr(result.exception, "limit", None)
    return Outcome(result.answer, usage=result.usage, iterations=result.iterations, depth=result.max_depth_reached,
                   trajectory=result.trajectory, error=result.error, error_type=result.error_type, limit=limit,
                   load_all_tokens=load_all, probe_s=round(result.probe_s, 3))


def load_all_tokens(handles: list[Any], memory: Any = None) -> int | None:
    """The tokens of every context's whole text (a memory store's: all its chunks'), counted as
    the runtime counts a prompt's (tiktoken; sampled past 2 MB: ``TokenCount``); None when one
    cannot be counted."""
    total = 0
    try:
        for handle in handles:
            total += int(handle.n_tokens)
        if memory is not None:
            total += int(memory.stats().tokens)
    except (RLMError, OSError, ValueError, AttributeError):
        return None
    return total


# ----------------------------------------------------------------------------- direct and rag


def context_text(sources: list[Any], limit: int | None = None) -> tuple[str, int]:
    """The text of a task's contexts, and its whole length in characters: files as they are,
    folders as their regular files (sorted, each headed ``=== path ===``; a symlink in a folder
    is not followed, at the file or at any folder on its way, even one swapped in after the
    folder was listed: it could point out of the folder the task file was confined to),
    inline text as it is, sources joined by a blank line. Only the first ``limit``
    characters are kept; the rest is read in slices and counted, so a huge file costs time,
    not memory."""
    import codecs
    import stat

    from rlm_runtime.context.beneath import Root, open_beneath, walk_beneath
    from rlm_runtime.errors import SourceRefused
    from rlm_runtime.eval.confine import open_regular

    parts: list[str] = []
    kept = total = 0

    def add(text: str) -> None:
        nonlocal kept, total
        total += len(text)
        room = len(text) if limit is None else max(0, limit - kept)
        if room:
            parts.append(text[:room])
            kept += min(room, len(text))

    def read(fd: int) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        with open(fd, "rb") as f:
            while chunk := f.read(1 << 20):
                add(decoder.decode(chunk))
        add(decoder.decode(b"", final=True))

    for n, source in enumerate(sources):
        if n:
            add("\n\n")
        if isinstance(source, Path):
            if source.is_dir() and not source.is_symlink():
                try:
                    root = Root.of(source)
                    files = sorted((rel for rel, st in walk_beneath(root) if stat.S_ISREG(st.st_mode)),
                                   key=lambda rel: rel.split(os.sep))  # as the Paths sorted before
                    for i, rel in enumerate(files):
                        add(("\n\n" if i else "") + f"=== {Path(rel).as_posix()} ===\n")
                        read(open_beneath(root, rel))
                except OSError as e:
                    why = e.strerror or str(e)
                    named = str(e.filename or "")
                    where = f" ({named})" if named and named != str(source) and named not in why else ""
                    raise SourceRefused(f"cannot read {source}: {why}{where}") from e
            else:
                read(open_regular(source))
        else:
            add(str(source))
    return "".join(parts), total


def _one_call(job: Job, s: MethodSettings, prompt: str) -> tuple[Completion, Any]:
    from rlm_runtime.llm import make_client
    from rlm_runtime.llm.base import stoppable

    if job.cost_cap is not None and job.cost_cap <= 0:
        from rlm_runtime.errors import BudgetExceeded

        raise BudgetExceeded("the batch's cost budget is spent", limit="session.max_cost_usd")
    client = make_client(s.model)
    try:
        with stoppable(job.cancel.event):
            completion = client.complete([{"role": "user", "content": prompt}], max_tokens=REPLY_TOKENS)
        if completion.finish_reason == "cancelled" or job.cancel.event.is_set():
            from rlm_runtime.errors import Cancelled

            raise Cancelled("the call was cancelled")
        return completion, client
    finally:
        client.close()


def _usage(model: str, usage: Usage) -> dict[str, dict[str, Any]]:
    return {model: usage.to_dict()}


def _direct(job: Job, s: MethodSettings) -> Outcome:
    from rlm_runtime import brain
    from rlm_runtime.llm.tokens import count_tokens, cut_to_tokens

    if job.memory is not None:
        raise ConfigError("the direct method has no text to paste for a memory: context")
    dirs = s.paths.brain_dirs
    # The frame is measured with the longest numbers the cut note can hold.
    frame = brain.prompt("eval/direct", dirs, context="", question=job.question,
                         cut_note=brain.prompt("eval/direct_cut", dirs, kept=10**15, total=10**15))
    room = max(0, s.window - count_tokens(frame) - REPLY_TOKENS - MARGIN_TOKENS)
    if s.model.startswith("local:"):
        room = int(room * LOCAL_TOKENIZER_SHARE)
    # Counting 10 MB of text costs seconds, and a context may not fit in memory: keep
    # generously by characters first (no token is longer than 16 characters in practice),
    # then cut exactly by tokens.
    text, total = context_text(job.sources, limit=room * 16)
    if count_tokens(text) > room:
        text = cut_to_tokens(text, room)
    cut = len(text) < total
    note = brain.prompt("eval/direct_cut", dirs, kept=len(text), total=total) if cut else ""
    prompt = brain.prompt("eval/direct", dirs, context=text, question=job.question, cut_note=note)
    completion, client = _one_call(job, s, prompt)
    return Outcome(completion.text.strip(), usage=_usage(client.model, completion.usage), iterations=1,
                   extra={"context_chars": total, "pasted_chars": len(text), "cut": cut, "window": s.window})


def _index_stop(job: Job, max_wall_s: float) -> Callable[[], None]:
    """What building the rag index checks between files and 1 MB windows: Ctrl-C, and the
    run's wall-clock limit (a task's contexts can be as large as its author likes)."""
    deadline = time.monotonic() + max_wall_s

    def stop() -> None:
        if job.cancel.event.is_set():
            raise Cancelled("cancelled while indexing the task's contexts")
        if time.monotonic() > deadline:
            raise BudgetExceeded(f"wall-clock limit of {max_wall_s:g}s reached while indexing the task's contexts",
                                 limit="max_wall_s")

    return stop


def _rag(job: Job, s: MethodSettings) -> Outcome:
    from rlm_runtime import brain
    from rlm_runtime.context import open_context
    from rlm_runtime.llm.tokens import count_tokens
    from rlm_runtime.searching import ChunkSearch

    store = None
    if job.memory is not None:
        from rlm_runtime.memory.store import MemoryStore, default_store_path

        store = MemoryStore(default_store_path(s.paths) if job.memory is True else Path(job.memory))
    search = ChunkSearch(s.paths.home / "index", store)
    try:
        search.set_contexts([open_context(src, as_text=not isinstance(src, Path)) for src in job.sources])
        hits = search.search(job.question, k=s.rag_k, stop=_index_stop(job, s.limits.max_wall_s))
        dirs = s.paths.brain_dirs
        room = max(0, s.window - count_tokens(brain.prompt("eval/rag", dirs, passages="", question=job.question))
                   - REPLY_TOKENS - MARGIN_TOKENS)
        passages: list[str] = []
        used = 0
        for n, hit in enumerate(hits, 1):
            body = f"[{n}] {search.read(hit['id'])}"
            cost = count_tokens(body)
            if used + cost > room:
                break
            passages.append(body)
            used += cost
    finally:
        search.close()
        if store is not None:
            store.close()
    text = "\n\n".join(passages) if passages else "(the search found nothing)"
    prompt = brain.prompt("eval/rag", dirs, passages=text, question=job.question)
    completion, client = _one_call(job, s, prompt)
    return Outcome(completion.text.strip(), usage=_usage(client.model, completion.usage), iterations=1,
                   extra={"passages": len(passages), "hits": len(hits), "window": s.window})
