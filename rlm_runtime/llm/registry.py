"""Model providers: a registry from name prefix to client factory, and ``make_client``.

A model name picks its provider by prefix. Built in: ``scripted:PATH`` (``scripted.py``),
``local:NAME`` (``local.py``), and litellm (``litellm_client.py``) for every name no
registered prefix claims. Adding a provider is one call::

    from rlm_runtime.llm import register_provider

    register_provider("echo:", lambda name, **options: EchoClient(name))

The factory gets the whole model name (prefix included: it is the client's ``model``) and
the options ``make_client`` was given (``api_base``, say; a factory ignores the ones it has
no use for), and returns an ``LLMClient``. It runs when a client is made, so it imports its
heavy dependencies then, not at registration. When several prefixes match a name, the
longest wins.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from rlm_runtime.errors import UnknownModel
from rlm_runtime.llm.base import LLMClient

ProviderFactory = Callable[..., LLMClient]
"""``factory(name, **options) -> LLMClient``: ``name`` is the whole model name, prefix included."""

_lock = threading.Lock()
_providers: dict[str, ProviderFactory] = {}


def register_provider(prefix: str, factory: ProviderFactory, *, replace: bool = False) -> None:
    """Route model names starting with ``prefix`` to ``factory``.

    Args:
        prefix: how the provider's names begin, separator included (``"echo:"``, ``"myhost/"``).
        factory: ``factory(name, **options) -> LLMClient``, called by ``make_client``.
        replace: allow replacing the factory of a prefix already registered.

    Raises:
        ValueError: an empty or padded prefix, or one already registered (without ``replace``).
    """
    if not isinstance(prefix, str) or not prefix or prefix != prefix.strip():
        raise ValueError(f"a provider prefix must be a non-empty string without surrounding spaces, not {prefix!r}")
    if not callable(factory):
        raise ValueError(f"the factory for {prefix!r} is not callable")
    with _lock:
        if prefix in _providers and not replace:
            raise ValueError(f"provider prefix {prefix!r} is already registered (pass replace=True to replace it)")
        _providers[prefix] = factory


def make_client(name: str | LLMClient, **options: Any) -> LLMClient:
    """A client for the model ``name`` (a client passes through unchanged).

    Args:
        name: a model name: ``scripted:PATH``, ``local:NAME``, a registered provider's, or
            any litellm name (``openai/gpt-4o-mini``...).
        options: passed to the provider's factory (``api_base``, ``api_key``, ``timeout_s``,
            ``temperature``...; the built-in factories take ``temperature``, the scripted one
            ignores it).

    Raises:
        UnknownModel: an empty name, or a registered prefix with no model after it. (litellm
            names are checked on the first call, where a wrong one raises UnknownModel too.)
    """
    if not isinstance(name, str):
        return name
    name = name.strip()
    if not name:
        raise UnknownModel("empty model name")
    with _lock:
        prefix = max((p for p in _providers if name.startswith(p)), key=len, default=None)
        factory = _providers[prefix] if prefix is not None else _litellm
    if prefix is not None and not name[len(prefix):].strip():
        raise UnknownModel(f"model name {name!r} names no model after its provider prefix {prefix!r}")
    return factory(name, **options)


def checked_client(name: str | LLMClient, **options: Any) -> LLMClient:
    """``make_client(name, **options)``, then the client's own ``check()`` when it has one
    (``LiteLLMClient.check``: the provider knows the name, its key is set), so a wrong name
    fails before any work rather than at the first model call.

    Raises:
        UnknownModel: as ``make_client``, or a name the provider does not know.
        MissingAPIKey: the provider's key is not set.
        ConfigError: what the provider's factory raises (a missing script, an unknown or
            uninstalled local model).
    """
    client = make_client(name, **options)
    check = getattr(client, "check", None)
    if callable(check):
        try:
            check()
        except BaseException:
            client.close()
            raise
    return client


# ------------------------------------------------------------------- built-in providers


def _scripted(name: str, **options: Any) -> LLMClient:
    from rlm_runtime.llm.scripted import ScriptedClient

    return ScriptedClient(name.removeprefix("scripted:"), model=name)  # a script needs no server options


def _local(name: str, **options: Any) -> LLMClient:
    from rlm_runtime.llm.local import LocalModelClient

    return LocalModelClient(name.removeprefix("local:"), **options)


def _litellm(name: str, **options: Any) -> LLMClient:
    from rlm_runtime.llm.litellm_client import LiteLLMClient

    temperature = options.pop("temperature", None)
    if temperature is not None:
        options["extra"] = {**options.get("extra", {}), "temperature": temperature}
    return LiteLLMClient(name, **options)


register_provider("scripted:", _scripted)
register_provider("local:", _local)
