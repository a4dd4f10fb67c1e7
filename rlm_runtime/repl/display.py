"""What the REPL prints: a question's iterations as they happen, answers, cell results, notes.

Everything printed goes through a ``Printer``, and every printer passes each piece of text
through ``termsafe.printable`` first: models, cells and context files write most of what
is shown, and their control characters must be seen escaped, never obeyed. Code is
escaped before it is highlighted, so the highlighter only ever sees safe text.

Two printers: ``PlainPrinter`` writes text to a stream (no colours: pipes, files, tests);
``TerminalPrinter`` writes styled text through prompt-toolkit, above the run view's HUD
while one is showing (``attach``/``detach``).
"""

from __future__ import annotations

import threading
from typing import Any, Protocol, TextIO

from rlm_runtime.termsafe import one_line, printable, printable_lines
from rlm_runtime.trajectory.live import ReplyLines

Fragments = list[tuple[str, str]]

#: Lines of a model's code block shown per iteration, and lines of its output.
CODE_LINES = 15
OUTPUT_LINES = 8
#: Characters of one shown output line, and of a person's cell output.
LINE_CHARS = 160
CELL_CHARS = 20_000


class Printer(Protocol):
    """Prints one block of styled text (a newline is added). ``err`` marks notes and errors."""

    def __call__(self, fragments: Fragments, *, err: bool = False) -> None: ...


def _safe(fragments: Fragments) -> Fragments:
    return [(style, printable(text)) for style, text in fragments]


class PlainPrinter:
    """Writes the text of each block to ``out`` (``err`` blocks to ``err``), styles dropped."""

    def __init__(self, out: TextIO, err: TextIO | None = None) -> None:
        self.out = out
        self.err = err or out
        self._lock = threading.Lock()

    def __call__(self, fragments: Fragments, *, err: bool = False) -> None:
        text = "".join(t for _, t in _safe(fragments))
        stream = self.err if err else self.out
        with self._lock:
            stream.write(text + "\n")
            stream.flush()


class TerminalPrinter:
    """Styled output through prompt-toolkit. While a run view is attached, blocks printed
    from other threads are queued and written above it on its event loop; whatever is left
    when it detaches is written then."""

    def __init__(self, output: Any, style: Any) -> None:
        self.output = output
        self.style = style
        self._lock = threading.Lock()
        self._pending: list[Fragments] = []
        self._scheduled = False
        self._app: Any = None

    def attach(self, app: Any) -> None:
        with self._lock:
            self._app = app

    def clear(self) -> None:
        """Clear the terminal (``/clear``, ``clear``): between entries, with no view attached."""
        self._drain()
        self.output.erase_screen()
        self.output.cursor_goto(0, 0)
        self.output.flush()

    def detach(self) -> None:
        with self._lock:
            self._app = None
            self._scheduled = False
        self._drain()

    def __call__(self, fragments: Fragments, *, err: bool = False) -> None:
        block = [*_safe(fragments), ("", "\n")]
        with self._lock:
            self._pending.append(block)
            app = self._app
            schedule = app is not None and not self._scheduled
            if schedule:
                self._scheduled = True
        if app is None:
            self._drain()
        elif schedule:
            try:
                app.loop.call_soon_threadsafe(self._flush_above, app)
            except (RuntimeError, AttributeError):  # the view just ended: detach() prints it
                pass

    def _flush_above(self, app: Any) -> None:
        from prompt_toolkit.application import run_in_terminal

        with self._lock:
            self._scheduled = False
        run_in_terminal(self._drain)

    def _drain(self) -> None:
        from prompt_toolkit.formatted_text import FormattedText
        from prompt_toolkit.renderer import print_formatted_text

        with self._lock:
            blocks, self._pending = self._pending, []
        for block in blocks:
            print_formatted_text(self.output, FormattedText(block), self.style)
        if blocks:
            self.output.flush()


