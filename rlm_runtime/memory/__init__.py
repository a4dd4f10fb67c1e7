"""The memory store: a persistent, searchable memory of chunks in one SQLite file.

``MemoryStore`` is the API; the records it returns (``Hit``, ``Hits``, ``ChunkView``,
``IngestReport``...) and its settings (``MemorySettings``, ``RecallConfig``...) come with it.
Modules, one job each: ``db`` (connection, transactions), ``migrations`` (the schema),
``chunking`` (cutting text), ``ingest`` (files and folders), ``writer`` / ``chunks`` (rows),
``links``, ``search``, ``lifecycle`` (recall, reinforce, decay, promote, prune), ``curation``
(list, pin, expiry, the trash), ``transfer``
(JSONL export and import), ``terms`` (words), ``records`` and ``settings``.
"""

from rlm_runtime.memory.errors import ChunkNotFound, NotAMemoryStore, StoreError
from rlm_runtime.memory.records import (
    ChunkStats,
    ChunkView,
    Hit,
    Hits,
    IngestProgress,
    IngestReport,
    LifecycleReport,
    Link,
    ScoreParts,
    Skipped,
    StoreStats,
)
from rlm_runtime.memory.settings import IngestConfig, LinkConfig, MemorySettings, RecallConfig, SearchConfig
from rlm_runtime.memory.store import MemoryStore, default_store_path

__all__ = [
    "ChunkNotFound", "ChunkStats", "ChunkView", "Hit", "Hits", "IngestConfig", "IngestProgress", "IngestReport", "LifecycleReport",
    "Link", "LinkConfig", "MemorySettings", "MemoryStore", "NotAMemoryStore", "RecallConfig", "ScoreParts", "SearchConfig", "Skipped",
    "StoreError", "StoreStats", "default_store_path",
]
