"""The assists that read or change a reply before its code runs, or read the forced turn's.

Each was written for small models from how they were seen to fail: feedback pasted into
code, ``Final(...)`` spelled so, the same code again and again, the same sentence twice,
prose in place of code, a sentence as the last answer. With ``--assists none`` none of them
acts: the reply's code runs as written, and a reply without code is asked for code.
"""

from __future__ import annotations

from rlm_runtime.assist.base import Assist, AssistState, Host, Turn
from rlm_runtime.assist.readings import final_spelled, forced_prose, insisted_answer, last_printed, prose_block, without_echo
from rlm_runtime.harness import placeholder_final

#: A block is a repeat when it is the code of one of this many turns before.
_REPEAT_WINDOW = 3
#: Turns in a row whose code repeats an earlier one before the turns end and the answer is asked for.
_REPEATS_BEFORE_FORCING = 2
#: The most characters of a question written into a code block the model is shown.
_QUESTION_IN_CODE = 500


class EchoLines(Assist):
    """A block that is not Python because it pastes lines of the message it answers (the
    output, a note): those lines leave it, when it parses without them."""

    name = "echo_lines"

    def on_reply(self, host: Host, state: AssistState, turn: Turn) -> None:
        turn.blocks = [without_echo(b, turn.shown) for b in turn.blocks]


class FinalSpelling(Assist):
    """``Final(...)`` or ``final(...)`` in code that does not define that name: ``FINAL``."""

    name = "final_spelling"

    def on_reply(self, host: Host, state: AssistState, turn: Turn) -> None:
        turn.blocks = [final_spelled(b) for b in turn.blocks]


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


class InsistedProse(Assist):
    """A short reply without code, the same as one the run wrote before (each was answered
    with a request for code): that is the answer, unless it says it is still looking."""

    name = "insisted_prose"

    def __init__(self) -> None:
        self.said: set[str] = set()

    def on_reply(self, host: Host, state: AssistState, turn: Turn) -> None:
        if turn.blocks or turn.forced:
            return
        if turn.answer is None:
            turn.answer = insisted_answer(turn.reply, self.said)
        self.said.add(turn.reply.strip())


class RecordsReprompt(Assist):
    """The same prose again, still looking, over a text with fields: the reply is answered
    with a block it can run as it stands, the question written in, and the prose turns since
    the last output leave the conversation (a small model copies its own loop)."""

    name = "records_reprompt"

    def __init__(self) -> None:
        self.said: set[str] = set()

    def on_reply(self, host: Host, state: AssistState, turn: Turn) -> None:
        if turn.blocks or turn.forced:
            return
        said = turn.reply.strip()
        if turn.answer is None and said in self.said and host.mode == "records":
            turn.feedback = host.prompts.text("reprompt_records", question=repr(host.query[:_QUESTION_IN_CODE]))
            turn.restart = True
        self.said.add(said)


class ForcedReading(Assist):
    """Told to answer now, a model that writes a sentence as its one code block, or replies
    with a sentence stating something (not after failing turns in prose: that is more talk),
    is answering; ``FINAL(your answer)`` copied from the instructions gives the line the code
    printed last."""

    name = "forced_reading"

    def last_reply(self, host: Host, state: AssistState, turn: Turn) -> str | None:
        said = prose_block(turn.blocks[0]) if len(turn.blocks) == 1 else None
        if said is None and not turn.blocks and not turn.failing:
            said = forced_prose(turn.reply, host.query)
        if said is None and placeholder_final(turn.reply):
            said = last_printed(turn.printed)
        return said
