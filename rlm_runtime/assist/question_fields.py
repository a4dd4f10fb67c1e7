"""``question_fields``: the first prompt shows which words of the question are the records'
field names and values (``records().about(question)``, read by a typed lookup).

A small model starting on records guesses a field and a value from the question, and often
takes the wrong words: a field's name as the value (``count("department")``), the field
asked for as the value counted (``count("status", "failover")``). The runtime matches the
question against the records themselves, once, before the first turn, and shows what matched
under the question: the fields it names, each value with its field and count, the records a
value names, and the record a named field links to. Nothing here knows a wording: the fields
and values are the text's. Silent when the main context has no fields.
"""

from __future__ import annotations

from rlm_runtime.assist import lookups
from rlm_runtime.assist.base import Assist, AssistState, Host


class QuestionFields(Assist):
    name = "question_fields"

    def first_turn(self, host: Host, state: AssistState) -> str:
        if not host.fielded:
            return ""
        said = lookups.about(host, host.query)
        if not said or said[0].startswith("no word of the question"):
            return ""
        return host.prompts.text("notes/question_fields", lines="\n".join(said)).strip()
