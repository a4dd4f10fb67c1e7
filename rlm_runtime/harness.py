"""The forgiving harness: reading a model's reply and shaping what goes back to it.

Pure functions, no I/O: code-block parsing (lenient about fences, as small models write
them), FINAL written in prose, the verdict on one turn's cells, feedback capping and the
compact history of a session. Every text shown to the model comes in as an argument (from
``brain/prompts/``), so this module holds no model-facing prose.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_FENCE = re.compile(r"^[ \t]*```+[ \t]*([\w+-]*)")
_CODE_TAGS = {"", "python", "py", "python3", "repl"}
_PROSE_FINAL = re.compile(r"\bFINAL\(", re.IGNORECASE)  # small models write Final( or final( too
_PROSE_FINAL_VAR = re.compile(r"FINAL_VAR\(\s*['\"]?([A-Za-z_]\w*)['\"]?\s*\)")

_BRACKETS_OR_QUOTES = re.compile(r"[()'\"]")
_QUOTE_ENDS = {"'": re.compile(r"[\\']"), '"': re.compile(r'[\\"]')}
#: A FINAL(...) in prose longer than this is text, not an expression to evaluate (a name, a
#: short call): parsing a megabyte of it took seconds, and the policy refuses such a cell.
_EXPRESSION_CHARS = 4000


#: What small models write inside FINAL(...) when they copy an instruction instead of answering.
_PLACEHOLDERS = frozenset({"answer", "the answer", "your answer", "final answer", "result", "value", "..."})


#: What ``str.splitlines`` ends a line at besides "\n" (a "\r" before "\n" is a CRLF line end:
#: one break either way). grep, and so the line numbers the model reads, split at "\n" alone.
_OTHER_BREAKS = re.compile("\r(?!\n)|[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_BREAK_FORMS = {"\r": "\\r", **{c: f"\\x{ord(c):02x}" for c in "\x0b\x0c\x1c\x1d\x1e\x85"},
                "\u2028": "\\u2028", "\u2029": "\\u2029"}


def newlines_only(text: str) -> str:
    r"""``text`` with every line break but "\n" (and CRLF) shown as a visible escape
    (``\u2028``, ``\r``...): a line of a document quoted to a model stays one line, so it
    cannot start a line of its own that reads as the runtime's note or another grep row."""
    if _OTHER_BREAKS.search(text) is None:  # the fast path: nearly all text
        return text
    return _OTHER_BREAKS.sub(lambda m: _BREAK_FORMS[m.group()], text)


def parse_code_blocks(text: str) -> list[str]:
    """Code of every python/repl fenced block, in order (a trailing unclosed block counts).

    Fences are read line by line, so the closing fence of another language's block is never
    taken for an opening one. Small models are forgiven: an opening fence after prose on the
    same line, a closing fence glued to the last code line, and indented blocks.
    """
    blocks: list[str] = []
    tag: str | None = None
    body: list[str] = []

    def close() -> None:
        code = textwrap.dedent("\n".join(body))
        if tag in _CODE_TAGS and code.strip():
            blocks.append(code.strip("\n"))

    for line in text.splitlines():
        if tag is None:
            at = line.find("```")
            if at >= 0:
                opener = _FENCE.match(line[at:])
                tag, body = (opener.group(1).lower() if opener else ""), []
            continue
        fence = _FENCE.match(line)
        if fence and not fence.group(1):
            close()
            tag = None
        elif line.rstrip().endswith("```"):
            body.append(line.rstrip()[:-3])
            close()
            tag = None
        else:
            body.append(line)
    if tag is not None:
        close()
    return blocks


def prose_final_arg(text: str) -> tuple[str, bool] | None:
    """The text inside the last FINAL(...) written outside code, and whether it was quoted."""
    starts = [m.end() for m in _PROSE_FINAL.finditer(text)]
    if not starts:
        return None
    start = starts[-1]
    depth, quote, i = 1, "", start
    # From one character that matters to the next (a regex search each), not a Python step per character.
    while True:
        found = (_QUOTE_ENDS[quote] if quote else _BRACKETS_OR_QUOTES).search(text, i)
        if found is None:
            i = len(text)
            break
        ch, i = found.group(), found.start()
        if quote:
            if ch == "\\":
                i += 2  # the escaped character
                continue
            quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                break
        i += 1
    inner = text[start:i].strip()
    if len(inner) >= 2 and inner[0] == inner[-1] and inner[0] in "'\"":
        return inner[1:-1].strip(), True
    return inner, False


def prose_final(text: str) -> str | None:
    """The answer of a FINAL(...) written outside code, if any (the last one wins).

    A placeholder copied from the instructions (``FINAL(answer)``, ``FINAL(your answer)``) is
    no answer."""
    found = prose_final_arg(text)
    return None if found is None or not found[0] or _placeholder(*found) else found[0]


def _placeholder(inner: str, quoted: bool) -> bool:
    return not quoted and inner.lower().replace("_", " ") in _PLACEHOLDERS


