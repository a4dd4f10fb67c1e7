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
* after a cell that showed the value asked (a short output holding it, or a line holding it
  with the record's name): that it is the field of the record the question names (a small
  model printed it and then wrote that the text does not hold it). Said as a fact, not as
  the answer: a question counting the records that share the value reads as this read too;
* after code run again (the same as an earlier cell's): the code that reads the field, or,
  when an output of the run already showed the value, that value (a small model ran the
  same lookup three turns running with the record printed above). One of these a run;
* on the forced last turn, the value, when an output of the run showed it.

A question is a read only when the answer is not a count (``hops.counted``).
"""

from __future__ import annotations

from rlm_runtime.assist import lookups
from rlm_runtime.assist.base import AssistState, Cell, Checker, Host
from rlm_runtime.context.hops import SHORT_OUTPUT, SHOWN_CHARS, printed
from rlm_runtime.quoting import VALUE_CHARS, quoted


def _values(read: dict[str, object], answer: str = "") -> dict[str, object]:
    """The note's fields. Every name and value is the document's, and ``quoted`` (a lookup
    whose strings a note could not show whole is none: ``lookups._whole``)."""
    start, field = quoted(read["start"], VALUE_CHARS), quoted(read["field"])
    return {"answer": repr(answer.strip()[:200]), "start": start, "field": field, "start_code": start, "field_code": field,
            "target": quoted(read["target"], VALUE_CHARS)}


def _shown(read: dict[str, object], outputs: list[str]) -> bool:
    """Whether one of ``outputs`` showed the value asked: a short output holding it (the
    model's own read printed it), or a line holding it with the record's name."""
    target, start = str(read["target"]), str(read["start"])
    return any((len(out.strip()) <= SHORT_OUTPUT and printed(target, out.casefold()))
               or any(printed(target, line) and printed(start, line) for line in out[:SHOWN_CHARS].casefold().splitlines())
               for out in outputs)


class ReadField(Checker):
    name = "read_field"

    def __init__(self) -> None:
        self.questioned = ""
        self.insisted = False
        self.started = False  # a cell was told the value it showed, or (run again) the read's code

    def after_cell(self, host: Host, state: AssistState, cell: Cell) -> str:
        if cell.has_final or self.started or self.questioned or not (cell.repeated or cell.stdout.strip()):
            return ""
        read = lookups.misread(host, "")  # the read the question asks, whatever was answered
        if read is None:
            return ""
        if _shown(read, [cell.stdout]):
            self.started = True
            return host.prompts.text("notes/read_field_shown", **_values(read))
        if not cell.repeated:
            return ""
        self.started = True
        return host.prompts.text("notes/read_field_shown" if _shown(read, state.seen) else "notes/read_field_start",
                                 **_values(read))

    def last_found(self, host: Host, state: AssistState) -> str:
        read = lookups.misread(host, "")
        if read is None or not _shown(read, state.seen):
            return ""
        return " " + host.prompts.text("notes/read_field_shown", **_values(read)).strip()

    def question(self, host: Host, answer: str) -> str | None:
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
