"""The schema of the registry of contexts as named, append-only migrations (simonw/llm style).

``MIGRATIONS`` lists functions in order; ``migrate`` applies those not yet named in the
``_migrations`` table, each in its own ``BEGIN IMMEDIATE`` transaction together with its
record, so two processes opening a new registry at once do not both apply one. Never edit or
reorder a released migration: add a new one at the end.

The tables:

* ``contexts``: one row per registered context: id, name, kind, source (a real path; NULL
  for a text), metadata (JSON: what the probe found), created and refreshed times.
* ``context_texts``: the text of a ``text`` context (its own table: listing never reads it).
* ``context_tags``.
* ``context_usage``: access counts aggregated across runs (peeks, greps, chunks, loads,
  searches) and the last access; its own table so that counting does not rewrite a context.
* ``context_runs``: the runs a context served, the last ``store.RECENT_RUNS`` of each.
* ``context_leads``: the probes that found the lines answers came from (``leads.py``), with
  how many questions each served, the ``store.LEADS_KEPT`` most used of each context.
* ``context_types``: a context's type (``types.py``), when it was given one.

``unexpected_objects`` compares a file's schema with what the migrations make, so a file
holding triggers or views of its own is refused before SQLite could run them in this process.
"""

from __future__ import annotations

import sqlite3

from rlm_runtime import sqlmigrations

Migration = sqlmigrations.Migration
MIGRATIONS: list[Migration] = []


def migration(fn: Migration) -> Migration:
    """Register ``fn`` as the next migration (its name is its identity)."""
    MIGRATIONS.append(fn)
    return fn


def _statements(conn: sqlite3.Connection, *statements: str) -> None:
    # executescript would COMMIT the migration's transaction: one statement at a time.
    for statement in statements:
        conn.execute(statement)


@migration
def m001_contexts(conn: sqlite3.Connection) -> None:
    _statements(
        conn,
        """CREATE TABLE contexts (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('file', 'folder', 'text', 'memory')),
            source TEXT,
            meta TEXT NOT NULL,
            created REAL NOT NULL,
            refreshed REAL NOT NULL
        )""",
        "CREATE INDEX contexts_kind ON contexts (kind)",
        """CREATE TABLE context_texts (
            id TEXT PRIMARY KEY REFERENCES contexts(id) ON DELETE CASCADE,
            text TEXT NOT NULL
        )""",
        """CREATE TABLE context_tags (
            id TEXT NOT NULL REFERENCES contexts(id) ON DELETE CASCADE,
            tag TEXT NOT NULL,
            PRIMARY KEY (id, tag)
        ) WITHOUT ROWID""",
        "CREATE INDEX context_tags_tag ON context_tags (tag)",
    )


@migration
def m002_usage(conn: sqlite3.Connection) -> None:
    _statements(
        conn,
        """CREATE TABLE context_usage (
            id TEXT PRIMARY KEY REFERENCES contexts(id) ON DELETE CASCADE,
            peeks INTEGER NOT NULL DEFAULT 0,
            greps INTEGER NOT NULL DEFAULT 0,
            chunks INTEGER NOT NULL DEFAULT 0,
            loads INTEGER NOT NULL DEFAULT 0,
            searches INTEGER NOT NULL DEFAULT 0,
            last_access REAL
        )""",
        """CREATE TABLE context_runs (
            id TEXT NOT NULL REFERENCES contexts(id) ON DELETE CASCADE,
            run_id TEXT NOT NULL,
            at REAL NOT NULL,
            PRIMARY KEY (id, run_id)
        ) WITHOUT ROWID""",
        "CREATE INDEX context_runs_at ON context_runs (id, at)",
    )


@migration
def m003_answer_leads(conn: sqlite3.Connection) -> None:
    _statements(
        conn,
        """CREATE TABLE context_leads (
            id TEXT NOT NULL REFERENCES contexts(id) ON DELETE CASCADE,
            probe TEXT NOT NULL,
            questions INTEGER NOT NULL DEFAULT 0,
            last_at REAL NOT NULL,
            PRIMARY KEY (id, probe)
        ) WITHOUT ROWID""",
    )


@migration
def m004_context_types(conn: sqlite3.Connection) -> None:
    # A context's type (``types.py``): its own table, so that a row of ``contexts`` keeps the
    # shape every check reads; a context without a row has its kind's default type.
    _statements(
        conn,
        """CREATE TABLE context_types (
            id TEXT PRIMARY KEY REFERENCES contexts(id) ON DELETE CASCADE,
            type TEXT NOT NULL CHECK (type IN ('identity', 'project', 'temporal', 'document', 'memory', 'tool_result'))
        ) WITHOUT ROWID""",
    )


def expected_schema() -> frozenset[tuple[str, str, str, str]]:
    """Every schema object the migrations make (``sqlmigrations.expected_schema``)."""
    return sqlmigrations.expected_schema(tuple(MIGRATIONS))


def unexpected_objects(conn: sqlite3.Connection) -> list[str]:
    """The schema objects of ``conn`` no migration makes; empty for a registry this code made."""
    return sqlmigrations.unexpected_objects(conn, MIGRATIONS)


applied = sqlmigrations.applied


def pending(conn: sqlite3.Connection, migrations: list[Migration] | None = None) -> list[str]:
    """Names of the migrations not yet applied."""
    return sqlmigrations.pending(conn, MIGRATIONS if migrations is None else migrations)


def migrate(conn: sqlite3.Connection, migrations: list[Migration] | None = None) -> list[str]:
    """Apply every pending migration (``migrations`` defaults to all of them); return the
    names applied now. ``conn`` must be in autocommit mode (``isolation_level=None``)."""
    return sqlmigrations.migrate(conn, MIGRATIONS if migrations is None else migrations)
