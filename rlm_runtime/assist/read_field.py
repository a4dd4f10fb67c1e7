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
  (once a run).
"""

from __future__ import annotations

from rlm_runtime.assist import lookups
from rlm_runtime.assist.base import Assist, AssistState, Host
from rlm_runtime.context.about import shown_name


class ReadField(Assist):
    name = "read_field"

    def __init__(self) -> None:
        self.questioned = ""
        self.insisted = False

    def before_answer(self, host: Host, state: AssistState, answer: str, reply: str) -> str | None:
        said = answer.strip().casefold()
        if not said or self.insisted:
            return None
        read = lookups.misread(host, answer.strip())
        if read is None:
            return None
        values = {"answer": repr(answer.strip()[:200]), "start": repr(read["start"]), "field": shown_name(str(read["field"])),
                  "start_code": repr(read["start"]), "field_code": repr(read["field"]), "target": repr(read["target"])}
        if self.questioned:
            self.insisted = True
            return host.prompts.text("notes/read_field_insisted", **values)
        self.questioned = said
        return host.prompts.text("notes/read_field_answer", **values)
