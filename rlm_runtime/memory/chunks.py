"""Rows of chunks and sources: insert (with the FTS entry, stats and tags), delete (keeping
the ``follows`` chain whole), and read back as ``ChunkView``. Every function runs inside the
caller's transaction on the connection it is given.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rlm_runtime.memory import links
from rlm_runtime.memory.db import LIVE
from rlm_runtime.memory.errors import ChunkNotFound
from rlm_runtime.memory.records import ChunkStats, ChunkView
from rlm_runtime.memory.value_check import read_meta


def content_hash(text: str) -> str:
    """The content hash of a chunk's text (blake2b, 128 bits, hex)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def text_key(text: str) -> str:
    """The key of a note's text for ``add_text``'s deduplication: the content hash of its words
    with every run of whitespace made one space (case and punctuation kept)."""
    return content_hash(" ".join(text.split()))


def set_text_keys(conn: sqlite3.Connection, rows: Iterable[tuple[int, str]]) -> None:
    """Give chunks of memory sources, each ``(id, text)``, their ``text_key``."""
    conn.executemany("UPDATE chunks SET text_key = ? WHERE id = ?", [(text_key(t), i) for i, t in rows])


def held_texts(conn: sqlite3.Connection, keys: Iterable[str]) -> dict[str, int]:
    """Each key held by a live chunk of a memory source: key -> the oldest such chunk."""
    found: dict[str, int] = {}
    for key in dict.fromkeys(keys):
        row = conn.execute(f"""SELECT c.id FROM chunks c JOIN sources s ON s.id = c.source_id
                               WHERE c.text_key = ? AND s.kind = 'memory' AND {LIVE} ORDER BY c.id LIMIT 1""", (key,)).fetchone()
        if row is not None:
            found[key] = int(row[0])
    return found


@dataclass(frozen=True)
class NewChunk:
    """A piece of text about to be stored, with its span in its source."""

    text: str
    start_byte: int
    end_byte: int
    start_line: int
    end_line: int
    tokens: int
    kind: str
    #: A line that gives the piece its meaning without being part of it (a CSV header row).
    header: str | None = None

    @property
    def hash(self) -> str:
        return content_hash(self.text)


def source_id(conn: sqlite3.Connection, kind: str, path: str, now: float, *, create: bool = True) -> int | None:
    """The id of a source, created (empty) when missing and ``create``."""
    row = conn.execute("SELECT id FROM sources WHERE kind = ? AND path = ?", (kind, path)).fetchone()
    if row:
        return int(row[0])
    if not create:
        return None
    cur = conn.execute("INSERT INTO sources (kind, path, created, updated) VALUES (?, ?, ?, ?)", (kind, path, now, now))
    return int(cur.lastrowid or 0)


def _meta_json(meta: dict[str, Any] | None, header: str | None) -> str | None:
    if header:
        meta = {**(meta or {}), "header": header}
    return json.dumps(meta, sort_keys=True, ensure_ascii=False) if meta else None


