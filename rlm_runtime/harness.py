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
from collections.abc import Collection, Mapping, Sequence
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

#: A reply without code, written twice in a row after a re-prompt, is taken as the answer up to this size.
INSISTED_CHARS = 500

#: What small models write inside FINAL(...) when they copy an instruction instead of answering.
_PLACEHOLDERS = frozenset({"answer", "the answer", "your answer", "final answer", "result", "value", "..."})


#: What ``str.splitlines`` ends a line at besides "\n" (a "\r" before "\n" is a CRLF line end:
#: one break either way). grep, and so the line numbers the model reads, split at "\n" alone.
_OTHER_BREAKS = re.compile("\r(?!\n)|[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_BREAK_FORMS = {"\r": "\\r", **{c: f"\\x{ord(c):02x}" for c in "\x0b\x0c\x1c\x1d\x1e\x85"},
                "\u2028": "\\u2028", "\u2029": "\\u2029"}


def lines_of(text: str) -> list[str]:
    r"""The lines of text that grep or a document wrote: split at "\n" only, as grep splits
    them (``str.splitlines`` would also split at a "\r" or U+2028 inside one line)."""
    return text.split("\n")


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


def placeholder_final(text: str) -> bool:
    """``text`` holds a FINAL(...) whose argument is a placeholder copied from the
    instructions (``FINAL(your answer)``): no answer, and no sentence either."""
    found = prose_final_arg(text)
    return found is not None and _placeholder(*found)


def _placeholder(inner: str, quoted: bool) -> bool:
    return not quoted and inner.lower().replace("_", " ") in _PLACEHOLDERS


def echoes_question(answer: str, question: str) -> bool:
    """The answer is the question copied back (``FINAL("How many ...?")``), ignoring case,
    spaces and punctuation, or a piece of it (``FINAL("X has a rack.")``): at least
    ``ECHO_WORDS`` words and a third of the question's, every one of them the question's. No
    answer at all, as a placeholder is none; a short answer made of the question's words
    ("New York City", for "New York City or Boston?") is one."""
    said = re.sub(r"[^\w\s]", " ", answer.casefold()).split()
    asked = re.sub(r"[^\w\s]", " ", question.casefold()).split()
    if not asked:
        return False
    if said == asked:
        return True
    # A piece: counted in words as written (a name such as "TAG-1-1" is one), each the question's.
    said_words, asked_words = _words_as_written(answer), set(_words_as_written(question))
    return len(said_words) >= max(ECHO_WORDS, len(asked_words) / 3) and set(said_words) <= asked_words


def question_piece(answer: str, question: str) -> bool:
    """``answer`` is two or more words, every one of them the question's, joining words such
    as "of" aside (``loader of kiln 4`` for "Which loader does kiln 4 have?"): words copied
    from the question, too few to be its echo. It may still be the answer ("New York City"
    for "New York City or Boston?"), so the loop asks once."""
    said = [w for w in _words_as_written(answer) if w not in _JOINING]
    return len(said) >= 2 and set(said) <= set(_words_as_written(question))


def _words_as_written(text: str) -> list[str]:
    """The words of ``text`` casefolded, split at spaces only, their outer punctuation off."""
    return [w for w in (w.strip(_EDGE_PUNCTUATION) for w in text.casefold().split()) if w]


def stated(reply: str, answer: str, question: str) -> str:
    """For ``answer``, a piece of the question given again: the sentence the reply wrote
    before its code when it states more than the question's words ("The loader of kiln 4 is
    Orrin." over ``FINAL("loader of kiln 4")``); ``answer`` otherwise."""
    prose = reply.split("```", 1)[0].strip()
    said = forced_prose(prose, question) if prose else None
    return said if said and answer.casefold() != said.casefold() and not question_piece(said, question) else answer


#: Words that join a piece of the question without being found ("loader *of* kiln 4").
_JOINING = frozenset("a an the of is are was were for to in on at and its has have does".split())


#: An answer of at least this many words, all of them the question's, is the question echoed.
ECHO_WORDS = 4
_EDGE_PUNCTUATION = "?!.,;:\"'()[]{}<>`"


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


