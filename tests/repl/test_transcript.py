"""Transcripts: what /save writes reads back as the same entries (and as a script)."""

from __future__ import annotations

from rlm_runtime.repl.transcript import Transcript, read_entries


def test_round_trip() -> None:
    """It writes questions, cells (with continuation lines) and state commands, and reads them back."""
    t = Transcript()
    t.add("question", "what is x?", "42\nsecond line")
    t.add("cell", "for i in range(2):\n    print(i)\n\nprint('after')", "0\n1")
    t.add("command", "/budget")  # shows only: not kept
    t.add("command", "/limits max_iterations=3")
    text = t.render("scripted:m")
    assert "/budget" not in text
    assert list(read_entries(text.splitlines())) == [
        "what is x?", ">>> for i in range(2):\n    print(i)\n\nprint('after')", "/limits max_iterations=3"]


def test_results_are_escaped_comments() -> None:
    """It keeps an answer's control characters out of the file."""
    t = Transcript()
    t.add("question", "q", "a\x1b]0;x\x07")
    assert "\x1b" not in t.render("m") and "#   a\\x1b]0;x\\x07" in t.render("m")