def insert_chunk(conn: sqlite3.Connection, *, source_id: int, seq: int, piece: NewChunk, tags: Sequence[str], now: float,
                 run_id: str | None = None, meta: dict[str, Any] | None = None, digest: str | None = None,
                 pinned: bool = False, expires_at: float | None = None, chunk_id: int | None = None) -> int:
    """Insert one chunk, its FTS entry, its stats row and its tags; return its id."""
    cur = conn.execute(
        """INSERT INTO chunks (id, source_id, seq, text, start_byte, end_byte, start_line, end_line, tokens, kind, hash,
                               run_id, meta, created, modified)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        (chunk_id, source_id, seq, piece.text, piece.start_byte, piece.end_byte, piece.start_line, piece.end_line, piece.tokens,
         piece.kind, digest or piece.hash, run_id, _meta_json(meta, piece.header), now, now))
    new_id = int(cur.lastrowid or 0)
    conn.execute("INSERT INTO chunks_fts (rowid, text) VALUES (?, ?)", (new_id, piece.text))
    conn.execute("INSERT INTO chunk_stats (chunk_id, strength_at, pinned, expires_at) VALUES (?, ?, ?, ?)",
                 (new_id, now, int(pinned), expires_at))
    add_tags(conn, [new_id], tags)
    return new_id


def next_chunk_id(conn: sqlite3.Connection) -> int:
    """The id the next inserted chunk gets (never one used before: AUTOINCREMENT's sequence).
    Valid inside a write transaction, where no other connection can insert."""
    row = conn.execute("""SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'chunks'), 0),
                                     coalesce((SELECT max(id) FROM chunks), 0))""").fetchone()
    return int(row[0]) + 1


def insert_chunks(conn: sqlite3.Connection, rows: Sequence[tuple[int, int, int, NewChunk, str]], *, tags: Sequence[str], now: float,
                  run_id: str | None = None, meta: dict[str, Any] | None = None, pinned: bool = False,
                  expires_at: float | None = None) -> None:
    """Insert many chunks at once, each ``(id, source id, seq, piece, content hash)``, with
    their FTS entries, stats rows and tags: one ``executemany`` per table (ingest's hot path).
    The ids come from ``next_chunk_id``."""
    conn.executemany(
        """INSERT INTO chunks (id, source_id, seq, text, start_byte, end_byte, start_line, end_line, tokens, kind, hash,
                               run_id, meta, created, modified)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        [(cid, sid, seq, p.text, p.start_byte, p.end_byte, p.start_line, p.end_line, p.tokens, p.kind, digest, run_id,
          _meta_json(meta, p.header), now, now) for cid, sid, seq, p, digest in rows])
    conn.executemany("INSERT INTO chunks_fts (rowid, text) VALUES (?, ?)", [(r[0], r[3].text) for r in rows])
    conn.executemany("INSERT INTO chunk_stats (chunk_id, strength_at, pinned, expires_at) VALUES (?, ?, ?, ?)",
                     [(r[0], now, int(pinned), expires_at) for r in rows])
    if tags:
        add_tags(conn, [r[0] for r in rows], tags)


def add_tags(conn: sqlite3.Connection, ids: Sequence[int], tags: Iterable[str]) -> None:
    rows = [(tag, i) for i in ids for tag in dict.fromkeys(tags)]
    conn.executemany("INSERT OR IGNORE INTO chunk_tags (tag, chunk_id) VALUES (?, ?)", rows)


def tags_of(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, tuple[str, ...]]:
    """Each chunk's tags, sorted (chunks without tags are left out)."""
    found: dict[int, list[str]] = {}
    for start in range(0, len(ids), 500):
        part = ids[start:start + 500]
        marks = ",".join("?" * len(part))
        for chunk_id, tag in conn.execute(f"SELECT chunk_id, tag FROM chunk_tags WHERE chunk_id IN ({marks})", part):
            found.setdefault(int(chunk_id), []).append(str(tag))
    return {k: tuple(sorted(v)) for k, v in found.items()}


def notes_of(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, tuple[str | None, float | None]]:
    """Each chunk's (summary, confidence), for the chunks that have either."""
    found: dict[int, tuple[str | None, float | None]] = {}
    for start in range(0, len(ids), 500):
        part = list(ids[start:start + 500])
        marks = ",".join("?" * len(part))
        for chunk_id, summary, confidence in conn.execute(
                f"SELECT chunk_id, summary, confidence FROM chunk_notes WHERE chunk_id IN ({marks})", part):
            if summary is not None or confidence is not None:
                found[int(chunk_id)] = (None if summary is None else str(summary),
                                        None if confidence is None else float(confidence))
    return found


