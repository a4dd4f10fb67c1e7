"""Errors of the memory store, under ``rlm_runtime.errors.RLMError``.

``StoreError`` covers a store that cannot be opened or used (SQLite without FTS5, a locked or
corrupt file, a bad argument); ``ChunkNotFound`` an id that names no chunk (the sandbox layer
shows it back to the model). SQLite's own exceptions are translated where they are caught.
"""

from __future__ import annotations

from rlm_runtime.errors import RLMError


class StoreError(RLMError):
    """The memory store cannot be opened or cannot do what was asked (the message says why)."""


class NotAMemoryStore(StoreError):
    """The file is not a memory store (another program's SQLite database, or not SQLite at
    all): it is refused before anything writes to it, and left as it was."""


class ChunkNotFound(StoreError):
    """No chunk has this id (never stored, forgotten or pruned). ``chunk_id`` names it."""

    def __init__(self, chunk_id: int, note: str = "") -> None:
        super().__init__(f"no chunk with id {chunk_id} in the memory store{f' ({note})' if note else ''}")
        self.chunk_id = chunk_id
