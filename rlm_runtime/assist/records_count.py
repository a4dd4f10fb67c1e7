"""``records_count``: a count the records contradict, questioned once with the code that counts.

A question that counts (its words say so: "how many", "number of") and names one value the
records hold asks how many records hold that value in one field, or how many records the
record it names holds (``hops.asked_count``, over the records as parsed, whatever the
text's format). An answer without that number (another number, a sentence of no number)
gets one more turn, told the code that counts and what it counts; an answer given again is
taken. A cell that made the records and looked nothing up (or ran again) is followed by that
code, once a run, before any answer. Nothing here knows a format: fields and names are the records' own.
"""

from __future__ import annotations

import re

from rlm_runtime.assist import lookups
from rlm_runtime.assist.base import AssistState, Cell, Checker, Host
from rlm_runtime.quoting import VALUE_CHARS, quoted

#: A number standing alone ("14", "1,204"), not the digits of a name ("north-3").
_NUMBER = re.compile(r"(?<![\w-])\d[\d,]*(?![\w-])")
#: Characters of an answer a note repeats.
_ANSWER_SHOWN = 200


class RecordsCount(Checker):
    name = "records_count"

    def __init__(self) -> None:
        self.asked = False
        self.started = False  # a cell was told the code that counts

    def after_cell(self, host: Host, state: AssistState, cell: Cell) -> str:
        """After a cell that made the records and looked nothing up, or ran again: the code
        that counts what the question asks (once a run)."""
        if self.started or self.asked or cell.has_final or cell.error or not (
                cell.repeated or lookups.described_only(cell.code)) or not lookups.counts(host.query):
            return ""
        found = lookups.asked_count(host)
        if found is None:
            return ""
        self.started = True
        return host.prompts.text("notes/records_count_start", code=_code(found))

    def question(self, host: Host, answer: str) -> str | None:
        if self.asked or not lookups.counts(host.query):
            return None
        found = lookups.asked_count(host)
        if found is None:
            return None
        numbers = [int(n.replace(",", "")) for n in _NUMBER.findall(answer[:2000])]
        if found["n"] in numbers[:1]:
            return None
        self.asked = True
        return host.prompts.text("notes/records_count_answer", code=_code(found), answer=repr(answer.strip()[:_ANSWER_SHOWN]),
                                 n=found["n"])


def _code(found: dict[str, object]) -> str:
    """The code that counts what ``found`` (``lookups.asked_count``) says the question asks."""
    value = quoted(found["value"], VALUE_CHARS)
    return (f"print(len(records().children_of({value})))" if found["children"]
            else f"print(records().count({quoted(found['field'])}, {value}))")
