"""Make untrusted text safe to write to a terminal.

Cell output, model replies, answers and context files are written by someone else. Raw,
they drive the terminal: OSC 0/2 set the window title, OSC 52 writes the clipboard, OSC 8
draws hyperlinks whose target is not their text, and CSI sequences, backspace and a bare
carriage return erase or overwrite what was printed before (a cell can forge "all tests
passed" over its own failure). ``printable`` shows every such character as a visible escape
instead, so the text still reads, and nothing in it acts on the terminal.

What is escaped, in Python's own notation so it reads familiar:

* C0 controls except newline and tab, and DEL: ``\\x00``-``\\x08``, ``\\x0b``-``\\x1f``,
  ``\\x7f`` (so ESC shows as the four characters ``\\x1b``, BEL as ``\\x07``);
* C1 controls ``\\x80``-``\\x9f`` (``\\x9b`` is a one-character CSI on many terminals);
* the Unicode bidirectional embeddings, overrides and isolates U+202A-U+202E and
  U+2066-U+2069 (``\\u202e``), which reorder how a line is displayed ("Trojan Source",
  CVE-2021-42574).

A carriage return directly before a newline (CRLF line ends) is kept: the cursor goes to the
next line before anything else is written, so it cannot overwrite text. A bare ``\\r`` is
escaped.

The escaped form is not a reversible encoding (a literal backslash stays as it is, so text
that already reads ``\\x1b`` looks the same as an escaped ESC). Its job is that the output
holds no control character and that every one in the input is visible. Output meant for
programs (``--json``) does not need this: ``json.dumps`` escapes controls itself.
"""

from __future__ import annotations

import re

# One character class (an alternation for "\r not before \n" made the scan three times
# slower); CRLF is told apart in the replacement, which runs only on a hit.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_FORMS = {chr(c): f"\\x{c:02x}" for c in (*range(0x00, 0x09), *range(0x0b, 0x20), *range(0x7f, 0xa0))}
_FORMS.update({chr(c): f"\\u{c:04x}" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))})


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\r" and match.string.startswith("\n", match.end()):
        return char
    return _FORMS[char]


def printable(text: str) -> str:
    """``text`` with every terminal control character shown as a visible escape.

    Newlines, tabs and CRLF line ends are kept; see the module docstring for the list.
    """
    # The search is the fast path: clean text (nearly all of it) is returned as it is.
    if _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub(_visible, text)


def printable_lines(text: str) -> list[str]:
    """The lines of ``printable(text)``, escaped first and split second (at ``\\n`` alone:
    ``str.splitlines`` would also split at a bare ``\\r`` or ``\\x1c``, the characters a forged
    line is made of); outer blank lines dropped, indentation kept; [] for blank text."""
    shown = printable(text).strip("\n")
    return [line.removesuffix("\r") for line in shown.split("\n")] if shown.strip() else []


def one_line(text: str) -> str:
    """``printable(text)`` on one line: line breaks become `` / `` (for error messages)."""
    return " / ".join(part.strip() for part in printable(text).splitlines() if part.strip())
