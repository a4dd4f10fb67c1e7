"""The turn loop: prompt a model to write code against context handles, run it, repeat.

Each turn the model's reply is parsed for code blocks (``harness``); each block is checked
and run in the run's sandbox; the output goes back as the next user turn, until code calls
FINAL. FINAL(...) written in prose counts when there is no code, a reply with neither is
asked for code, and the run stops after too many failing turns in a row (failing in prose,
with no code, it first gets the forced turn). After ``max_iterations`` one forced "answer
now" turn is made. That is the plain loop. Everything else done to a reply or an answer is
one of the run's assists (``rlm_runtime.assist``, the names ``RunLimits.assists`` selects),
called at fixed points: a reply before its code runs, a cell after it ran, an answer before
it is taken, the turns' end. ``conversation.py`` keeps the messages.

``Tree`` is what every run of one question shares (budget, trace, sub-call slots, the
worker-pool key); ``Run`` is one conversation with one model over one sandbox. A session's
question is a root ``Run`` in the session's sandbox; ``rlm_query`` makes child runs with
their own sandboxes (``subcalls.py``).
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from rlm_runtime import harness, subcalls
from rlm_runtime.assist import Answer, Assists, Host, Question, Turn, names_for
from rlm_runtime.budget import Budget, Slots
from rlm_runtime.context.brief import describe
from rlm_runtime.conversation import Conversation
from rlm_runtime.errors import BudgetExceeded, Cancelled, NoAnswer, RLMError, RunCrashed, TooManyErrors
from rlm_runtime.llm.base import Completion, LLMClient, Message, Usage, listening, stoppable
from rlm_runtime.result import RunResult
from rlm_runtime.sandbox import CellResult, Sandbox
from rlm_runtime.setup import Setup

Event = dict[str, Any]

class Tree:
    """What every run of one question's call tree shares."""

    def __init__(self, setup: Setup, budget: Budget, emit: Callable[[Event], None], *, pool_key: str,
                 search: Any = None, live: Callable[[Event], None] | None = None) -> None:
        self.setup = setup
        #: The session's ``ChunkSearch`` (search_chunks / read_chunk), or None.
        self.search = search
        self.budget = budget
        self.emit = emit
        #: Where live events go (a display; never the trace): ``model_call`` before a turn's
        #: call, ``model_progress`` as a local server reads its prompt (``llm.progress``),
        #: ``model_text`` as its reply streams in, ``cell_start`` before a cell runs.
        self.live = live
        self.slots = Slots(setup.max_concurrent_calls())
        self.pool_key = pool_key
        #: The sandboxes running this tree's cells now (the session's, and children's while
        #: they run), so that ``cancel()`` can interrupt them.
        self.sandboxes: set[Sandbox] = set()

    def call(self, run: Run, client: LLMClient, messages: list[Message], *, code: bool) -> Completion:
        """One budgeted model call; the reservation covers the worst case while in flight."""
        limits = self.setup.limits
        # Ask for no more than the tree has left, so a small total budget still allows calls.
        max_out = max(1, min(limits.max_output_tokens_per_call, self.budget.output_tokens_left()))
        # What a model reads breaks lines at "\n" alone: a document's U+2028 or "\r" inside a
        # line quoted in a note or an output would start a forged line of its own.
        messages = [{**m, "content": harness.newlines_only(m["content"])} for m in messages]
        prompt_tokens = sum(client.count_tokens(m["content"]) for m in messages)
        with self.budget.reserve(prompt_tokens, max_out):
            with stoppable(self.budget.cancelled), self._shown(run, client, prompt_tokens, code):
                completion = client.complete(messages, max_tokens=max_out, stop_after_code_block=code)
            # Settled while still reserved, so no other call sees neither figure.
            self.budget.settle(client.model, completion.usage)
        run.own_usage.setdefault(client.model, Usage()).add(completion.usage)
        self.check_cancelled()  # a call cut short by cancel() ends the run here, settled
        return completion

    def _shown(self, run: Run, client: LLMClient, prompt_tokens: int, turn: bool) -> contextlib.AbstractContextManager[None]:
        """A turn's call as live events (``model_call``, ``model_progress`` reports while the
        server reads the prompt, then ``model_text`` pieces), when something displays them;
        other calls (llm_query's) are shown by their ``sub_call``."""
        live = self.live
        if live is None or not turn:
            return contextlib.nullcontext()
        where = {"run_id": run.run_id, "parent_id": run.parent_id, "depth": run.depth,
                 "iteration": run.iterations + 1 if run.forced else run.iterations, "forced": run.forced}
        live({"type": "model_call", **where, "model": client.model, "prompt_tokens": prompt_tokens, "t": time.time()})
        return listening(lambda text: live({"type": "model_text", **where, "text": text}),
                         lambda p: live({"type": "model_progress", **where, "total": p.total, "cached": p.cached,
                                         "processed": p.processed, "elapsed_ms": p.elapsed_ms}))

    def cancel(self) -> None:
        """Stop the tree from any thread: no new call starts, a streaming call stops reading,
        and the cells running in its sandboxes are interrupted."""
        self.budget.cancel()
        for sandbox in list(self.sandboxes):
            sandbox.interrupt()

    def check_cancelled(self, partial: str | None = None) -> None:
        if self.budget.cancelled.is_set():
            raise Cancelled("the run was cancelled", partial=partial)


