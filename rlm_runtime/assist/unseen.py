"""``unseen_answer``: an answer the model typed that no output of its code ever showed is
questioned once, with what the code printed last.

A small model reads the value it was after in its cell's output, then answers with another
word it saw elsewhere (a value of the text's first lines, shown in its prompt, or a word of
its own). Nothing knows the answer here: the check only asks whether the answer's words were
ever in front of the model as output. Only an answer typed into the reply is checked (an
answer code computed, ``FINAL(len(rows))``, is the code's), and only words that are not the
question's (a word the question gave needs no output to show it).
"""

from __future__ import annotations

import re

from rlm_runtime.assist.base import Assist, AssistState, Host

#: The longest answer checked (a longer one is an explanation, not a value to find).
ANSWER_CHARS = 200
#: Characters of the last output shown with the question.
SHOWN_CHARS = 600
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

    def before_answer(self, host: Host, state: AssistState, answer: str, reply: str) -> str | None:
        said = answer.strip().strip("'\"`").strip()
        printed = [out for out in state.seen if out.strip()]
        if self.asked or not said or len(said) > ANSWER_CHARS or not printed or said.casefold() not in reply.casefold():
            return None
        seen = "\n".join(printed).casefold()
        own = _words(said) - _words(host.query)
        if not own or any(w in seen for w in own):
            return None
        self.asked = True
        last = printed[-1].strip()
        if len(last) > SHOWN_CHARS:
            last = "..." + last[-SHOWN_CHARS:]
        return host.prompts.text("notes/unseen_answer", answer=repr(said), printed=last)
