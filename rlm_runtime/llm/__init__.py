"""Model clients. ``make_client(name)`` turns a model name string into a client.

Names: ``scripted:PATH`` (a JSONL script, see ``scripted.py``), ``local:NAME`` (an embedded
llama.cpp model, see ``local.py``) and any litellm name (``openai/...``, ``anthropic/...``, ``ollama/...``, or an
OpenAI-compatible server through ``api_base``). litellm is imported only when used.
"""

from __future__ import annotations

from typing import Any

from rlm_runtime.errors import UnknownModel
from rlm_runtime.llm.base import Completion, LLMClient, Message, Usage
from rlm_runtime.llm.scripted import ScriptedClient


def make_client(name: str | LLMClient, **options: Any) -> LLMClient:
    """A client for ``name`` (a client passes through unchanged)."""
    if not isinstance(name, str):
        return name
    name = name.strip()
    if not name:
        raise UnknownModel("empty model name")
    if name.startswith("scripted:"):
        return ScriptedClient(name.removeprefix("scripted:"), model=name)
    if name.startswith("local:"):
        from rlm_runtime.llm.local import LocalModelClient

        return LocalModelClient(name.removeprefix("local:"), **options)
    from rlm_runtime.llm.litellm_client import LiteLLMClient

    return LiteLLMClient(name, **options)


__all__ = ["Completion", "LLMClient", "Message", "ScriptedClient", "Usage", "make_client"]