def insisted_answer(reply: str, earlier_prose: Collection[str]) -> str | None:
    """The model wrote the same short prose reply it wrote on an earlier turn of this run (each
    prose turn is answered with a request for code, so it was asked and said it again, with
    or without code turns between): that is its answer, unless it says it is still looking
    ("The output does not show the answer. Let's try searching again.")."""
    said = reply.strip()
    if said in earlier_prose and 0 < len(said) <= INSISTED_CHARS and not _STILL_LOOKING.search(said):
        return said
    return None


#: Prose that says the model has not found the answer yet and means to look further.
_STILL_LOOKING = re.compile(r"\b(?:let's|let me|I will|I'll|try (?:searching|again|to)|search(?:ing)? again|"
                            r"does not (?:show|contain) the answer|no answer yet)\b", re.IGNORECASE)


def prose_block(code: str) -> str | None:
    """A short code block that is not Python but a sentence (``The meeting is in Oslo.``):
    what a small model writes when told to answer now. None if it parses as Python."""
    said = code.strip()
    if not said or len(said) > INSISTED_CHARS or not any(ch.isalpha() for ch in said):
        return None
    return said if parsed(said) is None else None


#: A value written as code: a word joined to more by dashes, dots or slashes (``B-81``,
#: ``r29-b``); a lone word is more likely a variable the model meant to show.
_BARE_VALUE = re.compile(r"[^\W\d]\w*(?:[-./]\w+)+")


def bare_value(code: str, error_type: str | None, printed: str) -> str | None:
    """A block that is one value copied from the code's last output (``B-81``), which failed
    as Python with a NameError: a small model answering by writing the value it read as
    code. None otherwise (a name the model meant to define, or a value it never saw)."""
    said = code.strip()
    if error_type != "NameError" or "\n" in said or len(said) > 80 or not _BARE_VALUE.fullmatch(said):
        return None
    return said if _shown_whole(said, printed) else None


def _shown_whole(value: str, printed: str) -> bool:
    """Whether ``printed`` holds ``value`` not joined to more word characters or dashes."""
    return re.search(r"(?<![\w-])" + re.escape(value) + r"(?![\w-])", printed) is not None


#: Digits joined by dashes or slashes: a date, a code or a phone number as the text wrote it,
#: which Python reads as arithmetic (``2015-12`` is 2003).
_JOINED_DIGITS = re.compile(r"\d+(?:[-/]\d+)+")


def joined_digits(argument: str, printed: str) -> str | None:
    """An unquoted FINAL argument such as ``2015-12`` that ``printed`` (what the code showed)
    holds as it is: the value, as text. None for any other argument (``12-3`` nobody printed
    is a sum the model meant)."""
    said = argument.strip()
    if len(said) > 40 or not _JOINED_DIGITS.fullmatch(said):
        return None
    return said if re.search(r"(?<![\w./-])" + re.escape(said) + r"(?![\w/-])", printed) else None


def final_answer(code: str, printed: str, value: Any) -> str:
    """The answer of a cell that called FINAL with ``value``: the argument as written when it
    is digits joined by dashes or slashes that ``printed`` showed (``joined_digits``), else
    ``value`` as text."""
    argument = final_argument(code)
    return (joined_digits(argument, printed) if argument else None) or stringify(value)


def final_argument(code: str) -> str | None:
    """The source of the argument of the one ``FINAL(x)`` call of ``code``; None when the code
    does not parse or has no such call, or more than one."""
    tree = parsed(code)
    if tree is None:
        return None
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
             and n.func.id == "FINAL" and len(n.args) == 1 and not n.keywords]
    return ast.get_source_segment(code, calls[0].args[0]) if len(calls) == 1 else None


