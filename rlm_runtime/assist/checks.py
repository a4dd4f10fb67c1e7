"""Answer checks: before an answer is taken, question it once when nothing the run showed
supports it (``count_check``, ``grounding_check``, ``unlinked_check``), or when it may be the
middle of a chain rather than its end (``follow_check``). Each returns the note that gives
the model one more turn, or None to let the answer be taken.
"""

from __future__ import annotations

from rlm_runtime import harness
from rlm_runtime.assist import lookups
from rlm_runtime.assist.base import Assist, AssistState, Host
from rlm_runtime.assist.leads import CHAIN_LINES_SHOWN, chain_note, lines_of, shown
from rlm_runtime.context.grep import re2_escape

#: Answers looked up before being taken, per run.
_FOLLOWS = 2


class CountCheck(Assist):
    """A count the model wrote and no output showed, or a "most common" kind no output
    showed counted: ask once for it to be counted in code."""

    name = "count_check"

    def before_answer(self, host: Host, state: AssistState, answer: str, reply: str) -> str | None:
        if state.count_checked:
            return None
        seen = "\n".join(state.seen)
        if harness.untallied_answer(answer, host.query, seen, reply):
            state.count_checked = True
            return host.prompts.text("tally_answer", answer=" ".join(answer.split())[:200], question=host.query)
        number = harness.unbacked_count(answer, host.query, seen, reply)
        if number is None:
            return None
        state.count_checked = True
        return host.prompts.text("count_answer", number=number, question=host.query)


class GroundingCheck(Assist):
    """An answer that quotes a code or a value the text never holds (a token with a digit,
    or a quoted string, that the model wrote itself and that occurs nowhere in the
    contexts): ask once for the line that states it. Not for counts, which the text need
    not spell out, nor for what its code computed."""

    name = "grounding_check"

    def before_answer(self, host: Host, state: AssistState, answer: str, reply: str) -> str | None:
        if state.grounding_checked or harness.is_count_question(host.query):
            return None
        for token in [t for t in harness.answer_tokens(answer, host.query) if t in reply]:
            if lookups.count(host, re2_escape(token), ignore_case=True) == 0:
                state.grounding_checked = True
                return host.prompts.text("ungrounded_answer", token=token, question=host.query)
        return None


class UnlinkedCheck(Assist):
    """An answer read from a line about another name than the question's (the serial of the
    first of several lines a broad grep printed): the lines of the question's name, the
    chain from them, and one more turn. Asked once."""

    name = "unlinked_check"

    def before_answer(self, host: Host, state: AssistState, answer: str, reply: str) -> str | None:
        if state.link_checked or harness.is_count_question(host.query):
            return None
        token = harness.unlinked_answer(answer, host.query, "\n".join(state.seen), state.chained, written=reply)
        if token is None:
            return None
        state.link_checked = True
        for full in harness.question_names(host.query):
            for name in harness.name_forms(full):
                lines = lines_of(host, name)
                if lines:
                    shown(host, name, lines, "the question's name, before taking an answer read elsewhere")
                    state.seen.append("\n".join(lines))
                    # and the chain from them (followed now if it was not yet): the answer may be a link further on
                    chain_note(host, state, "\n".join(lines))
                    further = [line for line in state.chain_lines if line not in lines][-CHAIN_LINES_SHOWN:]
                    chain = host.prompts.text("unlinked_chain", lines="\n".join(further)) if further else ""
                    return host.prompts.text("unlinked_answer", token=token, term=name, lines="\n".join(lines),
                                             chain=chain, question=host.query)
        return None


class FollowCheck(Assist):
    """An answer that is a name the question does not give, which the model read in a line
    of the text it printed (grep's ``N: line``), and a few lines hold it of which the model
    has not seen every one: those lines and one more turn (it may be the middle of a chain,
    not its end). Asked once per answer: the same answer given again is taken."""

    name = "follow_check"

    def before_answer(self, host: Host, state: AssistState, answer: str, reply: str) -> str | None:
        term = harness.answer_to_follow(answer, host.query)
        if term is None or term.lower() in state.followed or len(state.followed) >= _FOLLOWS:
            return None
        # A link of the chain the runtime followed is its middle, whatever the model has seen of
        # its lines; any other answer after such a chain comes after it.
        middle = term.lower() in state.middles
        if state.chained and not middle:
            return None
        seen = "\n".join(state.seen)
        if not any(term.lower() in row.lower() for row in harness.grep_rows(seen)):
            return None  # not a name the model read in a line of the text
        state.followed.add(term.lower())
        lines = lines_of(host, term)
        if not lines or (not middle and all(harness.seen_in(row, seen) for row in harness.grep_rows("\n".join(lines)))):
            return None
        said = " ".join(answer.split())
        shown(host, term, lines, "more about the answer, before taking it")
        return host.prompts.text("follow_answer", answer=said, term=term, lines="\n".join(lines), question=host.query)
