"""The schema of the memory store as named, append-only migrations (simonw/llm style).

``MIGRATIONS`` lists functions in order; ``migrate`` applies those not yet named in the
``_migrations`` table, each in its own ``BEGIN IMMEDIATE`` transaction together with its
record, so two processes opening a new store at once do not both apply it. Never edit or
reorder a released migration: add a new one at the end.

The tables:

* ``sources``: where chunks come from: a file (``kind='file'``, its absolute path, size,
  mtime and hash for incremental re-ingest; ``state`` is ``ingesting`` until its last batch
  commits) or a memory (``kind='memory'``, a label such as ``run:<id>``).
* ``chunks``: the text, its source and position (``seq``, byte and line span), tokens, kind,
  content hash, run id, provenance (``meta``, JSON), created/modified/accessed times.
  ``AUTOINCREMENT``: an id is never reused, so an id printed once never names other text.
* ``chunks_fts``: the FTS5 index (BM25) over ``chunks.text``, external content. Triggers
  remove a deleted or edited chunk's entry; an insert writes the index explicitly
  (``chunks.insert_chunk``): an insert trigger opens a savepoint per row, which makes FTS5
  flush its pending terms each time (ingest measured twice as slow).
  ``chunk_tags``; ``chunk_terms`` (a chunk's rare key terms, for ``related_to``).
* ``links``: typed, weighted edges between chunks (an open set of types).
* ``chunk_stats``: recall count, last recall, strength (as of ``strength_at``), tier, pinned,
  expires_at; a separate table so that a recall does not rewrite the row holding the text.
* ``recall_traces`` and ``trace_chunks``: each search or recall, and the chunks it returned.
* ``chunk_vectors``: a chunk's vector, quantised (``vectors.py``: 2 bits a dimension), and
  ``vector_meta``: the one row naming the model that made them, its dimension, the bytes of a
  vector, and the counters a reader's copy in memory follows. A store opened read-only before
  this migration reads as a store without vectors (``READ_ONLY_OPTIONAL``), and one before
  the next two as one with an empty trash (``read_as_current``).
* ``chunks.deleted_at``: when ``forget`` moved the chunk to the trash (NULL: live). A deleted
  chunk keeps its row, index entry, vector and links until ``purge``; every reader skips it.
* ``chunks.text_key``: for chunks of memory sources (notes, answers), the hash of their text
  with whitespace made single spaces (``chunks.text_key``): a note already held is not stored
  twice (``MemoryStore.add_text``). NULL for file chunks, which mirror their file.
* ``chunk_versions``: what an edited chunk held before each edit (text, kind, tags, summary,
  confidence, and when it held them); ``chunk_notes``: a chunk's summary and confidence.

``unexpected_objects`` compares a file's schema with what the migrations make (applied to an
empty in-memory database, with ``ANALYZE``'s statistics table): a store file from elsewhere
may carry triggers, views or tables of its own, which SQLite would run inside the host on the
first write or search, so such a file is refused before anything runs.
"""

from __future__ import annotations

import sqlite3

from rlm_runtime import sqlmigrations
from rlm_runtime.memory.db import TOKENIZER

Migration = sqlmigrations.Migration
MIGRATIONS: list[Migration] = []


def migration(fn: Migration) -> Migration:
    """Register ``fn`` as the next migration (its name is its identity)."""
    MIGRATIONS.append(fn)
    return fn


def _script(conn: sqlite3.Connection, sql: str) -> None:
    # executescript would COMMIT the migration's transaction: run statement by statement
    # (a trigger body holds semicolons: a statement ends where SQLite says it is complete).
    statement = ""
    for line in sql.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            conn.execute(statement)
            statement = ""
    if statement.strip():
        raise ValueError(f"incomplete SQL statement in a migration: {statement.strip()[:80]}")


