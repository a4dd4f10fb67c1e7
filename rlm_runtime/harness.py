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
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
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
    if found is None or not found[0]:
        return None
    inner, quoted = found
    if not quoted and inner.lower().replace("_", " ") in _PLACEHOLDERS:
        return None
    return inner


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


_SHORT_ANSWER_CHARS = 200


def short_answer(reply: str) -> str | None:
    """The answer of a reply asked for a fact in a few words: its FINAL(...) if it wrote one,
    else its first line less an "Answer:" label, quotes and the closing full stop. None when
    that is empty or longer than an answer in a few words would be."""
    final = prose_final(reply)
    if final:
        return final
    lines = [line.strip().strip("`").strip() for line in reply.strip().splitlines()]
    first = next((line for line in lines if line and not line.startswith("```")), "")
    first = re.sub(r"^(?:the\s+)?answer\s*(?:is)?\s*[:\-]?\s*", "", first, flags=re.IGNORECASE)
    first = first.strip().rstrip(".").strip().strip("\"'").strip()
    return first if first and len(first) <= _SHORT_ANSWER_CHARS else None


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


_GREP_ROW = re.compile(r"^(?:[^\s:]+:)?(\d+): (.*)$", re.MULTILINE)
_STOPPED = "... (stopped after "
#: Capitalised words a question starts with that are never part of a name.
_LEADING = frozenset("""a an the what which who whom whose where when why how is are was were does do did in on at of
for from to by among count list name give find tell please if and or but""".split())
_NAME = re.compile(r"[A-Z][\w'-]*(?:[ \t]+[A-Z][\w'-]*)*")


def grep_rows(stdout: str) -> list[str]:
    """The text of each line a printed grep result shows (``12: text``, ``doc:12: text``)."""
    return [m.group(2) for m in _GREP_ROW.finditer(stdout)]


def shows_many_lines(stdout: str, at_least: int) -> bool:
    """Whether a cell's output is a grep listing of at least ``at_least`` lines, or one cut
    at its ``max_matches``: a search too broad to read."""
    return _STOPPED in stdout or len(grep_rows(stdout)) >= at_least


#: Words that shape a question rather than name what it is about.
_FUNCTION_WORDS = _LEADING | frozenset("""many much more most least fewest that this these those there their them they with
have has had been being into than then also about over under each every some other same such only very just text
number total times often common appears appear occurs occur does there""".split())


def question_words(question: str, most: int = 6) -> list[str]:
    """The words a question is about (four letters or more, not its function words), each
    in a form that also finds its singular and capitalised uses (``sightings`` ->
    ``sighting``, ``species`` -> ``specie``): for grepping as a prefix, ignoring case."""
    out: list[str] = []
    for word in re.findall(r"[^\W\d_]{4,}", question):
        low = word.lower()
        if low in _FUNCTION_WORDS:
            continue
        stem = low[:-1] if low.endswith("s") and not low.endswith(("ss", "us", "is")) else low
        if stem not in out:
            out.append(stem)
    return out[:most]


_TOKEN = re.compile(r"[A-Za-z0-9]+")
#: A field is a label when its values are few: at most this many kinds, and at most half the lines.
_MAX_KINDS = 12


