"""Curation of the store by its user: list chunks without a query, pin and unpin, set a time
to live, and the trash (``forget`` moves a chunk there, ``restore`` brings it back, ``purge``
deletes it for good). Every function runs inside the caller's transaction.

A chunk in the trash has ``chunks.deleted_at`` set (``m007_soft_delete``). It keeps its row,
its full-text entry, its vector and its links, so a restore is exact; every reader leaves it
out (``db.LIVE`` is the condition they share: search by words and by vectors, recall, read,
links, export), and ``stats`` counts it apart. Ids given to a command are handled one by one:
those that name no chunk it applies to come back in ``Changed.missing``, never as an error
half-way through the rest.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rlm_runtime.memory.chunks import delete_chunks, tags_of
from rlm_runtime.memory.db import LIVE
from rlm_runtime.memory.records import Changed, Listed

#: Characters of a chunk's text ``list`` shows.
PREVIEW_CHARS = 160
TIERS = ("working", "long_term")


@dataclass(frozen=True)
class ListFilter:
    """What ``list`` keeps: chunks having every tag, of any of the kinds, created in
    ``[since, until)`` (seconds since the epoch), of a tier, pinned ones only, and live
    chunks or (``deleted``) the trash only."""

    tags: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    since: float | None = None
    until: float | None = None
    tier: str | None = None
    pinned: bool = False
    deleted: bool = False


def list_chunks(conn: sqlite3.Connection, f: ListFilter, limit: int) -> list[Listed]:
    """Chunks passing ``f``, most recently stored first (by id: ids only grow), at most ``limit``."""
    parts = ["c.deleted_at IS NOT NULL" if f.deleted else LIVE]
    args: list[object] = []
    if f.kinds:
        parts.append(f"c.kind IN ({','.join('?' * len(f.kinds))})")
        args += f.kinds
    for tag in f.tags:
        parts.append("EXISTS (SELECT 1 FROM chunk_tags t WHERE t.tag = ? AND t.chunk_id = c.id)")
        args.append(tag)
    if f.since is not None:
        parts.append("c.created >= ?")
        args.append(f.since)
    if f.until is not None:
        parts.append("c.created < ?")
        args.append(f.until)
    if f.tier is not None:
        parts.append("st.tier = ?")
        args.append(f.tier)
    if f.pinned:
        parts.append("st.pinned = 1")
    rows = conn.execute(
        f"""SELECT c.id, s.path, c.start_line, c.end_line, c.kind, c.created, st.tier, st.pinned, st.expires_at, c.deleted_at,
                   substr(c.text, 1, ?)
            FROM chunks c JOIN sources s ON s.id = c.source_id JOIN chunk_stats st ON st.chunk_id = c.id
            WHERE {' AND '.join(parts)} ORDER BY c.id DESC LIMIT ?""", (PREVIEW_CHARS, *args, max(0, limit))).fetchall()
    tags = tags_of(conn, [int(r[0]) for r in rows])
    return [Listed(int(r[0]), str(r[1]), int(r[2]), int(r[3]), str(r[4]), tags.get(int(r[0]), ()), float(r[5]), str(r[6]),
                   bool(r[7]), r[8], r[9], str(r[10])) for r in rows]


def _split(conn: sqlite3.Connection, ids: Iterable[int], where: str) -> tuple[list[int], list[int]]:
    """The distinct ``ids`` (in order) that name a chunk ``c`` meeting ``where``, and the others."""
    found: list[int] = []
    missing: list[int] = []
    for i in dict.fromkeys(int(x) for x in ids):
        (found if conn.execute(f"SELECT 1 FROM chunks c WHERE c.id = ? AND {where}", (i,)).fetchone() else missing).append(i)
    return found, missing


def pin(conn: sqlite3.Connection, ids: Iterable[int], pinned: bool) -> Changed:
    """Pin live chunks (never pruned) or unpin them. A pinned chunk keeps its expiry time: it
    counts again once the chunk is unpinned."""
    found, missing = _split(conn, ids, LIVE)
    conn.executemany("UPDATE chunk_stats SET pinned = ? WHERE chunk_id = ?", [(int(pinned), i) for i in found])
    return Changed(tuple(found), tuple(missing))


def expire(conn: sqlite3.Connection, ids: Iterable[int], at: float | None) -> Changed:
    """Set when live chunks expire (``prune`` drops them after, unless pinned); None: never."""
    found, missing = _split(conn, ids, LIVE)
    conn.executemany("UPDATE chunk_stats SET expires_at = ? WHERE chunk_id = ?", [(at, i) for i in found])
    return Changed(tuple(found), tuple(missing))


def soft_delete(conn: sqlite3.Connection, ids: Iterable[int], now: float) -> Changed:
    """Move live chunks to the trash."""
    found, missing = _split(conn, ids, LIVE)
    conn.executemany("UPDATE chunks SET deleted_at = ? WHERE id = ?", [(now, i) for i in found])
    return Changed(tuple(found), tuple(missing))


def restore(conn: sqlite3.Connection, ids: Iterable[int]) -> Changed:
    """Bring chunks back from the trash."""
    found, missing = _split(conn, ids, "c.deleted_at IS NOT NULL")
    conn.executemany("UPDATE chunks SET deleted_at = NULL WHERE id = ?", [(i,) for i in found])
    return Changed(tuple(found), tuple(missing))


def in_trash(conn: sqlite3.Connection, before: float | None) -> list[int]:
    """Ids of the chunks in the trash (moved there at or before ``before`` when given), oldest first."""
    if before is None:
        rows = conn.execute("SELECT id FROM chunks WHERE deleted_at IS NOT NULL ORDER BY id")
    else:
        rows = conn.execute("SELECT id FROM chunks WHERE deleted_at IS NOT NULL AND deleted_at <= ? ORDER BY id", (before,))
    return [int(r[0]) for r in rows]


def purge(conn: sqlite3.Connection, ids: Sequence[int], now: float) -> int:
    """Delete chunks of the trash for good (with their links, vectors and statistics)."""
    return delete_chunks(conn, ids, now)
