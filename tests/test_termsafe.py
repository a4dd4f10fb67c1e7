"""``termsafe.printable``: untrusted text shown on a terminal with its control characters escaped."""

from __future__ import annotations

import re
import time

import pytest
from _timing import SLACK_S

from rlm_runtime.termsafe import one_line, printable

#: Anything that would still act on a terminal: C0 (but newline and tab), DEL, C1, bidi controls.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

ATTACKS = {
    "OSC 0 title": ("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"),
    "OSC 2 title, ST end": ("\x1b]2;pwned\x1b\\", "\\x1b]2;pwned\\x1b\\"),
    "OSC 52 clipboard": ("\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07", "\\x1b]52;c;Y3VybCBldmlsIHwgc2g=\\x07"),
    "OSC 8 hyperlink": ("\x1b]8;;https://evil.example/\x1b\\docs\x1b]8;;\x1b\\", "\\x1b]8;;https://evil.example/\\x1b\\docs\\x1b]8;;\\x1b\\"),
    "forged line": ("FAILED 3 tests\x1b[1A\x1b[2K\rall tests passed", "FAILED 3 tests\\x1b[1A\\x1b[2K\\x0dall tests passed"),
    "C1 CSI": ("\x9b31mred\x9b0m", "\\x9b31mred\\x9b0m"),
    "backspace and DEL": ("rm -rf ~\x08\x08\x08\x08\x08\x08\x08\x08ls\x7f", "rm -rf ~\\x08\\x08\\x08\\x08\\x08\\x08\\x08\\x08ls\\x7f"),
    "NUL, VT, FF, ESC alone": ("a\x00b\x0bc\x0cd\x1b", "a\\x00b\\x0bc\\x0cd\\x1b"),
    "bidi override": ("access = 'user\u202e \u2066// admin\u2069 \u2066'", "access = 'user\\u202e \\u2066// admin\\u2069 \\u2066'"),
}


@pytest.mark.parametrize(("raw", "shown"), ATTACKS.values(), ids=ATTACKS.keys())
def test_it_escapes_terminal_controls_visibly(raw: str, shown: str) -> None:
    """It shows every control of an attack as a visible escape and leaves none raw."""
    assert printable(raw) == shown
    assert not RAW.search(printable(raw))


def test_it_escapes_every_c0_c1_and_bidi_control() -> None:
    """It escapes all of C0 (but newline and tab), DEL, C1 and the bidi embeddings, overrides and isolates."""
    controls = [*range(0x00, 0x09), *range(0x0b, 0x20), *range(0x7f, 0xa0), *range(0x202a, 0x202f), *range(0x2066, 0x206a)]
    for code in controls:
        shown = printable(chr(code) + "x")
        assert shown == (f"\\x{code:02x}x" if code < 0x100 else f"\\u{code:04x}x"), hex(code)


def test_it_keeps_newlines_tabs_and_crlf() -> None:
    """It keeps newline, tab and a carriage return that ends a line (CRLF), which cannot overwrite text."""
    assert printable("a\tb\nc\r\nd\n") == "a\tb\nc\r\nd\n"
    assert printable("a\r\rb\r") == "a\\x0d\\x0db\\x0d"
    assert printable("x\r\r\n") == "x\\x0d\r\n"


def test_it_keeps_ordinary_unicode_and_surrogates() -> None:
    """It leaves printable Unicode, emoji, bidi marks used by RTL text, and lone surrogates as they are."""
    text = "naïve café, 日本語, שלום \u200f, 🙂, \ud800"
    assert printable(text) == text
    assert printable(text) is text  # clean text is returned without a copy


def test_one_line_joins_lines() -> None:
    """It puts an error message on one line, escaped, with " / " between its lines."""
    assert one_line("first\n  second\r\n\nthird\x1b[2K\n") == "first / second / third\\x1b[2K"


def test_it_is_fast_on_a_megabyte() -> None:
    """It escapes 1 MB of clean text, or of text full of colour codes, in well under a second."""
    clean = ("The quick brown fox jumps over the lazy dog. " * 23 + "\n") * 1000
    dirty = "\x1b[31mred\x1b[0m plain text line here\n" * 30_000
    for text in (clean[:1_000_000], dirty[:1_000_000]):
        started = time.perf_counter()
        printable(text)
        assert time.perf_counter() - started < 0.5 + SLACK_S  # ~40 ms; a quadratic escape would take minutes


def test_printable_lines_split_at_newlines_only_and_keep_indentation() -> None:
    """It escapes before splitting (a bare CR or \\x1c stays inside its line) and keeps a line's leading spaces."""
    from rlm_runtime.termsafe import printable_lines

    assert printable_lines("\n  indented\r\nx\ry\x1cz\n\n") == ["  indented", "x\\x0dy\\x1cz"]
    assert printable_lines(" \n \n") == []
