"""``Assists``: the assists of one run, called at the loop's hooks, and the one place their
trace events (``assist``, ``answer_check``) are written."""

from __future__ import annotations

from collections.abc import Sequence

from rlm_runtime.assist.base import Assist, AssistState, Cell, Host
from rlm_runtime.assist.registry import REGISTRY
from rlm_runtime.sandbox import CellResult

#: Characters of an answer a trace event keeps.
_ANSWER_CHARS = 200


class Assists:
    """The named assists of one run over ``host``, with their shared state."""

    def __init__(self, names: Sequence[str], host: Host) -> None:
        self.host = host
        self.state = AssistState()
        self.assists: list[Assist] = [REGISTRY[n]() for n in names]

    @property
    def names(self) -> list[str]:
        return [a.name for a in self.assists]

    def after_cell(self, code: str, result: CellResult) -> str:
        """The notes to add after a cell's output ("" for none)."""
        if not self.assists:
            return ""
        self.state.seen.append(result.stdout)
        repeated = code.strip() in self.state.codes
        self.state.codes.append(code.strip())
        # An empty grep printed, indexed (hits[0]) or only tested (if hits:): the worker knows.
        kind = "empty_grep" if result.empty_greps else "final" if result.has_final else "repeat" if repeated else "cell"
        cell = Cell(code, result.stdout, result.error, result.has_final, kind, list(result.empty_greps), repeated)
        notes: list[str] = []
        spoke = False
        for assist in self.assists:
            if assist.exclusive and spoke:
                continue
            self.host.looked.clear()
            note = assist.after_cell(self.host, self.state, cell)
            if note:
                spoke = spoke or assist.exclusive
                notes.append(note)
                self.host.emit({"type": "assist", "name": assist.name, "trigger": kind, "chars": len(note),
                                "lookups": list(self.host.looked)})
        return "".join("\n" + n for n in notes)

    def before_answer(self, answer: str, reply: str) -> str | None:
        """A note questioning ``answer`` (one more turn), or None to take it."""
        for assist in self.assists:
            self.host.looked.clear()
            note = assist.before_answer(self.host, self.state, answer, reply)
            if note:
                self._checked(assist.name, answer, "questioned")
                return note
        return None

    def settle(self, answer: str) -> str:
        """The answer to take for ``answer``."""
        for assist in self.assists:
            self.host.looked.clear()
            settled = assist.settle(self.host, self.state, answer)
            if settled != answer:
                self._checked(assist.name, answer, "replaced")
                return settled
        return answer

    def last_turn(self) -> str | None:
        """The run's answer when the turns ran out, made without the forced turn, or None."""
        for assist in self.assists:
            self.host.looked.clear()
            answer = assist.last_turn(self.host, self.state)
            if answer is not None:
                self.host.emit({"type": "assist", "name": assist.name, "trigger": "last_turn", "chars": len(answer),
                                "lookups": list(self.host.looked)})
                return answer
        return None

    def last_found(self) -> str:
        """What the forced turn's prompt shows besides the question."""
        return "".join(a.last_found(self.host, self.state) for a in self.assists)

    def _checked(self, name: str, answer: str, outcome: str) -> None:
        self.host.emit({"type": "answer_check", "name": name, "answer": answer[:_ANSWER_CHARS], "outcome": outcome,
                        "lookups": list(self.host.looked)})
