"""Model clients. ``make_client(name)`` turns a model name string into a client.

Names: ``scripted:PATH`` (a JSONL script, see ``scripted.py``), ``local:NAME`` (an embedded
llama.cpp model, see ``local.py``) and any litellm name (``openai/...``, ``anthropic/...``, ``ollama/...``, or an
OpenAI-compatible server through ``api_base``). litellm is imported only when used.

``checked_client(name)`` also runs the client's own ``check()`` when it has one, so a
wrong name or a missing key fails before any work.

Providers: the name's prefix picks the client factory from a registry (``registry.py``), and
litellm takes every name no prefix claims. ``register_provider(prefix, factory)`` adds one:
``factory(name, **options) -> LLMClient`` gets the whole name and ``make_client``'s options::

    register_provider("echo:", lambda name, **options: EchoClient(name))
    make_client("echo:hello")   # -> EchoClient("echo:hello")

Also here: ``count_tokens(text)``, the token count every client uses (``tokens.py``), and
``is_small_model(name)``, whether a name is served locally or states a size of at most ~8B
parameters (``sizes.py``).
"""

from __future__ import annotations

from rlm_runtime.llm.base import Completion, LLMClient, Message, Usage
from rlm_runtime.llm.registry import ProviderFactory, checked_client, make_client, register_provider
from rlm_runtime.llm.scripted import ScriptedClient
from rlm_runtime.llm.sizes import is_small_model
from rlm_runtime.llm.tokens import count_tokens

__all__ = ["Completion", "LLMClient", "Message", "ProviderFactory", "ScriptedClient", "Usage", "checked_client", "count_tokens",
           "is_small_model", "make_client", "register_provider"]
