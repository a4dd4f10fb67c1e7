"""From ``ctx:ID`` to a context handle: what ``open_context`` and ``Session`` call.

A ``file`` or ``folder`` context opens its real path as ``resolve`` checked it (so what was
checked is what is read), a ``text`` context its stored text, each named by the registry's
name. A ``memory`` context is a store to search, not a text to read: ``open_resolved``
refuses it, and the callers that can use a store (``rlm ask -c``, ``Session``) take it as
their memory store instead.

``Opened`` is a registered context its caller has already opened, from what it checked (a
server opens a file beneath its roots, by descriptor): a ``Session`` takes it as it is and
counts its use under its id, and never opens the path again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlm_runtime.errors import ContextError
from rlm_runtime.registry.roots import Roots
from rlm_runtime.registry.store import Registry, Resolved


@dataclass(frozen=True)
class Opened:
    """A registered context opened by the caller: ``handle`` is its context handle, or the
    ``Path`` of a memory store (``kind == "memory"``); ``id`` its registry id, or None for a
    path the caller checked that is not registered (nothing is counted for it). ``reopen``
    opens it again as the caller opened it (with the same checks) and ``path`` is the file or
    folder it was opened from: with both, a session reads it again when it changes
    (``context.living``); without, it stays as opened."""

    handle: Any
    id: str | None
    kind: str = "file"
    reopen: Callable[[], Any] | None = None
    path: Path | None = None

    @property
    def store(self) -> Path | None:
        """The memory store's path, for a memory context."""
        return self.handle if self.kind == "memory" and isinstance(self.handle, Path) else None


def open_resolved(resolved: Resolved, name: str | None = None) -> Any:
    """The context handle of a resolved registered context (``name``: instead of its own).

    Raises:
        ContextError: it is a memory store, or its file cannot be opened as text.
    """
    from rlm_runtime.context.sources import open_context

    entry = resolved.entry
    label = name or entry.name
    if entry.kind == "memory":
        raise ContextError(f"ctx:{entry.id} is a memory store, searched with search_chunks, not a text to read: "
                           f"give it where a memory store goes (rlm ask -c ctx:{entry.id}, Session(contexts=[...]) "
                           "when the session opens, memory=PATH)")
    if entry.kind == "text":
        return open_context(resolved.text or "", name=label, as_text=True)
    handle = open_context(resolved.path, name=label)
    if entry.kind == "folder":
        handle.name = label  # a folder's corpus takes its name from the folder
    return handle


def open_ref(ref: str, *, registry: Registry | None = None, roots: Roots = None, name: str | None = None) -> Any:
    """The context handle of ``ctx:ID`` from ``registry`` (default: ``$RLM_HOME``'s),
    checked against ``roots`` (None: anywhere).

    Raises:
        UnknownContext: no context has this id.
        ContextError: its file is gone, or it is a memory store.
        ContextOutsideRoots: its path resolves outside ``roots``.
    """
    own = registry is None
    reg = Registry.open() if registry is None else registry
    try:
        return open_resolved(reg.resolve(ref, roots), name)
    finally:
        if own:
            reg.close()


def source_of(ref: str, *, registry: Registry | None = None, roots: Roots = None) -> Any:
    """What ``ctx:ID`` names as a plain source: its real path, or its text (for checks that
    take paths, such as ``nothing_to_read``)."""
    own = registry is None
    reg = Registry.open() if registry is None else registry
    try:
        resolved = reg.resolve(ref, roots)
    finally:
        if own:
            reg.close()
    return resolved.path if resolved.path is not None else resolved.text