#: Events that happen during one of a run's turns, and say which (``iteration``).
_IN_A_TURN = frozenset({"sub_call", "tool_call", "assist", "answer_check", "worker_wait"})


class Run:
    """One RLM run: a question, one model, one sandbox, until FINAL or a limit."""

    def __init__(self, tree: Tree, query: str, *, depth: int, parent_id: str | None, turn: int = 0) -> None:
        self.tree = tree
        self.query = query
        self.depth = depth
        self.parent_id = parent_id
        self.turn = turn
        #: How earlier questions over the main context found their answers (set by ``execute``).
        self.earlier = ""
        self.run_id = uuid.uuid4().hex[:8]
        self.iterations = 0
        self.partial: str | None = None
        #: What FINAL was last given, as plain data (a list stays a list): the answer's
        #: ``value`` when the answer taken is its text.
        self.final_value: Any = None
        self.budget_error: BudgetExceeded | None = None
        #: Turns in a row that failed: code that raised, or a reply without code after one.
        self.failing = 0
        #: The last turn was a reply without code and without an answer (asked for code).
        self.reprompted = False
        self.own_usage: dict[str, Usage] = {}
        #: Every code block this run executed, in order (what ``remember`` stores).
        self.cells: list[str] = []
        #: The forced turn (the turns ran out) is under way.
        self.forced = False
        #: A child run: the parent's turn that started it (its ``run_start`` says so).
        self.parent_iteration: int | None = None
        #: The assists of the run (``assist/``), made when its turns start.
        self.assists: Assists | None = None

    @property
    def client(self) -> LLMClient:
        return self.tree.setup.client if self.depth == 0 else self.tree.setup.sub_client

    def emit(self, event: Event) -> None:
        """Write an event of this run; one that happens during a turn (a sub-call, a tool
        call, an assist, a wait for a worker) carries the turn's number (``iteration``)."""
        event.update(run_id=self.run_id, parent_id=self.parent_id, depth=self.depth)
        if event["type"] in _IN_A_TURN:
            event.setdefault("iteration", self.iterations + 1 if self.forced else self.iterations)
        self.tree.emit(event)

    # ----------------------------------------------------------------- a whole run

    def execute(self, sandbox: Sandbox, table: subcalls.ToolTable, *, history: str = "", variables: str = "",
                earlier: str = "") -> RunResult:
        """Run to an answer or a failure. Every exception ends as a failed ``RunResult`` with
        the partial output and a ``run_end`` event: an ``RLMError`` as itself, any other (a
        host-side step that hostile text reached unguarded) as ``RunCrashed`` from it.
        ``earlier``: how earlier questions over the main context found their answers (its
        answer leads), said under its brief."""
        setup = self.tree.setup
        self.earlier = earlier
        self.tree.budget.note_depth(self.depth)
        began = time.monotonic()
        result: RunResult
        stats_before: list[dict[str, Any]] = []
        briefs: list[Any] = []
        probe_s = 0.0
        self.tree.sandboxes.add(sandbox)
        try:
            # Describing reads the contexts (it parses a JSON document): inside, so that what it
            # raises fails this run, not the session; run_start first whatever it did.
            try:
                probed = time.monotonic()
                briefs = _describe(sandbox.contexts, self.query, setup)
                probe_s = time.monotonic() - probed
            finally:
                self.emit({"type": "run_start", "model": self.client.model, "sub_model": setup.sub_client.model,
                           "query": self.query, "limits": setup.limits.model_dump(), "turn": self.turn,
                           "contexts": [b.to_dict() for b in briefs],
                           **({} if self.parent_iteration is None else {"parent_iteration": self.parent_iteration})})
            table.current = self.functions()
            stats_before = _context_stats(sandbox)
            sandbox.start()
            self.tree.check_cancelled()
            result = self._turns(sandbox, briefs, history, variables)
        except RLMError as e:
            if isinstance(e, (BudgetExceeded, Cancelled)):
                e.partial = e.partial or self.partial
            result = RunResult.failed(e, iterations=self.iterations, partial=self.partial)
        except Exception as e:  # not KeyboardInterrupt / SystemExit: those stop the program, as they should
            crash = RunCrashed(f"the run stopped on an unexpected {type(e).__name__}: {str(e)[:200]}", partial=self.partial)
            crash.__cause__ = e
            result = RunResult.failed(crash, iterations=self.iterations, partial=self.partial)
        except KeyboardInterrupt:  # Ctrl-C: the program stops, and the trace says where the run was
            self.emit({"type": "run_end", "answer": None, "error": "interrupted (Ctrl-C)", "error_type": "KeyboardInterrupt",
                       "iterations": self.iterations, "usage": self.tree.budget.usage(),
                       "run_usage": {m: u.to_dict() for m, u in self.own_usage.items()},
                       "duration_s": time.monotonic() - began})
            raise
        finally:
            table.current = {}
            self.tree.sandboxes.discard(sandbox)
        stats = _context_stats(sandbox)
        if stats:
            self.emit({"type": "context_stats", "contexts": _stats_delta(stats_before, stats)})
        result.duration_s = time.monotonic() - began
        result.probe_s = probe_s
        self.emit({"type": "run_end", "answer": result.answer, "error": result.error, "error_type": result.error_type,
                   "iterations": result.iterations, "usage": self.tree.budget.usage(),
                   "run_usage": {m: u.to_dict() for m, u in self.own_usage.items()}, "duration_s": result.duration_s})
        return result

    def child(self, query: str, handles: list[Any]) -> RunResult:
        """A child run at depth+1 over ``handles``, in its own sandbox (closed after)."""
        tree = self.tree
        sandbox, table = subcalls.open_sandbox(tree.setup, handles, pool_key=tree.pool_key, on_wait=self._on_wait)
        with sandbox:
            child = Run(tree, query, depth=self.depth + 1, parent_id=self.run_id, turn=self.turn)
            child.parent_iteration = self.iterations + 1 if self.forced else self.iterations
            return child.execute(sandbox, table)

    def _on_wait(self, info: dict[str, Any]) -> None:
        self.emit({"type": "worker_wait", "waited_s": float(info.get("waited_s", 0.0)),
                   "pool_size": int(info.get("pool_size", 0)), "detail": str(info.get("detail", ""))})

    def functions(self) -> dict[str, Callable[..., Any]]:
        """The host functions of this run: the built-ins and the program's tools."""
        functions = subcalls.builtin_tools(self)
        for t in self.tree.setup.tools:
            functions[t.name] = subcalls.user_tool(self, t)
        return functions

    # -------------------------------------------------------------------- turns

    def _turns(self, sandbox: Sandbox, briefs: Sequence[Any], history: str, variables: str) -> RunResult:
        lim = self.tree.setup.limits
        talk = self._start(sandbox, briefs, history, variables)
        assists = self.assists = self._assists(sandbox, "\n".join(m["content"] for m in talk.messages[:2]))
        while self.iterations < lim.max_iterations:
            self.iterations += 1
            self.tree.budget.check_time()
            turn, answer, feedback, assisted = self._turn(sandbox, talk)
            if answer is not None:  # an answer given after a refused sub-call still counts
                verdict = assists.on_answer(answer)
                if not isinstance(verdict, Question):
                    return self._result(verdict)
                talk.ask(verdict.note)
                continue
            self.tree.check_cancelled(self.partial)
            if self.budget_error is not None:
                raise self.budget_error
            if self.failing >= lim.max_consecutive_errors:
                if turn.blocks:
                    raise TooManyErrors(f"stopped after {self.failing} failing turns in a row", partial=self.partial)
                # Failing in prose (no code, re-prompted): the model is talking, maybe about an
                # answer it has; ask for it once, as when the turns run out, before stopping.
                return self._forced_answer(talk, sandbox, failing=f"stopped after {self.failing} failing turns "
                                                                  "in a row and a forced turn")
            if turn.blocks:  # an assist's note after the general instruction: a small model follows what it read last
                feedback = self.tree.setup.prompts.feedback(feedback, iteration=self.iterations,
                                                            max_iterations=lim.max_iterations) + assisted
            if turn.retract:  # an assist took the reply out: the message it answered is asked again, with a note
                talk.retract("\n".join(turn.notes))
            else:
                talk.answer(feedback, plain=bool(turn.blocks) and not assisted, drop_previous=turn.drop_previous)
            if turn.stop:
                break  # an assist ended the turns (the same code again and again): ask for the answer
        return self._forced_answer(talk, sandbox)

    def _start(self, sandbox: Sandbox, briefs: Sequence[Any], history: str, variables: str) -> Conversation:
        """The conversation's first two messages (the system prompt is traced)."""
        system = self._system_prompt(sandbox, briefs)
        self.emit({"type": "system_prompt", "text": system})
        first = self.tree.setup.prompts.first_user(self.query, history=history, variables=variables,
                                                   mode=_mode(briefs, self.tree.search))
        return Conversation(system, first, 24 * self.tree.setup.limits.feedback_chars)

    def _turn(self, sandbox: Sandbox, talk: Conversation) -> tuple[Turn, Answer | None, str, str]:
        """One turn: the model's reply, read by the plain loop and changed by the assists, and
        its code run. Returns the turn, its answer (or None), the output or request for code
        that answers it, and the assists' notes on its cells. Counts failing turns."""
        began = time.monotonic()
        completion = self.tree.call(self, self.client, talk.messages, code=True)
        model_s = time.monotonic() - began
        reply = completion.text
        turn = Turn(reply, harness.parse_code_blocks(reply), shown=talk.last, printed=self.partial or "")
        talk.reply(reply)
        answer = None if turn.blocks else self._prose_answer(reply, sandbox)
        turn.answer = answer.text if answer is not None else None
        self.assists_of().on_reply(turn)
        outputs: list[dict[str, Any]] = []
        assisted = ""
        if turn.blocks:
            self.reprompted = False
            try:
                answer, feedback, failed, assisted = self._run_blocks(sandbox, turn, outputs)
            except BaseException as e:  # stopped mid-turn (Ctrl-C, a cancel, a limit): the code that ran is traced
                self._iteration_event(talk, reply, turn, outputs, began, model_s, completion, stopped=type(e).__name__)
                raise
            self.failing = self.failing + 1 if failed else 0
            feedback = "\n".join([feedback, *turn.notes])
        else:
            if answer is None and turn.answer is not None:  # an assist read the reply as the answer
                answer = Answer(turn.answer, reply, None, self.partial or "", self._last())
            feedback = self.tree.setup.prompts.text("reprompt")
            if answer is None:
                self.failing += 1 if self.reprompted else 0
                self.reprompted = True
        self._iteration_event(talk, reply, turn, outputs, began, model_s, completion)
        return turn, answer, feedback, assisted

    def _iteration_event(self, talk: Conversation, reply: str, turn: Turn, outputs: list[dict[str, Any]], began: float,
                         model_s: float, completion: Any, **extra: Any) -> None:
        self.emit({"type": "iteration", "iteration": self.iterations, "forced": False,
                   "prompt_chars": talk.chars(but_last=True), "response": reply, "code_blocks": turn.blocks,
                   "outputs": outputs, "duration_s": time.monotonic() - began, "model_s": model_s,
                   "usage": completion.usage.to_dict(), "finish_reason": completion.finish_reason, **extra})

    def _last(self) -> bool:
        """No turn comes after this one."""
        return self.forced or self.iterations >= self.tree.setup.limits.max_iterations

    def assists_of(self) -> Assists:
        if self.assists is None:
            raise RuntimeError("the run's assists are made when its turns start")
        return self.assists

    def _run_blocks(self, sandbox: Sandbox, turn: Turn,
                    outputs: list[dict[str, Any]]) -> tuple[Answer | None, str, bool, str]:
        """Run each block; return (answer or None, feedback text, whether the turn failed, the
        assists' notes on the turn's cells)."""
        notes = self.tree.setup.prompts.notes
        shown: list[str] = []
        assisted = ""
        failed = False
        for code in turn.blocks:
            if harness.only_comments(code):
                shown.append(notes["only_comments"])
                failed = True
                continue
            if self.tree.live is not None:
                self.tree.live({"type": "cell_start", "run_id": self.run_id, "parent_id": self.parent_id, "depth": self.depth,
                                "iteration": self.iterations, "code": code})
            printed = self.partial or ""
            result = sandbox.execute(code)
            self.cells.append(code)
            outputs.append(cell_output(result))
            note = self.assists_of().after_run(code, result, printed)
            if result.stdout.strip():
                self.partial = result.stdout.strip()[-2000:]
            text, cell_failed = harness.cell_feedback(
                harness.CellOutcome(result.stdout, result.error, result.error_type, result.warnings), notes)
            assisted += note
            failed = failed or cell_failed
            shown.append(text)
            if result.has_final:
                return (Answer(self._final_text(result.final), turn.reply, harness.final_argument(code),
                               f"{printed}\n{result.stdout}", self._last()), "", False, "")
            if self.budget_error is not None or result.error:
                break  # later blocks usually depend on this one
        return None, harness.cap("\n\n".join(shown), self.tree.setup.limits.feedback_chars, notes["cut"]), failed, assisted

    def _final_text(self, value: Any) -> str:
        """FINAL's value as the answer's text (``harness.stringify``), kept as data too."""
        self.final_value = value
        return harness.stringify(value)

    def _result(self, text: str) -> RunResult:
        """The run's answer ``text``, with FINAL's value as JSON data when that is what the
        text says (a list, a dict, a number, a bool; not when an assist changed the text)."""
        value = self.final_value
        if isinstance(value, str) or value is None or harness.stringify(value) != text:
            return RunResult(text, iterations=self.iterations)
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):  # NaN, or data JSON has no form for
            return RunResult(text, iterations=self.iterations)
        return RunResult(text, iterations=self.iterations, value=value)

    def _prose_answer(self, reply: str, sandbox: Sandbox) -> Answer | None:
        """A FINAL written in prose: ``FINAL_VAR(name)``, ``FINAL(expression)`` evaluated in the
        sandbox (literal text when it fails), ``FINAL("text")``; None when there is none."""
        printed, last = self.partial or "", self._last()
        var = harness.prose_final_var(reply)
        if var:
            result = sandbox.execute(f"FINAL_VAR({var!r})")
            if result.has_final:
                return Answer(self._final_text(result.final), reply, var, printed, last)
        expression = harness.prose_final_expression(reply)
        if expression is not None:
            # Unquoted: it may name a variable or be an expression; if that fails it is literal text.
            result = sandbox.execute(f"FINAL({expression})")
            if result.has_final:
                return Answer(self._final_text(result.final), reply, expression, printed, last)
        said = harness.prose_final(reply)
        return Answer(said, reply, expression, printed, last) if said is not None else None

    def _forced_answer(self, talk: Conversation, sandbox: Sandbox, *, failing: str = "") -> RunResult:
        """One "answer now" turn; with no answer, NoAnswer (or TooManyErrors saying ``failing``,
        when failing turns brought the run here)."""
        assists = self.assists_of()
        prompts = self.tree.setup.prompts
        talk.force(prompts.text("force_answer", found=assists.last_found(), question=self.query))
        began = time.monotonic()
        self.forced = True
        completion = self.tree.call(self, self.client, talk.messages, code=True)
        model_s = time.monotonic() - began
        reply = completion.text
        turn = Turn(reply, harness.parse_code_blocks(reply), shown=talk.last, printed=self.partial or "", forced=True)
        assists.on_reply(turn)
        outputs: list[dict[str, Any]] = []
        given = self._run_blocks(sandbox, turn, outputs)[0] if turn.blocks else None
        given = given or self._prose_answer(reply, sandbox)
        self.emit({"type": "iteration", "iteration": self.iterations + 1, "forced": True, "response": reply,
                   "prompt_chars": talk.chars(), "code_blocks": turn.blocks, "outputs": outputs,
                   "usage": completion.usage.to_dict(), "duration_s": time.monotonic() - began, "model_s": model_s,
                   "finish_reason": completion.finish_reason})
        self.iterations += 1
        if given is not None:
            verdict = assists.on_answer(given)  # the last turn: an assist may replace it, not question it
            return self._result(given.text if isinstance(verdict, Question) else verdict)
        if failing:
            raise TooManyErrors(failing, partial=self.partial)
        raise NoAnswer(f"no FINAL answer after {self.iterations - 1} iterations and a forced turn",
                       partial=self.partial)

    def _assists(self, sandbox: Sandbox, opening: str) -> Assists:
        """The assists this run's ``assists`` setting names, over this run's sandbox and the
        conversation's ``opening`` (its system prompt and first message)."""
        setup = self.tree.setup
        host = Host(query=self.query, prompts=setup.prompts, lookup=sandbox.lookup, emit=self.emit, opening=opening)
        return Assists(names_for(setup.limits.assists, self.client.model), host)

    def _system_prompt(self, sandbox: Sandbox, briefs: Sequence[Any]) -> str:
        setup = self.tree.setup
        lim = setup.limits
        builtins = (["llm_query"] + (["rlm_query"] if self.depth < lim.max_depth else [])) if lim.sub_calls else []
        search = self.tree.search
        memory_chunks = None
        if search is not None:
            builtins.append("search_chunks")
            # semantic_grep is callable (cells, the REPL) but not offered to the model: what
            # it does to answers is not measured yet (issue 26), and every function listed
            # changes what a small model writes.
            if search.memory is not None:
                memory_chunks = _memory_size(search.memory)
                builtins.append("related")  # the memory's links (a person's, learned): offered where they are
        contexts = setup.prompts.contexts(briefs, memory_chunks=memory_chunks, earlier=self.earlier,
                                          always=setup.always if self.depth == 0 else "")
        return setup.prompts.system(contexts=contexts, builtins=builtins, tools=setup.tools,
                                    imports=setup.policy.allowed_imports, output_chars=sandbox.limits.output_chars,
                                    max_iterations=lim.max_iterations, sub_call_chars=lim.sub_call_max_chars,
                                    addendum=setup.system_addendum, mode=_mode(briefs, search))


