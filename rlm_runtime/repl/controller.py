"""The REPL's core, without a terminal: one ``Session``, and what each entered line does.

``Repl.handle`` takes one entry (a question, a ``>>>`` cell, a ``/command``) and returns
whether it went well; it never raises for bad input or a failed run. An entry that was
replayed (a ``/load``ed transcript, piped lines) runs a command only under the rule of
``replay.py``. ``exit`` or ``quit`` alone leaves, as Ctrl-D does. Questions and cells
run on a thread of their own (``Operation``) so that the front end stays responsive: it
draws the HUD and turns Ctrl-C into ``Session.cancel()`` while it waits (``Frontend.wait``).
The front ends are in ``app.py`` (a terminal, with prompt-toolkit) and ``plain.py`` (lines
from a pipe or a file).
"""

from __future__ import annotations

import textwrap
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rlm_runtime.repl.commands import run_command
from rlm_runtime.repl.display import Display
from rlm_runtime.repl.hud import Hud
from rlm_runtime.repl.replay import question, read_only, refusal, shown
from rlm_runtime.repl.transcript import CELL_PREFIX, Entry, Transcript, entry_lines
from rlm_runtime.termsafe import one_line

#: /load inside a loaded transcript is allowed this deep (a file loading itself stops here).
MAX_REPLAY_DEPTH = 3
#: Entries that leave the REPL, as Ctrl-D and /exit do (any case): nobody means them as a question.
LEAVE_WORDS = frozenset({"exit", "quit"})
#: Words alone that people type as commands in a shell or IPython (any case): run as the
#: command, never sent to the model as a question (which a hosted model charges for).
COMMAND_WORDS = {"help": "/help", "?": "/help", "clear": "/clear", "cls": "/clear"}


@dataclass
class ReplConfig:
    """How ``rlm repl`` was started (see ``rlm repl --help``)."""

    model: str
    sub_model: str | None = None
    contexts: Sequence[str | Path] = ()
    memory: Any = None  # True, a store path, or None
    remember: bool | None = None  # None: on when a memory store is in use
    budget_usd: float | None = None  # the session's total cost cap
    policy: str = "default"
    trace: str | None = None
    live: bool = True
    limits: Any = None  # a RunLimits, or None for the model's defaults
    profile: str | None = None  # a profile name or TOML path
    allow_commands: bool = False  # piped lines are the person's own script: run all their commands
    assists: str | None = None  # RunLimits.assists for the session's questions (None: the limits' own)
    fill_quality: bool = False  # fill the memory store's quality tier while no question runs
    extra: dict[str, Any] = field(default_factory=dict)  # more Session keyword arguments (tests)


def open_session(config: ReplConfig, on_event: Callable[[dict[str, Any]], None]) -> Any:
    """The session ``config`` describes (raises ``RLMError`` when it cannot be made)."""
    from rlm_runtime.budget import RunLimits, SessionLimits
    from rlm_runtime.errors import ConfigError
    from rlm_runtime.session import Session

    session_limits = SessionLimits(max_cost_usd=config.budget_usd) if config.budget_usd is not None else None
    remember = config.memory is not None if config.remember is None else config.remember
    from rlm_runtime.registry import is_ref

    contexts = [c if is_ref(c) else Path(c) for c in config.contexts]  # ctx:ID: a registered context
    session = Session(config.model, config.sub_model, contexts=contexts, limits=config.limits,
                      session_limits=session_limits, policy=config.policy, trace=config.trace, on_event=on_event,
                      memory=config.memory, remember=remember, profile=config.profile, **config.extra)
    if config.assists is not None:
        try:
            session.set_limits(RunLimits(**{**session.limits.model_dump(), "assists": config.assists}))
        except ValueError as e:
            session.close()
            raise ConfigError(f"--assists: {e.errors()[0]['msg'] if hasattr(e, 'errors') else e}") from e
    if config.fill_quality:
        _fill_quality(session)
    return session


#: Seconds with no question running before the REPL's fill of the quality tier starts: short,
#: as a person typing leaves the machine idle, and a question stops the fill within one chunk.
FILL_IDLE_S = 10.0


def _fill_quality(session: Any) -> None:
    """Start the fill of the session's memory store's quality tier while no question runs
    (``MemoryStore.fill_while_idle``), or close the session and say why it cannot."""
    from rlm_runtime import contextual
    from rlm_runtime.errors import ConfigError, RLMError

    why = None
    if session.memory is None:
        why = "--fill-quality fills a memory store: use it with --memory"
    elif session.memory.db.readonly:
        why = "--fill-quality needs a memory store open for writing"
    elif not contextual.installed(session.paths.models):
        why = f"--fill-quality needs the quality model ({contextual.INSTALL_HINT})"
    if why is None:
        try:
            session.memory.fill_while_idle(idle_s=FILL_IDLE_S)
            return
        except RLMError as e:
            why = f"--fill-quality: {e}"
    session.close()
    raise ConfigError(why)


