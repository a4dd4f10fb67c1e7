"""The turn loop: prompt a model to write code against context handles, run it, repeat.

Each turn the model's reply is parsed for code blocks (``harness``); each block is checked
and run in the run's sandbox; the output goes back as the next user turn, until code calls
FINAL. Small models get a forgiving harness: FINAL(...) written in prose counts when there
is no code, a reply with neither is re-prompted once, and the run stops after too many
failing turns in a row. After ``max_iterations`` one forced "answer now" turn is made.

``Tree`` is what every run of one question shares (budget, trace, sub-call slots, the
worker-pool key); ``Run`` is one conversation with one model over one sandbox. A session's
question is a root ``Run`` in the session's sandbox; ``rlm_query`` makes child runs with
their own sandboxes (``subcalls.py``).
"""

from __future__ import annotations

import ast
import contextlib
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from rlm_runtime import harness, subcalls
from rlm_runtime.budget import Budget, Governor, RunLimits, Slots
from rlm_runtime.context.brief import describe
from rlm_runtime.context.grep import re2_escape
from rlm_runtime.errors import BudgetExceeded, Cancelled, HostCallError, NoAnswer, RLMError, RunCrashed, TooManyErrors
from rlm_runtime.llm.base import Completion, LLMClient, Message, Usage, stoppable
from rlm_runtime.prompts import Prompts
from rlm_runtime.sandbox import CellLimits, CellResult, Policy, Sandbox
from rlm_runtime.tools import Tool

Event = dict[str, Any]

#: After an empty grep, this many chunks ranked for the question are shown, each cut to this
#: many characters; the question is cut to the query length first.
_HINT_HITS = 3
_HINT_SNIPPET_CHARS = 200
_HINT_QUERY_CHARS = 300
#: Lines shown when the runtime runs the grep an empty grep's hint suggests.
_HINT_LINES = 8
#: A model that sends the same code this many turns in a row after the first is asked for
#: its answer at once (the forced turn) instead of using its remaining turns on it.
_REPEATS_BEFORE_FORCING = 2
#: A block is a repeat when it is the code of one of this many turns before.
_REPEAT_WINDOW = 3
#: A grep printing this many lines (or cut at its max_matches) is too broad to read: if the
#: question names something the code did not search for, the lines naming it are shown.
_BROAD_GREP_LINES = 12
#: A name the question gives, or an answer looked up before it is taken, is shown when it
#: is on at most this many lines (more: it is a common word, not a lead).
_LEAD_LINES = 6
#: Answers looked up before being taken, per run.
_FOLLOWS = 2
#: A chain is followed for the model this many links past what it printed, when a link
#: adds at most this many new names.
_CHAIN_STEPS = 2
_CHAIN_NAMES = 2
#: New capitalised words of a link's lines tested for being plain words (a grep each): more
#: than this and the lines name too many things to follow (a printed list full of names).
_WORD_CHECKS = 12
#: The last lines of the followed chain repeated in the forced last turn and when an answer
#: was read on a line about another name.
_FORCED_CHAIN_LINES = 8
#: Lines of a question's word read to find records of one form (and the fewest records counted).
_RECORD_SAMPLE = 40
#: A records tally with more kinds than this over the whole text is not shown (no label field).
_MAX_KINDS_SHOWN = 30
#: After an empty grep, the lines of this many of the question's rarest words, this many each.
_WORDS_SHOWN = 2
_WORD_LINES = 3