def delete_chunks(conn: sqlite3.Connection, ids: Iterable[int], now: float, *, bridge: bool = True) -> int:
    """Delete chunks with their index entries, stats, tags, terms and links; return how many
    went. With ``bridge``, the chunks before and after a deleted one in its source are linked
    ``follows``, so the chain stays whole. A memory source left empty goes too."""
    gone: list[tuple[int, int]] = []
    for chunk_id in dict.fromkeys(ids):
        row = conn.execute("SELECT source_id, seq FROM chunks WHERE id = ?", (chunk_id,)).fetchone()
        if row is None:
            continue
        conn.execute("DELETE FROM chunks WHERE id = ?", (chunk_id,))  # the FTS entry by trigger, the rest by cascade
        gone.append((int(row[0]), int(row[1])))
    for src, seq in gone if bridge else ():
        before = conn.execute("SELECT id FROM chunks WHERE source_id = ? AND seq < ? ORDER BY seq DESC, id DESC LIMIT 1", (src, seq)).fetchone()
        after = conn.execute("SELECT id FROM chunks WHERE source_id = ? AND seq > ? ORDER BY seq, id LIMIT 1", (src, seq)).fetchone()
        if before and after:
            links.upsert(conn, int(before[0]), int(after[0]), "follows", 1.0, now)
    for src in {s for s, _ in gone}:
        conn.execute("""DELETE FROM sources WHERE id = ? AND kind = 'memory'
                        AND NOT EXISTS (SELECT 1 FROM chunks WHERE source_id = ?)""", (src, src))
    return len(gone)


_VIEW = """SELECT c.id, c.text, s.path, s.kind, c.seq, c.start_byte, c.end_byte, c.start_line, c.end_line, c.tokens, c.kind,
                  c.created, c.run_id, c.meta, c.source_id
           FROM chunks c JOIN sources s ON s.id = c.source_id"""


def _view(row: sqlite3.Row | tuple[Any, ...], tags: tuple[str, ...]) -> ChunkView:
    return ChunkView(chunk_id=int(row[0]), text=str(row[1]), source=str(row[2]), source_kind=str(row[3]), seq=int(row[4]),
                     start_byte=int(row[5]), end_byte=int(row[6]), start_line=int(row[7]), end_line=int(row[8]), tokens=int(row[9]),
                     kind=str(row[10]), tags=tags, created=float(row[11]), run_id=row[12], meta=read_meta(row[13]))


def view(conn: sqlite3.Connection, chunk_id: int, around: int = 0) -> ChunkView:
    """A live chunk with up to ``around`` live neighbours on each side (same source, by position).

    Raises:
        ChunkNotFound: no chunk has this id, or it is in the trash.
    """
    row = conn.execute(f"{_VIEW} WHERE c.id = ? AND {LIVE}", (chunk_id,)).fetchone()
    if row is None:
        raise ChunkNotFound(chunk_id)
    before: list[tuple[Any, ...]] = []
    after: list[tuple[Any, ...]] = []
    if around > 0:
        src, seq = row[14], row[4]
        before = conn.execute(
            f"{_VIEW} WHERE c.source_id = ? AND (c.seq < ? OR (c.seq = ? AND c.id < ?)) AND {LIVE} ORDER BY c.seq DESC, c.id DESC LIMIT ?",
            (src, seq, seq, chunk_id, around)).fetchall()[::-1]
        after = conn.execute(
            f"{_VIEW} WHERE c.source_id = ? AND (c.seq > ? OR (c.seq = ? AND c.id > ?)) AND {LIVE} ORDER BY c.seq, c.id LIMIT ?",
            (src, seq, seq, chunk_id, around)).fetchall()
    tags = tags_of(conn, [int(r[0]) for r in (row, *before, *after)])
    summary, confidence = notes_of(conn, [chunk_id]).get(chunk_id, (None, None))
    return dataclasses.replace(_view(row, tags.get(int(row[0]), ())), summary=summary, confidence=confidence,
                               before=tuple(_view(r, tags.get(int(r[0]), ())) for r in before),
                               after=tuple(_view(r, tags.get(int(r[0]), ())) for r in after))


def stats_of(conn: sqlite3.Connection, chunk_id: int, now: float, half_life_s: float, long_half_life_s: float) -> ChunkStats:
    """A chunk's lifecycle state, strength decayed to ``now``."""
    row = conn.execute(
        """SELECT recall_count, last_recall, rlm_decay(strength, strength_at, ?, CASE tier WHEN 'long_term' THEN ? ELSE ? END),
                  tier, pinned, expires_at FROM chunk_stats WHERE chunk_id = ?""", (now, long_half_life_s, half_life_s, chunk_id)).fetchone()
    if row is None:
        raise ChunkNotFound(chunk_id)
    return ChunkStats(chunk_id, int(row[0]), row[1], float(row[2]), str(row[3]), bool(row[4]), row[5])
