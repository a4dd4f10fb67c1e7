"""The terminal front end of ``rlm repl``: a prompt-toolkit prompt, and a run view with the HUD.

The prompt (``PromptSession``) edits one entry with history per project, completion and,
for cells, Python highlighting and ptpython's multi-line rules: Enter sends, except while a
cell is incomplete (a trailing ``:``, an open bracket, an indented block not yet closed by
an empty line), where it starts a new line; Meta+Enter always sends; F2 switches python
mode (every entry a cell). While a question or cell runs, a one-line application shows the
HUD (redrawn at most every ``hud.REFRESH_S``), prints the run's iterations above it, turns
Ctrl-C into a cancel, and keeps whatever else is typed for the next prompt.
"""

from __future__ import annotations

import asyncio
import codeop
import contextlib
import hashlib
import re
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prompt_toolkit import PromptSession
from prompt_toolkit.application import Application
from prompt_toolkit.enums import DEFAULT_BUFFER
from prompt_toolkit.filters import has_focus
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.input.typeahead import store_typeahead
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.keys import Keys
from prompt_toolkit.layout import Layout, Window
from prompt_toolkit.layout.controls import FormattedTextControl
from prompt_toolkit.lexers import DynamicLexer, Lexer, PygmentsLexer
from prompt_toolkit.styles import Style
from pygments.lexers.python import PythonLexer

from rlm_runtime import private
from rlm_runtime.repl.completion import ReplCompleter
from rlm_runtime.repl.controller import Operation, Repl, ReplConfig, cell_code
from rlm_runtime.repl.display import Display, Printer, TerminalPrinter
from rlm_runtime.repl.hud import REFRESH_S, human_count, short_model
from rlm_runtime.repl.transcript import CELL_PREFIX

STYLE = Style.from_dict({
    "prompt": "ansicyan bold",
    "prompt.py": "ansigreen bold",
    "dim": "#888888",
    "info": "ansicyan",
    "error": "ansired",
    "warning": "ansiyellow",
    "answer": "bold",
    "output": "",
    "bottom-toolbar": "noreverse bg:#303030 #d0d0d0",
    "hud": "bg:#303030 #ffffff",
    "hud.key": "bg:#303030 #8a8a8a",
    "hud.hint": "bg:#303030 #ffaf00",
})


def history_file(home: Path, project: Path) -> Path:
    """``$RLM_HOME/history/<folder name>-<hash of its path>``: one history per project folder."""
    resolved = project.resolve()
    digest = hashlib.sha1(str(resolved).encode("utf-8", "surrogateescape")).hexdigest()[:10]
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", resolved.name or "root")[:40]
    return home / "history" / f"{name}-{digest}"


def needs_more(text: str) -> bool:
    """Whether a cell being typed (``>>>`` and all) is incomplete, so Enter starts a new line:
    a first line ending in ``:`` or ``\\`` or leaving a bracket open, or a block of several
    lines whose last is not empty yet (an empty line ends it, as in ptpython)."""
    lines = text.split("\n")
    if len(lines) > 1:
        return bool(lines[-1].strip())
    code = cell_code(text)
    if not code.strip():
        return False
    if code.rstrip().endswith((":", "\\")):
        return True
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return codeop.compile_command(code, symbol="exec") is None
    except (SyntaxError, ValueError, OverflowError):
        return False  # send it: the sandbox says what is wrong