class Operation:
    """A question or a cell on its own thread. ``cancel()`` may come before the session has
    registered the run; ``tick()`` (called by the waiting front end) sends it again then."""

    def __init__(self, work: Callable[[], Any], session: Any) -> None:
        self._work = work
        self._session = session
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None
        self.cancel_requested = False
        self._cancel_sent = False
        self._thread = threading.Thread(target=self._main, name="rlm-repl-run", daemon=True)

    def _main(self) -> None:
        try:
            self.result = self._work()
        except BaseException as e:  # re-raised on the REPL's thread, which reports it
            self.error = e
        finally:
            self.done.set()

    def start(self) -> None:
        self._thread.start()

    def cancel(self) -> None:
        """A person's Ctrl-C: sent now, and again at each press (a cell that was just
        starting when the first one came may have missed it)."""
        self.cancel_requested = True
        self._cancel_sent = False
        self.tick()

    def tick(self) -> None:
        if self.cancel_requested and not self._cancel_sent and not self.done.is_set():
            self._cancel_sent = bool(self._session.cancel())


class Frontend(Protocol):
    def wait(self, op: Operation) -> None:
        """Return when ``op.done`` is set; meanwhile turn the person's Ctrl-C into ``op.cancel()``."""

    def confirm(self, question: str) -> bool | None:
        """Ask the person ``question``: True only for a yes; None when nobody can be asked.
        May raise ``KeyboardInterrupt`` / ``EOFError`` (the person wants out of the replay)."""


