"""Notes after a cell that follow leads: the lines of a name the question gives, and the
chain of names those lines tie it to (assist ``leads``).

The lookups (``lines_of``, ``named_note``, ``chain_note``) are also what the answer checks
use (``checks.py``): an answer read on a line about another name is checked against the
chain from the question's name.
"""

from __future__ import annotations

from rlm_runtime import harness
from rlm_runtime.assist import lookups
from rlm_runtime.assist.base import Assist, AssistState, Cell, Host
from rlm_runtime.context.grep import re2_escape

#: A name the question gives, or an answer looked up before it is taken, is shown when it
#: is on at most this many lines (more: it is a common word, not a lead).
LEAD_LINES = 6
#: A chain is followed for the model this many links past what it printed, when a link
#: adds at most this many new names.
_CHAIN_STEPS = 2
_CHAIN_NAMES = 2
#: New capitalised words of a link's lines tested for being plain words (a grep each): more
#: than this and the lines name too many things to follow (a printed list full of names).
_WORD_CHECKS = 12
#: The last lines of the followed chain shown when an answer was read on a line about
#: another name, and in the last turn.
CHAIN_LINES_SHOWN = 8


class Leads(Assist):
    """After a grep too broad to read: the lines of the question's name (or, when the grep
    printed them among the rest, the chain from them); after any other cell that did not
    answer: the chain from what it printed, else the question's name's lines; after an
    empty grep whose hint found nothing: the question's name's lines."""

    name = "leads"

    def after_cell(self, host: Host, state: AssistState, cell: Cell) -> str:
        if cell.kind == "empty_grep":
            return named_note(host, state, "", cell.reported)
        if cell.kind == "broad":
            return named_note(host, state, cell.code, cell.stdout, broad=True) or chain_note(host, state, cell.stdout)
        if cell.kind == "cell":
            # A cell that failed, or printed nothing, found nothing, whatever names its code
            # holds (a loop over another grep's hits that tests for the question's name).
            searched = "" if cell.error or not cell.stdout.strip() else cell.code
            return chain_note(host, state, cell.stdout) or named_note(host, state, searched, cell.stdout)
        return ""


def lines_of(host: Host, term: str) -> list[str] | None:
    """The lines holding ``term`` as whole words (ignoring case), as grep prints them; None
    when there are none or more than ``LEAD_LINES``."""
    found, total = lookups.lines(host, harness.name_pattern(term), ignore_case=True, most=LEAD_LINES)
    if not found or total > LEAD_LINES:
        return None
    return found


def shown(host: Host, term: str, lines: list[str], why: str) -> None:
    """Trace the lines the runtime looked up and showed the model."""
    host.note_lookup(f"{len(lines)} lines of {term!r} shown: {why}")


def named_note(host: Host, state: AssistState, code: str, stdout: str, *, broad: bool = False) -> str:
    """The lines holding a name the question gives, when the code neither searched for it
    nor printed it (once per name): after a grep too broad to read (small models grep the
    kind of value asked for, which hundreds of lines hold), or any cell that looked
    elsewhere or failed (``code`` is then empty). The chain is followed from those lines as
    from printed ones."""
    for full in harness.question_names(host.query):
        if full in state.named or any(f.lower() in code.lower() or f.lower() in stdout.lower()
                                      for f in harness.name_forms(full)):
            continue
        state.named.add(full)
        name, lines = full, None
        for name in harness.name_forms(full):
            lines = lines_of(host, name)
            if lines:
                break
        if lines:
            shown(host, name, lines, "a name of the question" + (", after a broad grep" if broad else ""))
            state.seen.append("\n".join(lines))
            note = host.prompts.text("broad_grep_lead" if broad else "question_name_lead", term=name, lines="\n".join(lines))
            chain = chain_note(host, state, "\n".join(lines))
            return note + ("\n" + chain if chain else "")
    return ""


def chain_note(host: Host, state: AssistState, stdout: str) -> str:
    """Find, then follow, done for the model: when lines it printed tie a name of the
    question to a new name, the lines about that new name (and, one step further, about
    the names those lines add), as few as ``LEAD_LINES`` per name. Small models find the
    first fact of a chain, then search for the question's words again."""
    known = {f.lower() for n in harness.question_names(host.query) for f in harness.name_forms(n)} | state.chained
    if not known:
        return ""
    rows = harness.grep_rows(stdout)
    notes: list[str] = []
    openers: set[str] = set()  # words that open several rows, at any step: never names
    for _ in range(_CHAIN_STEPS):
        linked = [r for r in rows if harness.names_in(r, known)]
        openers |= harness.row_openers(rows)
        asked = host.query.lower()
        new = list(dict.fromkeys(n for r in linked for n in harness.question_names(r)
                                 if n.lower() not in known and n.lower() not in asked and n not in openers))
        if len(new) > _WORD_CHECKS:
            break  # a listing full of names (each would cost a grep in the sandbox): no one link
        new = [n for n in new if not _is_word(host, n)]
        if not new or len(new) > _CHAIN_NAMES:
            break
        rows = []
        for name in new:
            known.add(name.lower())
            state.chained.add(name.lower())
            lines = lines_of(host, name)
            state.chain_lines += [line for line in lines or [] if line not in state.chain_lines]
            # A line naming no other link goes past this one (the badge of the lead): the
            # chain's middle. A name whose only line is the one that tied it in is an end.
            if any(not harness.names_in(row, known - {name.lower()}) for row in harness.grep_rows("\n".join(lines or []))):
                state.middles.add(name.lower())
            # a line in a long listing was not read: it is shown again as a link
            broad = set(state.broad)
            seen = "\n".join([s for s in state.seen if s not in broad] + notes)
            fresh = [line for line in lines or [] if not harness.seen_in(line.split(": ", 1)[-1], seen)]
            if fresh:
                shown(host, name, fresh, "the next link of a chain")
                notes.append(host.prompts.text("chain_lead", term=name, lines="\n".join(fresh)))
            # followed on from lines the model printed too: printing a link is not following it
            rows += harness.grep_rows("\n".join(lines or []))
    if not notes:
        return ""
    state.seen.extend(notes)
    return "\n".join(notes)


def _is_word(host: Host, name: str) -> bool:
    """Whether a one-word capitalised ``name`` is a plain word that opened a sentence
    ("According to ..."): the text also writes it in lower case. Names are never lower case."""
    if " " in name or not name.isalpha():
        return False
    return bool(lookups.count(host, r"\b" + re2_escape(name.lower()) + r"\b"))
