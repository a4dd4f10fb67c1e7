"""``read_field``: a question about one field of one record, answered with some other value.

A lookup names a record and one of its fields (the glaze of one kiln). A small model that
printed a field's tally (``find("glaze")`` says the field's values, most common first) has
answered the most common value; one that printed the whole record has answered another of
its fields; one that found the record has answered its name. Each is a value the records
hold, just not the one asked, and the
runtime can tell (``hops.misread``, over the records the model's code parsed), without
knowing any wording:

* before such an answer: that it is not the field of the record the question names, and the
  code that reads it (once a run);
* when such an answer comes again after that (the same or another): what that code reads
  (once a run);
* after code run again (the same as an earlier cell's): the code that reads the field, or,
  when an output of the run already showed the named record with it, that value (once a
  run; a small model ran the same lookup three turns running with the record printed above);
* on the forced last turn, the value, when an output of the run showed it with the name.

A question is a read only when the answer is not a count (``hops.counted``).
"""

from __future__ import annotations

from rlm_runtime.assist import lookups
from rlm_runtime.assist.base import Assist, AssistState, Cell, Host
from rlm_runtime.context.about import shown_name
from rlm_runtime.context.hops import SHOWN_CHARS, printed


def _values(read: dict[str, object], answer: str = "") -> dict[str, object]:
    return {"answer": repr(answer.strip()[:200]), "start": repr(read["start"]), "field": shown_name(str(read["field"])),
            "start_code": repr(read["start"]), "field_code": repr(read["field"]), "target": repr(read["target"])}


def _shown(read: dict[str, object], state: AssistState) -> bool:
    """Whether a line an output of the run printed holds the record's name and the value asked."""
    target, start = str(read["target"]), str(read["start"])
    return any(printed(target, line) and printed(start, line)
               for out in state.seen for line in out[:SHOWN_CHARS].casefold().splitlines())


class ReadField(Assist):
    name = "read_field"

    def __init__(self) -> None:
        self.questioned = ""
        self.insisted = False
        self.started = False  # code run again was given the read's code or value

    def after_cell(self, host: Host, state: AssistState, cell: Cell) -> str:
        if not cell.repeated or cell.has_final or self.started or self.questioned:
            return ""
        read = lookups.misread(host, "")  # the read the question asks, whatever was answered
        if read is None:
            return ""
        self.started = True
        return host.prompts.text("notes/read_field_shown" if _shown(read, state) else "notes/read_field_start",
                                 **_values(read))

    def last_found(self, host: Host, state: AssistState) -> str:
        read = lookups.misread(host, "")
        if read is None or not _shown(read, state):
            return ""
        return " " + host.prompts.text("notes/read_field_shown", **_values(read)).strip()

    def before_answer(self, host: Host, state: AssistState, answer: str, reply: str) -> str | None:
        said = answer.strip().casefold()
        if not said or self.insisted:
            return None
        read = lookups.misread(host, answer.strip())
        if read is None:
            return None
        values = _values(read, answer)
        if self.questioned:
            self.insisted = True
            return host.prompts.text("notes/read_field_insisted", **values)
        self.questioned = said
        return host.prompts.text("notes/read_field_answer", **values)
