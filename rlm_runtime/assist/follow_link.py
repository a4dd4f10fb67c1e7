"""``follow_link``: a value that a cell printed, or an answer gave, which names a record of its
own whose field the question asks, is followed once with the code that reads it.

A question through a link (the office of someone's manager) needs two lookups. A small model
finds the first record and prints the linked value, then stops: it answers that value, or
searches again for words it already has. The runtime knows the text's records and which of
the question's words are their fields (``context/hops.py``), so it can say, without knowing any
wording: this value is the name of a record, and the question asks for that record's field.
It speaks once for each value, after a cell or before an answer, never twice.
"""

from __future__ import annotations

from rlm_runtime.assist import lookups
from rlm_runtime.assist.base import Assist, AssistState, Cell, Host
from rlm_runtime.context.about import shown_name


class FollowLink(Assist):
    name = "follow_link"

    def __init__(self) -> None:
        self.said: set[str] = set()

    def _note(self, host: Host, text: str) -> str:
        if not text.strip():
            return ""
        hop = lookups.hop(host, text)
        if hop is None or str(hop["value"]).casefold() in self.said:
            return ""
        self.said.add(str(hop["value"]).casefold())
        # Field names are the document's words: shown with control characters escaped.
        return host.prompts.text("notes/follow_link", value=repr(hop["value"]), link=shown_name(str(hop["link"])),
                                 start=repr(hop["start"]), name_field=shown_name(str(hop["name_field"])), line=hop["line"],
                                 field=shown_name(str(hop["field"])), value_code=repr(hop["value"]),
                                 field_code=repr(hop["field"]))

    def after_cell(self, host: Host, state: AssistState, cell: Cell) -> str:
        return "" if cell.has_final else self._note(host, cell.stdout)

    def before_answer(self, host: Host, state: AssistState, answer: str, reply: str) -> str | None:
        return self._note(host, answer) or None
