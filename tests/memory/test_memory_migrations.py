"""Schema migrations: named, append-only, applied once, from any earlier version."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from rlm_runtime.memory import MemoryStore, StoreError
from rlm_runtime.memory.db import Database
from rlm_runtime.memory.migrations import MIGRATIONS, applied, migrate, pending


def schema(conn: sqlite3.Connection) -> list[tuple[str, str, str]]:
    rows = conn.execute("SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name").fetchall()
    return [(t, n, " ".join((s or "").split())) for t, n, s in rows]


def fresh_schema(tmp_path: Path) -> list[tuple[str, str, str]]:
    db = Database(tmp_path / "fresh.db")
    migrate(db.conn)
    try:
        return schema(db.conn)
    finally:
        db.close()


def test_migrates_empty_database(tmp_path: Path) -> None:
    """It applies every migration, in order, to an empty database."""
    db = Database(tmp_path / "empty.db")
    try:
        done = migrate(db.conn)
        assert done == [fn.__name__ for fn in MIGRATIONS]
        assert applied(db.conn) == done
        assert pending(db.conn) == []
        tables = {n for t, n, _ in schema(db.conn) if t == "table"}
        assert {"sources", "chunks", "chunks_fts", "links", "chunk_stats", "chunk_tags", "chunk_terms", "recall_traces",
                "trace_chunks", "_migrations"} <= tables
    finally:
        db.close()


def test_migrating_twice_does_nothing(tmp_path: Path) -> None:
    """It applies nothing the second time."""
    db = Database(tmp_path / "twice.db")
    try:
        migrate(db.conn)
        assert migrate(db.conn) == []
    finally:
        db.close()


def test_names_are_unique() -> None:
    """It names every migration differently (the name is its identity)."""
    names = [fn.__name__ for fn in MIGRATIONS]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("version", range(1, len(MIGRATIONS)))
def test_migrates_each_earlier_version(tmp_path: Path, version: int) -> None:
    """It brings a database at each earlier version, with data, to the current schema and keeps the data."""
    path = tmp_path / f"v{version}.db"
    db = Database(path)
    migrate(db.conn, MIGRATIONS[:version])
    db.conn.execute("INSERT INTO sources (kind, path, created, updated) VALUES ('memory', 'notes', 1, 1)")
    db.conn.execute("""INSERT INTO chunks (source_id, seq, text, start_byte, end_byte, start_line, end_line, tokens, kind, hash,
                                         created, modified) VALUES (1, 0, 'the zebrafish genome', 0, 20, 1, 1, 4, 'fact', 'h', 5, 5)""")
    if version >= 2:  # the index exists: write it as the store does
        db.conn.execute("INSERT INTO chunks_fts (rowid, text) VALUES (1, 'the zebrafish genome')")
    if version >= 4:
        db.conn.execute("INSERT INTO chunk_stats (chunk_id, strength_at) VALUES (1, 5)")
    db.close()
    with MemoryStore(path) as st:
        assert schema(st.db.conn) == fresh_schema(tmp_path)
        hits = st.search("zebrafish", record=False)
        assert [h.chunk_id for h in hits] == [1]
        assert st.chunk_stats(1).recall_count == 0
        assert st.integrity_check() == []


def test_readonly_refuses_an_old_schema(tmp_path: Path) -> None:
    """It refuses to open read-only a store that still needs migrations, and says which."""
    path = tmp_path / "old.db"
    db = Database(path)
    migrate(db.conn, MIGRATIONS[:2])
    db.close()
    with pytest.raises(StoreError, match="needs migrations"):
        MemoryStore(path, readonly=True)
