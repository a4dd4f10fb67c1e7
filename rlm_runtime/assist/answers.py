"""The assists that read or question an answer: the question copied back, the question's own
words given as the value, a date that Python reads as a sum, a value written as code.

Each was written for small models from how they were seen to fail (``readings.py`` holds
the rules as pure functions) and each is off with ``--assists none``: then FINAL's value is
the answer, whatever it is.
"""

from __future__ import annotations

from rlm_runtime.assist.base import Answer, Assist, AssistState, Cell, Host, Question
from rlm_runtime.assist.readings import (
    bare_value,
    echoes_question,
    joined_digits,
    last_printed,
    question_piece,
    stated,
    unbound_final,
    unparsable_final,
)
from rlm_runtime.harness import cap

#: The most characters of the variables listed when an answer is questioned.
_HELD_VARIABLES_CHARS = 1200
#: The most characters of an answer a note repeats.
_ANSWER_SHOWN = 200


def held_variables(host: Host) -> str:
    """The model's variables and their values (cut), as a note: said when an answer is
    questioned, so the value found is in front of the model. "" when it holds none."""
    held = host.variables()
    if not held:
        return ""
    return "\n" + host.prompts.text("notes/held_variables",
                                    variables=cap(held, _HELD_VARIABLES_CHARS, host.prompts.notes["cut"]))


class DatedFinal(Assist):
    """``FINAL(2015-12)``, unquoted, of a date or code the output showed: the text as written,
    not the number Python computes from it (2003)."""

    name = "dated_final"

    def on_answer(self, host: Host, state: AssistState, answer: Answer) -> str | Question | None:
        return joined_digits(answer.argument, answer.printed) if answer.argument else None


class QuestionEcho(Assist):
    """The question copied back as the answer (or four or more of its words and nothing
    else) is no answer: questioned, with the model's variables shown; on the last turn, the
    line the code printed last is taken in its place."""

    name = "question_echo"

    def on_answer(self, host: Host, state: AssistState, answer: Answer) -> str | Question | None:
        if not echoes_question(answer.text, host.query):
            return None
        if answer.last:
            return last_printed(answer.printed)
        return Question(host.prompts.notes["question_as_answer"] + held_variables(host))


class QuestionWords(Assist):
    """An answer of two or more of the question's words and nothing found (``loader of kiln
    4``): asked about once, with the model's variables shown; given again, or on the last turn,
    the sentence the reply states before its code, when it states more."""

    name = "question_words"

    def __init__(self) -> None:
        self.asked: set[str] = set()

    def on_answer(self, host: Host, state: AssistState, answer: Answer) -> str | Question | None:
        if not answer.text or not question_piece(answer.text, host.query):
            return None
        if answer.text in self.asked or answer.last:
            return stated(answer.reply, answer.text, host.query)
        self.asked.add(answer.text)
        return Question(host.prompts.text("notes/question_words", answer=repr(answer.text[:_ANSWER_SHOWN]))
                        + held_variables(host))


class ValueAsCode(Assist):
    """A cell that is the answer written as code: ``FINAL(Loyar Cailo)``, not Python; a lone
    value the last output showed (``B-81``) that failed as a name; ``FINAL(Orrin)`` whose
    name is undefined and was printed as a word. The value is the answer."""

    name = "value_as_code"

    def read_cell(self, host: Host, state: AssistState, cell: Cell) -> str | None:
        if cell.error is None:
            return None
        return (unparsable_final(cell.code) or bare_value(cell.code, cell.error_type, cell.printed)
                or unbound_final(cell.code, cell.error, cell.printed))