def prose_final_var(text: str) -> str | None:
    """The variable named by a ``FINAL_VAR(name)`` written outside code, if any."""
    found = _PROSE_FINAL_VAR.search(text)
    return found.group(1) if found else None


def prose_final_expression(text: str) -> str | None:
    """An unquoted FINAL(...) argument that parses as a Python expression (``FINAL(room)``,
    ``FINAL(hits[0])``): worth evaluating in the sandbox before taking it as literal text."""
    found = prose_final_arg(text)
    if found is None or not found[0] or found[1] or len(found[0]) > _EXPRESSION_CHARS:
        return None
    if parsed(found[0], "eval") is None:
        return None
    return found[0]


def final_argument(code: str) -> str | None:
    """The source of the argument of the one ``FINAL(x)`` call of ``code``; None when the code
    does not parse or has no such call, or more than one."""
    tree = parsed(code)
    if tree is None:
        return None
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
             and n.func.id == "FINAL" and len(n.args) == 1 and not n.keywords]
    return ast.get_source_segment(code, calls[0].args[0]) if len(calls) == 1 else None


def parsed(code: str, mode: str = "exec") -> ast.AST | None:
    """``code`` parsed by Python's own parser, or None when it is not Python. A model's text
    is hostile input: a short expression nested thousands deep (``-`` * 10**5, ``a.b.b.b...``)
    makes the parser raise RecursionError or MemoryError, which are "not Python" here too
    (the policy check refuses the same code the same way before it could run)."""
    try:
        return ast.parse(code, "<reply>", mode)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def only_comments(code: str) -> bool:
    """Whether a block holds nothing but comments and blank lines."""
    return not any(line.strip() and not line.strip().startswith("#") for line in code.splitlines())


def stringify(value: Any) -> str:
    """An answer as text: str as is, numbers by ``str``, anything else by ``repr``."""
    if isinstance(value, str):
        return value
    return str(value) if isinstance(value, (int, float)) else repr(value)


def cap(text: str, limit: int, marker: str = "... [{cut} characters cut] ...") -> str:
    """``text`` cut to about ``limit`` characters, keeping its head and tail; ``marker`` (with
    ``{cut}``, the number of characters left out) stands on its own line between them."""
    if len(text) <= limit:
        return text
    return text[: limit // 2] + "\n" + marker.replace("{cut}", str(len(text) - limit)) + "\n" + text[-limit // 2:]


@dataclass(frozen=True)
class CellOutcome:
    """What the harness needs from one cell (``CellResult`` has these fields)."""

    stdout: str
    error: str | None
    error_type: str | None
    warnings: Sequence[str]


#: The TypeError of arithmetic on a number cut from a printed line (``hit.split(":")[0] - 5``).
_NUMBER_AS_TEXT = re.compile(r"TypeError: (?:unsupported operand type\(s\) for [^:]*: '(?:str' and 'int|int' and 'str)'"
                             r"|can only concatenate str \(not \"int\"\)|a line number must be an int)")


def cell_feedback(outcome: CellOutcome, notes: Mapping[str, str]) -> tuple[str, bool]:
    """The text one cell contributes to the next turn, and whether the cell failed.

    ``notes`` holds the hints shown to the model: ``not_python`` (a block the parser
    refused as a syntax error), ``number_as_text`` (arithmetic on a number that is still
    text) and ``warning`` (a template with ``{warning}``).
    """
    text = outcome.stdout
    failed = outcome.error is not None
    if outcome.error:
        text += ("\n" if text and not text.endswith("\n") else "") + outcome.error
        if outcome.error_type == "PolicyViolation" and "SyntaxError" in outcome.error:
            text += "\n" + notes["not_python"]
        elif _NUMBER_AS_TEXT.search(outcome.error):
            text += "\n" + notes["number_as_text"]
    for warning in outcome.warnings:
        text += "\n" + notes["warning"].replace("{warning}", warning)
    return text.strip() or notes["no_output"], failed


@dataclass(frozen=True)
class Exchange:
    """One earlier question of a session and what it ended with."""

    question: str
    answer: str | None
    error: str | None = None


def compact_history(exchanges: Sequence[Exchange], limit: int, *, question_chars: int = 300,
                    answer_chars: int = 600, no_answer: str = "(no answer: {error})") -> str:
    """The earlier questions and answers of a session, newest kept first, within ``limit``.

    Each question and answer is cut to its own cap; the oldest exchanges go first when the
    whole would not fit. Returns "" when there is nothing (or no room) to show.
    """
    rows: list[str] = []
    used = 0
    for n in range(len(exchanges) - 1, -1, -1):
        ex = exchanges[n]
        answer = ex.answer if ex.answer is not None else no_answer.replace("{error}", ex.error or "unknown")
        row = f"{n + 1}. Q: {_one_line(ex.question, question_chars)}\n   A: {_one_line(answer, answer_chars)}"
        if used + len(row) + 1 > limit:
            break
        rows.append(row)
        used += len(row) + 1
    return "\n".join(reversed(rows))


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
