"""The assist protocol: what an assist is, what it may use of the run, and what it keeps.

An assist is the runtime doing one small thing for the model at a fixed point of the turn
loop: a note after a cell's output (``after_cell``), a question put to an answer before it
is taken (``before_answer``), or the last turn when the turns run out (``last_turn``,
``settle``). The loop calls the hooks through ``Assists`` (``runner.py``) and knows no
assist by name. An assist reads the run through ``Host`` (never the ``Run`` itself). Each
run makes its own instance of each of its assists, so an assist keeps what it learns in one
run on itself; what the assists of a run share is the run's one ``AssistState``.
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
    ``empty_grep`` (a grep of the context found nothing), ``final`` (it called FINAL),
    ``repeat`` (the code of an earlier cell of the run, run again), ``cell`` (any other
    cell); the ``assist`` trace event names it as the note's trigger."""

    code: str
    stdout: str
    error: str | None
    has_final: bool
    kind: str
    #: The cell's greps of the context that found nothing, as the worker reports them
    #: (``CellResult.empty_greps``: pattern, ignore_case, hint).
    empty_greps: list[dict[str, Any]] = field(default_factory=list)
    #: The same code (stripped) as an earlier cell of the run: a small model that loops
    #: prints the same thing again and reads nothing new from it.
    repeated: bool = False


@dataclass
class AssistState:
    """A small generic state the assists of one run share (one object a run). The mechanism
    itself needs none of it: it holds what the run's cells printed, in order (the runner
    adds each output before the after-cell hooks run). An assist's own flags live on its
    instance (one a run); a field goes here only when assists must read what another learned."""

    seen: list[str] = field(default_factory=list)
    #: The code of each cell of the run, stripped, in order.
    codes: list[str] = field(default_factory=list)


class Assist:
    """One named assist. Subclasses set ``name`` and override the hooks they use; every
    hook's default does nothing. Hooks are called in the registry's order.

    * ``after_cell``: a note to add to the cell's feedback, or "". An ``exclusive`` assist
      is called only while no earlier exclusive one has spoken for this cell (one such note a
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
