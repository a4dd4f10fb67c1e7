"""Answer leads: which probes of a registered context found the lines an answer came from,
kept across runs and said in the context's brief ("earlier questions over this text found
their answers with grep('owner'), records().find(...)").

A question's root run that ends with an answer leaves, in its events, each cell's code and
what the cell printed. A cell whose output holds the answer (ignoring case) led to it; the
probes its code called with literal arguments (``grep('owner')``, ``find('K-12')``) are that
question's leads. Nothing runs: the code is parsed (``ast``), never executed, and every
string is cut. ``Registry.record_leads`` counts them per context and keeps the most used.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence

from rlm_runtime.embeddings import WORDS as _WORDS

#: The calls that read a context, by name (a function or a method).
PROBES = frozenset({"grep", "find", "where", "count", "tally", "about", "search_chunks", "semantic_grep", "peek",
                    "lines", "chunk", "read_chunk", "records"})
#: An answer shorter or longer than this is not looked for in outputs (a letter matches
#: anything; a paragraph is not a value a probe found).
ANSWER_CHARS = (2, 200)
#: Characters and words of a string argument, characters of one probe; probes kept a question.
ARG_CHARS = 40
ARG_WORDS = 4
#: What a string argument of a lookup may hold: letters, digits, spaces, a pattern's punctuation.
_LOOKUP_TEXT = re.compile(r"[\w \-.:/|()\[\]\\^$*+?{},=#@&%']*")
PROBE_CHARS = 120
PROBES_A_QUESTION = 5
#: Calls of a cell looked at (in the order written).
CALLS_A_CELL = 50
#: Code longer than this is not parsed (a cell is bounded by the policy; this bounds the host).
CODE_CHARS = 20_000


def _literal(node: ast.expr) -> str | None:
    """A literal argument as written, when it is one a lookup takes: a number, a flag, or a
    short string of at most ``ARG_WORDS`` words of letters, digits and a pattern's punctuation
    (what a model wrote is shown to later models: no sentence of its own gets through)."""
    if not isinstance(node, ast.Constant) or not isinstance(node.value, (str, int, float, bool)):
        return None
    if isinstance(node.value, str) and (len(node.value) > ARG_CHARS or len(node.value.split()) > ARG_WORDS
                                        or not _LOOKUP_TEXT.fullmatch(node.value)):
        return None
    text = repr(node.value)
    return text if len(text) <= ARG_CHARS + 2 else None


def probes_of(code: str) -> list[str]:
    """The probe calls of ``code`` whose arguments are all literals, written as called
    (``grep('owner', ignore_case=True)``), in order, each once; [] when it does not parse."""
    if len(code) > CODE_CHARS:
        return []
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    found: list[str] = []
    calls = sorted((n for n in ast.walk(tree) if isinstance(n, ast.Call)), key=lambda n: (n.lineno, n.col_offset))
    for node in calls[:CALLS_A_CELL]:
        name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr if isinstance(node.func, ast.Attribute) else ""
        if name not in PROBES or (not node.args and not node.keywords):
            continue
        args = [_literal(a) for a in node.args]
        kwargs = [(k.arg, _literal(k.value)) for k in node.keywords]
        if any(a is None for a in args) or any(k is None or v is None for k, v in kwargs):
            continue
        call = f"{name}({', '.join([*(str(a) for a in args), *(f'{k}={v}' for k, v in kwargs)])})"
        if call not in found and len(call) <= PROBE_CHARS:
            found.append(call)
    return found


def _led(probe: str, lines: Sequence[str]) -> bool:
    """Whether an output line holding the answer shows what ``probe`` looked for: the longest
    run of letters and digits of its first string argument (a grep pattern's literal part),
    ignoring case. A probe without one (``chunk(12)``) led to what its cell printed."""
    first = probe[probe.index("(") + 1:]
    if not first.startswith(("'", '"')):
        return True
    words = _WORDS.findall(first.split(first[0], 2)[1] if first.count(first[0]) >= 2 else first[1:])
    word = max(words, key=len, default="").casefold()
    return not word or any(word in line for line in lines)


def leads(cells: Iterable[tuple[str, str]], answer: str | None) -> list[str]:
    """The probes of the cells (``(code, output)``) whose output holds ``answer`` and whose
    own argument stands in a line holding it (``_led``)."""
    said = (answer or "").strip().strip("'\"").casefold()
    if not ANSWER_CHARS[0] <= len(said) <= ANSWER_CHARS[1]:
        return []
    out: list[str] = []
    for code, output in cells:
        text = output.casefold()
        if said not in text:
            continue
        lines = [line for line in text.splitlines() if said in line][:_LINES_A_CELL]
        for probe in probes_of(code):
            if probe not in out and _led(probe, lines):
                out.append(probe)
                if len(out) >= PROBES_A_QUESTION:
                    return out
    return out


#: Output lines holding the answer a probe's words are looked for in, a cell.
_LINES_A_CELL = 50


def shown(probe: object) -> bool:
    """Whether a probe read back from a registry file is one ``probes_of`` could have made
    (a file may hold anything: only those reach a prompt)."""
    return (isinstance(probe, str) and 0 < len(probe) <= PROBE_CHARS and probe.isprintable()
            and _PROBE_SHAPE.fullmatch(probe) is not None and probe.split("(", 1)[0] in PROBES)


_PROBE_SHAPE = re.compile(r"[a-z_]+\(.*\)")


def describe(kept: Sequence[tuple[str, int]]) -> str:
    """A context's leads (``(probe, questions)``, most used first) as the brief lists them
    (``prompts/context_earlier.md`` says what they are)."""
    return ", ".join(f"{probe}" + (f" ({n} questions)" if n > 1 else "") for probe, n in kept)
