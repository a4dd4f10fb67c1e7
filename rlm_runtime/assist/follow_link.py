"""``follow_link``: a question through a link between records, followed where the model stops.

A question through a link (the office of someone's manager) needs two lookups. A small model
finds the first record and prints the linked value, then stops: it answers that value (or the
first record's own value of the field asked), or searches again for words it already has.
The runtime knows the text's records and which of the question's words are their fields
(``context/hops.py``), so it can say, without knowing any wording:

* after a cell that printed the linked value but not what it leads to: that value is the name
  of a record of its own, and the code that reads the field the question asks (once a value);
* before an answer one hop short (the linked value, or the start's own value of the field,
  and not the linked record's): which it is, and the same code (once an answer, twice a run);
* before an answer off the chain (another record's value, a number made up after an error,
  "the text does not say"; not a count, ``hops.counted``): the code that reads the first
  hop, once; the next such answer is told what the chain reads;
* when such an answer comes again after that: what the code reads, the value of the field
  asked in the linked record (once a run). A small model that ran the code, or did not,
  and gave the first hop again, still had the hop's value to read: this says it;
* after code run again (the same as an earlier cell's) when no output has shown the first
  hop's value: the code that reads it (once a run);
* after a short output that shows the target of the hop it pointed at: that this is the
  answer (once a run; the model had printed it three times and then answered the first hop);
* on the forced last turn, the target, when a short output of the model's code showed it.

Both read only records the model's code already parsed (the host parses nothing).
"""

from __future__ import annotations

from rlm_runtime.assist import lookups
from rlm_runtime.assist.base import AssistState, Cell, Checker, Host
from rlm_runtime.context.about import VALUE_CHARS, quoted
from rlm_runtime.context.hops import SHORT_OUTPUT, SHOWN_CHARS, counted, printed

#: Answers questioned in one run, at most.
QUESTIONED_A_RUN = 2


def _values(hop: dict[str, object]) -> dict[str, object]:
    """The note's fields. Every name and value is the document's, and ``quoted`` (a lookup
    whose strings a note could not show whole is none: ``lookups._whole``)."""
    value, start = quoted(hop["value"], VALUE_CHARS), quoted(hop["start"], VALUE_CHARS)
    return {"value": value, "link": quoted(hop["link"]), "start": start, "name_field": quoted(hop["name_field"]),
            "line": hop["line"], "field": quoted(hop["field"]), "value_code": value, "field_code": quoted(hop["field"]),
            "start_code": start, "link_code": quoted(hop["link"]), "target": quoted(hop["target"], VALUE_CHARS)}


class FollowLink(Checker):
    name = "follow_link"

    def __init__(self) -> None:
        self.said: set[str] = set()
        self.questioned: set[str] = set()
        self.insisted = False  # an answer questioned once was given again, and told the hop's value
        self.confirmed = False  # the hop pointed at was taken, and its target said to be the answer
        self.strayed = False  # an answer off the chain was questioned with the first hop's code
        self.started = False  # code run again was given the first hop's code

    def after_cell(self, host: Host, state: AssistState, cell: Cell) -> str:
        if cell.has_final:
            return ""
        if not cell.stdout.strip():
            return self._stuck(host, state, cell)
        hop = lookups.hop(host, cell.stdout)
        if hop is None:
            return self._taken(host, cell.stdout) or self._stuck(host, state, cell)
        if str(hop["value"]).casefold() in self.said:
            return ""
        self.said.add(str(hop["value"]).casefold())
        return host.prompts.text("notes/follow_link", **_values(hop))

    def _stuck(self, host: Host, state: AssistState, cell: Cell) -> str:
        """After code run again that never printed the chain's first hop: the code that reads
        it, once a run (a small model ran its own failing lookup three turns running, past the
        records' note naming the right one)."""
        if not cell.repeated or self.started or self.said:
            return ""
        hop = lookups.chain(host)
        if hop is None or any(printed(str(hop["value"]), out[:SHOWN_CHARS].casefold()) for out in state.seen):
            return ""
        self.started = True
        return host.prompts.text("notes/follow_link_start", **_values(hop))

    def _taken(self, host: Host, stdout: str) -> str:
        """After the hop this assist pointed at was taken (a short output shows its target):
        that the target is the answer, once a run."""
        if not self.said or self.confirmed or len(stdout.strip()) > SHORT_OUTPUT:
            return ""
        hop = lookups.chain(host)
        if hop is None or str(hop["value"]).casefold() not in self.said or not printed(str(hop["target"]), stdout.casefold()):
            return ""
        self.confirmed = True
        return host.prompts.text("notes/follow_link_taken", **_values(hop))

    def last_found(self, host: Host, state: AssistState) -> str:
        """On the forced last turn: the hop's target, when a short output of the model's own
        code showed it."""
        if not self.said and not self.questioned and not self.started:
            return ""
        hop = lookups.chain(host)
        if hop is None or not any(len(out.strip()) <= SHORT_OUTPUT and printed(str(hop["target"]), out.casefold())
                                  for out in state.seen):
            return ""
        return " " + host.prompts.text("notes/follow_link_found", **_values(hop)).strip()

    def question(self, host: Host, answer: str) -> str | None:
        said = answer.strip().casefold()
        insisted = said in self.questioned
        if not said or self.insisted or (not insisted and len(self.questioned) >= QUESTIONED_A_RUN):
            return None
        hop = lookups.chain(host)
        if hop is None or printed(str(hop["target"]), said):
            return None
        if printed(str(hop["value"]), said):
            what = f"the {quoted(hop['link'])} of {quoted(hop['start'], VALUE_CHARS)}"
        elif hop["own"] and printed(str(hop["own"]), said):
            what = f"the {quoted(hop['field'])} of {quoted(hop['start'], VALUE_CHARS)} itself"
        elif counted(said, str(hop["target"])):
            return None  # a number where the field holds none: a count the question may ask
        else:
            return self._strayed(host, answer, hop)
        values = {"answer": repr(answer.strip()[:200]), "what": what, **_values(hop)}
        if insisted:
            # Said again after the code that reads the hop: the value that code reads.
            self.insisted = True
            return host.prompts.text("notes/follow_link_insisted", **values)
        self.questioned.add(said)
        return host.prompts.text("notes/follow_link_answer", **values)

    def _strayed(self, host: Host, answer: str, hop: dict[str, object]) -> str:
        """An answer off the chain (another record's value, a made-up one, "not found"): the
        code that reads the chain's first hop, once; then, for the next such answer, what
        the chain reads (once a run)."""
        values = {"answer": repr(answer.strip()[:200]), **_values(hop)}
        self.questioned.add(answer.strip().casefold())
        if self.strayed:
            self.insisted = True
            return host.prompts.text("notes/follow_link_strayed_insisted", **values)
        self.strayed = True
        return host.prompts.text("notes/follow_link_strayed", **values)
