"""The assist protocol: what an assist is, what it may use of the run, and what it keeps.

An assist is the runtime doing one small thing to a model's reply or answer at a fixed
point of the turn loop: a reply read before its code runs (``on_reply``: an answer read
from prose, a note, the conversation cut, the turns ended), a note after a cell's output
(``after_cell``), an answer questioned or replaced before it is taken (``on_answer``), and
what the forced turn's prompt shows (``last_found``). The loop calls the hooks through ``Assists``
(``runner.py``) and knows no assist by name: with none, it is the plain loop (code runs,
FINAL in code or written in prose ends the run, a reply without code is asked for code).
An assist reads the run through ``Host`` (never the ``Run`` itself). Each run makes its own
instance of each of its assists, so an assist keeps what it learns in one run on itself;
what the assists of a run share is the run's one ``AssistState``.
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
    ``lookups.py``) and its trace."""

    query: str
    prompts: Prompts
    lookup: Callable[..., dict[str, Any]]
    emit: Callable[[Event], None]
    #: The run's system prompt and first message, as the model read them: the runtime's own
    #: words, which a reply may copy and which are never the answer.
    opening: str = ""
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
    #: The error's type name (``NameError``...), None when the cell ran.
    error_type: str | None = None
    #: What the run's code printed last before this cell (its last output, cut).
    printed: str = ""


@dataclass
class Turn:
    """One reply of the model as the reply hooks see it, and what they may change of it.

    ``blocks`` are the reply's code blocks, not run yet; ``answer`` is what the plain loop
    read from a reply without code (a FINAL written in prose), or None. A hook may set
    ``answer`` (a reply without code that is the answer), add ``notes`` (said after the
    turn's output), set ``drop_previous`` (the previous turn's code and output leave the
    conversation: this reply repeats them), ``retract`` (a reply without code leaves the
    conversation, and the message it answered is asked again with the notes after it) or
    ``stop`` (the turns end here; the forced turn asks for the answer)."""

    reply: str
    blocks: list[str]
    #: The message the reply answered.
    shown: str
    #: What the run's code printed last (its last output, cut), "" before any.
    printed: str = ""
    #: The "answer now" turn (the turns ran out, or failing turns brought the run to it).
    forced: bool = False
    answer: str | None = None
    notes: list[str] = field(default_factory=list)
    drop_previous: bool = False
    retract: bool = False
    stop: bool = False


@dataclass(frozen=True)
class Answer:
    """An answer about to be taken, as ``on_answer`` sees it."""

    text: str
    #: The reply that gave it.
    reply: str
    #: FINAL's argument as the model wrote it (``2015-12``, ``room``), when FINAL gave it.
    argument: str | None
    #: What the run's code printed last (its last output, cut).
    printed: str
    #: No turn comes after this one: an answer questioned now would be no answer.
    last: bool


@dataclass(frozen=True)
class Question:
    """``on_answer``'s verdict that an answer is not taken yet: ``note`` goes to the model,
    which gets one more turn."""

    note: str


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

    * ``on_reply``: change ``turn`` (``Turn`` says what may change), before its code runs.
    * ``after_cell``: a note to add to the cell's feedback, or "".
    * ``on_answer``: None to let ``answer`` be, a ``Question`` (the model gets one more turn;
      the first assist that questions it wins) or a str, the answer to take in its place
      (later assists see that one).
    * ``last_found``: text the forced turn's prompt shows.
    """

    name = ""

    def after_cell(self, host: Host, state: AssistState, cell: Cell) -> str:
        return ""

    def on_reply(self, host: Host, state: AssistState, turn: Turn) -> None:
        return None

    def on_answer(self, host: Host, state: AssistState, answer: Answer) -> str | Question | None:
        return None

    def last_found(self, host: Host, state: AssistState) -> str:
        return ""


class Checker(Assist):
    """An assist that may question an answer before the last turn: ``question`` gives the
    note (the model gets one more turn), or None to let the answer be taken."""

    def on_answer(self, host: Host, state: AssistState, answer: Answer) -> str | Question | None:
        if answer.last:
            return None
        note = self.question(host, answer.text)
        return Question(note) if note else None

    def question(self, host: Host, answer: str) -> str | None:
        return None