class TerminalFrontend:
    """Reads entries with a prompt and waits for runs with the HUD showing.

    Args:
        input / output: prompt-toolkit's (default: the terminal; tests pass a pipe input
            and a ``DummyOutput``).
        history: the prompt's history (default: in memory).
    """

    def __init__(self, *, input: Any = None, output: Any = None, history: History | None = None) -> None:
        self.input = input
        self.output = output
        self.history = history or InMemoryHistory()
        self.python_mode = False
        self.repl: Repl | None = None
        self.printer: TerminalPrinter | None = None
        self._prompt: PromptSession[str] | None = None

    # ------------------------------------------------------------------ the prompt

    def bind(self, repl: Repl | None) -> None:
        """Make the prompt; ``repl`` may come later (``start``), the prompt works before it."""
        self.repl = repl
        completer = ReplCompleter(lambda: self.python_mode, lambda: self.repl.names if self.repl else [], _limit_names,
                                  _model_names, types=lambda: self.repl.types if self.repl else {})
        python = PygmentsLexer(PythonLexer)

        def lexer() -> Lexer | None:
            text = self._prompt.default_buffer.text if self._prompt else ""
            return python if self.python_mode or text.lstrip().startswith(CELL_PREFIX) else None

        self._prompt = PromptSession(
            message=self._message, multiline=True, prompt_continuation=lambda width, *_: [("class:dim", "... ".rjust(width))],
            key_bindings=self._bindings(), history=self.history, completer=completer, complete_while_typing=False,
            lexer=DynamicLexer(lexer), bottom_toolbar=self._toolbar, style=STYLE, include_default_pygments_style=True,
            input=self.input, output=self.output, enable_history_search=False, mouse_support=False)
        if self.output is None:
            self.output = self._prompt.app.output
        if self.input is None:
            self.input = self._prompt.app.input

    def _message(self) -> FormattedText:
        return FormattedText([("class:prompt.py", ">>> ")] if self.python_mode else [("class:prompt", "rlm> ")])

    def start(self, make: Callable[[], Repl]) -> None:
        """Build the REPL (its session: imports, sandbox set-up) on a thread while the
        prompt is already up; the first entry waits for it (``ready``)."""
        self._ready = threading.Event()
        self._start_error: BaseException | None = None

        def build() -> None:
            try:
                self.repl = make()
            except BaseException as e:  # shown when the first entry needs the session, or at once
                self._start_error = e
                app = self._prompt.app if self._prompt is not None else None
                if app is not None and app.is_running and app.loop is not None:
                    app.loop.call_soon_threadsafe(lambda: app.exit(exception=_StartFailed()) if app.is_running else None)
            finally:
                self._ready.set()
                running = self._prompt.app if self._prompt is not None else None
                # The toolbar has something to show now: redraw on the app's own loop (from this
                # thread, invalidate() looks for a running loop here and raises when the app's
                # loop is not set yet); a loop closed meanwhile has nothing left to redraw.
                if running is not None and running.is_running and running.loop is not None:
                    with contextlib.suppress(RuntimeError):
                        running.loop.call_soon_threadsafe(running.invalidate)

        threading.Thread(target=build, name="rlm-repl-start", daemon=True).start()

    def ready(self) -> Repl:
        """The REPL, once built (raises what building it raised)."""
        self._ready.wait()
        if self._start_error is not None:
            raise self._start_error
        assert self.repl is not None
        return self.repl

    def _toolbar(self) -> FormattedText:
        repl = self.repl
        if repl is None:
            return FormattedText([("class:hud.hint", " starting the session... ")])
        try:
            totals = repl.session.budget.totals()
            cap = repl.session.budget.limits.max_cost_usd
            left = f" (left ${max(0.0, cap - totals['cost_usd']):.4f})" if cap is not None else ""
            mode = "F2: questions" if self.python_mode else "F2: python mode"
            asked = repl.session.usage()["questions"]
            return FormattedText([("class:hud.key", " model "), ("class:hud", short_model(repl.hud.model)),
                    ("class:hud.key", "  session "),
                    ("class:hud", f"{asked} question{'' if asked == 1 else 's'}, {human_count(totals['input_tokens'])} tokens in / "
                                  f"{human_count(totals['output_tokens'])} out, ${totals['cost_usd']:.4f}{left}"),
                    ("class:hud.key", "  vars "), ("class:hud", str(len(repl.names))),
                    ("class:hud.hint", f"  {mode}  /help  Ctrl-D exits ")])
        except Exception:  # a toolbar must never break the prompt
            return FormattedText([])

    def _bindings(self) -> KeyBindings:
        kb = KeyBindings()
        focused = has_focus(DEFAULT_BUFFER)

        @kb.add("f2")
        def _toggle(event: KeyPressEvent) -> None:
            self.python_mode = not self.python_mode
            event.app.invalidate()

        @kb.add("enter", filter=focused)
        def _enter(event: KeyPressEvent) -> None:
            buffer = event.current_buffer
            text = buffer.text
            cell = self.python_mode or text.lstrip().startswith(CELL_PREFIX)
            at_end = not buffer.document.text_after_cursor.strip()
            if cell and not text.lstrip().startswith("/") and at_end and needs_more(text):
                line = buffer.document.current_line_before_cursor
                indent = line[: len(line) - len(line.lstrip())]
                if line.lstrip().startswith(CELL_PREFIX):
                    indent = ""
                if line.rstrip().endswith(":"):
                    indent += "    "
                buffer.insert_text("\n" + indent)
            else:
                buffer.validate_and_handle()

        @kb.add("escape", "enter", filter=focused)
        def _send(event: KeyPressEvent) -> None:
            event.current_buffer.validate_and_handle()

        return kb

    def read(self) -> str:
        """One entry (raises ``KeyboardInterrupt`` on Ctrl-C, ``EOFError`` on Ctrl-D)."""
        assert self._prompt is not None, "bind() first"
        prompt = self._prompt

        def stop_if_failed() -> None:  # the session failed before this prompt was up
            if getattr(self, "_start_error", None) is not None:
                prompt.app.exit(exception=_StartFailed())

        return prompt.prompt(pre_run=stop_if_failed)

    def confirm(self, question: str) -> bool:
        """Ask a yes/no question (a replayed command that is not read-only): only y or yes is
        yes, Enter is no (raises ``KeyboardInterrupt`` on Ctrl-C, ``EOFError`` on Ctrl-D)."""
        asking: PromptSession[str] = PromptSession(input=self.input, output=self.output)
        answer = asking.prompt(FormattedText([("class:warning", question)]), style=STYLE)
        return answer.strip().lower() in ("y", "yes")

    # ------------------------------------------------------------------ a run

    def wait(self, op: Operation) -> None:
        assert self.repl is not None
        hud = self.repl.hud
        typed: list[Any] = []
        kb = KeyBindings()

        @kb.add("c-c")
        def _cancel(event: KeyPressEvent) -> None:
            hud.cancelling = True
            op.cancel()
            event.app.invalidate()

        @kb.add(Keys.Any)
        def _keep(event: KeyPressEvent) -> None:
            typed.extend(event.key_sequence)

        app: Application[None] = Application(
            layout=Layout(Window(FormattedTextControl(lambda: FormattedText(hud.fragments())), height=1, style="class:bottom-toolbar")),
            key_bindings=kb, style=STYLE, refresh_interval=REFRESH_S, erase_when_done=True, input=self.input,
            output=self.output)

        async def watch() -> None:
            while not op.done.is_set():
                op.tick()
                await asyncio.sleep(0.05)
            app.exit()

        def pre_run() -> None:
            if self.printer is not None:
                self.printer.attach(app)
            app.create_background_task(watch())

        try:
            app.run(pre_run=pre_run, handle_sigint=False)
        except (EOFError, KeyboardInterrupt):  # input closed, or a signal: the run still ends first
            op.cancel()
            while not op.done.wait(0.05):
                op.tick()
        finally:
            if self.printer is not None:
                self.printer.detach()
            if typed:
                store_typeahead(self.input, typed)

    # ------------------------------------------------------------------ the loop

    def loop(self) -> int:
        """Read and run entries until Ctrl-D or /exit (raises what building the REPL raised)."""
        while self.repl is None or not self.repl.exiting:
            try:
                text = self.read()
            except KeyboardInterrupt:
                continue  # Ctrl-C at the prompt clears the line
            except EOFError:
                break
            except _StartFailed:
                break  # ready() below raises the reason
            self.ready().handle(text, python=self.python_mode)
        self.ready()
        return 0


