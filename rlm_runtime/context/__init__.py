"""Context handles: explore a context of any size without loading it.

Every handle keeps the ``ContextHandle`` protocol (protocol.py). ``open_context(source)``
picks one: a str is a ``TextHandle``, a path to a file a ``FileHandle`` (read-only mmap), a
folder or a glob a ``CorpusHandle``, a list a corpus of its items, a callable a
``LazyHandle``. ``describe`` (brief.py) tells a model what its contexts are, acting on
their probes; ``load_probe_config`` reads the ``[probe]`` settings it uses.
"""

from __future__ import annotations

from rlm_runtime.context.brief import ContextBrief, describe, keywords_from_question, mark_skipped_documents
from rlm_runtime.context.corpus import CorpusHandle, Document
from rlm_runtime.context.grep import GrepMatch, GrepResult
from rlm_runtime.context.handles import BufferHandle, FileHandle, LazyCache, LazyHandle, TextHandle
from rlm_runtime.context.probe import FileProbe, FolderProbe
from rlm_runtime.context.protocol import AccessStats, Chunk, ContextHandle, ProbeReport
from rlm_runtime.context.settings import ProbeConfig, load_probe_config
from rlm_runtime.context.sources import open_context, probe_path
from rlm_runtime.context.tokens import TokenCount

#: The old name of the handle type; every handle, a corpus too, is a ``ContextHandle``.
Handle = ContextHandle

__all__ = [
    "AccessStats", "BufferHandle", "Chunk", "ContextBrief", "ContextHandle", "CorpusHandle", "Document", "FileHandle",
    "FileProbe", "FolderProbe", "GrepMatch", "GrepResult", "Handle", "LazyCache", "LazyHandle", "ProbeConfig",
    "ProbeReport", "TextHandle", "TokenCount", "describe", "keywords_from_question", "load_probe_config",
    "mark_skipped_documents", "open_context", "probe_path",
]
