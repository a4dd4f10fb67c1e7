"""``Assists``: the assists of one run, called at the loop's hooks, and the one place their
trace events (``assist``, ``answer_check``) are written."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from rlm_runtime.assist.base import Answer, Assist, AssistState, Cell, Host, Question, Turn
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

    def on_reply(self, turn: Turn) -> None:
        """Let each assist change ``turn`` before its code runs; each change is traced."""
        for assist in self.assists:
            self.host.looked.clear()
            before = dataclasses.replace(turn, blocks=list(turn.blocks), notes=list(turn.notes))
            assist.on_reply(self.host, self.state, turn)
            changed = [f.name for f in dataclasses.fields(Turn) if getattr(before, f.name) != getattr(turn, f.name)]
            if changed:
                self.host.emit({"type": "assist", "name": assist.name, "trigger": "reply", "changed": changed,
                                "chars": sum(len(n) for n in turn.notes) - sum(len(n) for n in before.notes),
                                "lookups": list(self.host.looked)})

    def after_run(self, code: str, result: CellResult, printed: str) -> str:
        """After a cell ran: the notes to add after its output, "" for none. ``printed``: what
        the run's code printed before this cell."""
        if not self.assists:
            return ""
        repeated = code.strip() in self.state.codes
        # An empty grep printed, indexed (hits[0]) or only tested (if hits:): the worker knows.
        kind = "empty_grep" if result.empty_greps else "final" if result.has_final else "repeat" if repeated else "cell"
        cell = Cell(code, result.stdout, result.error, result.has_final, kind, error_type=result.error_type, printed=printed,
                    empty_greps=list(result.empty_greps), repeated=repeated)
        self.state.seen.append(result.stdout)
        self.state.codes.append(code.strip())
        notes = self._said(kind, lambda a: a.after_cell(self.host, self.state, cell))
        return "".join("\n" + n for n in notes)

    def on_answer(self, answer: Answer) -> str | Question:
        """The answer to take for ``answer`` (its text, or one an assist put in its place),
        or the ``Question`` the first assist that questions it puts (one more turn)."""
        for assist in self.assists:
            self.host.looked.clear()
            verdict = assist.on_answer(self.host, self.state, answer)
            if isinstance(verdict, Question):
                self._checked(assist.name, answer.text, "questioned")
                return verdict
            if verdict is not None and verdict != answer.text:
                self._checked(assist.name, answer.text, "replaced")
                answer = dataclasses.replace(answer, text=verdict)
        return answer.text

    def last_found(self) -> str:
        """What the forced turn's prompt shows besides the question; each assist's part traced."""
        return "".join(self._said("last_turn", lambda a: a.last_found(self.host, self.state)))

    def _said(self, trigger: str, hook: Callable[[Assist], str]) -> list[str]:
        """What ``hook`` has each assist say, in order; each that says something is traced."""
        said: list[str] = []
        for assist in self.assists:
            self.host.looked.clear()
            text = hook(assist)
            if text:
                said.append(text)
                self.host.emit({"type": "assist", "name": assist.name, "trigger": trigger, "chars": len(text),
                                "lookups": list(self.host.looked)})
        return said

    def _checked(self, name: str, answer: str, outcome: str) -> None:
        self.host.emit({"type": "answer_check", "name": name, "answer": answer[:_ANSWER_CHARS], "outcome": outcome,
                        "lookups": list(self.host.looked)})
