"""What a registered context is for, and how it is loaded: its *type* and the type's policy.

The design's context system keeps some contexts in every question (who the user is, how they
like answers) and others for the questions that name them. A registered context has a type,
set when it is added (``rlm context add PATH --type identity``) or later (``rlm context type
ID TYPE``); one added without a type is a ``memory`` when it is a memory store, else a
``document``. Each type has one policy, this table:

* ``load``: ``always``, its text is put in every question's system prompt, within
  ``always.ALWAYS_CHARS`` all together (``context/always.py``), wherever the question runs
  (``rlm ask``, the REPL, a program's ``Session``, a served client); ``on_demand``, it is read
  only where a question names it (``-c ctx:ID``).
* ``ttl_s``: how long what was read of it stays good; past it, the registry probes the source
  again when the context is next used (``Registry.resolve``), and a text (a tool's result
  kept as a context) has expired: it is refused, saying so, until it is added again.

A context on the ``always`` list of the project's settings (``[contexts] always`` in rlm.toml)
or of a profile (``always = [...]``) is always loaded whatever its type.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlm_runtime.errors import RegistryError


@dataclass(frozen=True)
class Policy:
    """How contexts of one type are loaded (see the module docstring)."""

    load: str
    ttl_s: float | None
    describe: str


#: Each type's policy.
POLICIES: dict[str, Policy] = {
    "identity": Policy("always", None, "who you are, how you like answers: in every question"),
    "project": Policy("on_demand", None, "the project you are in: read when a question names it"),
    "temporal": Policy("on_demand", 24 * 3600, "what holds for now (this week's plan): probed again after a day"),
    "document": Policy("on_demand", None, "a document, a folder of them: read when a question names it"),
    "memory": Policy("on_demand", None, "a memory store: searched when a question names it"),
    "tool_result": Policy("on_demand", 3600, "a tool's output kept for later: good for an hour"),
}
TYPES = tuple(POLICIES)


def check_type(kind: str) -> str:
    """``kind`` when it is a type, else a RegistryError naming the types."""
    if kind not in POLICIES:
        raise RegistryError(f"not a context type: {str(kind)[:40]!r} (one of {', '.join(TYPES)})")
    return kind


def default_type(kind: str) -> str:
    """The type of a context added without one: a memory store's is ``memory``, else ``document``."""
    return "memory" if kind == "memory" else "document"


def expired(type_: str, refreshed: float, now: float) -> bool:
    """Whether what was read of a context of ``type_`` last ``refreshed`` is past its time to live."""
    ttl = POLICIES[type_].ttl_s
    return ttl is not None and now - refreshed > ttl
