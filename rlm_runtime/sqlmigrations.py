"""Named, append-only SQLite migrations (simonw/llm style): the runner the memory store and
the registry of contexts share, each with its own list of migration functions.

``migrate`` applies the functions not yet named in the ``_migrations`` table, each in its own
``BEGIN IMMEDIATE`` transaction together with its record, so two processes opening a new file
at once do not both apply one. ``unexpected_objects`` compares a file's schema with what the
migrations make, so a file holding triggers or views of its own is refused before SQLite could
run them in this process.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from functools import lru_cache

Migration = Callable[[sqlite3.Connection], None]


def applied(conn: sqlite3.Connection) -> list[str]:
    """Names of the migrations applied to this database, in the order they were applied."""
    exists = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_migrations'").fetchone()
    if not exists:
        return []
    return [row[0] for row in conn.execute("SELECT name FROM _migrations ORDER BY applied_at, rowid")]


def pending(conn: sqlite3.Connection, migrations: Sequence[Migration]) -> list[str]:
    """Names of ``migrations`` not yet applied."""
    done = set(applied(conn))
    return [fn.__name__ for fn in migrations if fn.__name__ not in done]


def migrate(conn: sqlite3.Connection, migrations: Sequence[Migration]) -> list[str]:
    """Apply every pending one of ``migrations``; return the names applied now. ``conn`` must
    be in autocommit mode (``isolation_level=None``)."""
    conn.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
    done_now = []
    for fn in migrations:
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("SELECT 1 FROM _migrations WHERE name = ?", (fn.__name__,)).fetchone():
                conn.execute("COMMIT")
                continue
            fn(conn)
            conn.execute("INSERT INTO _migrations (name, applied_at) VALUES (?, ?)", (fn.__name__, time.time()))
            conn.execute("COMMIT")
        except BaseException:
            conn.rollback()
            raise
        done_now.append(fn.__name__)
    return done_now


@lru_cache(maxsize=8)
def expected_schema(migrations: tuple[Migration, ...]) -> frozenset[tuple[str, str, str, str]]:
    """(type, name, table, SQL with whitespace collapsed) of every schema object ``migrations``
    make, with SQLite's own tables (FTS5 shadow tables, ``sqlite_stat*``: ``PRAGMA optimize``
    may create sqlite_stat1)."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        migrate(conn, migrations)
        conn.execute("ANALYZE")
        return frozenset(_schema_rows(conn))
    finally:
        conn.close()


@lru_cache(maxsize=8)
def known_schema(migrations: tuple[Migration, ...]) -> frozenset[tuple[str, str, str, str]]:
    """``expected_schema`` of every prefix of ``migrations``, together: a file stopped at an
    earlier migration holds an object as it was then (a table a later ``ALTER TABLE`` changes)."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    known: set[tuple[str, str, str, str]] = set()
    try:
        for i in range(1, len(migrations) + 1):
            migrate(conn, migrations[:i])
            known.update(_schema_rows(conn))
        conn.execute("ANALYZE")
        known.update(_schema_rows(conn))
        return frozenset(known)
    finally:
        conn.close()


def unexpected_objects(conn: sqlite3.Connection, migrations: Sequence[Migration]) -> list[str]:
    """The schema objects of ``conn``'s main database that ``migrations`` do not make (or make
    with other SQL), as ``"type name"``; empty for a file they made, at any migration."""
    expected = known_schema(tuple(migrations))
    return sorted(f"{row[0]} {row[1]}" for row in _schema_rows(conn) if row not in expected)


def _schema_rows(conn: sqlite3.Connection) -> list[tuple[str, str, str, str]]:
    rows = conn.execute("SELECT type, name, tbl_name, sql FROM main.sqlite_master")
    return [(str(t), str(n), str(tb), " ".join(str(sql or "").split())) for t, n, tb, sql in rows]