def last_printed(output: str) -> str | None:
    """The last line of ``output`` when it is short (``LAST_LINE_CHARS``) and not one of the
    runtime's own notes in parentheses; None otherwise."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    return last if 0 < len(last) <= LAST_LINE_CHARS and not last.startswith("(") else None


#: The longest printed line taken for an answer in place of the question copied back.
LAST_LINE_CHARS = 200


def unbound_final(code: str, error: str | None, printed: str) -> str | None:
    """``FINAL(Orrin)`` that raised a NameError for that name, where the last output printed
    it as a word: the model wrote the value it read without quotes; the word is the answer.
    None otherwise (another name failed, or a name no output showed)."""
    argument = final_argument(code) if error and "NameError" in error else None
    if argument is None or not argument.isidentifier() or f"name '{argument}' is not defined" not in (error or ""):
        return None
    return argument if _shown_whole(argument, printed) else None


#: Prose that says it has no answer (told to answer now, a model may say so instead).
_NO_ANSWER = re.compile(
    r"\b(?:not sure|unsure|give up|gave up|no idea|sorry|impossible|unable to|no answer|enough information|"
    r"(?:do|does|did|can|could|is|are|was|were)(?:n't| not)|cannot|"
    r"not (?:yet )?(?:found|in|stated|given|specified|mentioned|available|provided|listed|present|known)|"
    r"there (?:is|are|was|were) no|no (?:records?|information|data|match(?:es)?|such)|still)\b"
    r"|^\W*(?:unknown|n/?a|none|nothing)\W*$", re.IGNORECASE)


def forced_prose(reply: str, question: str) -> str | None:
    """A short reply without code to the "answer now" turn that states something (``The
    badge is 31720.``): the model answering in a sentence. None when it says it has no
    answer, says it is still looking, or copies the question."""
    said = reply.strip()
    if not said or len(said) > INSISTED_CHARS or not any(ch.isalnum() for ch in said):
        return None
    if (_STILL_LOOKING.search(said) or _NO_ANSWER.search(said) or echoes_question(said, question)
            or prose_final_arg(said) is not None):
        return None  # a FINAL(...) it holds was read already (a placeholder is none), not a sentence
    return said


def unparsable_final(code: str) -> str | None:
    """The answer of a block that is not Python because its FINAL(...) holds bare words
    (``FINAL(Loyar Cailo)``, as small models write it): read as a FINAL written in prose.
    None when the block parses (it runs as it is) or has no such FINAL."""
    return prose_final(code) if parsed(code) is None else None


_FINAL_SPELLINGS = frozenset({"Final", "final"})


def final_spelled(code: str) -> str:
    """``code`` with calls of ``Final(...)`` / ``final(...)`` written ``FINAL(...)``, when the
    code does not define that name itself: small models spell it so in code as in prose, and
    it would fail with a NameError after the answer was found. Only name tokens followed by
    "(" change (not strings, not attributes such as ``x.final(``)."""
    if not any(name in code for name in _FINAL_SPELLINGS):
        return code
    tree = parsed(code)
    if tree is None:
        return code
    bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    bound |= {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    bound |= {(a.asname or a.name).split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    calls = [n.func for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
             and n.func.id in _FINAL_SPELLINGS and n.func.id not in bound]
    if not calls:
        return code
    lines = code.split("\n")
    for name in sorted(calls, key=lambda n: (n.lineno, n.col_offset), reverse=True):
        row = lines[name.lineno - 1].encode("utf-8")  # col_offset counts UTF-8 bytes
        lines[name.lineno - 1] = (row[: name.col_offset] + b"FINAL" + row[name.col_offset + len(name.id):]).decode("utf-8")
    return "\n".join(lines)


def without_echo(code: str, shown: str) -> str:
    """``code`` less the lines it copies from ``shown`` (the message the model answered), when
    the block is not Python as written and is without them. Small models paste the runtime's
    feedback (the output, its notes) into their next block, which then fails to parse. A block
    that parses is returned as it is: a suggested call copied into code is code."""
    if _parses(code):
        return code
    said = {line.strip() for line in lines_of(shown) if len(line.strip()) >= 8}
    rows = lines_of(code)
    kept = [line for line in rows
            if not (len(line.strip()) >= 8 and (line.strip() in said or line.strip().lstrip("#").strip() in said))]
    rest = "\n".join(kept)
    return rest if len(kept) < len(rows) and _parses(rest) else code


def _parses(code: str) -> bool:
    return parsed(code) is not None


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
