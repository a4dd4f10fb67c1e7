"""The assists that read or change a reply before its code runs.

Each was written for small models from how they were seen to fail: the same code again
and again, the same sentence twice. With ``--assists none`` neither acts: the reply's code
runs as written, and a reply without code is asked for code.
"""

from __future__ import annotations

import re

from rlm_runtime.assist import lookups
from rlm_runtime.assist.base import Assist, AssistState, Host, Turn

#: A block is a repeat when it is the code of one of this many turns before.
_REPEAT_WINDOW = 3
#: Turns in a row whose code repeats an earlier one before the turns end and the answer is asked for.
_REPEATS_BEFORE_FORCING = 2
#: A reply without code, written again after a request for code, is taken as the answer up to this size.
INSISTED_CHARS = 500
#: Words a reply copied from the run's opening must have to be a copy, not a short value.
COPIED_WORDS = 4
#: Prose that says the model has not found the answer yet and means to look further.
_STILL_LOOKING = re.compile(r"\b(?:let's|let me|I will|I'll|try (?:searching|again|to)|search(?:ing)? again|"
                            r"does not (?:show|contain) the answer|no answer yet)\b", re.IGNORECASE)


class RepeatCut(Assist):
    """Code the model sent on one of the last turns, sent again: a note says so; the turn
    before, when it was this same code, leaves the conversation (a small model copies a turn
    it sees twice); a third repeat in a row ends the turns (the forced turn asks for the
    answer)."""

    name = "repeat_cut"

    def __init__(self) -> None:
        self.last: list[list[str]] = []
        self.repeats = 0

    def on_reply(self, host: Host, state: AssistState, turn: Turn) -> None:
        if not turn.blocks or turn.forced:
            return
        # The same code as one of the last turns: also two blocks taken in turn (A, B, A, B).
        self.repeats = self.repeats + 1 if turn.blocks in self.last else 0
        turn.drop_previous = bool(self.last) and self.last[-1] == turn.blocks
        self.last = [*self.last, list(turn.blocks)][-_REPEAT_WINDOW:]
        if self.repeats:
            turn.notes.append(host.prompts.notes["same_code"])
        turn.stop = self.repeats >= _REPEATS_BEFORE_FORCING


class CopiedProse(Assist):
    """A reply without code that writes the runtime's own words back (the message it
    answered, or the run's opening: its system prompt and first message), half of it or more:
    it leaves the conversation, and the message it answered is asked again with a note. A
    small model that sees its copy in the conversation copies it again, turn after turn, until
    the run stops without an answer. A reply whose first line the text holds is left alone:
    the opening may show the text, and a line of it said back may be the answer."""

    name = "copied_prose"

    def __init__(self) -> None:
        self.opening: set[tuple[str, ...]] | None = None

    def on_reply(self, host: Host, state: AssistState, turn: Turn) -> None:
        if turn.blocks or turn.forced or turn.answer is not None:
            return
        said = _shingles(turn.reply[:_COPY_CHARS])
        if not said:
            return  # a few words: a short value, not a copy
        if self.opening is None:
            self.opening = set(_shingles(host.opening))
        shown = set(_shingles(turn.shown[-_COPY_CHARS:]))
        if 2 * sum(s in self.opening or s in shown for s in said) < len(said):
            return
        first = turn.reply.strip().split("\n", 1)[0][:_COPY_CHARS]
        if len(_WORD.findall(first)) >= _SHINGLE_WORDS and lookups.count(host, re.escape(first), ignore_case=True):
            return  # a line of the text (which the opening may show) said back: it may be the answer
        turn.retract = True
        turn.notes.append(host.prompts.notes["copied_prose"])


#: Characters of a reply (and of the end of the message it answered) compared for a copy.
_COPY_CHARS = 4_000
#: Words in a row that make a shingle: a run this long written back is copied, not said anew.
_SHINGLE_WORDS = 5


def _shingles(text: str) -> list[tuple[str, ...]]:
    """Each run of ``_SHINGLE_WORDS`` words of ``text`` (casefolded, punctuation aside)."""
    words = _WORD.findall(text.casefold())
    return [tuple(words[i:i + _SHINGLE_WORDS]) for i in range(len(words) - _SHINGLE_WORDS + 1)]


class InsistedProse(Assist):
    """A short reply without code, the same as one the run wrote before (each was answered
    with a request for code): that is the answer, unless it says it is still looking ("The
    output does not show the answer. Let's try searching again.") or copies the runtime's
    own words (a sentence of the first prompt, said back three times, was taken as an
    answer on a development format)."""

    name = "insisted_prose"

    def __init__(self) -> None:
        self.said: set[str] = set()
        self.opening: str | None = None

    def on_reply(self, host: Host, state: AssistState, turn: Turn) -> None:
        if turn.blocks or turn.forced or turn.retract:
            return
        said = turn.reply.strip()
        if (turn.answer is None and said in self.said and 0 < len(said) <= INSISTED_CHARS
                and not _STILL_LOOKING.search(said) and not self._copied(said, host)):
            turn.answer = said
        self.said.add(said)

    def _copied(self, said: str, host: Host) -> bool:
        """``said`` is a sentence of the run's opening (``COPIED_WORDS`` words or more of it, in
        order, whatever their case and punctuation) that the text does not hold: a short value,
        or a line of the document the brief quoted, may be the answer."""
        words = _words(said)
        if words.count(" ") + 1 < COPIED_WORDS:
            return False
        if self.opening is None:
            self.opening = f" {_words(host.opening)} "
        return f" {words} " in self.opening and lookups.count(host, re.escape(said), ignore_case=True) == 0


def _words(text: str) -> str:
    return " ".join(_WORD.findall(text.casefold()))


_WORD = re.compile(r"\w+")
