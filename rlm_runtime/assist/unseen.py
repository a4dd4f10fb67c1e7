"""``unseen_answer``: an answer the model typed that no output of its code ever showed is
questioned once, with what the code printed last.

A small model reads the value it was after in its cell's output, then answers with words it
never saw there (a value it remembers, a word of its prompt's example). Nothing here knows
the answer or the text's format: the check only asks whether any of the answer's own words
(those the question does not give) was ever in front of the model as output. Only an answer
typed into the reply is checked (one code computed, ``FINAL(len(rows))``, is the code's), and
only before the last turn.
"""

from __future__ import annotations

import re

from rlm_runtime.assist.base import Answer, Assist, AssistState, Host, Question

#: The longest answer checked (a longer one is an explanation, not a value to find).
ANSWER_CHARS = 200
#: Characters of the last output shown with the question.
SHOWN_CHARS = 600
#: Characters of the outputs searched for the answer's words (the most recent kept).
SEEN_CHARS = 200_000
_WORD = re.compile(r"\w[\w.\-/]*\w|\w")
#: Words an answer sentence is made of, never evidence of anything.
_COMMON = frozenset("""a an the of is are was were be to in on at by for from with as and or not it its this that
these those there answer final value result record records which what who""".split())


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.casefold()) if w not in _COMMON}


class UnseenAnswer(Assist):
    name = "unseen_answer"

    def __init__(self) -> None:
        self.asked = False

    def on_answer(self, host: Host, state: AssistState, answer: Answer) -> str | Question | None:
        said = answer.text.strip().strip("'\"`").strip()
        printed = [out for out in state.seen if out.strip()]
        if (self.asked or answer.last or not said or len(said) > ANSWER_CHARS or not printed
                or said.casefold() not in answer.reply.casefold()):
            return None
        seen = "\n".join(printed)[-SEEN_CHARS:].casefold()
        own = _words(said) - _words(host.query[:2000])
        if not own or any(w in seen for w in own):
            return None
        self.asked = True
        last = printed[-1].strip()
        if len(last) > SHOWN_CHARS:
            last = "..." + last[-SHOWN_CHARS:]
        return Question(host.prompts.text("notes/unseen_answer", answer=repr(said), printed=last))
