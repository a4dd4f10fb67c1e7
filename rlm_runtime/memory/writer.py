"""Writes the chunks of one source in order, inside the caller's transactions: new text gets
a new chunk (with its links), text already stored in that source (same content hash) keeps
its chunk, id, statistics and links and only moves to its new position. Consecutive chunks
are linked ``follows``. A new chunk's vector (when the store has a model) is written with it,
in the same transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rlm_runtime.memory import links
from rlm_runtime.memory.chunks import NewChunk, add_tags, insert_chunks, next_chunk_id

if TYPE_CHECKING:
    from rlm_runtime.memory.settings import LinkConfig
    from rlm_runtime.memory.vectors import Vectors


class SourceWriter:
    """Appends chunks to one source. ``old`` maps content hash -> ids of the chunks the source
    held before (a re-ingest): a piece whose hash is there reuses the first such id."""

    def __init__(self, source_id: int, link_cfg: LinkConfig, *, next_seq: int = 0, prev_id: int | None = None,
                 tags: Sequence[str] = (), run_id: str | None = None, meta: dict[str, Any] | None = None,
                 old: dict[str, list[int]] | None = None, pinned: bool = False, expires_at: float | None = None,
                 vectors: Vectors | None = None, template: frozenset[str] = frozenset()) -> None:
        self.source_id = source_id
        self.template = template  # words the store wrote into the texts: never key terms (links.link_new_chunks)
        self.link_cfg = link_cfg
        self.seq = next_seq
        self.prev_id = prev_id
        self.tags = tuple(dict.fromkeys(tags))
        self.run_id = run_id
        self.meta = meta
        self.old = old or {}
        self.pinned = pinned
        self.expires_at = expires_at
        self.vectors = vectors
        self.added = 0
        self.kept = 0
        #: (previous id, id) of every consecutive pair written, kept only when the source had
        #: chunks before (a new source has no stale ``follows`` links to find).
        self.pairs: set[tuple[int, int]] | None = set() if self.old else None

    def write(self, conn: sqlite3.Connection, pieces: Sequence[NewChunk], now: float) -> list[int]:
        """Store ``pieces`` after those written so far; return their ids in order. New
        chunks are inserted together, then linked together (``links.link_new_chunks``)."""
        ids: list[int] = []
        new: list[tuple[int, int, int, NewChunk, str]] = []
        next_id = 0
        for piece in pieces:
            digest = piece.hash
            reuse = self.old.get(digest)
            if reuse:
                chunk_id = reuse.pop(0)
                conn.execute(
                    """UPDATE chunks SET seq = ?, start_byte = ?, end_byte = ?, start_line = ?, end_line = ?
                       WHERE id = ? AND (seq, start_byte, end_byte, start_line, end_line) IS NOT (?, ?, ?, ?, ?)""",
                    (self.seq, piece.start_byte, piece.end_byte, piece.start_line, piece.end_line, chunk_id,
                     self.seq, piece.start_byte, piece.end_byte, piece.start_line, piece.end_line))
                if self.tags:
                    add_tags(conn, [chunk_id], self.tags)
                self.kept += 1
            else:
                next_id = next_id or next_chunk_id(conn)
                chunk_id = next_id
                next_id += 1
                new.append((chunk_id, self.source_id, self.seq, piece, digest))
            ids.append(chunk_id)
            self.seq += 1
        if new:
            insert_chunks(conn, new, tags=self.tags, now=now, run_id=self.run_id, meta=self.meta, pinned=self.pinned,
                          expires_at=self.expires_at)
            if self.vectors is not None:
                self.vectors.write_new(conn, [(r[0], r[3].text, r[3].header) for r in new])
            self.added += len(new)
        fresh = {r[0]: r[3] for r in new}
        chain: list[tuple[int, int]] = []
        linking: list[tuple[int, str, int | None]] = []
        for chunk_id in ids:
            if chunk_id in fresh:
                linking.append((chunk_id, fresh[chunk_id].text, self.prev_id))
            if self.prev_id is not None:
                chain.append((self.prev_id, chunk_id))
            self.prev_id = chunk_id
        links.upsert_many(conn, chain, "follows", 1.0, now)
        links.link_new_chunks(conn, linking, self.tags, self.run_id, self.link_cfg, now, template=self.template)
        if self.pairs is not None:
            self.pairs.update(chain)
        return ids

    def leftover(self) -> list[int]:
        """Ids of the old chunks no piece reused: the text they held is gone from the source."""
        return [i for ids in self.old.values() for i in ids]

    def drop_stale_follows(self, conn: sqlite3.Connection) -> None:
        """Remove ``follows`` links between this source's chunks that the new order does not have."""
        if self.pairs is None:
            return
        rows = conn.execute("""SELECT l.src, l.dst FROM links l JOIN chunks c ON c.id = l.src
                               WHERE c.source_id = ? AND l.type = 'follows'""", (self.source_id,))
        stale = [(int(a), int(b)) for a, b in rows if (int(a), int(b)) not in self.pairs]
        conn.executemany("DELETE FROM links WHERE src = ? AND type = 'follows' AND dst = ?", stale)
