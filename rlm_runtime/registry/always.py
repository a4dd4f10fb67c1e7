"""Always-on contexts: the text every question sees of the contexts that are always loaded.

Who the user is and how they like answers belong in every question, not only in those that
name them. ``gather`` reads the contexts whose type is loaded always (``types.py``:
``identity``) and those an ``always`` list names (the project's ``[contexts] always`` in
rlm.toml, a profile's ``always``), in that order, once each, and puts their text in one block
of at most ``ALWAYS_CHARS`` characters for the system prompt (``brain/prompts/context_always.md``).
A context longer than what is left is cut, and the block says how much is left out and how to
read it all (``-c ctx:ID``). A folder or a memory store has no one text to show: it is named,
not read. Each is resolved as any ``ctx:ID`` is, under the caller's roots: one outside them,
gone or damaged is left out, and ``gather`` says why (``notes``), never the text.

Bounded: at most ``ALWAYS_CHARS`` characters are read of each file (4 bytes a character at most).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from rlm_runtime.context.beneath import Root, open_beneath
from rlm_runtime.errors import RLMError
from rlm_runtime.registry.roots import Roots
from rlm_runtime.registry.store import Entry, Registry

#: Characters of always-on text in a question's system prompt, all contexts together (~1,000 tokens).
ALWAYS_CHARS = 4000


@dataclass(frozen=True)
class Always:
    """The always-on block: ``text`` for the prompt ("" when there is none), the ids shown, and
    ``notes``: what was left out and why."""

    text: str = ""
    ids: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def gather(registry: Registry, refs: Sequence[str] = (), roots: Roots = None, budget: int = ALWAYS_CHARS) -> Always:
    """The always-on block of ``registry``'s always-loaded contexts and of ``refs`` (``ctx:ID``s)."""
    notes: list[str] = []
    entries: dict[str, Entry] = {}
    for entry in registry.always():
        entries.setdefault(entry.id, entry)
    for ref in refs:
        try:
            entry = registry.get(ref)
        except RLMError as e:
            notes.append(f"{str(ref)[:80]}: {e}")
            continue
        entries.setdefault(entry.id, entry)
    parts: list[str] = []
    shown: list[str] = []
    left = budget
    for entry in entries.values():
        head = f"[ctx:{entry.id}] {entry.name} ({entry.type})"
        if left <= 80 + len(head):
            notes.append(f"ctx:{entry.id}: no room left of the {budget:,} characters always-on contexts share")
            continue
        if entry.kind in ("folder", "memory"):
            parts.append(f"{head}: a {entry.kind}; read it with -c ctx:{entry.id}")
            shown.append(entry.id)
            left -= len(parts[-1]) + 2
            continue
        try:
            text = _text(registry, entry, roots, left - len(head) - 1)
        except RLMError as e:
            notes.append(f"ctx:{entry.id}: {e}")
            continue
        if text is None:
            notes.append(f"ctx:{entry.id}: not text")
            continue
        body, total = text
        if len(body) < total:
            body = body[: max(0, left - 80)].rstrip() + f"\n... ({total - len(body):,} more characters: read it all with -c ctx:{entry.id})"
        parts.append(f"{head}\n{body.strip()}")
        shown.append(entry.id)
        left -= len(parts[-1]) + 2
    return Always("\n\n".join(parts), tuple(shown), tuple(notes))


def _text(registry: Registry, entry: Entry, roots: Roots, most: int) -> tuple[str, int] | None:
    """At most ``most`` characters of a text or file context and its whole length (a file's in
    bytes, an upper bound of its characters); None for a file that is not text."""
    resolved = registry.resolve(entry.id, roots)
    if resolved.text is not None:
        return resolved.text[:most], len(resolved.text)
    assert resolved.path is not None
    path = resolved.path
    try:
        # As a server opens a file it serves: no symlink on the way, a regular file only (a
        # FIFO put there since the check is refused, never waited on), nothing sealed (the
        # server's home and token, by device and inode: a hard link to them too).
        fd = open_beneath(Root.of(path.anchor), path.relative_to(path.anchor))
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(4 * most + 1)
            size = max(len(data), fh.seek(0, 2))
    except (OSError, ValueError) as e:
        raise RLMError(f"cannot read it: {getattr(e, 'strerror', None) or e}") from e
    if b"\x00" in data[:8192]:
        return None
    text = data.decode("utf-8", "replace")
    return text[:most], size if len(data) > 4 * most else len(text)
