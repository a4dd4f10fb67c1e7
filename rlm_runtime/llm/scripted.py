"""A scripted model: a real client that answers from a script, for tests and demos.

``scripted:PATH`` names a JSONL file of replies, one ``{"content": "..."}`` per line, served
in order. A line with ``"when": "substring"`` instead answers any prompt whose last message
contains that substring (first match wins, and it can answer again). From Python, a list of
strings or a callable ``(messages) -> str`` works too (called concurrently by batched
sub-calls, so it must be thread-safe). Every prompt is recorded, and usage is
counted in tokens like a real model's, so budgets can be tested.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlm_runtime.errors import ConfigError, LLMCallError
from rlm_runtime.llm.base import Completion, Message, Usage, heard
from rlm_runtime.llm.tokens import count_tokens, cut_to_tokens

Responder = Callable[[list[Message]], str]


class ScriptedClient:
    """Replies from a script. Thread-safe. Raises LLMCallError when the script runs out."""

    def __init__(self, script: str | Path | list[str] | list[dict[str, Any]] | Responder, *, model: str | None = None,
                 delay_s: float = 0.0) -> None:
        self._lock = threading.Lock()
        self._responder: Responder | None = None
        self._queue: list[str] = []
        self._when: list[tuple[str, str]] = []
        self.prompts: list[list[Message]] = []
        self.delay_s = delay_s
        if callable(script):
            self._responder = script
            self.model = model or "scripted:callable"
        elif isinstance(script, list):
            self._load(script, "<list>")
            self.model = model or "scripted:list"
        else:
            path = Path(script)
            self.model = model or f"scripted:{path}"
            try:
                lines = path.read_text(encoding="utf-8").splitlines()
            except FileNotFoundError as e:
                raise ConfigError(f"script file not found: {path}") from e
            except (OSError, UnicodeDecodeError) as e:
                raise ConfigError(f"cannot read script {path}: {e}") from e
            items: list[Any] = []
            for n, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    items.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ConfigError(f"{path}:{n}: not JSON: {e.msg}") from e
            self._load(items, str(path))

    def _load(self, items: list[Any], source: str) -> None:
        for n, item in enumerate(items, 1):
            if isinstance(item, str):
                self._queue.append(item)
            elif isinstance(item, dict) and isinstance(item.get("content"), str):
                when = item.get("when")
                if when is None:
                    self._queue.append(item["content"])
                elif isinstance(when, str) and when:
                    self._when.append((when, item["content"]))
                else:
                    raise ConfigError(f"{source}: item {n}: 'when' must be a non-empty string")
            else:
                raise ConfigError(f"{source}: item {n}: expected {{\"content\": \"...\"}}")

    def complete(self, messages: list[Message], *, max_tokens: int | None = None,
                 stop_after_code_block: bool = False, timeout_s: float | None = None) -> Completion:
        start = time.monotonic()
        if self.delay_s:
            time.sleep(self.delay_s)
        last = messages[-1]["content"] if messages else ""
        with self._lock:
            self.prompts.append([dict(m) for m in messages])
            responder = self._responder
            scripted = None if responder is not None else self._answer(last)
        if responder is not None:
            # Outside the lock, so concurrent sub-calls overlap (responders must be thread-safe).
            reply = responder(messages)
            if not isinstance(reply, str):
                raise LLMCallError(f"scripted responder returned {type(reply).__name__}, not str")
            text = reply
        else:
            assert scripted is not None
            text = scripted
        if max_tokens is not None:
            text = cut_to_tokens(text, max_tokens)
        heard(text)
        usage = Usage(1, sum(self.count_tokens(m.get("content", "")) for m in messages), self.count_tokens(text), 0.0)
        return Completion(text, self.model, usage, "stop", time.monotonic() - start)

    def _answer(self, last: str) -> str:
        for needle, reply in self._when:
            if needle in last:
                return reply
        if not self._queue:
            raise LLMCallError(f"{self.model}: the script has no reply left for call {len(self.prompts)}")
        return self._queue.pop(0)

    def count_tokens(self, text: str) -> int:
        return count_tokens(text)

    @property
    def remaining(self) -> int:
        return len(self._queue)

    def close(self) -> None:
        pass
