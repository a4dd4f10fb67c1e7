"""From a source to a handle or a probe: ``open_context`` and ``probe_path``.

``open_context(source)`` picks the handle: a str is a ``TextHandle``, a path to a file a
``FileHandle`` (read-only mmap), a folder or a glob a ``CorpusHandle``, a list a corpus of
its items, a callable a ``LazyHandle``, and a handle is returned as it is. A ``ctx:ID`` str
names a registered context (``rlm_runtime.registry``): the registry of ``$RLM_HOME`` resolves
it to its real path or its text, opened under the registry's name (a file literally named
``ctx:...`` is reached as ``./ctx:...``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rlm_runtime.config import user_path
from rlm_runtime.context.corpus import CorpusHandle, Document
from rlm_runtime.context.handles import FileHandle, LazyHandle, TextHandle
from rlm_runtime.context.probe import FileProbe, FolderProbe, probe_corpus
from rlm_runtime.context.protocol import ContextHandle
from rlm_runtime.context.settings import ProbeConfig
from rlm_runtime.errors import ConfigError, ContextError
from rlm_runtime.registry.ids import is_ref


def open_context(source: Any, *, name: str | None = None, as_text: bool = False) -> ContextHandle:
    """The right handle for ``source``.

    Args:
        source: a str (a path if one exists there, else text; ``as_text=True`` forces text),
            a ``pathlib.Path``, a folder, a glob (``*``/``?`` in a str), a list or tuple
            (a corpus of its items), a callable returning str (lazy), or a handle.
        name: the handle's display name.

    Raises:
        ContextError: nothing to open there (``UnknownContext``, a ``ConfigError``, for an
            unknown ``ctx:ID``).
    """
    if isinstance(source, ContextHandle):
        return source
    if is_ref(source) and not as_text:
        from rlm_runtime.registry import open_ref

        return open_ref(source, name=name)
    if callable(source) and not isinstance(source, (str, bytes, os.PathLike)):
        return LazyHandle(source, name=name or str(getattr(source, "__name__", "lazy")))
    if isinstance(source, (list, tuple)):
        return CorpusHandle.from_items(list(source))
    if isinstance(source, bytes):
        raise ContextError("bytes are not a context: decode them to str first, or pass a file path")
    if isinstance(source, os.PathLike) or (isinstance(source, str) and not as_text and _path_like(source)):
        try:
            path = user_path(source)
        except ConfigError as e:
            raise ContextError(str(e)) from e
        if path.is_dir():
            return CorpusHandle.from_folder(path)
        if path.is_file():
            return FileHandle(path, name=name)
        if isinstance(source, str) and any(c in source for c in "*?["):
            return CorpusHandle.from_glob(str(path))
        if path.exists():  # a device, a pipe, a socket: read from, it could never end
            raise ContextError(f"{source} is not a regular file or a folder (a device, pipe or socket): "
                               "only files and folders can be contexts")
        raise ContextError(f"context path not found: {source}")
    if isinstance(source, str):
        return TextHandle(source, name=name or "text")
    raise ContextError(f"cannot open a context from a {type(source).__name__}")


def _path_like(text: str) -> bool:
    """A str names a path when it is one line, short, and exists or looks like a path/glob."""
    if "\n" in text or len(text) > 4096 or not text.strip():
        return False
    if os.path.exists(os.path.expanduser(text)):
        return True
    if any(c.isspace() for c in text):
        return False  # "Is this a question?" is text, not a glob
    return text.startswith(("/", "./", "../", "~")) or any(c in text for c in "*?") or os.sep in text


def probe_path(path: str | Path, config: ProbeConfig | None = None) -> FileProbe | FolderProbe:
    """Probe a file or a folder on disk (a folder under the config's extensions, depth and excludes)."""
    config = config or ProbeConfig()
    p = Path(path)
    if p.is_dir():
        corpus = CorpusHandle.from_folder(p, extensions=config.extensions, max_depth=config.max_depth,
                                          excludes=config.excludes)
        return probe_corpus(corpus, config, excluded=list(config.excludes))
    handle = FileHandle(p)
    try:
        return handle.probe(config)
    finally:
        handle.close()


# For the type checker: every handle class keeps the protocol (a mismatch fails mypy here).
_HANDLE_CLASSES: tuple[type[ContextHandle], ...] = (TextHandle, FileHandle, LazyHandle, CorpusHandle)


def nothing_to_read(sources: list[Any]) -> str | None:
    """Why none of ``sources`` has text a model could read, or None when one has: each
    source's reason ("a.txt: empty", "docs: 12 documents, every one empty or skipped: binary
    content 10, empty 2"). A file or a folder's document is judged by its head (a few KB,
    as a folder's documents are: ``Document.check``), never opened or decoded whole; a
    folder stops being looked at with its first readable document."""
    reasons = []
    for source in sources:
        reason = _unreadable(source)
        if reason is None:
            return None
        reasons.append(reason)
    return "; ".join(reasons) if reasons else None


def _unreadable(source: Any) -> str | None:
    """Why ``source`` has no text to read, or None."""
    if is_ref(source):
        from rlm_runtime.registry import source_of

        found = source_of(source)
        if isinstance(found, str):  # a registered text
            return None if found else f"{source}: empty"
        source = found
    if isinstance(source, ContextHandle) or not isinstance(source, (str, os.PathLike)):
        try:
            return None if open_context(source).n_bytes else f"{getattr(source, 'name', 'text')}: empty"
        except ContextError as e:
            return str(e)
    path = Path(source)
    if path.is_dir():
        try:
            documents = CorpusHandle.from_folder(path).documents
        except ContextError as e:
            return f"{path.name}: {e}"
    else:
        documents = [Document(0, path.name, path=str(path))]
    why: dict[str, int] = {}
    for doc in documents:
        reason = doc.check()
        if reason is None:
            return None
        kind = reason.split(":", 1)[0]
        why[kind] = why.get(kind, 0) + 1
    if not path.is_dir():
        return f"{path.name}: {next(iter(why))}"
    if not why:
        return f"{path.name}: a folder with no documents"
    counted = ", ".join(f"{k} {n}" for k, n in sorted(why.items(), key=lambda kv: -kv[1]))
    n = sum(why.values())
    return f"{path.name}: {n} document{'s' if n != 1 else ''}, {'every one' if n != 1 else 'it'} empty or skipped: {counted}"
