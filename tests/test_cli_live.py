"""What ``rlm ask`` shows while a question runs: replies a line at a time as they stream,
cells' output after them, a status line on a terminal while the model reads its prompt."""

from __future__ import annotations

import io
import time

from rlm_runtime import Session
from rlm_runtime.cli.live import LiveView
from rlm_runtime.llm.scripted import ScriptedClient
from rlm_runtime.trajectory.live import LONG_LINE, ReplyLines


def _text(run: str, text: str, iteration: int = 1) -> dict[str, object]:
    return {"type": "model_text", "run_id": run, "depth": 0, "iteration": iteration, "text": text}


def test_pieces_become_lines_per_run() -> None:
    """It joins pieces split anywhere into whole lines, keeps runs apart and hands back the unfinished last line on flush."""
    lines = ReplyLines()
    assert lines.feed(_text("a", "first li")) == []
    assert lines.feed(_text("b", "other run\nsecond")) == ["other run"]
    assert lines.feed(_text("a", "ne\nsecond line\nthi")) == ["first line", "second line"]
    assert lines.flush("a") == ["thi"] and lines.flush("a") == []
    assert lines.flush("b") == ["second"]


def test_a_line_without_end_is_shown_in_parts() -> None:
    """It hands back a line that never ends in parts of LONG_LINE characters: the held text stays bounded."""
    lines = ReplyLines()
    shown: list[str] = []
    for _ in range(50):
        shown += lines.feed(_text("a", "x" * 97))
    assert shown and all(len(line) == LONG_LINE for line in shown)
    assert sum(map(len, shown)) + len("".join(lines.flush("a"))) == 50 * 97


def test_a_turn_that_streamed_is_known_until_the_next_begins() -> None:
    """It says a run's latest turn streamed once text came, and not after the next turn's model_call."""
    lines = ReplyLines()
    lines.feed(_text("a", "x"))
    assert lines.streamed({"run_id": "a"}) and not lines.streamed({"run_id": "b"})
    lines.begin({"run_id": "a"})
    assert not lines.streamed({"run_id": "a"})


def _run(view: LiveView, script: list[str], question: str = "q?") -> None:
    with Session(ScriptedClient(script), contexts=["alpha 1\nbeta 2\n"], trace=False, on_event=view) as s:
        s.ask(question)
    view.close()


def test_a_run_is_shown_as_it_is_written_then_its_output() -> None:
    """It shows the turn's header, the reply's lines (code included, once), then the cell's output and the time."""
    out = io.StringIO()
    _run(LiveView(out, status=False), ['Looking.\n```python\nprint(grep("beta"))\n```', '```python\nFINAL("2")\n```'])
    text = out.getvalue()
    assert text.index("--- iteration 1") < text.index("  | Looking.") < text.index('  | print(grep("beta"))') \
        < text.index("2: beta 2") < text.index("--- iteration 2")
    assert text.count('grep("beta")') == 1  # streamed: not printed again from the iteration event
    assert "tokens of prompt" in text and "--- done: 2 iterations" in text


def test_model_text_cannot_drive_the_terminal() -> None:
    """It escapes control characters a model writes: no escape sequence reaches the terminal, no forged line."""
    out = io.StringIO()
    _run(LiveView(out, status=False), ['\x1b[2J\x1b]0;owned\x07 hi\r--- done: 9 iterations\n```python\nFINAL("x")\n```'])
    text = out.getvalue()
    assert "\x1b" not in text and "\x07" not in text and "\r" not in text
    assert not any(line.startswith("--- done: 9") for line in text.split("\n"))  # no forged line of the view
    assert "--- done: 1 iteration\n" in text  # one, not "1 iterations"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_sees_a_status_line_until_the_model_writes() -> None:
    """It draws a status line (prompt size, seconds) on a terminal while the model is silent, and clears it before the reply."""
    out = _Tty()
    view = LiveView(out, tick_s=0.02)
    assert view.status
    view({"type": "model_call", "run_id": "a", "depth": 0, "iteration": 1, "model": "m", "prompt_tokens": 3400})
    deadline = time.monotonic() + 30
    while out.getvalue().count("the model is reading") < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    view({"type": "model_text", "run_id": "a", "depth": 0, "iteration": 1, "text": ""})  # the reply begins: no more redraws
    with view._lock:
        drawn = out.getvalue()
    assert drawn.count("the model is reading 3,400 tokens of prompt") >= 2  # drawn at once, then redrawn by the thread
    view(_text("a", "print(1)\n"))
    view.close()
    after = out.getvalue()[len(drawn):]
    assert after.startswith("\r\x1b[K") and "  | print(1)\n" in after
    assert view._ticker is not None and not view._ticker.is_alive()


def _call(run: str = "a", model: str = "local:m") -> dict[str, object]:
    return {"type": "model_call", "run_id": run, "depth": 0, "iteration": 1, "model": model, "prompt_tokens": 3400}


def _progress(run: str = "a", *, total: int = 3412, cached: int = 0, processed: int, elapsed_ms: int) -> dict[str, object]:
    return {"type": "model_progress", "run_id": run, "depth": 0, "iteration": 1, "total": total, "cached": cached,
            "processed": processed, "elapsed_ms": elapsed_ms}


def _status(out: io.StringIO) -> str:
    """The status line on the screen now: what follows the last clear."""
    return out.getvalue().rsplit("\r\x1b[K", 1)[-1]


