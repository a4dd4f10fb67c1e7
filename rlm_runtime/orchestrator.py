"""The RLM loop: prompt a model to write code against context handles, run it, repeat.

Each turn the model's reply is parsed for ```python (or ```repl) blocks; each block is
checked and run in the session's sandbox; the (truncated) output goes back as the next user
turn, until code calls FINAL. Small models get a forgiving harness: generation may stop at
the closing fence, FINAL(...) written in prose counts when there is no code, a reply with
neither is re-prompted once, and the run stops after too many failing cells in a row.
After ``max_iterations`` one forced "answer now" turn is made.

Sub-calls reach the host through the sandbox's RPC channel: ``llm_query``,
``llm_query_batched`` (concurrent, capped by the governor) and ``rlm_query`` (a child RLM at
depth+1 with its own worker, a plain call at the depth limit). One ``Budget`` covers the
whole tree.
"""

from __future__ import annotations

import asyncio
import re
import textwrap
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rlm_runtime import brain, errors
from rlm_runtime.budget import Budget, Governor, RunLimits, Slots
from rlm_runtime.config import Paths, paths_from_env
from rlm_runtime.context import ContextHandle, CorpusHandle, open_context
from rlm_runtime.errors import BudgetExceeded, HostCallError, LLMError, RLMError
from rlm_runtime.llm import LLMClient, make_client
from rlm_runtime.llm.base import Message
from rlm_runtime.sandbox import CellLimits, Policy, Sandbox, load_policy
from rlm_runtime.trajectory import TraceWriter

_FENCE = re.compile(r"^[ \t]*```+[ \t]*([\w+-]*)")
_CODE_TAGS = {"", "python", "py", "python3", "repl"}
_PROSE_FINAL = re.compile(r"FINAL\(")
_PROSE_FINAL_VAR = re.compile(r"FINAL_VAR\(\s*['\"]?([A-Za-z_]\w*)['\"]?\s*\)")

Event = dict[str, Any]


@dataclass
class RunResult:
    """What a run produced. ``answer`` is None when it failed; ``error`` then says why."""

    answer: str | None
    usage: dict[str, dict[str, Any]] = field(default_factory=dict)
    iterations: int = 0
    max_depth_reached: int = 0
    trajectory: str | None = None
    error: str | None = None
    error_type: str | None = None
    partial: str | None = None
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_code_blocks(text: str) -> list[str]:
    """Code of every python/repl fenced block, in order (a trailing unclosed block counts).

    Fences are read line by line, so the closing fence of another language's block is never
    taken for an opening one. Small models are forgiven: an opening fence after prose on the
    same line, a closing fence glued to the last code line, and indented blocks.
    """
    blocks: list[str] = []
    tag: str | None = None
    body: list[str] = []

    def close() -> None:
        code = textwrap.dedent("\n".join(body))
        if tag in _CODE_TAGS and code.strip():
            blocks.append(code.strip("\n"))

    for line in text.splitlines():
        if tag is None:
            at = line.find("```")
            if at >= 0:
                opener = _FENCE.match(line[at:])
                tag, body = (opener.group(1).lower() if opener else ""), []
        elif _FENCE.match(line) and not _FENCE.match(line).group(1):  # type: ignore[union-attr]
            close()
            tag = None
        elif line.rstrip().endswith("```"):
            body.append(line.rstrip()[:-3])
            close()
            tag = None
        else:
            body.append(line)
    if tag is not None:
        close()
    return blocks


#: A reply without code, written twice in a row after a re-prompt, is taken as the answer up to this size.
_INSISTED_CHARS = 500

#: What small models write inside FINAL(...) when they copy an instruction instead of answering.
_PLACEHOLDERS = frozenset({"answer", "the answer", "your answer", "final answer", "result", "value", "..."})


def _prose_final_arg(text: str) -> tuple[str, bool] | None:
    """The text inside the last FINAL(...) written outside code, and whether it was quoted."""
    starts = [m.end() for m in _PROSE_FINAL.finditer(text)]
    if not starts:
        return None
    start = starts[-1]
    depth, quote, i = 1, "", start
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                break
        i += 1
    inner = text[start:i].strip()
    if len(inner) >= 2 and inner[0] == inner[-1] and inner[0] in "'\"":
        return inner[1:-1].strip(), True
    return inner, False


