"""The assist protocol: what an assist is, what it may use of the run, and what it keeps.

An assist is the runtime doing one small thing for the model at a fixed point of the turn
loop: a note after a cell's output (``after_cell``), a question put to an answer before it
is taken (``before_answer``), or the last turn when the turns run out (``last_turn``,
``settle``). The loop calls the hooks through ``Assists`` (``runner.py``) and knows no
assist by name. An assist reads the run through ``Host`` (never the ``Run`` itself) and
keeps what it learns in the run's one ``AssistState``, which every assist of the run shares
(the leads one assist followed are what another checks an answer against).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rlm_runtime.prompts import Prompts

Event = dict[str, Any]


@dataclass
class Host:
    """What a run lends its assists: the question, the prompts, ``lookup`` (the sandbox's
    typed grep, count and tally over the main context, ``Sandbox.lookup``; read it through
    ``lookups.py``), its trace, the chunk search (None when the session has none) and
    ``ask(prompt, source)``: one short model call outside the conversation, counted as a
    forced turn of the run whose trace says it came ``from`` ``source`` (it returns the
    reply's text)."""

    query: str
    prompts: Prompts
    lookup: Callable[..., dict[str, Any]]
    emit: Callable[[Event], None]
    search: Callable[[str, int], list[dict[str, Any]]] | None
    ask: Callable[[str, str], str]
    #: What the assist being called looked up (``lookups.py`` and ``note_lookup`` add to it;
    #: the runner puts it in the assist's trace event and empties it before each call).
    looked: list[str] = field(default_factory=list)

    def note_lookup(self, what: str) -> None:
        """Record one lookup for the trace (cut to 200 characters; 20 a call at most)."""
        if len(self.looked) < 20:
            self.looked.append(what[:200])


@dataclass
class Cell:
    """What one cell of the model did, as the after-cell hooks see it. ``kind``:
    ``empty_grep`` (a grep of the context found nothing), ``broad`` (it printed too many lines to read),
    ``cell`` (any other cell that did not answer), ``final`` (it called FINAL)."""

    code: str
    stdout: str
    reported: str  # stdout, the error and the worker's warnings: where an empty grep shows
    error: str | None
    has_final: bool
    kind: str
    #: The cell's greps of the context that found nothing, as the worker reports them
    #: (``CellResult.empty_greps``: pattern, ignore_case, hint).
    empty_greps: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class AssistState:
    """What the assists of one run learned and did (one object a run, shared by them)."""

    seen: list[str] = field(default_factory=list)  # what the run's cells printed and notes showed (the model read it)
    broad: list[str] = field(default_factory=list)  # those outputs too long to read (a broad grep): only shown
    followed: set[str] = field(default_factory=set)  # answers looked up before being taken
    named: set[str] = field(default_factory=set)  # names of the question whose lines were shown
    chained: set[str] = field(default_factory=set)  # names whose lines were shown as the next link of a chain
    middles: set[str] = field(default_factory=set)  # those of them with a line past the row that tied them in
    chain_lines: list[str] = field(default_factory=list)  # the lines of those names, in the order followed
    count_checked: bool = False  # a count no output showed was questioned once
    grounding_checked: bool = False  # an answer the text never holds was questioned once
    records_tried: bool = False  # records of the text were looked for, for a counting question
    records_counts: dict[str, int] = field(default_factory=dict)  # their tally, when found
    records_checked: bool = False  # an answer the tally disagrees with was questioned once
    words_shown: bool = False  # the question's words were looked up after an empty grep
    link_checked: bool = False  # an answer read on a line about another name was questioned once


class Assist:
    """One named assist. Subclasses set ``name`` and override the hooks they use; every
    hook's default does nothing. Hooks are called in the registry's order.

    * ``after_cell``: a note to add to the cell's feedback, or "". An ``exclusive`` assist
      is called only while no earlier exclusive one has spoken for this cell (one lead a
      cell); the others are called whatever spoke before.
    * ``before_answer``: a note that questions ``answer`` (the model gets one more turn), or
      None to let it be taken. The first assist that questions it wins.
    * ``last_turn``: the run's answer, when the turns ran out, without the conversation's
      forced turn; or None. ``last_found``: text the forced turn's prompt shows.
    * ``settle``: the answer to take in place of ``answer`` (``answer`` itself by default).
    """

    name = ""
    exclusive = True

    def after_cell(self, host: Host, state: AssistState, cell: Cell) -> str:
        return ""

    def before_answer(self, host: Host, state: AssistState, answer: str, reply: str) -> str | None:
        return None

    def last_turn(self, host: Host, state: AssistState) -> str | None:
        return None

    def last_found(self, host: Host, state: AssistState) -> str:
        return ""

    def settle(self, host: Host, state: AssistState, answer: str) -> str:
        return answer