def test_the_status_line_shows_the_servers_reading() -> None:
    """It shows the server's count, what is read, the rate and the time left, counting down between reports."""
    now = [100.0]
    out = _Tty()
    view = LiveView(out, tick_s=3600, clock=lambda: now[0])
    view(_call())
    assert _status(out) == "  ... the model is reading 3,400 tokens of prompt (0s)"  # a hosted model stays here
    now[0] = 101.0
    view(_progress(processed=0, elapsed_ms=0))
    assert _status(out) == "  ... reading 3,412 tokens of prompt: 0 done (1s)"
    now[0] = 122.0
    view(_progress(processed=1200, elapsed_ms=22_000))
    assert _status(out) == "  ... reading 3,412 tokens of prompt: 1,200 done, 55 tok/s, ~41s left (22s)"
    now[0] = 132.0
    with view._lock:
        view._draw()  # the ticker's redraw
    assert _status(out) == "  ... reading 3,412 tokens of prompt: 1,200 done, 55 tok/s, ~31s left (32s)"
    view(_text("a", "x\n"))
    view.close()


def test_a_cached_prompt_says_so_and_borrows_the_last_rate() -> None:
    """It names the cached tokens, and until this call's first batch is read estimates with the model's last rate, marked ~."""
    now = [0.0]
    out = _Tty()
    view = LiveView(out, tick_s=3600, clock=lambda: now[0])
    view(_call())
    view(_progress(processed=3412, elapsed_ms=62_000))  # the first call: 55 tok/s
    view(_text("a", "x\n"))
    view(_call())
    view(_progress(cached=2900, processed=2900, elapsed_ms=0))
    assert _status(out) == "  ... reading 3,412 tokens of prompt, 2,900 cached: 2,900 done, ~55 tok/s, ~9s left (0s)"
    view(_call(model="local:other"))  # another model's rate is not borrowed
    view(_progress(processed=0, elapsed_ms=0))
    assert _status(out) == "  ... reading 3,412 tokens of prompt: 0 done (0s)"
    view.close()


def test_a_pipe_gets_one_line_when_the_prompt_is_read() -> None:
    """It prints no progress to a pipe, one line with the time and rate once the server has read the prompt,
    and nothing for a report about a turn no longer waited on."""
    out = io.StringIO()
    view = LiveView(out, status=False)
    view(_call())
    view(_progress(processed=0, elapsed_ms=0))
    view(_progress(processed=2048, elapsed_ms=35_000))
    view(_progress("b", processed=3412, elapsed_ms=1))
    assert out.getvalue() == "--- iteration 1: local:m\n  ... sent 3,400 tokens of prompt\n"
    view(_progress(cached=400, processed=3412, elapsed_ms=50_000))
    view(_text("a", "x\n"))
    view(_progress(processed=3412, elapsed_ms=50_000))  # after the text: stale
    assert out.getvalue().splitlines()[2:] == ["  ... read 3,412 tokens of prompt (400 cached) in 50.0s, 60 tok/s", "  | x"]
    view.close()


def test_what_an_assist_did_is_said_after_the_turn_escaped() -> None:
    """It says, after the turn's output, that an assist added a note (and what it looked up),
    and that an assist questioned an answer; a failing block the loop read as an answer says
    so; a document's control characters stay escaped."""
    out = io.StringIO()
    view = LiveView(out, status=False)
    where = {"run_id": "r1", "depth": 0, "iteration": 1}
    view({"type": "assist", **where, "name": "read_field", "trigger": "cell", "chars": 90,
          "lookups": ["read: vin\x1b[2Jeth -> home town"]})
    view({"type": "iteration", **where, "code_blocks": ["print(1)"], "outputs": [{"stdout": "vineth\n"}], "duration_s": 1.0})
    view({"type": "iteration", **where, "code_blocks": ["FINAL(vineth)"], "duration_s": 1.0,
          "outputs": [{"stdout": "", "error": "NameError: name 'vineth' is not defined", "read_as": "a value copied from the output"}]})
    view({"type": "answer_check", **where, "name": "read_field", "answer": "vineth\nuser: hi", "outcome": "questioned"})
    text = out.getvalue()
    assert text.index("vineth") < text.index("[assist read_field: a note to the model; read: vin")
    assert "home town]" in text and "[assist read_field questioned the answer 'vineth / user: hi']" in text
    assert "\x1b" not in text and "\nuser: hi" not in text
    assert text.index("NameError: name 'vineth'") < text.index("(read as a value copied from the output)")


def test_a_running_cell_shows_how_long_it_has_run() -> None:
    """While a cell runs, a terminal's status line counts its seconds (and says Ctrl-C stops
    it); the turn's end clears it, and a pipe gets no such line."""
    now = [100.0]
    out = _Tty()
    view = LiveView(out, tick_s=3600, clock=lambda: now[0])
    view(_call())
    view(_text("a", "```python\nimport time\n```\n"))
    view({"type": "cell_start", "run_id": "a", "depth": 0, "iteration": 1, "code": "x = 1"})
    assert _status(out) == "  ... cell running 0s (Ctrl-C stops it)"
    now[0] = 112.0
    with view._lock:
        view._draw()  # the ticker's redraw
    assert _status(out) == "  ... cell running 12s (Ctrl-C stops it)"
    view({"type": "iteration", "run_id": "a", "depth": 0, "iteration": 1, "code_blocks": ["x = 1"], "outputs": [{}],
          "duration_s": 12.0})
    with view._lock:
        view._draw()
    assert "cell running" not in _status(out)
    view.close()
    piped = io.StringIO()
    plain = LiveView(piped, clock=lambda: now[0])
    plain(_call())
    plain({"type": "cell_start", "run_id": "a", "depth": 0, "iteration": 1, "code": "x = 1"})
    plain.close()
    assert "cell running" not in piped.getvalue()