@dataclass
class RunResult:
    """What a run produced. ``answer`` is None when it failed; then ``error`` says why,
    ``error_type`` names the class and ``exception`` holds it (an ``RLMError``)."""

    answer: str | None
    usage: dict[str, dict[str, Any]] = field(default_factory=dict)
    iterations: int = 0
    max_depth_reached: int = 0
    trajectory: str | None = None
    error: str | None = None
    error_type: str | None = None
    partial: str | None = None
    duration_s: float = 0.0
    exception: RLMError | None = field(default=None, repr=False, compare=False)

    @classmethod
    def failed(cls, error: RLMError, *, iterations: int = 0, partial: str | None = None) -> RunResult:
        partial = getattr(error, "partial", None) or partial
        return cls(None, error=str(error), error_type=type(error).__name__, partial=partial, iterations=iterations,
                   exception=error)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (without ``exception``)."""
        out = asdict(self.__class__(**{k: v for k, v in self.__dict__.items() if k != "exception"}))
        out.pop("exception", None)
        return out


@dataclass(frozen=True)
class Setup:
    """What every question of a session uses. Built once by ``Session``."""

    client: LLMClient
    sub_client: LLMClient
    limits: RunLimits
    policy: Policy
    cell_limits: CellLimits | None
    prompts: Prompts
    tools: tuple[Tool, ...]
    governor: Governor
    probe: Any = None  # a ProbeConfig, or None for the defaults
    pool: Any = None  # a sandbox WorkerPool, or None for the process's default pool
    protect_host: bool = True
    #: Appended to every system prompt (a profile's addendum and answer style).
    system_addendum: str = ""

    def max_concurrent_calls(self) -> int:
        """Sub-calls in flight: the governor's cap, the limit, and what the sub-model's server
        serves at once when it says (a local server's slots; more would only queue there)."""
        cap = min(self.governor.max_concurrent_calls, self.limits.max_concurrency)
        parallel = getattr(self.sub_client, "parallel", None)
        return max(1, min(cap, parallel)) if isinstance(parallel, int) and parallel > 0 else cap


class Tree:
    """What every run of one question's call tree shares."""

    def __init__(self, setup: Setup, budget: Budget, emit: Callable[[Event], None], *, pool_key: str,
                 search: Any = None) -> None:
        self.setup = setup
        #: The session's ``ChunkSearch`` (search_chunks / read_chunk), or None.
        self.search = search
        self.budget = budget
        self.emit = emit
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
            with stoppable(self.budget.cancelled):
                completion = client.complete(messages, max_tokens=max_out, stop_after_code_block=code)
            # Settled while still reserved, so no other call sees neither figure.
            self.budget.settle(client.model, completion.usage)
        run.own_usage.setdefault(client.model, Usage()).add(completion.usage)
        self.check_cancelled()  # a call cut short by cancel() ends the run here, settled
        return completion

    def cancel(self) -> None:
        """Stop the tree from any thread: no new call starts, a streaming call stops reading,
        and the cells running in its sandboxes are interrupted."""
        self.budget.cancel()
        for sandbox in list(self.sandboxes):
            sandbox.interrupt()

    def check_cancelled(self, partial: str | None = None) -> None:
        if self.budget.cancelled.is_set():
            raise Cancelled("the run was cancelled", partial=partial)


class ToolTable:
    """The host functions of one sandbox, re-pointed at whichever run uses it now.

    A session's sandbox outlives its runs: the names are registered once, and each call
    goes to the current run's functions."""

    def __init__(self, sandbox: Sandbox, names: Sequence[str]) -> None:
        self.current: dict[str, Callable[..., Any]] = {}
        for name in names:
            sandbox.register(name, self._caller(name))

    def _caller(self, name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            fn = self.current.get(name)
            if fn is None:
                raise HostCallError(f"{name}() works only while a question is being answered")
            return fn(*args, **kwargs)

        call.__name__ = name
        return call


BUILTINS = ("llm_query", "llm_query_batched", "rlm_query", "search_chunks", "read_chunk")


def open_sandbox(setup: Setup, contexts: Sequence[Any], *, pool_key: str, on_wait: Callable[[dict[str, Any]], None] | None
                 ) -> tuple[Sandbox, ToolTable]:
    """A sandbox for runs of ``setup``, its host functions registered (not yet started)."""
    sandbox = Sandbox(setup.policy, setup.cell_limits, contexts=contexts, protect_host=setup.protect_host,
                      pool=setup.pool, pool_key=pool_key, on_wait=on_wait)
    table = ToolTable(sandbox, [*BUILTINS, *(t.name for t in setup.tools)])
    return sandbox, table


class Run:
    """One RLM run: a question, one model, one sandbox, until FINAL or a limit."""

    def __init__(self, tree: Tree, query: str, *, depth: int, parent_id: str | None, turn: int = 0) -> None:
        self.tree = tree
        self.query = query
        self.depth = depth
        self.parent_id = parent_id
        self.turn = turn
        self.run_id = uuid.uuid4().hex[:8]
        self.iterations = 0
        self.partial: str | None = None
        self.budget_error: BudgetExceeded | None = None
        self.last_blocks: list[list[str]] = []  # the code of the last few turns, latest last
        self.own_usage: dict[str, Usage] = {}
        #: Every code block this run executed, in order (what ``remember`` stores).
        self.cells: list[str] = []
        self.seen: list[str] = []  # what this run's cells printed (the model has read it)
        self.broad: list[str] = []  # those of them too long to read (a broad grep): not read, only shown
        self.followed: set[str] = set()  # answers looked up before being taken
        self.named: set[str] = set()  # names of the question shown after a broad grep
        self.chained: set[str] = set()  # names whose lines were shown as the next link of a chain
        self.middles: set[str] = set()  # those of them with a line past the row that tied them in
        self.chain_lines: list[str] = []  # the lines of those names, in the order followed
        self.count_checked = False  # a count no output showed was questioned once
        self.grounding_checked = False  # an answer the text never holds was questioned once
        self.records_tried = False  # records of the text were looked for, for a counting question
        self.records_counts: dict[str, int] = {}  # their tally, when found
        self.records_checked = False  # an answer the tally disagrees with was questioned once
        self.words_shown = False  # the question's words were looked up after an empty grep
        self.link_checked = False  # an answer read on a line about another name was questioned once

    @property
    def client(self) -> LLMClient:
        return self.tree.setup.client if self.depth == 0 else self.tree.setup.sub_client

    def emit(self, event: Event) -> None:
        event.update(run_id=self.run_id, parent_id=self.parent_id, depth=self.depth)
        self.tree.emit(event)

    # ----------------------------------------------------------------- a whole run

    def execute(self, sandbox: Sandbox, table: ToolTable, *, history: str = "", variables: str = "") -> RunResult:
        """Run to an answer or a failure. Every exception ends as a failed ``RunResult`` with
        the partial output and a ``run_end`` event: an ``RLMError`` as itself, any other (a
        host-side step that hostile text reached unguarded) as ``RunCrashed`` from it."""
        setup = self.tree.setup
        self.tree.budget.note_depth(self.depth)
        began = time.monotonic()
        result: RunResult
        stats_before: list[dict[str, Any]] = []
        briefs: list[Any] = []
        self.tree.sandboxes.add(sandbox)
        try:
            # Describing reads the contexts (it parses a JSON document): inside, so that what it
            # raises fails this run, not the session; run_start first whatever it did.
            try:
                briefs = _describe(sandbox.contexts, self.query, setup)
            finally:
                self.emit({"type": "run_start", "model": self.client.model, "sub_model": setup.sub_client.model,
                           "query": self.query, "limits": setup.limits.model_dump(), "turn": self.turn,
                           "contexts": [b.to_dict() for b in briefs]})
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
        finally:
            table.current = {}
            self.tree.sandboxes.discard(sandbox)
        stats = _context_stats(sandbox)
        if stats:
            self.emit({"type": "context_stats", "contexts": _stats_delta(stats_before, stats)})
        result.duration_s = time.monotonic() - began
        self.emit({"type": "run_end", "answer": result.answer, "error": result.error, "error_type": result.error_type,
                   "iterations": result.iterations, "usage": self.tree.budget.usage(),
                   "run_usage": {m: u.to_dict() for m, u in self.own_usage.items()}, "duration_s": result.duration_s})
        return result

    def child(self, query: str, handles: list[Any]) -> RunResult:
        """A child run at depth+1 over ``handles``, in its own sandbox (closed after)."""
        tree = self.tree
        sandbox, table = open_sandbox(tree.setup, handles, pool_key=tree.pool_key, on_wait=self._on_wait)
        with sandbox:
            return Run(tree, query, depth=self.depth + 1, parent_id=self.run_id, turn=self.turn).execute(sandbox, table)

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
        setup = self.tree.setup
        lim = setup.limits
        prompts = setup.prompts
        system = self._system_prompt(sandbox, briefs)
        self.emit({"type": "system_prompt", "text": system})
        messages: list[Message] = [
            {"role": "system", "content": system},
            {"role": "user", "content": prompts.first_user(self.query, history=history, variables=variables)},
        ]
        reprompted = False
        prose_said: set[str] = set()  # this run's prose replies: one said twice is the answer
        errors_in_a_row = 0
        repeats = 0  # turns in a row whose code repeated the turn before's
        while self.iterations < lim.max_iterations:
            self.iterations += 1
            self.tree.budget.check_time()
            began = time.monotonic()
            completion = self.tree.call(self, self.client, messages, code=True)
            model_s = time.monotonic() - began
            reply = completion.text
            messages.append({"role": "assistant", "content": reply})
            blocks = harness.parse_code_blocks(reply)
            outputs: list[dict[str, Any]] = []
            answer: str | None = None
            if blocks:
                reprompted = False
                blocks = [harness.final_spelled(harness.without_echo(b, messages[-2]["content"])) for b in blocks]
                answer, feedback, failed = self._run_blocks(sandbox, blocks, outputs)
                errors_in_a_row = errors_in_a_row + 1 if failed else 0
                # the same code as one of the last turns: also two blocks taken in turn (A, B, A, B)
                repeats = repeats + 1 if blocks in self.last_blocks else 0
                if repeats:
                    feedback += "\n" + prompts.notes["same_code"]
                self.last_blocks = [*self.last_blocks, blocks][-_REPEAT_WINDOW:]
            else:
                answer = self._prose_answer(reply, sandbox)
                feedback = prompts.text("reprompt")
                if answer is None:
                    answer = harness.insisted_answer(reply, prose_said)
                if answer is None:
                    errors_in_a_row += 1 if reprompted else 0
                    reprompted = True
                prose_said.add(reply.strip())
            self.emit({"type": "iteration", "iteration": self.iterations, "forced": False,
                       "prompt_chars": sum(len(m["content"]) for m in messages[:-1]), "response": reply,
                       "code_blocks": blocks, "outputs": outputs, "duration_s": time.monotonic() - began, "model_s": model_s,
                       "usage": completion.usage.to_dict(), "finish_reason": completion.finish_reason})
            if answer is not None:  # an answer given after a refused sub-call still counts
                check = (self._count_note(answer, reply) or self._grounding_note(sandbox, answer, reply)
                         or self._unlinked_note(sandbox, answer, reply)
                         or self._follow_note(sandbox, answer)) if self.iterations < lim.max_iterations else None
                if check is None:
                    return RunResult(self._settled(answer), iterations=self.iterations)
                messages.append({"role": "user", "content": check})
                messages = self._trim(messages)
                continue
            self.tree.check_cancelled(self.partial)
            if self.budget_error is not None:
                raise self.budget_error
            if errors_in_a_row >= lim.max_consecutive_errors:
                raise TooManyErrors(f"stopped after {errors_in_a_row} failing turns in a row", partial=self.partial)
            if blocks:
                feedback = prompts.feedback(feedback, iteration=self.iterations, max_iterations=lim.max_iterations)
            messages.append({"role": "user", "content": feedback})
            messages = self._trim(messages)
            if repeats >= _REPEATS_BEFORE_FORCING:
                break  # the same code three times: more turns would repeat it again; ask for the answer
        return self._forced_answer(messages, sandbox)

    def _run_blocks(self, sandbox: Sandbox, blocks: list[str], outputs: list[dict[str, Any]]) -> tuple[str | None, str, bool]:
        """Run each block; return (answer or None, feedback text, whether the turn failed)."""
        notes = self.tree.setup.prompts.notes
        shown: list[str] = []
        failed = False
        for code in blocks:
            if harness.only_comments(code):
                shown.append(notes["only_comments"])
                failed = True
                continue
            said = harness.unparsable_final(code)
            if said is not None:
                outputs.append({"stdout": "", "error": None, "error_type": None, "duration_s": 0.0,
                                "worker_restarted": False, "warnings": [], "read_as": "FINAL in prose"})
                return said, "", False
            result = sandbox.execute(code)
            self.cells.append(code)
            outputs.append(cell_output(result))
            if result.stdout.strip():
                self.partial = result.stdout.strip()[-2000:]
            text, cell_failed = harness.cell_feedback(
                harness.CellOutcome(result.stdout, result.error, result.error_type, result.warnings), notes)
            # An empty grep printed, indexed (hits[0]), or only tested (if hits:), which the worker notes.
            reported = "\n".join([result.stdout, result.error or "", *result.warnings])
            self.seen.append(result.stdout)
            if harness.grep_found_nothing(reported):
                note = self._empty_grep_note(sandbox, reported)
                text += "\n" + note if note else ""
            elif not result.has_final and harness.shows_many_lines(result.stdout, _BROAD_GREP_LINES):
                self.broad.append(result.stdout)
                # Too many lines to read: the question's name's lines, or when the grep printed
                # them among the rest, the chain from them.
                note = self._named_note(sandbox, code, result.stdout, broad=True) or self._chain_note(sandbox, result.stdout)
                text += "\n" + note if note else ""
            elif not result.has_final:
                # A cell that failed, or printed nothing, found nothing, whatever names its code
                # holds (a loop over another grep's hits that tests for the question's name).
                searched = "" if result.error or not result.stdout.strip() else code
                note = self._chain_note(sandbox, result.stdout) or self._named_note(sandbox, searched, result.stdout)
                text += "\n" + note if note else ""
            if not result.has_final and not self.records_tried:
                records = self._records_note(sandbox)
                text += "\n" + records if records else ""
            failed = failed or cell_failed
            shown.append(text)
            if result.has_final:
                return harness.stringify(result.final), "", False
            if self.budget_error is not None or result.error:
                break  # later blocks usually depend on this one
        return None, harness.cap("\n\n".join(shown), self.tree.setup.limits.feedback_chars, notes["cut"]), failed

    def _empty_grep_note(self, sandbox: Sandbox, stdout: str) -> str:
        """After an empty grep: the lines its own hint names (the same pattern ignoring case,
        or its rarest word), run for the model, since small models seldom follow the hint;
        else, with search available, the chunks ranked for the question."""
        call = harness.suggested_grep(stdout)
        if call is not None:
            shown = call[:-1] + f", max_matches={_HINT_LINES})"
            result = sandbox.execute(f"print({shown})")
            lines = (result.stdout or "").strip()
            if result.ok and lines and not harness.grep_found_nothing(lines):
                self.emit({"type": "tool_call", "name": "grep", "args": call[:200],
                           "result": "shown after an empty grep", "error": None, "duration_s": result.duration_s})
                self.seen.append(lines)
                note = self.tree.setup.prompts.text("empty_grep_lines", call=call, lines=lines)
                chain = self._chain_note(sandbox, lines)  # those lines may tie the question's name to the next one
                return note + ("\n" + chain if chain else "")
        # The lines of a name the question gives, and their chain: what the grep was after.
        named = self._named_note(sandbox, "", stdout)
        if named:
            return named
        # Ranked chunks find a fact worded otherwise; records to count are found by their words.
        counting = harness.is_count_question(self.query) or harness.is_tally_question(self.query)
        if self.tree.search is not None and not counting:
            return self._search_hint()
        return self._words_note(sandbox) or (self._search_hint() if self.tree.search is not None else "")

    def _words_note(self, sandbox: Sandbox) -> str:
        """After an empty grep with no hint to run (once a run; with search, for a counting
        question only): how many lines hold each word
        the question is about (as a prefix, ignoring case, so that ``sightings`` finds
        "Sighting #12"), and a few lines of the rarest words that occur. Small models grep the
        question's word for a kind of thing, which the text may never write."""
        if self.words_shown:
            return ""
        self.words_shown = True
        words = harness.question_words(self.query)
        if not words:
            return ""
        patterns = [r"\b" + re2_escape(w) for w in words]
        result = sandbox.execute(f"print([grep(p, ignore_case=True, max_matches=1).count() for p in {patterns!r}])")
        try:
            counts = [int(n) for n in (result.stdout or "").strip().strip("[]").split(",")] if result.ok else []
        except ValueError:
            counts = []
        if len(counts) != len(words) or not any(counts):
            return ""
        found = sorted((n, k) for k, n in enumerate(counts) if n)[:_WORDS_SHOWN]
        shown = []
        for _, k in found:
            lines = sandbox.execute(f"print(grep({patterns[k]!r}, ignore_case=True, max_matches={_WORD_LINES}))")
            if lines.ok and (lines.stdout or "").strip():
                shown.append(self.tree.setup.prompts.text("question_word_lines", word=words[k], lines=lines.stdout.strip()))
        tally = ", ".join(f"{w!r} {n}" for w, n in zip(words, counts, strict=True))
        self.emit({"type": "tool_call", "name": "grep", "args": tally[:200], "result": "the question's words, after an empty grep",
                   "error": None, "duration_s": 0.0})
        note = self.tree.setup.prompts.text("question_words", counts=tally, lines="\n".join(shown))
        self.seen.append(note)
        return note

    def _records_note(self, sandbox: Sandbox) -> str:
        """For a question that counts ("how many", "which is most common"), after its first
        cell: when the lines holding a word of the question are records of one form with a
        label field (``Record 12 | kind=otter | ...``), that form's tally over the whole text,
        counted here. Small models seldom work out a record's form and count it right; the
        counts are the data the answer rests on."""
        self.records_tried = True
        if not (harness.is_count_question(self.query) or harness.is_tally_question(self.query)):
            return ""
        for word in harness.question_words(self.query):
            prefix = r"\b" + re2_escape(word)
            found = sandbox.execute(f"print(grep({prefix!r}, ignore_case=True, max_matches={_RECORD_SAMPLE}))")
            pattern = harness.record_pattern(harness.grep_rows(found.stdout or "")) if found.ok else None
            if pattern is None:
                continue
            # print only: the cell runs in the model's namespace, whose names it must not touch
            call = f"grep({pattern!r}, max_matches=2)"
            result = sandbox.execute(f"print({call}.count())\nprint({call})\nprint({call}.tally())")
            out = (result.stdout or "").strip().split("\n")
            if not result.ok or len(out) < 4 or not out[0].isdigit() or int(out[0]) < _RECORD_SAMPLE // 2:
                continue
            tally = None
            with contextlib.suppress(ValueError, SyntaxError, MemoryError, RecursionError):
                tally = ast.literal_eval(out[-1])
            if not (isinstance(tally, dict) and 2 <= len(tally) <= _MAX_KINDS_SHOWN
                    and all(isinstance(k, str) and isinstance(v, int) for k, v in tally.items())):
                continue  # not a label field over the whole text (too many kinds, or cut)
            self.records_counts = tally
            self.emit({"type": "tool_call", "name": "grep", "args": f"{pattern!r}.tally()"[:200],
                       "result": "records counted for a counting question", "error": None, "duration_s": result.duration_s})
            note = self.tree.setup.prompts.text("records_tally", total=out[0], lines="\n".join(out[1:-1]), pattern=pattern,
                                                counts=out[-1], question=self.query)
            self.seen.append(note)
            return note
        return ""

    def _lines_of(self, sandbox: Sandbox, term: str) -> list[str] | None:
        """The lines holding ``term`` as whole words (ignoring case), found in the run's sandbox;
        None when there are none or more than ``_LEAD_LINES``."""
        call = f"grep({harness.name_pattern(term)!r}, ignore_case=True, max_matches={_LEAD_LINES + 1})"
        result = sandbox.execute(f"print({call})")
        rows = harness.grep_rows(result.stdout or "") if result.ok else []
        if not rows or len(rows) > _LEAD_LINES:
            return None
        return [line for line in harness.lines_of((result.stdout or "").strip()) if line.strip()]

    def _shown(self, term: str, lines: list[str], why: str) -> None:
        """Trace the lines the runtime looked up and showed the model."""
        self.emit({"type": "tool_call", "name": "grep", "args": repr(term)[:200], "result": f"{len(lines)} lines shown: {why}",
                   "error": None, "duration_s": 0.0})

    def _named_note(self, sandbox: Sandbox, code: str, stdout: str, *, broad: bool = False) -> str:
        """The lines holding a name the question gives, when the code neither searched for it
        nor printed it (once per name): after a grep too broad to read (small models grep the
        kind of value asked for, which hundreds of lines hold), or any cell that looked
        elsewhere or failed (``code`` is then empty). The chain is followed from those lines as
        from printed ones."""
        for full in harness.question_names(self.query):
            if full in self.named or any(f.lower() in code.lower() or f.lower() in stdout.lower()
                                         for f in harness.name_forms(full)):
                continue
            self.named.add(full)
            name, lines = full, None
            for name in harness.name_forms(full):
                lines = self._lines_of(sandbox, name)
                if lines:
                    break
            if lines:
                self._shown(name, lines, "a name of the question" + (", after a broad grep" if broad else ""))
                self.seen.append("\n".join(lines))
                note = self.tree.setup.prompts.text("broad_grep_lead" if broad else "question_name_lead", term=name,
                                                    lines="\n".join(lines))
                chain = self._chain_note(sandbox, "\n".join(lines))
                return note + ("\n" + chain if chain else "")
        return ""

    def _chain_note(self, sandbox: Sandbox, stdout: str) -> str:
        """Find, then follow, done for the model: when lines it printed tie a name of the
        question to a new name, the lines about that new name (and, one step further, about
        the names those lines add), as few as ``_LEAD_LINES`` per name. Small models find the
        first fact of a chain, then search for the question's words again."""
        known = {f.lower() for n in harness.question_names(self.query) for f in harness.name_forms(n)} | self.chained
        if not known:
            return ""
        rows = harness.grep_rows(stdout)
        shown: list[str] = []
        openers: set[str] = set()  # words that open several rows, at any step: never names
        for _ in range(_CHAIN_STEPS):
            linked = [r for r in rows if harness.names_in(r, known)]
            openers |= harness.row_openers(rows)
            asked = self.query.lower()
            new = list(dict.fromkeys(n for r in linked for n in harness.question_names(r)
                                     if n.lower() not in known and n.lower() not in asked and n not in openers))
            if len(new) > _WORD_CHECKS:
                break  # a listing full of names (each would cost a grep in the sandbox): no one link
            new = [n for n in new if not self._is_word(sandbox, n)]
            if not new or len(new) > _CHAIN_NAMES:
                break
            rows = []
            for name in new:
                known.add(name.lower())
                self.chained.add(name.lower())
                lines = self._lines_of(sandbox, name)
                self.chain_lines += [line for line in lines or [] if line not in self.chain_lines]
                # A line naming no other link goes past this one (the badge of the lead): the
                # chain's middle. A name whose only line is the one that tied it in is an end.
                if any(not harness.names_in(row, known - {name.lower()}) for row in harness.grep_rows("\n".join(lines or []))):
                    self.middles.add(name.lower())
                # a line in a long listing was not read: it is shown again as a link
                broad = set(self.broad)
                seen = "\n".join([s for s in self.seen if s not in broad] + shown)
                fresh = [line for line in lines or [] if not harness.seen_in(line.split(": ", 1)[-1], seen)]
                if fresh:
                    self._shown(name, fresh, "the next link of a chain")
                    shown.append(self.tree.setup.prompts.text("chain_lead", term=name, lines="\n".join(fresh)))
                # followed on from lines the model printed too: printing a link is not following it
                rows += harness.grep_rows("\n".join(lines or []))
        if not shown:
            return ""
        self.seen.extend(shown)
        return "\n".join(shown)

    def _is_word(self, sandbox: Sandbox, name: str) -> bool:
        """Whether a one-word capitalised ``name`` is a plain word that opened a sentence
        ("According to ..."): the text also writes it in lower case. Names are never lower case."""
        if " " in name or not name.isalpha():
            return False
        pattern = r"\b" + re2_escape(name.lower()) + r"\b"
        result = sandbox.execute(f"print(grep({pattern!r}, max_matches=1).count())")
        return result.ok and (result.stdout or "").strip() not in ("", "0")

    def _count_note(self, answer: str, reply: str) -> str | None:
        """Before taking an answer the records the runtime counted disagree with (once), a
        count the model wrote and no output showed, or a "most common" kind no output showed
        counted: ask once for it to be counted in code."""
        if self.records_counts and not self.records_checked:
            found = harness.counts_disagree(answer, self.query, self.records_counts)
            if found is not None:
                self.records_checked = True
                return self.tree.setup.prompts.text("counts_answer", answer=" ".join(answer.split())[:200], expected=found[0],
                                                    why=found[1], question=self.query)
        if self.count_checked:
            return None
        shown = "\n".join(self.seen)
        if harness.untallied_answer(answer, self.query, shown, reply):
            self.count_checked = True
            return self.tree.setup.prompts.text("tally_answer", answer=" ".join(answer.split())[:200], question=self.query)
        number = harness.unbacked_count(answer, self.query, shown, reply)
        if number is None:
            return None
        self.count_checked = True
        return self.tree.setup.prompts.text("count_answer", number=number, question=self.query)

    def _grounding_note(self, sandbox: Sandbox, answer: str, reply: str) -> str | None:
        """Before taking an answer that quotes a code or a value the text never holds (a
        token with a digit, or a quoted string, that the model wrote itself and that occurs
        nowhere in the contexts): ask once for the line that states it. Not for counts, which
        the text need not spell out, nor for what its code computed."""
        if self.grounding_checked or harness.is_count_question(self.query):
            return None
        for token in [t for t in harness.answer_tokens(answer, self.query) if t in reply]:
            result = sandbox.execute(f"print(grep({re2_escape(token)!r}, ignore_case=True, max_matches=1).count())")
            if result.ok and (result.stdout or "").strip() == "0":
                self.grounding_checked = True
                return self.tree.setup.prompts.text("ungrounded_answer", token=token, question=self.query)
        return None

    def _unlinked_note(self, sandbox: Sandbox, answer: str, reply: str) -> str | None:
        """Before taking an answer read from a line about another name than the question's
        (the serial of the first of several lines a broad grep printed): the lines of the
        question's name, and one more turn. Asked once."""
        if self.link_checked or harness.is_count_question(self.query):
            return None
        token = harness.unlinked_answer(answer, self.query, "\n".join(self.seen), self.chained, written=reply)
        if token is None:
            return None
        self.link_checked = True
        for full in harness.question_names(self.query):
            for name in harness.name_forms(full):
                lines = self._lines_of(sandbox, name)
                if lines:
                    self._shown(name, lines, "the question's name, before taking an answer read elsewhere")
                    self.seen.append("\n".join(lines))
                    # and the chain from them (followed now if it was not yet): the answer may be a link further on
                    self._chain_note(sandbox, "\n".join(lines))
                    further = [line for line in self.chain_lines if line not in lines][-_FORCED_CHAIN_LINES:]
                    chain = self.tree.setup.prompts.text("unlinked_chain", lines="\n".join(further)) if further else ""
                    return self.tree.setup.prompts.text("unlinked_answer", token=token, term=name, lines="\n".join(lines),
                                                        chain=chain, question=self.query)
        return None

    def _follow_note(self, sandbox: Sandbox, answer: str) -> str | None:
        """Before taking ``answer``: if it is a name the question does not give, which the
        model read in a line of the text it printed (grep's ``N: line``), and a few lines hold it of which the model has not
        seen every one: those lines and one more turn (it may be the middle of a chain, not
        its end). Asked once per answer: the same answer given again is taken."""
        term = harness.answer_to_follow(answer, self.query)
        if term is None or term.lower() in self.followed or len(self.followed) >= _FOLLOWS:
            return None
        # A link of the chain the runtime followed is its middle, whatever the model has seen of
        # its lines; any other answer after such a chain comes after it.
        middle = term.lower() in self.middles
        if self.chained and not middle:
            return None
        seen = "\n".join(self.seen)
        if not any(term.lower() in row.lower() for row in harness.grep_rows(seen)):
            return None  # not a name the model read in a line of the text
        self.followed.add(term.lower())
        lines = self._lines_of(sandbox, term)
        if not lines or (not middle and all(harness.seen_in(row, seen) for row in harness.grep_rows("\n".join(lines)))):
            return None
        said = " ".join(answer.split())
        self._shown(term, lines, "more about the answer, before taking it")
        return self.tree.setup.prompts.text("follow_answer", answer=said, term=term, lines="\n".join(lines), question=self.query)

    def _search_hint(self) -> str:
        """After an empty grep: the best chunks for the question's own words, so that a model
        that guessed the wrong phrase sees where to look (it need not call search itself)."""
        prompts = self.tree.setup.prompts
        query = " ".join(self.query.split())[:_HINT_QUERY_CHARS]
        try:
            hits = self.tree.search.search(query, _HINT_HITS, run_id=self.run_id, stop=self.tree.budget.check_time) if query else []
        except HostCallError:
            hits = []
        if not hits:
            return prompts.notes["empty_grep"]
        lines = [f"- {h['id']} (lines {h['lines']}): {h['snippet'][:_HINT_SNIPPET_CHARS]}" for h in hits]
        self.emit({"type": "tool_call", "name": "search_chunks", "args": repr(query)[:200],
                   "result": f"{len(hits)} hits (shown after an empty grep)", "error": None, "duration_s": 0.0})
        return prompts.text("empty_grep_hits", query=repr(query), hits="\n".join(lines), best=hits[0]["id"])

    def _prose_answer(self, reply: str, sandbox: Sandbox) -> str | None:
        var = harness.prose_final_var(reply)
        if var:
            result = sandbox.execute(f"FINAL_VAR({var!r})")
            if result.has_final:
                return harness.stringify(result.final)
        expression = harness.prose_final_expression(reply)
        if expression is not None:
            # Unquoted: it may name a variable or be an expression; if that fails it is literal text.
            result = sandbox.execute(f"FINAL({expression})")
            if result.has_final:
                return harness.stringify(result.final)
        return harness.prose_final(reply)

    def _forced_answer(self, messages: list[Message], sandbox: Sandbox) -> RunResult:
        if self.chain_lines:
            answer = self._chain_answer()
            if answer is not None:
                return RunResult(answer, iterations=self.iterations)
        prompts = self.tree.setup.prompts
        # The question again, and the chain the runtime followed: after a run of turns that
        # repeated themselves, small models answer with a line of the first step.
        found = prompts.text("force_found", lines="\n".join(self.chain_lines[-_FORCED_CHAIN_LINES:])) if self.chain_lines else ""
        messages.append({"role": "user", "content": prompts.text("force_answer", found=found, question=self.query)})
        began = time.monotonic()
        completion = self.tree.call(self, self.client, messages, code=True)
        model_s = time.monotonic() - began
        reply = completion.text
        blocks = harness.parse_code_blocks(reply)
        outputs: list[dict[str, Any]] = []
        answer = None
        if blocks:
            answer, _, _ = self._run_blocks(sandbox, blocks, outputs)
        if answer is None:
            answer = self._prose_answer(reply, sandbox)
        if answer is None and len(blocks) == 1:
            # Told to answer now, a model that puts a sentence in a code block is answering.
            answer = harness.prose_block(blocks[0])
        self.emit({"type": "iteration", "iteration": self.iterations + 1, "forced": True, "response": reply,
                   "prompt_chars": sum(len(m["content"]) for m in messages), "code_blocks": blocks, "outputs": outputs,
                   "usage": completion.usage.to_dict(), "duration_s": time.monotonic() - began, "model_s": model_s,
                   "finish_reason": completion.finish_reason})
        self.iterations += 1
        if answer is not None:
            return RunResult(answer, iterations=self.iterations)
        raise NoAnswer(f"no FINAL answer after {self.iterations - 1} iterations and a forced turn",
                       partial=self.partial)

    def _settled(self, answer: str) -> str:
        """``answer``, or when it is again a link in the middle of the chain the runtime
        followed (shown its lines once already, the model gave it again), the answer of one
        short call with the chain's lines: the 1.5B named the second person of a chain twice
        when asked where that person is based. (An answer read on a line about another name
        and given again is taken: the note invites that, and the line may say "it".)"""
        term = harness.answer_to_follow(answer, self.query)
        if term is None or term.lower() not in self.middles or term.lower() not in self.followed:
            return answer
        return self._chain_answer() or answer

    def _chain_answer(self) -> str | None:
        """The last turn, when the runtime followed a chain from the question's names: one short
        call with those lines and the question alone, instead of the whole conversation. After
        turns that repeated themselves, small models answered the conversation's last turn with
        a line of the first step; asked with the few lines, they follow them."""
        lines = "\n".join(self.chain_lines[-_FORCED_CHAIN_LINES:])
        prompt = self.tree.setup.prompts.text("chain_answer", lines=lines, question=self.query)
        began = time.monotonic()
        completion = self.tree.call(self, self.client, [{"role": "user", "content": prompt}], code=False)
        reply = completion.text.strip()
        answer = harness.short_answer(reply)
        self.iterations += 1
        self.emit({"type": "iteration", "iteration": self.iterations, "forced": True, "response": reply,
                   "prompt_chars": len(prompt), "code_blocks": [], "outputs": [], "usage": completion.usage.to_dict(),
                   "duration_s": time.monotonic() - began, "model_s": time.monotonic() - began,
                   "finish_reason": completion.finish_reason, "from": "the chain's lines"})
        return answer

    def _trim(self, messages: list[Message]) -> list[Message]:
        """Keep the system prompt, the question and as many recent turns as fit."""
        budget = 24 * self.tree.setup.limits.feedback_chars
        head, tail = messages[:2], messages[2:]
        while len(tail) > 2 and sum(len(m["content"]) for m in head + tail) > budget:
            tail = tail[2:]
        return head + tail

    def _system_prompt(self, sandbox: Sandbox, briefs: Sequence[Any]) -> str:
        setup = self.tree.setup
        lim = setup.limits
        builtins = (["llm_query"] + (["rlm_query"] if self.depth < lim.max_depth else [])) if lim.sub_calls else []
        search = self.tree.search
        memory_chunks = None
        if search is not None:
            builtins.append("search_chunks")
            if search.memory is not None:
                memory_chunks = _memory_size(search.memory)
        contexts = setup.prompts.contexts(briefs, memory_chunks=memory_chunks)
        return setup.prompts.system(contexts=contexts, builtins=builtins, tools=setup.tools,
                                    imports=setup.policy.allowed_imports, output_chars=sandbox.limits.output_chars,
                                    max_iterations=lim.max_iterations, sub_call_chars=lim.sub_call_max_chars,
                                    addendum=setup.system_addendum)


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


def raise_for(result: RunResult) -> str:
    """The answer of ``result``, or its failure raised as the ``RLMError`` it was."""
    if result.answer is not None:
        return result.answer
    raise result.exception or RLMError(result.error or "no answer")