@migration
def m001_sources_and_chunks(conn: sqlite3.Connection) -> None:
    _script(conn, """
        CREATE TABLE sources (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            kind TEXT NOT NULL,
            path TEXT NOT NULL,
            size INTEGER,
            mtime_ns INTEGER,
            hash TEXT,
            state TEXT NOT NULL DEFAULT 'complete',
            note TEXT,
            created REAL NOT NULL,
            updated REAL NOT NULL,
            UNIQUE (kind, path)
        );
        CREATE TABLE chunks (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            source_id INTEGER NOT NULL REFERENCES sources(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            text TEXT NOT NULL,
            start_byte INTEGER NOT NULL,
            end_byte INTEGER NOT NULL,
            start_line INTEGER NOT NULL,
            end_line INTEGER NOT NULL,
            tokens INTEGER NOT NULL,
            kind TEXT NOT NULL,
            hash TEXT NOT NULL,
            run_id TEXT,
            meta TEXT,
            created REAL NOT NULL,
            modified REAL NOT NULL,
            accessed REAL
        );
        CREATE INDEX chunks_source_seq ON chunks (source_id, seq);
        CREATE INDEX chunks_run ON chunks (run_id) WHERE run_id IS NOT NULL;
        CREATE TABLE chunk_tags (
            tag TEXT NOT NULL,
            chunk_id INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
            PRIMARY KEY (tag, chunk_id)
        ) WITHOUT ROWID;
        CREATE INDEX chunk_tags_chunk ON chunk_tags (chunk_id);
    """)


@migration
def m002_chunks_fts(conn: sqlite3.Connection) -> None:
    _script(conn, f"""
        CREATE VIRTUAL TABLE chunks_fts USING fts5(text, content='chunks', content_rowid='id', tokenize='{TOKENIZER}');
        CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN
            INSERT INTO chunks_fts (chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);
        END;
        CREATE TRIGGER chunks_fts_update AFTER UPDATE OF text ON chunks BEGIN
            INSERT INTO chunks_fts (chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);
            INSERT INTO chunks_fts (rowid, text) VALUES (new.id, new.text);
        END;
        INSERT INTO chunks_fts (chunks_fts) VALUES ('rebuild');
    """)


@migration
def m003_links_and_terms(conn: sqlite3.Connection) -> None:
    _script(conn, """
        CREATE TABLE links (
            src INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
            dst INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
            type TEXT NOT NULL,
            strength REAL NOT NULL DEFAULT 1.0,
            count INTEGER NOT NULL DEFAULT 1,
            created REAL NOT NULL,
            updated REAL NOT NULL,
            PRIMARY KEY (src, type, dst)
        ) WITHOUT ROWID;
        CREATE INDEX links_dst ON links (dst, type);
        CREATE TABLE chunk_terms (
            term TEXT NOT NULL,
            chunk_id INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
            PRIMARY KEY (term, chunk_id)
        ) WITHOUT ROWID;
        CREATE INDEX chunk_terms_chunk ON chunk_terms (chunk_id);
    """)


@migration
def m004_chunk_stats(conn: sqlite3.Connection) -> None:
    _script(conn, """
        CREATE TABLE chunk_stats (
            chunk_id INTEGER PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
            recall_count INTEGER NOT NULL DEFAULT 0,
            last_recall REAL,
            strength REAL NOT NULL DEFAULT 1.0,
            strength_at REAL NOT NULL,
            tier TEXT NOT NULL DEFAULT 'working' CHECK (tier IN ('working', 'long_term')),
            pinned INTEGER NOT NULL DEFAULT 0,
            expires_at REAL
        );
        CREATE INDEX chunk_stats_expires ON chunk_stats (expires_at) WHERE expires_at IS NOT NULL;
        CREATE INDEX chunk_stats_last_recall ON chunk_stats (last_recall) WHERE last_recall IS NOT NULL;
        INSERT INTO chunk_stats (chunk_id, strength_at) SELECT id, created FROM chunks;
    """)


