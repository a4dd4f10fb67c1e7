"""The display: code highlighted only after it is escaped; every printer escapes."""

from __future__ import annotations

import io

from rlm_runtime.repl.display import Display, PlainPrinter, highlight


def test_highlighting_sees_only_escaped_code() -> None:
    """It escapes control characters before the lexer styles the code."""
    lines = highlight("x = '\x1b]0;t\x07'\nprint(x)", color=True)
    text = "".join(t for line in lines for _, t in line)
    assert "\x1b" not in text and "\\x1b]0;t\\x07" in text
    assert any(style.startswith("class:pygments") for line in lines for style, _ in line)
    assert len(lines) == 2


def test_every_printed_block_is_escaped() -> None:
    """It escapes text given to info, out and error alike."""
    out = io.StringIO()
    display = Display(PlainPrinter(out))
    display.info("a\x1b[2Jb")
    display.error("c\x9bd")
    display.out("e\rf")
    assert "\x1b" not in out.getvalue() and "\x9b" not in out.getvalue() and "\r" not in out.getvalue()
