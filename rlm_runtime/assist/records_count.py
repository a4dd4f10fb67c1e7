"""``records_count``: a count the records contradict, questioned once with the code that counts.

A question that counts (its words say so: "how many", "number of") and names one value the
records hold asks how many records hold that value in one field, or how many records the
record it names holds (``hops.asked_count``, over the records as parsed, whatever the
text's format). An answer without that number (another number, a sentence of no number)
gets one more turn, told the code that counts and what it counts; an answer given again is
taken. Nothing here knows a format: fields and names are the records' own.
"""

from __future__ import annotations

import re

from rlm_runtime.assist import lookups
from rlm_runtime.assist.base import Checker, Host
from rlm_runtime.quoting import VALUE_CHARS, quoted

#: The words of a question that counts. Its other words say what is counted, from the records.
_COUNTS = re.compile(r"\b(?:how many|number of|count of|count the)\b", re.IGNORECASE)
#: A number standing alone ("14", "1,204"), not the digits of a name ("north-3").
_NUMBER = re.compile(r"(?<![\w-])\d[\d,]*(?![\w-])")
#: Characters of an answer a note repeats.
_ANSWER_SHOWN = 200


class RecordsCount(Checker):
    name = "records_count"

    def __init__(self) -> None:
        self.asked = False

    def question(self, host: Host, answer: str) -> str | None:
        if self.asked or not _COUNTS.search(host.query[:2000]):
            return None
        found = lookups.asked_count(host)
        if found is None:
            return None
        numbers = [int(n.replace(",", "")) for n in _NUMBER.findall(answer[:2000])]
        if found["n"] in numbers[:1]:
            return None
        self.asked = True
        value = quoted(found["value"], VALUE_CHARS)
        code = (f"print(len(records().children_of({value})))" if found["children"]
                else f"print(records().count({quoted(found['field'])}, {value}))")
        return host.prompts.text("notes/records_count_answer", code=code, answer=repr(answer.strip()[:_ANSWER_SHOWN]),
                                 n=found["n"])
