"""The messages of one run's turns: what the model reads next, kept within a budget.

The loop appends the model's reply and the message that answers it; this class keeps the
system prompt and the question and as many recent turns as fit, and remembers two places
the assists may ask for: the last message that was more than a request for code (the
``anchor``, where a restarted conversation goes on from) and the last output without an
assist's note (``plain``, which a repeated turn may drop).
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
        self._anchor: Message = self.messages[-1]
        self._anchor_text = first
        self._plain: Message | None = None

    @property
    def last(self) -> str:
        """The text of the last message (before a reply: what the model answers)."""
        return self.messages[-1]["content"]

    def reply(self, text: str) -> None:
        """The model's reply."""
        self.messages.append({"role": "assistant", "content": text})

    def ask(self, note: str) -> None:
        """A note that questions the model's answer: the next turn answers it, and a restart
        goes on from it."""
        self.messages.append({"role": "user", "content": note})
        self._anchor, self._anchor_text = self.messages[-1], note
        self._trim()

    def answer(self, text: str, *, real: bool, plain: bool = False, drop_previous: bool = False,
               restart: bool = False) -> None:
        """The message that answers the last reply.

        Args:
            text: the message.
            real: it holds more than a request for code (an output, a note).
            plain: it is an output without an assist's note.
            drop_previous: the previous output and this reply leave the conversation when
                that output was plain (the reply repeated the code before it).
            restart: the turns since the anchor leave the conversation, and ``text`` goes
                after the anchor's text, in one message.
        """
        if drop_previous and len(self.messages) > 3 and self.messages[-2] is self._plain:
            del self.messages[-2:]
        keep_anchor_text = False
        if restart:
            at = next((k for k in range(len(self.messages) - 1, 0, -1) if self.messages[k] is self._anchor), None)
            if at is not None:
                text, real, keep_anchor_text = f"{self._anchor_text}\n\n{text}", True, True
                self.messages = self.messages[:at]
        self.messages.append({"role": "user", "content": text})
        self._plain = self.messages[-1] if plain else None
        if real:
            self._anchor = self.messages[-1]
            self._anchor_text = self._anchor_text if keep_anchor_text else text
        self._trim()

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
