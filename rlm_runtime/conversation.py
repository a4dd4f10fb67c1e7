"""The messages of one run's turns: what the model reads next, kept within a budget.

The loop appends the model's reply and the message that answers it; this class keeps the
system prompt and the question and as many recent turns as fit, and remembers the last
output without an assist's note (``plain``, which a repeated turn may drop).
"""

from __future__ import annotations

from rlm_runtime.llm.base import Message


class Conversation:
    """The messages of one run, from its system prompt and first user message.

    Args:
        system: the system prompt.
        first: the first user message (the question).
        budget_chars: the most characters kept; the oldest turns leave first, never the
            first two messages.
    """

    def __init__(self, system: str, first: str, budget_chars: int) -> None:
        self.messages: list[Message] = [{"role": "system", "content": system}, {"role": "user", "content": first}]
        self._budget = budget_chars
        self._plain: Message | None = None

    @property
    def last(self) -> str:
        """The text of the last message (before a reply: what the model answers)."""
        return self.messages[-1]["content"]

    def reply(self, text: str) -> None:
        """The model's reply."""
        self.messages.append({"role": "assistant", "content": text})

    def ask(self, note: str) -> None:
        """A note that questions the model's answer: the next turn answers it."""
        self.messages.append({"role": "user", "content": note})
        self._trim()

    def answer(self, text: str, *, plain: bool = False, drop_previous: bool = False) -> None:
        """The message that answers the last reply.

        Args:
            text: the message.
            plain: it is an output without an assist's note.
            drop_previous: the previous output and this reply leave the conversation when
                that output was plain (the reply repeated the code before it).
        """
        if drop_previous and len(self.messages) > 3 and self.messages[-2] is self._plain:
            del self.messages[-2:]
        self.messages.append({"role": "user", "content": text})
        self._plain = self.messages[-1] if plain else None
        self._trim()

    def retract(self, note: str) -> None:
        """The last reply leaves the conversation, and the message it answered is asked again
        with ``note`` after it (once: retracted again, the message keeps one note)."""
        if len(self.messages) > 2 and self.messages[-1]["role"] == "assistant":
            del self.messages[-1]
        asked = self.messages[-1]["content"]
        if not asked.endswith(f"\n\n{note}"):
            self.messages[-1] = {"role": self.messages[-1]["role"], "content": f"{asked}\n\n{note}"}

    def force(self, text: str) -> None:
        """The "answer now" message."""
        self.messages.append({"role": "user", "content": text})

    def chars(self, *, but_last: bool = False) -> int:
        """Characters of the messages (``but_last``: of all but the last)."""
        kept = self.messages[:-1] if but_last else self.messages
        return sum(len(m["content"]) for m in kept)

    def _trim(self) -> None:
        """Keep the system prompt, the question and as many recent turns as fit."""
        head, tail = self.messages[:2], self.messages[2:]
        while len(tail) > 2 and sum(len(m["content"]) for m in head + tail) > self._budget:
            tail = tail[2:]
        self.messages = head + tail