def record_pattern(rows: Sequence[str]) -> str | None:
    """From lines that include records of one form (``Record 12 | kind=otter | free text``),
    a grep pattern whose group captures their label field, or None.

    The records are the largest group of lines opening with the same word (or a number); the label is the
    first field (a word position, counted from that opening word) whose values are words,
    not numbers, and few (2 to 12 kinds, at most half as many as the lines), every field
    before it being one fixed word or a number. Free text after the label varies too much to
    be mistaken for one."""
    groups: dict[str, list[list[str]]] = {}
    for row in rows:
        tokens = _TOKEN.findall(row)
        if len(tokens) >= 2:
            groups.setdefault("" if tokens[0].isdigit() else tokens[0], []).append(tokens)
    if not groups:
        return None
    opening, lines = max(groups.items(), key=lambda kv: len(kv[1]))
    if len(lines) < 4:
        return None
    parts = [re.escape(opening) if opening else r"\d+"]
    for i in range(1, min(min(len(t) for t in lines), 8)):
        values = [t[i] for t in lines]
        kinds = set(values)
        if all(v.isdigit() for v in values):
            parts.append(r"\d+")
        elif len(kinds) == 1:
            parts.append(re.escape(values[0]))
        elif 2 <= len(kinds) <= min(_MAX_KINDS, len(values) // 2) and not any(v.isdigit() for v in values):
            return r"^\W*" + r"\W+".join(parts) + r"\W+(\w+)"
        else:
            return None
    return None


def question_names(question: str) -> list[str]:
    """The names a question mentions: runs of capitalised words, less the question words
    that open a sentence (``What``, ``The``...) and a possessive's ``'s``, longest first.
    ``"Who leads project Belpex?"`` -> ``["Belpex"]``. Linear in the text's length (it is
    also run on answers and printed lines: a dict, not a list, says which are known)."""
    names: dict[str, None] = {}
    for m in _NAME.finditer(question.replace("\u2019", "'")):
        words = m.group(0).split()
        while words and words[0].lower() in _LEADING:
            words = words[1:]
        name = re.sub(r"'s?$", "", " ".join(words))  # the possessive: "Venbel Mirsenpex's manager"
        if len(name) >= 3:
            names.setdefault(name)
    return sorted(names, key=len, reverse=True)


def name_pattern(name: str) -> str:
    """A regex for ``name`` as a whole word or words: ``Toryar`` finds "Toryar cannot..." and
    not "Fenrho Toryarsen", another name. (Also valid RE2, for grep.)"""
    pattern = re.escape(name)
    # RE2's \b knows ASCII word characters only: at an edge of another letter, no \b
    if name[:1].isascii() and name[:1].isalnum():
        pattern = r"\b" + pattern
    if name[-1:].isascii() and name[-1:].isalnum():
        pattern += r"\b"
    return pattern


def names_in(row: str, names: Iterable[str]) -> bool:
    """Whether ``row`` holds any of ``names`` as whole words, ignoring case."""
    return any(re.search(name_pattern(n), row, re.IGNORECASE) for n in names)


def row_openers(rows: Sequence[str]) -> set[str]:
    """The capitalised words that open two or more of ``rows``: the start of a sentence
    repeated line after line ("Remember this: ...", "Badge 123 ..."), not a name."""
    firsts = Counter(m.group(1) for row in rows if (m := re.match(r"\W*([A-Z][\w'-]*)", row)))
    return {f for f, n in firsts.items() if n >= 2}


_NOT_LETTER = re.compile(r"[\W_]+")  # \w is isalnum() or "_"


def _letters(text: str) -> str:
    return _NOT_LETTER.sub("", text.lower())


def seen_in(line: str, shown: str) -> bool:
    """Whether ``line`` is in ``shown`` (what a model was shown), ignoring case, spacing,
    punctuation and the marks a search puts around the words it matched."""
    return _letters(line) in _letters(shown)


_COUNT_QUESTION = re.compile(r"\b(?:how many|count|in total|(?:the|a) number of)\b", re.IGNORECASE)
_ROW_PREFIX = re.compile(r"(?m)^(?:[^\s:]+:)?\d+[:-] ")


def is_count_question(question: str) -> bool:
    """Whether the question asks how many (its answer is a number the text need not hold)."""
    return _COUNT_QUESTION.search(question) is not None


#: The answer checks look at an answer's first this many characters: what they look for (a
#: count, a code, a name, a kind) is at its start, and hostile text (an answer that is a list
#: of a million items) must cost them no more than this.
CHECKED_CHARS = 4000
#: Known names past this many make "a line about another name" meaningless: no more are added.
_MOST_KNOWN = 64

_QUOTED = re.compile(r"[\"'`]([^\"'`\n]{3,60})[\"'`]")
_CODED = re.compile(r"(?<![\w-])(?=[\w-]*\d)[A-Za-z0-9][\w-]{2,40}(?![\w-])")


def answer_tokens(answer: str, question: str = "", most: int = 3) -> list[str]:
    """The parts of an answer that the text should hold word for word if it is right: quoted
    strings, tokens with a digit (codes, serials, numbers of 3+ characters) and the names of
    two or more words it adds to the question. Not a plain word: a label or a judgement
    the model chose (``positive``, ``casual``) need not be in the text."""
    answer = answer[:CHECKED_CHARS]
    found = [m.group(1).strip() for m in _QUOTED.finditer(answer)]
    found += _CODED.findall(answer)
    # A name of two or more words (a person, a place); one word may be a class the model chose.
    asked = question.lower()
    found += [n for n in question_names(answer) if 2 <= len(n.split()) <= 5 and n.lower() not in asked]
    return [token for token in dict.fromkeys(found) if token][:most]


def unlinked_answer(answer: str, question: str, shown: str, linked: Collection[str] = (), written: str | None = None) -> str | None:
    """A part of ``answer`` (see ``answer_tokens``; one the model typed, when ``written``, its
    reply, is given: not one its code computed) that the grep rows in ``shown`` hold only
    on lines about something else: lines that mention no name of the question, nor a name
    that lines about it tie to it (two links, or a name in ``linked``), else None. A small
    model greps the kind of value asked for and answers from the first line it sees, which is
    about another name."""
    known = {f.lower() for n in question_names(question) for f in name_forms(n)}
    if not known:
        return None
    known |= {k.lower() for k in linked}
    originals = grep_rows(shown)
    rows = [r.lower() for r in originals]
    for _ in range(2):
        # each row is tested against at most _MOST_KNOWN names: linear in what was shown
        tied = [row for row, low in zip(originals, rows, strict=True) if any(k in low for k in known)]
        for n in (n.lower() for r in tied for n in question_names(r) if not any(ch.isdigit() for ch in n)):
            if len(known) >= _MOST_KNOWN:
                break
            known.add(n)
    for token in answer_tokens(answer, question):
        if written is not None and token not in written:
            continue
        holding = [r for r in rows if token.lower() in r]
        if holding and not any(k in r for r in holding for k in known):
            return token
    return None


def unbacked_count(answer: str, question: str, shown: str, written: str) -> str | None:
    """For a "how many" question: the number the answer gives when the model wrote it
    itself (it is in ``written``, the reply, not computed by its code) and no output it was
    shown holds it (line numbers of printed grep rows do not count), else None. A small
    model reads a listing and answers a number it never counted."""
    if not is_count_question(question):
        return None
    typed = _numbers(written)
    numbers = [n for n in re.findall(r"\d+", answer[:CHECKED_CHARS]) if n in typed]
    if not numbers:
        return None
    if _numbers(_ROW_PREFIX.sub("", shown)).intersection(numbers):
        return None
    return numbers[0]


_MOST = re.compile(r"\b(?:most|least|fewest)\b", re.IGNORECASE)
#: The kinds of an answer to "which is most common" that are looked for beside a count.
_TALLY_WORDS = 20
_LEAST = re.compile(r"\b(?:least|fewest)\b", re.IGNORECASE)
_OFTEN = re.compile(r"\b(?:common\w*|often|frequent\w*|times|appears?|occurs?|popular)\b", re.IGNORECASE)


def is_tally_question(question: str) -> bool:
    """Whether the question asks which kind is the most (or least) common: its answer rests
    on a count of every kind."""
    return _MOST.search(question) is not None and _OFTEN.search(question) is not None


def untallied_answer(answer: str, question: str, shown: str, written: str) -> bool:
    """For a "which is most common" question: whether the answer, written by the model itself
    (in ``written``), names no kind that an output showed with a count beside it (``'x': 40``,
    ``x = 40``, ``x 40``). A small model names the first label it read, or the question's own
    word, without counting."""
    if not is_tally_question(question):
        return False
    asked = question.lower()
    words = [w for w in re.findall(r"[^\W\d_][\w-]{2,}", answer[:CHECKED_CHARS]) if w.lower() not in asked]
    words = list(dict.fromkeys(words))[:_TALLY_WORDS]  # each is searched for in the outputs
    if any(w not in written for w in words) or (not words and answer.strip() not in written):
        return False  # computed by its code, not typed
    text = _ROW_PREFIX.sub("", shown)
    return not any(re.search(rf"(?i)(?<![\w-]){re.escape(w)}['\"]?\s*[:=,]?\s*\d", text) for w in words)


def counts_disagree(answer: str, question: str, counts: Mapping[str, int]) -> tuple[str, str] | None:
    """What ``counts`` (a tally of records by kind) say the answer is, when ``answer`` says
    otherwise: for "which kind is most (least) common", the kind with the most (fewest); for
    "how many", the count of the one kind the question names. As (expected, why), or None."""
    if len(counts) < 2:
        return None
    if is_tally_question(question):
        pick = min if _LEAST.search(question) else max
        top = pick(counts, key=lambda k: counts[k])
        if re.search(rf"(?i)(?<![\w-]){re.escape(top)}(?![\w-])", answer):
            return None
        return top, f"{counts[top]} records, the {'fewest' if pick is min else 'most'}"
    if is_count_question(question):
        named = [k for k in counts if re.search(rf"(?i)(?<![\w-]){re.escape(k)}(?![\w-])", question)]
        if len(named) != 1 or _has_number(answer, str(counts[named[0]])):
            return None
        return str(counts[named[0]]), f"the records of {named[0]}"
    return None


def _has_number(text: str, number: str) -> bool:
    return re.search(rf"(?<![\d.]){number}(?!\d|\.\d)", text) is not None


#: A whole number in text, as ``_has_number`` finds one: not a part of a longer number or a decimal.
_WHOLE_NUMBER = re.compile(r"(?<![\d.])\d+(?!\d|\.\d)")


def _numbers(text: str) -> set[str]:
    """Every whole number ``text`` holds, in one pass (``_has_number`` for many numbers at once)."""
    return set(_WHOLE_NUMBER.findall(text))


def name_forms(name: str) -> list[str]:
    """The forms a name of the question may take in the text: itself, then its last word
    when it has several (``Package Pexorolo`` is written ``Pexorolo`` in "Pexorolo cannot be
    installed..."), if that word is a name of four letters or more."""
    words = name.split()
    forms = [name]
    if len(words) > 1 and len(words[-1]) >= 4 and words[-1][0].isupper():
        forms.append(words[-1])
    return forms


def answer_to_follow(answer: str, question: str) -> str | None:
    """The term of an answer worth looking up once more before taking it, or None.

    A short name or phrase that the question does not contain may be the middle of a chain
    (the person who leads the project, when the question asks for that person's badge); so
    may the one new name of an answer that is a sentence (a line of the text copied whole).
    A number, a code, or only what the question names is taken as it is.
    """
    if "\n" in answer.strip():
        return None  # a list or a table: an answer of another kind
    text = " ".join(answer.split())
    term = text.strip("\"'`.,;:!?()").strip()
    if 3 <= len(term) <= 60 and len(term.split()) <= 5:
        if not any(ch.isalpha() for ch in term) or sum(ch.isdigit() for ch in term) > len(term) // 2:
            return None
        return None if term.lower() in question.lower() else term
    if len(text.split()) > 30:
        return None
    new = [n for n in question_names(text) if n.lower() not in question.lower() and len(n.split()) <= 5]
    return new[0] if len(new) == 1 else None


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