class Repl:
    """One REPL session: the session, its display, HUD and transcript.

    Args:
        config: how it was started.
        display: where everything is printed.
        frontend: waits for questions and cells (see ``Frontend``).
        echo: print each entry before running it (a script's log, where no prompt shows it).
    """

    def __init__(self, config: ReplConfig, display: Display, frontend: Frontend, *, echo: bool = False) -> None:
        self.config = config
        self.display = display
        self.frontend = frontend
        self.echo = echo
        self.session = open_session(config, self._on_event)
        self.hud = Hud(self.session.setup.client.model, worker_rss=self.session.worker_rss, budget=self._budget,
                       in_flight=self._in_flight, totals=self.session.budget.totals)
        self.transcript = Transcript()
        #: The variables in the worker after the last question or cell (for completion).
        self.names: list[str] = []
        self.types: dict[str, str] = {}  # each variable's type name (attribute completion)
        self.exiting = False
        #: The limits set with /limits: they stay through a /profile, as flags win over a
        #: profile on the command line.
        self.limit_overrides: dict[str, object] = {}
        self.cancelled = False  # the last question or cell was cancelled (stops a replay)
        self._replay_depth = 0

    def close(self) -> None:
        self.session.close()

    # ------------------------------------------------------------------ entries

    def handle(self, text: str, *, python: bool = False, replayed_from: str | None = None) -> bool:
        """Run one entry: a ``/command``, a cell (``>>>``, or any line in python mode), or a
        question. Returns False when it failed (the reason is printed).

        ``replayed_from`` names where a replayed entry came from (a transcript, standard
        input): a command that is not read-only then runs only if the person says yes.
        """
        entry = text.strip()
        if not entry:
            return True
        self.cancelled = False
        try:
            if entry.lower() in LEAVE_WORDS:
                if self.echo:
                    self._echo(Entry("command", entry))
                self.exiting = True
                return True
            entry = COMMAND_WORDS.get(entry.lower(), entry)
            if entry.startswith("/"):
                if self.echo:
                    self._echo(Entry("command", entry))
                if replayed_from is not None and not self._may_run(entry, replayed_from):
                    return False
                ok = run_command(self, entry)
                if ok:
                    self.transcript.add("command", entry)
                return ok
            if python or entry.startswith(CELL_PREFIX):
                return self.run_cell(cell_code(text))
            return self.ask(entry)
        except Exception as e:  # a bug of ours: one line, and the REPL goes on
            from rlm_runtime.config import debug_enabled

            if debug_enabled():
                import traceback

                traceback.print_exc()
            self.display.error(f"internal error: {type(e).__name__}: {e} (please report; RLM_DEBUG=1 shows the traceback)")
            return False

    def ask(self, question: str) -> bool:
        if self.echo:
            self._echo(Entry("question", question))
        before = list(self.names)
        self.hud.start("question", self.session.limits.max_iterations)
        result = self._run(lambda: self.session.ask(question))
        self.display.answer(result)
        said = result.answer if result.answer is not None else f"no answer: {one_line(str(result.error))}"
        self.transcript.add("question", question, said)
        self.cancelled = result.error_type == "Cancelled"
        self._after(before, self.hud.worker_restarted)
        return result.answer is not None

    def run_cell(self, code: str) -> bool:
        if not code.strip():
            return True
        if self.echo:
            self._echo(Entry("cell", code))
        before = list(self.names)
        self.hud.start("cell")
        result = self._run(lambda: self.session.execute(code))
        self.display.cell(result)
        self.transcript.add("cell", code, "\n".join(x for x in (result.stdout.rstrip("\n"), result.error or "") if x))
        self.cancelled = result.error_type == "KeyboardInterrupt"
        self._after(before, result.worker_restarted)
        return result.ok

    def _run(self, work: Callable[[], Any]) -> Any:
        op = Operation(work, self.session)
        op.start()
        try:
            self.frontend.wait(op)
        finally:
            self.hud.stop()
        if op.error is not None:
            raise op.error
        return op.result

    def _after(self, before: list[str], restarted: bool) -> None:
        self.refresh_names()
        if restarted:
            lost = [n for n in before if n not in self.names]
            self.display.note("the worker was replaced: " + (f"variables lost: {', '.join(lost)}" if lost else "no variables were lost"))

    def refresh_names(self) -> None:
        try:
            self.types = self.session.variables()
        except Exception:  # the session is closing or the worker is gone: no names to offer
            self.types = {}
        self.names = list(self.types)

    def _may_run(self, command: str, source: str) -> bool:
        """Whether a replayed command may run: a read-only one may; any other is asked about
        (a terminal) or refused (no one to ask), and a refusal is printed naming it. Ctrl-C or
        Ctrl-D at the question also stops the replay."""
        if read_only(command):
            return True
        try:
            answer = self.frontend.confirm(question(command, source))
        except (KeyboardInterrupt, EOFError):  # Ctrl-C / Ctrl-D at the question: no, and stop the replay
            self.cancelled = True
            answer = False
        if answer:
            return True
        self.display.error(refusal(command, source) if answer is None else f"not run: {shown(command)}")
        return False

    def replay(self, entries: list[str], *, source: str) -> bool:
        """Run a loaded transcript's entries in order, under the replay rule (``replay.py``);
        stops at /exit or a cancelled entry."""
        if self._replay_depth >= MAX_REPLAY_DEPTH:
            self.display.error(f"/load nested more than {MAX_REPLAY_DEPTH} deep: not loading {source}")
            return False
        self.display.note(f"replaying {len(entries)} entries from {source}")
        ok = True
        self._replay_depth += 1
        try:
            for entry in entries:
                if self.exiting:
                    break
                if not self.echo:
                    self._echo(Entry("cell" if entry.startswith(CELL_PREFIX) else "question", entry.removeprefix(CELL_PREFIX).strip()
                                     if entry.startswith(CELL_PREFIX) else entry))
                ok = self.handle(entry, replayed_from=source) and ok
                if self.cancelled:
                    self.display.note("replay stopped")
                    return False
        finally:
            self._replay_depth -= 1
        return ok

    def _echo(self, entry: Entry) -> None:
        lines = entry_lines(entry)
        prompt = "" if entry.kind == "cell" else "rlm> "
        for line in lines[:1]:
            self.display.printer([("class:prompt", prompt), ("", line)], err=True)
        for line in lines[1:]:
            self.display.printer([("", line)], err=True)

    # ------------------------------------------------------------------ events and gauges

    def _on_event(self, event: dict[str, Any]) -> None:
        self.hud.on_event(event)
        self.display.event(event)

    def _budget(self) -> tuple[float, float | None]:
        budget = self.session.budget
        return budget.cost_usd, budget.limits.max_cost_usd

    def _in_flight(self) -> int | None:
        return self.session.calls_in_flight()


def cell_code(text: str) -> str:
    """The code of a cell entry: without its ``>>>`` (and ``...`` continuation prompts), dedented."""
    lines = text.strip("\n").split("\n")
    first = lines[0].lstrip()
    if first.startswith(CELL_PREFIX):
        first = first[len(CELL_PREFIX):]
        first = first[1:] if first.startswith(" ") else first
    rest = [line[4:] if line.startswith("... ") else line[3:] if line == "..." else line for line in lines[1:]]
    return textwrap.dedent("\n".join([first, *rest])).strip("\n")