def _mode(briefs: Sequence[Any], search: Any = None) -> str:
    """How the prompts present the main context (its brief's ``mode``); with none, ``memory``
    when a memory store is searched, else ``text``."""
    if briefs:
        return str(getattr(briefs[0], "mode", "text"))
    return "memory" if search is not None and getattr(search, "memory", None) is not None else "text"


def _memory_size(store: Any) -> int:
    try:
        return int(store.stats().chunks)
    except RLMError:
        return 0


def cell_output(result: CellResult) -> dict[str, Any]:
    """One cell's record in the trajectory."""
    return {"stdout": result.stdout, "error": result.error, "error_type": result.error_type,
            "duration_s": result.duration_s, "worker_restarted": result.worker_restarted, "warnings": list(result.warnings)}


def _describe(handles: Sequence[Any], question: str, setup: Setup) -> list[Any]:
    return describe(list(handles), question=question, config=setup.probe, inline_max_chars=setup.limits.inline_context_chars)


def _context_stats(sandbox: Sandbox) -> list[dict[str, Any]]:
    try:
        return sandbox.context_stats()
    except RLMError:
        return []


def _stats_delta(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Counts of this run alone: the worker's totals now, less those at the run's start
    (when the worker is the same one: a restart starts the counts again)."""
    if len(before) > len(after):
        return after
    out = []
    for k, now in enumerate(after):
        then = before[k] if k < len(before) and before[k].get("name") == now.get("name") else {}
        row: dict[str, Any] = {}
        for key, value in now.items():
            old = then.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and isinstance(old, (int, float)) and value >= old:
                row[key] = value - old
            else:
                row[key] = value
        out.append(row)
    return out