class _StartFailed(Exception):
    """Ends the first prompt when the session could not be made (``ready()`` says why)."""


def _limit_names() -> list[str]:
    from rlm_runtime.budget import RunLimits

    return list(RunLimits.model_fields)


def _model_names() -> list[str]:
    try:
        from rlm_runtime.llm import models

        return [f"local:{name}" for name in models.MODELS] + ["scripted:"]
    except Exception:  # completion only
        return ["scripted:"]


def run_terminal(config: ReplConfig, *, home: Path, notes: tuple[str, ...] = (), input: Any = None, output: Any = None,
                 printer: Printer | None = None, color: bool = True, history: History | None = None) -> int:
    """The interactive REPL on a terminal (or on ``input``/``output``). Returns the exit status.

    Args:
        home: ``$RLM_HOME`` (the history lives under it).
        notes: lines to show before the first prompt (the model default's reason, say).
        printer: where output goes (default: the terminal, styled; tests pass a ``PlainPrinter``).
    """
    if history is None:
        path = history_file(home, Path.cwd())
        private.make_dir(path.parent)
        private.create_file(path)  # every line typed, questions and pasted text: 0600
        history = FileHistory(str(path))
    frontend = TerminalFrontend(input=input, output=output, history=history)
    if printer is None:
        from prompt_toolkit.output import create_output

        frontend.output = frontend.output or create_output()
        frontend.printer = TerminalPrinter(frontend.output, STYLE)
        printer = frontend.printer
    display = Display(printer, color=color and frontend.printer is not None, live=config.live)
    for note in notes:
        display.note(note)
    n = len(config.contexts)
    # Two lines that each fit 80 columns (the first with a model name of up to 36 characters).
    display.info(f"rlm repl: {config.model}, {n} context{'s' if n != 1 else ''}; /help; Ctrl-D leaves")
    display.info("a line is a question; '>>> code' or F2 runs Python in the same namespace")
    # The prompt comes up at once; the session is made meanwhile (most of the start-up time).
    frontend.bind(None)
    frontend.start(lambda: Repl(config, display, frontend))
    try:
        return frontend.loop()
    finally:
        try:
            frontend.ready().close()
        except BaseException:  # it never started: loop() has raised why
            pass


__all__ = ["STYLE", "TerminalFrontend", "history_file", "needs_more", "run_terminal"]
