"""What the answer assists read in a model's reply or answer: pure functions, no I/O.

Each rule here was written for small models, from how they were seen to fail: a question
copied back as the answer, words of the question given as the value, a value written as
code, ``Final(...)`` spelled so, the runtime's feedback pasted into code, a date that
Python reads as a sum. None is the plain loop's (``harness.py`` only parses replies): each is
applied by a named assist (``answers.py``, ``replies.py``) and is off with ``--assists none``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Collection
from typing import Any

from rlm_runtime.harness import final_argument, lines_of, parsed, prose_final, prose_final_arg, stringify

#: A reply without code, written twice in a row after a re-prompt, is taken as the answer up to this size.
INSISTED_CHARS = 500


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


def last_printed(output: str) -> str | None:
    """The last line of ``output`` when it is short (``LAST_LINE_CHARS``) and not one of the
    runtime's own notes in parentheses; None otherwise."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    return last if 0 < len(last) <= LAST_LINE_CHARS and not last.startswith("(") else None


#: The longest printed line taken for an answer in place of the question copied back.
LAST_LINE_CHARS = 200


#: Words joined by dashes (``db-07-east``, ``screen-reader``), which Python reads as a subtraction.
_DASHED = re.compile(r"[^\W\d]\w*(?:-\w+)+")


def unbound_final(code: str, error: str | None, printed: str) -> str | None:
    """``FINAL(Orrin)`` (or ``FINAL(db-07-east)``) that raised a NameError for that name (or
    its first word), where the last output printed it whole: the model wrote the value it read
    without quotes; the text is the answer. None otherwise (another name failed, or a value
    no output showed)."""
    argument = final_argument(code) if error and "NameError" in error else None
    if argument is None or not (argument.isidentifier() or _DASHED.fullmatch(argument)):
        return None
    if f"name '{argument.split('-')[0]}' is not defined" not in (error or ""):
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
    nodes = list(ast.walk(tree))
    bound = {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    bound |= {n.name for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    bound |= {(a.asname or a.name).split(".")[0] for n in nodes if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    calls = [n.func for n in nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
             and n.func.id in _FINAL_SPELLINGS and n.func.id not in bound]
    if not calls:
        return code
    # One pass over the UTF-8 bytes (col_offset counts them), each line found where Python's
    # tokenizer starts one ("\n", "\r\n" or a lone "\r"): one line of many calls stays linear.
    raw = code.encode("utf-8")
    starts = [0, *(m.end() for m in _SOURCE_BREAK.finditer(raw))]
    pieces: list[bytes] = []
    at = 0
    for name in sorted(calls, key=lambda n: (n.lineno, n.col_offset)):
        begin = starts[name.lineno - 1] + name.col_offset if name.lineno <= len(starts) else -1
        if begin < at or raw[begin:begin + len(name.id)] != name.id.encode():
            continue  # not where the parser put it: left as written
        pieces += [raw[at:begin], b"FINAL"]
        at = begin + len(name.id)
    return b"".join([*pieces, raw[at:]]).decode("utf-8")


#: Where Python's tokenizer ends a line of source, in bytes.
_SOURCE_BREAK = re.compile(rb"\r\n|\r|\n")


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