def highlight(code: str, color: bool) -> list[Fragments]:
    """``code`` escaped, then split in lines of fragments (Python-highlighted when ``color``)."""
    text = printable(code)
    if not color:
        return [[("class:code", line)] for line in text.split("\n")]
    from prompt_toolkit.formatted_text import PygmentsTokens, to_formatted_text
    from prompt_toolkit.formatted_text.utils import split_lines
    from pygments.lexers.python import PythonLexer

    tokens = list(PythonLexer().get_tokens(text))
    lines = [list(line) for line in split_lines(to_formatted_text(PygmentsTokens(tokens)))]
    if lines and not any(part[1] for part in lines[-1]):
        lines.pop()  # the lexer ends the text with a newline of its own
    return [[(part[0], part[1]) for part in line] for line in lines]


class Display:
    """Turns events and results into printed blocks.

    Args:
        printer: where blocks go.
        color: highlight code (a terminal); otherwise plain text.
        live: print iterations as they happen (``--quiet`` turns it off).
    """

    def __init__(self, printer: Printer, *, color: bool = False, live: bool = True) -> None:
        self.printer = printer
        self.color = color
        self.live = live
        self._replies = ReplyLines()  # the replies streaming in, joined into lines
        self._replies_lock = threading.Lock()  # events come from the runs' threads

    # ------------------------------------------------------------------ plain notes

    def info(self, text: str) -> None:
        self.printer([("class:info", text)])

    def out(self, text: str) -> None:
        self.printer([("", text)])

    def note(self, text: str) -> None:
        self.printer([("class:dim", text)], err=True)

    def error(self, text: str) -> None:
        self.printer([("class:error", one_line(text))], err=True)

    def clear(self) -> None:
        """Clear the screen of a terminal; nothing without one (a pipe, a file)."""
        clear = getattr(self.printer, "clear", None)
        if callable(clear):
            clear()

    def rows(self, rows: list[Fragments]) -> None:
        for row in rows:
            self.printer(row)

    # ------------------------------------------------------------------ live events

    def event(self, event: dict[str, Any]) -> None:
        """Print one trajectory event of a running question (called on the run's threads)."""
        if not self.live:
            return
        kind = event.get("type")
        depth = int(event.get("depth") or 0)
        pad = "  " * depth
        if kind in ("model_call", "model_text", "cell_start", "iteration", "run_end"):
            with self._replies_lock:
                self._reply(event, pad)
        if kind == "run_start" and depth:
            self.printer([("class:dim", f"{pad}-> rlm_query (depth {depth}): "), ("", one_line(str(event.get('query')))[:100])], err=True)
        elif kind == "run_end" and depth:
            said = event.get("answer") if event.get("answer") is not None else f"no answer: {event.get('error')}"
            self.printer([("class:dim", f"{pad}<- "), ("", one_line(str(said))[:LINE_CHARS])], err=True)
        elif kind == "sub_call":
            said = event.get("response") if event.get("error") is None else f"error: {event.get('error')}"
            self.printer([("class:dim", f"{pad}    {event.get('kind')} ({event.get('duration_s') or 0:.1f}s): "),
                          ("", one_line(str(event.get("prompt") or ""))[:60]), ("class:dim", " -> "),
                          ("", one_line(str(said or ""))[:80])], err=True)
        elif kind == "tool_call":
            said = event.get("result") if event.get("error") is None else f"error: {event.get('error')}"
            self.printer([("class:dim", f"{pad}    {event.get('name')}: "), ("", one_line(str(said or ""))[:LINE_CHARS])], err=True)
        elif kind == "worker_wait" and float(event.get("waited_s") or 0) >= 1.0:
            self.printer([("class:dim", f"{pad}    waited {event.get('waited_s'):.1f}s for a worker")], err=True)

    def _reply(self, event: dict[str, Any], pad: str) -> None:
        """A turn as it happens: its header when the model is called, the reply a line at a
        time as it streams, the rest of it when a cell starts, the outputs when it ends."""
        kind = event.get("type")
        replies = self._replies
        if kind == "model_call":
            replies.begin(event)
            tag = "forced answer" if event.get("forced") else f"iteration {event.get('iteration')}"
            self.printer([("class:dim", f"{pad}--- {tag} ({event.get('prompt_tokens') or 0:,} tokens of prompt)")], err=True)
        elif kind == "model_text":
            for line in replies.feed(event):
                self.printer([("class:dim", f"{pad}  | "), ("", line)], err=True)
        elif kind == "run_end":
            replies.end(event.get("run_id"))
        else:
            for line in replies.flush(event.get("run_id")):
                self.printer([("class:dim", f"{pad}  | "), ("", line)], err=True)
            if kind == "iteration":
                self._iteration(event, pad, streamed=replies.streamed(event))

    def _iteration(self, event: dict[str, Any], pad: str, *, streamed: bool = False) -> None:
        """A turn's code (unless it was shown as it streamed) and its cells' output."""
        tag = "forced answer" if event.get("forced") else f"iteration {event.get('iteration')}"
        if not streamed:
            self.printer([("class:dim", f"{pad}--- {tag} ({event.get('duration_s') or 0:.1f}s)")], err=True)
        blocks = event.get("code_blocks") or []
        outputs = event.get("outputs") or []
        for n, code in enumerate(blocks):
            lines = [] if streamed else highlight(code.strip("\n"), self.color)
            for line in lines[:CODE_LINES]:
                self.printer([("class:dim", f"{pad}  | "), *line], err=True)
            if len(lines) > CODE_LINES:
                self.printer([("class:dim", f"{pad}  | ... {len(lines) - CODE_LINES} more lines")], err=True)
            out = outputs[n] if n < len(outputs) else {}
            shown = printable_lines(out.get("stdout") or "")
            for row in shown[:OUTPUT_LINES]:
                self.printer([("class:dim", f"{pad}    "), ("class:output", row[:LINE_CHARS])], err=True)
            if len(shown) > OUTPUT_LINES:
                self.printer([("class:dim", f"{pad}    ... {len(shown) - OUTPUT_LINES} more lines")], err=True)
            if out.get("error"):
                self.printer([("class:dim", f"{pad}    "), ("class:error", one_line(str(out["error"]))[:LINE_CHARS * 2])], err=True)
        if not blocks and not streamed:
            self.printer([("class:dim", f"{pad}  (no code) "), ("", one_line(str(event.get("response") or ""))[:LINE_CHARS])], err=True)
        if streamed:  # the turn's header came when it began: its time comes after its output
            self.printer([("class:dim", f"{pad}  ({event.get('duration_s') or 0:.1f}s)")], err=True)

    # ------------------------------------------------------------------ results

    def answer(self, result: Any) -> None:
        """A question's outcome: the answer, or why there is none (and what was found)."""
        usage = _usage_line(result)
        if result.answer is not None:
            self.printer([("class:answer", result.answer)])
            self.printer([("class:dim", usage)], err=True)
            return
        cancelled = result.error_type == "Cancelled"
        head = "cancelled" if cancelled else f"no answer: {result.error}"
        self.printer([("class:error", one_line(head))], err=True)
        if result.partial:
            partial = result.partial if len(result.partial) <= 500 else result.partial[:500] + " ..."
            self.printer([("class:dim", "partial output: "), ("", partial)], err=True)
        self.printer([("class:dim", usage)], err=True)

    def cell(self, result: Any) -> None:
        """A person's cell: its output, error, warnings and FINAL value."""
        if result.stdout:
            text = result.stdout
            if len(text) > CELL_CHARS:
                text = text[:CELL_CHARS] + f"\n... {len(result.stdout) - CELL_CHARS} more characters"
            self.printer([("", text[:-2] if text.endswith("\r\n") else text.removesuffix("\n"))])
        for warning in result.warnings or ():
            self.printer([("class:warning", f"warning: {one_line(str(warning))}")], err=True)
        if result.error:
            self.printer([("class:error", str(result.error).rstrip("\n"))], err=True)
        if result.has_final:
            self.printer([("class:answer", f"FINAL: {result.final}")])


def _usage_line(result: Any) -> str:
    calls = tokens_in = tokens_out = 0
    cost = 0.0
    for usage in (result.usage or {}).values():
        calls += int(usage.get("calls") or 0)
        tokens_in += int(usage.get("input_tokens") or 0)
        tokens_out += int(usage.get("output_tokens") or 0)
        cost += float(usage.get("cost_usd") or 0.0)
    its = "iteration" if result.iterations == 1 else "iterations"
    return (f"({result.iterations} {its}, {calls} model call{'' if calls == 1 else 's'}, {tokens_in} tokens in / {tokens_out} out, "
            f"${cost:.4f}, {result.duration_s:.1f}s)")
