"""What the registry knows of a context without opening it for a run: its kind, and the
metadata a probe finds (``context.probe`` through ``probe_path``, the probe ``rlm probe``
prints; ``MemoryStore.stats`` for a memory store).

The metadata is a small JSON object, the same keys for every kind where they apply:
``size_bytes``, ``lines`` (a folder: of the documents counted; None for a store), ``tokens`` (the probe's estimate),
``shape`` (what ``records()`` makes of a text; "" when nothing), ``type`` (markdown, csv...,
``folder``, ``memory``), ``decision`` and ``reason`` (the probe's verdict with default
thresholds: load, excerpt or skip), ``mtime`` (seconds) and ``mtime_ns``; a folder adds
``files`` and ``skipped``, a store ``chunks``. Nothing of a folder's document list is kept:
the registry stays small whatever the folder holds. ``META_FIELDS`` says what each key's
value is; ``meta_problem`` checks metadata read back from a registry file.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rlm_runtime.errors import ContextError, RegistryError

#: The first bytes of an SQLite database file.
SQLITE_HEADER = b"SQLite format 3\x00"
#: Largest text a ``text`` context may hold (UTF-8 bytes).
MAX_TEXT_BYTES = 8 << 20


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


#: Each key of the metadata, and what its value is.
META_FIELDS: dict[str, Callable[[object], bool]] = {
    "size_bytes": _count, "lines": lambda v: v is None or _count(v), "tokens": _count, "files": _count, "skipped": _count,
    "chunks": _count, "shape": lambda v: isinstance(v, str), "type": lambda v: isinstance(v, str),
    "decision": lambda v: isinstance(v, str), "reason": lambda v: isinstance(v, str), "mtime": _number,
    "mtime_ns": lambda v: isinstance(v, int) and not isinstance(v, bool),
}


def meta_problem(meta: Mapping[str, object]) -> str | None:
    """The first key of ``meta`` whose value is not what ``META_FIELDS`` says (``"size_bytes
    is -5"``), or None; keys it does not know are not looked at."""
    for key, ok in META_FIELDS.items():
        if key in meta and not ok(meta[key]):
            return f"{key} is {_shown(meta[key])}"
    return None


def _shown(value: object) -> str:
    return repr(value)[:40] if isinstance(value, (str, int, float, type(None))) else f"a JSON {type(value).__name__}"


def kind_of(real: Path, asked: str | None) -> str:
    """The kind of the existing real path ``real``: ``folder``, ``memory`` (an SQLite file),
    or ``file``; ``asked`` must agree with it when given.

    Raises:
        RegistryError: ``asked`` disagrees, or the path is neither a regular file nor a folder.
    """
    mode = real.stat().st_mode
    if stat.S_ISDIR(mode):
        found = "folder"
    elif stat.S_ISREG(mode):
        found = "memory" if asked in (None, "memory") and _is_sqlite(real) else "file"
    else:
        raise RegistryError(f"{real} is neither a regular file nor a folder")
    if asked is not None and asked != found:
        raise RegistryError(f"{real} is a {found}, not a {asked}" if found != "file" or asked != "memory"
                            else f"{real} is not an SQLite file, so not a memory store")
    return found


def _is_sqlite(path: Path) -> bool:
    """Whether the regular file at ``path`` starts as an SQLite database does (a FIFO or a
    link put there since it was looked at is no database, and holds nothing up)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode) and os.pread(fd, len(SQLITE_HEADER), 0) == SQLITE_HEADER
    except OSError:
        return False
    finally:
        os.close(fd)


def fingerprint(real: Path) -> tuple[int, int]:
    """(size, mtime in ns) of a file: what tells a refresh that it changed."""
    st = real.stat()
    return st.st_size, st.st_mtime_ns


def describe_path(real: Path, kind: str) -> dict[str, Any]:
    """The metadata of the file, folder or memory store at the real path ``real``.

    Raises:
        ContextError: it cannot be read (or is not a usable memory store).
    """
    try:
        st = real.stat()
    except OSError as e:
        raise ContextError(f"cannot read {real}: {e.strerror or e}") from e
    meta: dict[str, Any] = {"mtime": st.st_mtime, "mtime_ns": st.st_mtime_ns}
    if kind == "memory":
        meta.update(_describe_store(real, st.st_size))
        return meta
    from rlm_runtime.context.sources import probe_path

    return {**meta, **_from_probe(probe_path(real).to_dict())}


def describe_text(text: str, name: str) -> dict[str, Any]:
    """The metadata of a text held in the registry."""
    from rlm_runtime.context.handles import TextHandle

    return _from_probe(TextHandle(text, name=name).probe().to_dict())


def _from_probe(probe: dict[str, Any]) -> dict[str, Any]:
    decision = probe.get("decision") or {}
    out: dict[str, Any] = {
        "size_bytes": int(probe.get("size_bytes", 0)), "lines": probe.get("lines"),
        "tokens": int(probe.get("est_tokens", 0)), "shape": str(probe.get("shape", "")),
        "type": str(probe.get("type", "folder")), "decision": str(decision.get("action", "")),
        "reason": str(decision.get("reason", ""))[:300],
    }
    if "files" in probe:  # a folder
        out["files"] = int(probe["files"])
        out["skipped"] = sum(1 for d in probe.get("documents", []) if d.get("skip"))
    return out


def _describe_store(real: Path, size: int) -> dict[str, Any]:
    import os
    import stat

    from rlm_runtime.memory import MemoryStore, StoreError
    from rlm_runtime.memory.db import descriptor_path

    # Read through a descriptor of the file as found (no link followed): the probe writes
    # nothing beside a store it only looks at (no -wal, no -shm in a folder not the runtime's).
    try:
        fd = os.open(real, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise ContextError(f"not a usable memory store: {e.strerror or e}") from e
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ContextError("not a usable memory store: not a regular file")
        store = MemoryStore(descriptor_path(fd), readonly=True)
        try:
            stats = store.stats()
        finally:
            store.close()
    except StoreError as e:
        raise ContextError(f"not a usable memory store: {e}") from e
    finally:
        os.close(fd)
    # A store file from elsewhere may count tokens below 0: the registry keeps counts only (META_FIELDS).
    return {"size_bytes": size, "lines": None, "tokens": max(0, stats.tokens), "shape": "", "type": "memory",
            "decision": "search", "reason": "a memory store is searched with search_chunks", "chunks": stats.chunks}


def check_text(text: object) -> str:
    """``text`` if it is a str of at most ``MAX_TEXT_BYTES`` UTF-8 bytes.

    Raises:
        RegistryError: not a str, or too large.
    """
    if not isinstance(text, str):
        raise RegistryError("a text context must be a str")
    # A str longer than the cap in characters is longer in bytes: not encoded at all.
    try:
        if len(text) > MAX_TEXT_BYTES or len(text.encode("utf-8")) > MAX_TEXT_BYTES:
            raise RegistryError(f"a text context holds at most {MAX_TEXT_BYTES >> 20} MB of UTF-8")
    except UnicodeEncodeError as e:
        raise RegistryError("a text context holds a lone surrogate: it is not valid text") from e
    return text