def prose_final(text: str) -> str | None:
    """The answer of a FINAL(...) written outside code, if any (the last one wins).

    A placeholder copied from the instructions (``FINAL(answer)``, ``FINAL(your answer)``) is
    no answer."""
    found = _prose_final_arg(text)
    if found is None or not found[0]:
        return None
    inner, quoted = found
    if not quoted and inner.lower().replace("_", " ") in _PLACEHOLDERS:
        return None
    return inner


def _stringify(value: Any) -> str:
    return value if isinstance(value, str) else repr(value) if not isinstance(value, (int, float)) else str(value)


class RLM:
    """A recursive language model over contexts.

    Args:
        model: the root model (a model name string, see ``rlm_runtime.llm.make_client``, or
            a client).
        sub_model: the model of ``llm_query`` and of child RLMs (default: ``model``).
        limits: the budget of a whole run (``rlm_runtime.RunLimits``; default: ``RunLimits.for_model``
            of the model, the small-model defaults for ``local:`` models).
        policy: the sandbox policy (name, path or Policy).
        cell_limits: per-cell sandbox limits (default: the policy's).
        trace: a JSONL path for trajectories, or a folder (one file per run); default
            ``$RLM_HOME/traces``; ``False`` writes none.
        on_event: called with every trajectory event as it happens (for live display).
        governor: concurrency caps (default: from this machine's memory and CPUs).
    """

    def __init__(self, model: str | LLMClient, sub_model: str | LLMClient | None = None, *,
                 limits: RunLimits | None = None, policy: str | Path | Policy = "default",
                 cell_limits: CellLimits | None = None, trace: str | Path | bool | None = None,
                 on_event: Callable[[Event], None] | None = None, governor: Governor | None = None,
                 paths: Paths | None = None) -> None:
        self.client = make_client(model)
        self.sub_client = make_client(sub_model) if sub_model is not None else self.client
        self.limits = limits or RunLimits.for_model(self.client.model)
        self.policy = load_policy(policy)
        self.cell_limits = cell_limits
        self.on_event = on_event
        self.paths = paths or paths_from_env()
        self.trace = None if trace is False else Path(trace) if isinstance(trace, (str, Path)) else self.paths.traces
        worker_mb = (cell_limits or self.policy.limits).memory_mb
        self.governor = governor or Governor.from_system(worker_mb=worker_mb, ceiling=self.limits.max_concurrency)

    # ------------------------------------------------------------------ entry points

    def run(self, query: str, context: Any = None, *, contexts: list[Any] | None = None) -> RunResult:
        """Answer ``query`` over ``context`` (one source) or ``contexts`` (several)."""
        sources = ([context] if context is not None else []) + list(contexts or [])
        handles = [open_context(s) for s in sources]
        trace_path = self._trace_path()
        writer = TraceWriter(trace_path)
        slots = Slots(self._max_concurrent_calls())
        run = _Run(self, Budget(self.limits), writer, slots)
        start = time.monotonic()
        try:
            result = run.loop(query, handles, depth=0, parent_id=None)
        finally:
            writer.close()
        result.trajectory = str(trace_path) if trace_path else None
        result.usage = run.budget.usage()
        result.max_depth_reached = run.budget.max_depth_reached
        result.duration_s = time.monotonic() - start
        return result

    async def arun(self, query: str, context: Any = None, *, contexts: list[Any] | None = None) -> RunResult:
        """``run`` without blocking the event loop (it runs in a worker thread)."""
        return await asyncio.to_thread(self.run, query, context, contexts=contexts)

    def _max_concurrent_calls(self) -> int:
        """Sub-calls in flight: the governor's cap, the limit, and what the sub-model's server
        serves at once when it says (a local server's slots; more would only queue there)."""
        cap = min(self.governor.max_concurrent_calls, self.limits.max_concurrency)
        parallel = getattr(self.sub_client, "parallel", None)
        return max(1, min(cap, parallel)) if isinstance(parallel, int) and parallel > 0 else cap

    def _trace_path(self) -> Path | None:
        if self.trace is None:
            return None
        if self.trace.suffix == ".jsonl":
            return self.trace
        return self.trace / f"run-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}.jsonl"

    def close(self) -> None:
        self.client.close()
        if self.sub_client is not self.client:
            self.sub_client.close()