@migration
def m005_recall_traces(conn: sqlite3.Connection) -> None:
    _script(conn, """
        CREATE TABLE recall_traces (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at REAL NOT NULL,
            op TEXT NOT NULL,
            query TEXT,
            run_id TEXT
        );
        CREATE INDEX recall_traces_at ON recall_traces (at);
        CREATE TABLE trace_chunks (
            trace_id INTEGER NOT NULL REFERENCES recall_traces(id) ON DELETE CASCADE,
            rank INTEGER NOT NULL,
            chunk_id INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
            score REAL,
            PRIMARY KEY (trace_id, rank)
        ) WITHOUT ROWID;
        CREATE INDEX trace_chunks_chunk ON trace_chunks (chunk_id);
    """)


@migration
def m006_chunk_vectors(conn: sqlite3.Connection) -> None:
    _script(conn, """
        CREATE TABLE vector_meta (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            model TEXT NOT NULL,
            dim INTEGER NOT NULL CHECK (dim > 0 AND dim <= 4096 AND dim % 64 = 0),
            bytes INTEGER NOT NULL CHECK (bytes * 4 = dim),
            version INTEGER NOT NULL DEFAULT 0,
            epoch INTEGER NOT NULL DEFAULT 0
        );
        CREATE TABLE chunk_vectors (
            chunk_id INTEGER PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
            bits BLOB NOT NULL
        );
    """)


@migration
def m007_soft_delete(conn: sqlite3.Connection) -> None:
    _script(conn, """
        ALTER TABLE chunks ADD COLUMN deleted_at REAL;
        CREATE INDEX chunks_deleted ON chunks (deleted_at) WHERE deleted_at IS NOT NULL;
    """)


@migration
def m008_text_keys(conn: sqlite3.Connection) -> None:
    from rlm_runtime.memory.chunks import set_text_keys  # chunks reads the schema's LIVE from db, not this module

    _script(conn, """
        ALTER TABLE chunks ADD COLUMN text_key TEXT;
        CREATE INDEX chunks_text_key ON chunks (text_key) WHERE text_key IS NOT NULL;
    """)
    ids = [int(r[0]) for r in conn.execute("SELECT c.id FROM chunks c JOIN sources s ON s.id = c.source_id WHERE s.kind = 'memory'")]
    for start in range(0, len(ids), 500):  # read, then write: never update the table a cursor is walking
        part = ids[start:start + 500]
        rows = conn.execute(f"SELECT id, text FROM chunks WHERE id IN ({','.join('?' * len(part))})", part).fetchall()
        set_text_keys(conn, [(int(i), str(t)) for i, t in rows])


@migration
def m009_upkeep(conn: sqlite3.Connection) -> None:
    # When the store's scheduled upkeep last ran (one row, written by the store's own clock
    # on its first open: the first upkeep comes a day after, not on the first open).
    _script(conn, """
        CREATE TABLE upkeep (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            last_run REAL NOT NULL
        );
    """)


@migration
def m010_related_cap(conn: sqlite3.Connection) -> None:
    # The related_cap the store's related_to links were last trimmed to (NULL: never; stores
    # made before the cap was kept may hold more a chunk). A writable open trims when it is
    # NULL or above the settings' cap.
    _script(conn, "ALTER TABLE upkeep ADD COLUMN related_cap INTEGER;")


@migration
def m011_learned_links_index(conn: sqlite3.Connection) -> None:
    # Every search asks whether the store ever linked an answer to its sources
    # (``learned.has_record``); without an index that scanned every link: 15 ms a search at
    # 100K chunks, for a store of file chunks whose links are all ``next`` and ``related_to``.
    _script(conn, "CREATE INDEX links_learned ON links (src) WHERE type = 'derived_from';")


@migration
def m012_quality_vectors(conn: sqlite3.Connection) -> None:
    # The quality tier's vectors (a contextual model's, filled after ingest: ``contextual.py``),
    # kept apart from the fast tier's as their model is: same layout as m006's tables, and the
    # characters a second the last fill embedded (``rate``: an ETA for the chunks left).
    _script(conn, """
        CREATE TABLE quality_meta (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            model TEXT NOT NULL,
            dim INTEGER NOT NULL CHECK (dim > 0 AND dim <= 4096 AND dim % 64 = 0),
            bytes INTEGER NOT NULL CHECK (bytes * 4 = dim),
            version INTEGER NOT NULL DEFAULT 0,
            epoch INTEGER NOT NULL DEFAULT 0,
            rate REAL
        );
        CREATE TABLE quality_vectors (
            chunk_id INTEGER PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
            bits BLOB NOT NULL
        );
    """)


