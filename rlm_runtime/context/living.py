"""Living contexts: a file or folder that changes during a long session is read again.

A session keeps its worker, and its contexts, between questions (``rlm repl``, a served
client's session). A line appended to a log between two questions was not found by
``grep``, and ``get_full()`` kept the old length. ``Living`` holds what one context's source
looked like when it was opened (its *stamp*: a file's inode, size and modification time, a
folder's files with theirs) and how to open it again; ``Session`` compares the stamp at each
question's start and, when it differs, opens the source again, binds the new handle in the
worker where the old one was (``Sandbox.replace_context``: variables stay), brings its search
index up to date, and the brief says what changed (``ContextBrief.changed``).

A stamp is a few ``stat`` calls: a folder's is one walk of it (what ``CorpusHandle`` walks,
without reading a file). A text, a lazy loader or a list of strings has no source to look at:
it has no ``Living`` and never changes.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlm_runtime.context.beneath import walk_beneath
from rlm_runtime.context.corpus import BINARY_EXTENSIONS, DEFAULT_EXCLUDES, CorpusHandle, _root
from rlm_runtime.context.handles import FileHandle
from rlm_runtime.errors import RLMError
from rlm_runtime.quoting import quoted

#: A stamp of a source that cannot be looked at now (removed, unreadable).
GONE: tuple[str] = ("gone",)


def file_stamp(path: str | os.PathLike[str]) -> Hashable:
    """A file's identity and state: (inode, size, modification time in ns); ``GONE`` when it cannot be looked at."""
    try:
        st = os.stat(path)
    except OSError:
        return GONE
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) if stat.S_ISREG(st.st_mode) else GONE


def folder_stamp(root: str | Path) -> Hashable:
    """The text candidates of a folder, each (relative path, size, modification time in ns),
    as ``CorpusHandle.from_folder`` would find them (no symlinked folder followed, excluded
    names and binary extensions left out); ``GONE`` when it cannot be walked."""
    import fnmatch

    def excluded(rel: str) -> bool:
        return any(fnmatch.fnmatch(os.path.basename(rel), ex) for ex in DEFAULT_EXCLUDES)

    try:
        found = [(rel, st.st_size, st.st_mtime_ns) for rel, st in walk_beneath(_root(root), lambda rel, _depth: not excluded(rel))
                 if stat.S_ISREG(st.st_mode) and not excluded(rel) and os.path.splitext(rel)[1].lower() not in BINARY_EXTENSIONS]
    except (OSError, RLMError):  # gone, or no longer a folder
        return GONE
    return tuple(sorted(found))


@dataclass
class Living:
    """How one context of a session stays current.

    Args:
        stamp: what its source looks like now (compared with ``seen``).
        reopen: a new handle of the same source, opened as the first one was (the same checks).
        seen: the stamp when the handle in use was opened.
    """

    stamp: Callable[[], Hashable]
    reopen: Callable[[], Any]
    seen: Hashable = field(default=None)

    def changed(self) -> bool:
        """Whether the source is not what it was when the handle in use was opened."""
        return self.stamp() != self.seen


def of_handle(handle: Any, reopen: Callable[[], Any], path: str | Path | None = None) -> Living | None:
    """The ``Living`` of a handle opened from a file or folder (``path``: where it was opened
    from, when the handle does not say: a file opened by descriptor); None for a handle with no
    source on disk (a text, a loader, a list)."""
    if isinstance(handle, CorpusHandle):
        root = path or handle.root
        if root is None:
            return None
        living = Living(lambda: folder_stamp(root), reopen)
    elif isinstance(handle, FileHandle):
        where = path or handle.path
        if where is None:
            return None
        living = Living(lambda: file_stamp(where), reopen)
    else:
        return None
    living.seen = living.stamp()
    return living


def what_changed(old: Any, new: Any) -> str:
    """What a context's new handle holds that the old one did not, in words for the brief."""
    if isinstance(old, CorpusHandle) and isinstance(new, CorpusHandle):
        before, after = {d.name: d.size for d in old.documents}, {d.name: d.size for d in new.documents}
        added = [n for n in after if n not in before]
        gone = [n for n in before if n not in after]
        edited = [n for n in after if n in before and after[n] != before[n]]
        # A file's name is the folder's, not the runtime's: quoted, as every note shows one.
        parts = [f"{len(names)} {what}: {', '.join(map(quoted, names[:5]))}{' ...' if len(names) > 5 else ''}"
                 for what, names in (("new", added), ("removed", gone), ("changed", edited)) if names]
        return "; ".join(parts) or "files changed (same sizes)"
    try:
        was, now = int(old.n_bytes), int(new.n_bytes)
    except Exception:  # noqa: BLE001 - an old handle cut short says nothing; the new one is what counts
        return "its text changed"
    if now > was:
        return f"{now - was:,} bytes added at the end ({was:,} before, {now:,} now)" if _same_start(old, new, was) else \
            f"its text changed ({was:,} bytes before, {now:,} now)"
    return f"its text changed ({was:,} bytes before, {now:,} now)"


def _same_start(old: Any, new: Any, n: int) -> bool:
    """Whether the new text starts with the old one's last 4 KB up to ``n`` bytes (an append)."""
    try:
        tail = 4096
        start = max(0, n - tail)
        return bool(old._buf().decode(start, n) == new._buf().decode(start, n))
    except Exception:  # noqa: BLE001 - the old file cut short: not an append
        return False