class _Run:
    """State shared by every RLM in one call tree: budget, trace, concurrency slots."""

    def __init__(self, rlm: RLM, budget: Budget, writer: TraceWriter, slots: Slots) -> None:
        self.rlm = rlm
        self.budget = budget
        self.writer = writer
        self.slots = slots
        self.limits = rlm.limits

    # --------------------------------------------------------------------- events

    def emit(self, event: Event) -> None:
        event.setdefault("t", time.time())
        self.writer.emit(event)
        if self.rlm.on_event is not None:
            try:
                self.rlm.on_event(event)
            except Exception:  # a display callback must not break a run
                pass

    def prompt(self, name: str, **values: object) -> str:
        return brain.prompt(name, self.rlm.paths.brain_dirs, **values)

    # ---------------------------------------------------------------- model calls

    def call(self, client: LLMClient, messages: list[Message], *, code: bool) -> Any:
        """One budgeted model call; the reservation covers the worst case while in flight."""
        # Ask for no more than the tree has left, so a small total budget still allows calls.
        max_out = max(1, min(self.limits.max_output_tokens_per_call, self.budget.output_tokens_left()))
        prompt_tokens = sum(client.count_tokens(m["content"]) for m in messages)
        with self.budget.reserve(prompt_tokens, max_out):
            completion = client.complete(messages, max_tokens=max_out, stop_after_code_block=code)
            # Settled while still reserved, so no other call sees neither figure.
            self.budget.settle(client.model, completion.usage)
        return completion

    # ------------------------------------------------------------------- the loop

    def loop(self, query: str, handles: list[Any], depth: int, parent_id: str | None) -> RunResult:
        run_id = uuid.uuid4().hex[:8]
        self.budget.note_depth(depth)
        self.emit({"type": "run_start", "run_id": run_id, "parent_id": parent_id, "depth": depth,
                   "model": self.rlm.client.model if depth == 0 else self.rlm.sub_client.model,
                   "sub_model": self.rlm.sub_client.model, "query": query,
                   "limits": self.limits.model_dump(), "contexts": [h.name for h in handles]})
        client = self.rlm.client if depth == 0 else self.rlm.sub_client
        began = time.monotonic()
        state = _LoopState(parent_id=parent_id)
        result: RunResult
        try:
            with Sandbox(self.rlm.policy, self.rlm.cell_limits, contexts=handles,
                         host_functions=self._host_functions(run_id, depth, state)) as sandbox:
                result = self._turns(query, handles, client, sandbox, run_id, depth, state)
        except BudgetExceeded as e:
            e.partial = e.partial or state.partial
            result = RunResult(None, error=str(e), error_type="BudgetExceeded", partial=e.partial,
                               iterations=state.iterations)
        except LLMError as e:
            result = RunResult(None, error=str(e), error_type=type(e).__name__, partial=state.partial,
                               iterations=state.iterations)
        self.emit({"type": "run_end", "run_id": run_id, "parent_id": parent_id, "depth": depth, "answer": result.answer,
                   "error": result.error, "error_type": result.error_type, "iterations": result.iterations,
                   "usage": self.budget.usage(), "duration_s": time.monotonic() - began})
        return result

    def _turns(self, query: str, handles: list[Any], client: LLMClient, sandbox: Sandbox, run_id: str, depth: int,
               state: _LoopState) -> RunResult:
        lim = self.limits
        messages: list[Message] = [
            {"role": "system", "content": self._system_prompt(handles, depth, sandbox)},
            {"role": "user", "content": self.prompt("first_user", query=query)},
        ]
        reprompted = False
        last_prose = ""
        errors_in_a_row = 0
        while state.iterations < lim.max_iterations:
            state.iterations += 1
            self.budget.check_time()
            began = time.monotonic()
            completion = self.call(client, messages, code=True)
            reply = completion.text
            messages.append({"role": "assistant", "content": reply})
            blocks = parse_code_blocks(reply)
            outputs: list[dict[str, Any]] = []
            answer: str | None = None
            feedback: str
            if blocks:
                reprompted = False
                answer, feedback, failed = self._run_blocks(sandbox, blocks, outputs, state)
                errors_in_a_row = errors_in_a_row + 1 if failed else 0
                if blocks == state.last_blocks:
                    feedback += "\nnote: this is the same code as your previous turn; try something different."
                state.last_blocks = blocks
            else:
                answer = self._prose_answer(reply, sandbox)
                feedback = self.prompt("reprompt")
                said = reply.strip()
                if answer is None and reprompted and said == last_prose and 0 < len(said) <= _INSISTED_CHARS:
                    # Re-prompted, the model wrote the same short prose again: that is its answer.
                    answer = said
                if answer is None:
                    errors_in_a_row += 0 if not reprompted else 1
                    reprompted = True
                last_prose = said
            self.emit({"type": "iteration", "run_id": run_id, "parent_id": state.parent_id, "depth": depth,
                       "iteration": state.iterations,
                       "prompt_chars": sum(len(m["content"]) for m in messages[:-1]), "response": reply,
                       "code_blocks": blocks, "outputs": outputs, "duration_s": time.monotonic() - began,
                       "usage": completion.usage.to_dict(), "finish_reason": completion.finish_reason})
            if answer is not None:  # an answer given after a refused sub-call still counts
                return RunResult(answer, iterations=state.iterations)
            if state.budget_error is not None:
                raise state.budget_error
            if errors_in_a_row >= lim.max_consecutive_errors:
                return RunResult(None, error=f"stopped after {errors_in_a_row} failing turns in a row",
                                 error_type="TooManyErrors", partial=state.partial, iterations=state.iterations)
            if blocks:
                feedback = self.prompt("feedback", iteration=state.iterations, max_iterations=lim.max_iterations,
                                       output=feedback)
            messages.append({"role": "user", "content": feedback})
            messages = self._trim(messages)
        return self._forced_answer(messages, client, sandbox, run_id, depth, state)

    def _run_blocks(self, sandbox: Sandbox, blocks: list[str], outputs: list[dict[str, Any]],
                    state: _LoopState) -> tuple[str | None, str, bool]:
        """Run each block; return (answer or None, feedback text, whether the turn failed)."""
        shown: list[str] = []
        failed = False
        for code in blocks:
            if not any(line.strip() and not line.strip().startswith("#") for line in code.splitlines()):
                shown.append("note: your code block holds only comments. Write Python that calls grep(...), "
                             "or FINAL(answer) if you know it.")
                failed = True
                continue
            result = sandbox.execute(code)
            outputs.append({"stdout": result.stdout, "error": result.error, "error_type": result.error_type,
                            "duration_s": result.duration_s, "worker_restarted": result.worker_restarted,
                            "warnings": result.warnings})
            if result.stdout.strip():
                state.partial = result.stdout.strip()[-2000:]
            text = result.stdout
            if result.error:
                text += ("\n" if text and not text.endswith("\n") else "") + result.error
                failed = True
                if result.error_type == "PolicyViolation" and "SyntaxError" in result.error:
                    text += '\nnote: a code block must be Python. To give your answer, write FINAL("your answer").'
            for warning in result.warnings:
                text += f"\nnote: {warning}"
            shown.append(text.strip() or "(no output)")
            if result.has_final:
                return _stringify(result.final), "", False
            if state.budget_error is not None:
                break
            if result.error:
                break  # later blocks usually depend on this one
        feedback = "\n\n".join(shown)
        cap = self.limits.feedback_chars
        if len(feedback) > cap:
            feedback = feedback[: cap // 2] + f"\n... [{len(feedback) - cap} characters cut] ...\n" + feedback[-cap // 2:]
        return None, feedback, failed

    def _prose_answer(self, reply: str, sandbox: Sandbox) -> str | None:
        var = _PROSE_FINAL_VAR.search(reply)
        if var:
            result = sandbox.execute(f"FINAL_VAR({var.group(1)!r})")
            if result.has_final:
                return _stringify(result.final)
        found = _prose_final_arg(reply)
        if found is not None and found[0] and not found[1]:
            # Unquoted: it may name a variable or be an expression (FINAL(room), FINAL(hits[0])).
            # Evaluate it in the sandbox; if that fails it is literal text.
            try:
                compile(found[0], "<prose>", "eval")
            except SyntaxError:
                pass
            else:
                result = sandbox.execute(f"FINAL({found[0]})")
                if result.has_final:
                    return _stringify(result.final)
        return prose_final(reply)

    def _forced_answer(self, messages: list[Message], client: LLMClient, sandbox: Sandbox, run_id: str, depth: int,
                       state: _LoopState) -> RunResult:
        messages.append({"role": "user", "content": self.prompt("force_answer")})
        completion = self.call(client, messages, code=True)
        reply = completion.text
        blocks = parse_code_blocks(reply)
        outputs: list[dict[str, Any]] = []
        answer = None
        if blocks:
            answer, _, _ = self._run_blocks(sandbox, blocks, outputs, state)
        if answer is None:
            answer = self._prose_answer(reply, sandbox)
        self.emit({"type": "iteration", "run_id": run_id, "parent_id": state.parent_id, "depth": depth,
                   "iteration": state.iterations + 1,
                   "forced": True, "response": reply, "code_blocks": blocks, "outputs": outputs,
                   "usage": completion.usage.to_dict(), "duration_s": completion.duration_s})
        if answer is not None:
            return RunResult(answer, iterations=state.iterations + 1)
        return RunResult(None, error=f"no FINAL answer after {self.limits.max_iterations} iterations and a forced turn",
                         error_type="NoAnswer", partial=state.partial, iterations=state.iterations + 1)

    def _trim(self, messages: list[Message]) -> list[Message]:
        """Keep the system prompt, the question and as many recent turns as fit."""
        budget = 24 * self.limits.feedback_chars
        head, tail = messages[:2], messages[2:]
        while len(tail) > 2 and sum(len(m["content"]) for m in head + tail) > budget:
            tail = tail[2:]
        return head + tail

    def _system_prompt(self, handles: list[Any], depth: int, sandbox: Sandbox) -> str:
        summaries = []
        for k, h in enumerate(handles):
            name = "context" if k == 0 else f"contexts[{k}]"
            try:
                summary = h.probe().summary(brief=True)
            except RLMError as e:
                summary = f"{h.name}: could not be probed ({e})"
            summaries.append(f"{name} holds {summary}" if len(handles) > 1 else summary)
        if len(handles) > 1:
            summaries.append("`contexts` is the list of all of them; grep(pattern, handle=contexts[k]) searches one; "
                             "`context` is contexts[0].")
        rlm_line = ("- rlm_query(prompt, context=text): give a sub-question and a long piece of text to a helper that\n"
                    "  works like you (with code); returns its answer.\n") if depth < self.limits.max_depth else ""
        return self.prompt(
            "system",
            contexts="\n".join(summaries) or "(no context: answer from the question alone)",
            sub_call_chars=self.limits.sub_call_max_chars,
            rlm_query_line=rlm_line,
            imports=", ".join(self.rlm.policy.allowed_imports),
            output_chars=sandbox.limits.output_chars,
            max_iterations=self.limits.max_iterations,
        )

    # ------------------------------------------------------------- host functions

    def _host_functions(self, run_id: str, depth: int, state: _LoopState) -> dict[str, Callable[..., Any]]:
        def llm_query(prompt: str) -> str:
            """Ask the sub-model; returns its reply."""
            return self._sub_call("llm_query", prompt, run_id, depth, state)

        def llm_query_batched(prompts: list[str]) -> list[str]:
            """Ask many prompts concurrently; a failed prompt yields "[ERROR] ..." in its place."""
            if not isinstance(prompts, list) or not all(isinstance(p, str) for p in prompts):
                raise HostCallError("llm_query_batched takes a list of str")
            if not prompts:
                return []

            def one(p: str) -> str:
                try:
                    return self._sub_call("llm_query", p, run_id, depth, state)
                except BudgetExceeded as e:
                    return f"[ERROR] budget: {e}"
                except (RLMError, Exception) as e:
                    return f"[ERROR] {type(e).__name__}: {e}"

            with ThreadPoolExecutor(max_workers=min(self.slots.size, len(prompts))) as pool:
                return list(pool.map(one, prompts))

        def rlm_query(prompt: str, context: Any = None) -> str:
            """A child RLM over ``context`` (str or list of str) at depth+1."""
            if not isinstance(prompt, str):
                raise HostCallError("rlm_query takes a prompt str")
            if depth + 1 > self.limits.max_depth:
                text = prompt if context is None else self.prompt("sub_context", prompt=prompt, context=_as_text(context))
                return self._sub_call("rlm_query (plain call at max depth)", text, run_id, depth, state)
            handles = [] if context is None else [_child_context(context)]
            child = self.loop(prompt, handles, depth + 1, run_id)
            if child.answer is None:
                if child.error_type == "BudgetExceeded":
                    state.budget_error = BudgetExceeded(child.error or "budget exhausted", limit="child",
                                                        partial=state.partial)
                raise HostCallError(f"rlm_query found no answer: {child.error}")
            return child.answer

        return {"llm_query": llm_query, "llm_query_batched": llm_query_batched, "rlm_query": rlm_query}

    def _sub_call(self, kind: str, prompt: str, run_id: str, depth: int, state: _LoopState) -> str:
        if not isinstance(prompt, str):
            raise HostCallError(f"{kind} takes a str prompt, not {type(prompt).__name__}")
        cap = self.limits.sub_call_max_chars
        if len(prompt) > cap:
            prompt = prompt[:cap] + f"\n[... {len(prompt) - cap} characters cut: the sub-call limit is {cap}]"
        client = self.rlm.sub_client
        began = time.monotonic()
        error = None
        text = None
        usage: dict[str, Any] = {}
        try:
            with self.slots.hold():
                completion = self.call(client, [{"role": "user", "content": prompt}], code=False)
            text = completion.text
            usage = completion.usage.to_dict()
            return text
        except BudgetExceeded as e:
            state.budget_error = state.budget_error or e
            error = str(e)
            raise HostCallError(f"budget exhausted: {e}") from e
        except LLMError as e:
            error = str(e)
            raise HostCallError(f"{kind} failed: {e}") from e
        finally:
            self.emit({"type": "sub_call", "run_id": run_id, "parent_id": state.parent_id, "depth": depth, "kind": kind,
                       "model": client.model,
                       "prompt": prompt[:4000], "response": None if text is None else text[:4000], "error": error,
                       "usage": usage if error is None else {}, "duration_s": time.monotonic() - began})


@dataclass
class _LoopState:
    parent_id: str | None = None
    last_blocks: list[str] = field(default_factory=list)
    iterations: int = 0
    partial: str | None = None
    budget_error: BudgetExceeded | None = None


def _as_text(context: Any) -> str:
    if isinstance(context, str):
        return context
    if isinstance(context, list):
        return "\n\n".join(str(c) for c in context)
    raise HostCallError(f"context must be a str or a list of str, not {type(context).__name__}")


def _child_context(context: Any) -> ContextHandle | CorpusHandle:
    if isinstance(context, str):
        return open_context(context, as_text=True, name="sub_context")
    if isinstance(context, list) and all(isinstance(c, str) for c in context):
        return CorpusHandle.from_items([open_context(c, as_text=True, name=f"doc{i}") for i, c in enumerate(context)])
    raise HostCallError(f"context must be a str or a list of str, not {type(context).__name__}")


def retrieve(query: str, context: Any = None, *, model: str | LLMClient | None = None,
             contexts: list[Any] | None = None, **options: Any) -> str:
    """Answer ``query`` over the given contexts and return the answer text.

    For programs: raises ``BudgetExceeded`` (with ``.partial``) or another ``RLMError`` when
    no answer was found. ``options`` go to ``RLM`` (sub_model, limits, policy, trace...).
    """
    from rlm_runtime.config import default_model

    rlm = RLM(model or default_model()[0], **options)
    try:
        result = rlm.run(query, context, contexts=contexts)
    finally:
        rlm.close()
    if result.answer is None:
        if result.error_type == "BudgetExceeded":
            raise BudgetExceeded(result.error or "budget exhausted", limit="run", partial=result.partial)
        kind = getattr(errors, result.error_type or "", None)
        if isinstance(kind, type) and issubclass(kind, RLMError) and kind is not BudgetExceeded:
            raise kind(result.error or "no answer")
        raise RLMError(result.error or "no answer")
    return result.answer