@migration
def m013_chunk_versions(conn: sqlite3.Connection) -> None:
    # An edit keeps a chunk's id, links and statistics: what it held before goes to
    # ``chunk_versions`` (``edits.py``), one row per edit. ``chunk_notes`` holds what a person
    # says of a chunk beside its text: a summary and a confidence in [0, 1].
    _script(conn, """
        CREATE TABLE chunk_versions (
            chunk_id INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
            version INTEGER NOT NULL,
            text TEXT NOT NULL,
            kind TEXT NOT NULL,
            tags TEXT NOT NULL,
            summary TEXT,
            confidence REAL,
            since REAL NOT NULL,
            replaced REAL NOT NULL,
            PRIMARY KEY (chunk_id, version)
        ) WITHOUT ROWID;
        CREATE TABLE chunk_notes (
            chunk_id INTEGER PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
            summary TEXT,
            confidence REAL CHECK (confidence IS NULL OR (confidence >= 0 AND confidence <= 1))
        );
    """)


#: Migrations a store opened read-only may lack: it reads as it did before them (see ``read_as_current``).
READ_ONLY_OPTIONAL = frozenset({"m006_chunk_vectors", "m007_soft_delete", "m008_text_keys", "m009_upkeep", "m010_related_cap",
                                "m011_learned_links_index", "m012_quality_vectors", "m013_chunk_versions"})
#: The columns of ``chunks`` a migration added, and the value a store without them reads as.
_ADDED_COLUMNS = {"m007_soft_delete": "NULL AS deleted_at", "m008_text_keys": "NULL AS text_key"}


def read_as_current(conn: sqlite3.Connection, missing: list[str]) -> None:
    """Let a read-only connection to a store without the column-adding migrations read it
    with today's queries: a temporary view ``chunks`` (the temp schema is searched first; the
    file is not written) shows ``main.chunks`` with those columns as NULL: nothing in the trash,
    no note keyed. FTS5 reads its content from ``main.chunks`` by name, so it is unaffected."""
    added = [_ADDED_COLUMNS[name] for name in missing if name in _ADDED_COLUMNS]
    if added:
        conn.execute(f"CREATE TEMP VIEW chunks AS SELECT *, {', '.join(added)} FROM main.chunks")
    if "m013_chunk_versions" in missing:  # no edits yet: empty tables in the temp schema (not the file)
        conn.execute("CREATE TEMP TABLE chunk_versions (chunk_id INTEGER, version INTEGER, text TEXT, kind TEXT, tags TEXT, "
                     "summary TEXT, confidence REAL, since REAL, replaced REAL)")
        conn.execute("CREATE TEMP TABLE chunk_notes (chunk_id INTEGER PRIMARY KEY, summary TEXT, confidence REAL)")


def expected_schema() -> frozenset[tuple[str, str, str, str]]:
    """Every schema object the migrations make (``sqlmigrations.expected_schema``)."""
    return sqlmigrations.expected_schema(tuple(MIGRATIONS))


def unexpected_objects(conn: sqlite3.Connection) -> list[str]:
    """The schema objects of ``conn`` no migration makes; empty for a store this code made."""
    return sqlmigrations.unexpected_objects(conn, MIGRATIONS)


applied = sqlmigrations.applied


def pending(conn: sqlite3.Connection, migrations: list[Migration] | None = None) -> list[str]:
    """Names of the migrations not yet applied."""
    return sqlmigrations.pending(conn, MIGRATIONS if migrations is None else migrations)


def migrate(conn: sqlite3.Connection, migrations: list[Migration] | None = None) -> list[str]:
    """Apply every pending migration (``migrations`` defaults to all of them); return the
    names applied now. ``conn`` must be in autocommit mode (``isolation_level=None``)."""
    return sqlmigrations.migrate(conn, MIGRATIONS if migrations is None else migrations)
