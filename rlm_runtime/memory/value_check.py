"""The values of a store file from elsewhere: each column holds what the migrations declare.

The schema check (``migrations.unexpected_objects``) makes sure a store file holds our tables,
indexes and triggers only; SQLite does not check a row's values when it reads them, so a file
written by another program can still put a blob in ``chunks.text``, text in
``chunks.start_line``, NULL in a NOT NULL column or a ``meta`` that is not JSON. The host read
them as ints, floats and JSON later and stopped with an internal error (``rlm memory search``,
``export``); a vector of another size than its model's would be read past its end.
``malformed_values`` finds the first such value with one scan per table, reading
only the values' types (SQLite answers ``typeof`` from the record header), before the store is
used.

Counts and counters: no value this code writes reaches ``COUNT_LIMIT`` (2**62), and no write
takes one past it: a count is capped there (``capped_increment``), a change counter of
``vector_meta`` wraps to 0 (``wrapped_increment``). SQLite writes an integer that overflows
64 bits as a REAL, which the check above refuses at every later open: a ``vector_meta.version``
of 2**63-1 from elsewhere opened, the next ``rlm memory add`` overflowed it, and the store never
opened again. A writable open resets a counter outside [0, 2**62) to 0 and says so
(``reset_counters``; the REAL of such an overflow included); ids and SQLite's AUTOINCREMENT
sequences beyond 2**62 (no store this code wrote holds one; at 2**63-1 no row can be added)
are refused at open.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

#: Counts and counters stay below this (see the module docstring).
COUNT_LIMIT = 1 << 62
#: The change counters of ``vector_meta`` (``vectors.py``): compared for change only, reset when out of range.
COUNTERS = (("vector_meta", "version"), ("vector_meta", "epoch"), ("quality_meta", "version"), ("quality_meta", "epoch"))
#: The types ``typeof()`` may report for a declared column type (NULL is allowed apart).
_ALLOWED = {"INTEGER": ("integer",), "REAL": ("real", "integer"), "TEXT": ("text",), "BLOB": ("blob",)}
#: A column's other types: a counter an older version overflowed holds a REAL (reset at a writable open).
_ALSO_ALLOWED = {column: ("real",) for column in COUNTERS}
#: What a value must also be, beyond its type: the CHECK constraints of the migrations (SQLite
#: checks them on writes only, not on a file written elsewhere) and the size of a vector.
_VALUE_RULES = {
    **{(meta, rule[0]): rule[1] for meta in ("vector_meta", "quality_meta") for rule in (
        ("id", '"id" = 1'), ("dim", '"dim" > 0 AND "dim" <= 4096 AND "dim" % 64 = 0'), ("bytes", '"bytes" * 4 = "dim"'))},
    ("chunk_vectors", "bits"): 'length("bits") = (SELECT "bytes" FROM main."vector_meta" WHERE "id" = 1)',
    ("quality_vectors", "bits"): 'length("bits") = (SELECT "bytes" FROM main."quality_meta" WHERE "id" = 1)',
    **{(table, "confidence"): '"confidence" >= 0 AND "confidence" <= 1' for table in ("chunk_notes", "chunk_versions")},
    # AUTOINCREMENT ids: room for 2**62 more rows (SQLite refuses a row past 2**63-1).
    **{(table, "id"): f'"id" <= {COUNT_LIMIT}' for table in ("sources", "chunks", "recall_traces")},
}
#: Columns holding JSON text, read with ``json.loads``.
_JSON_COLUMNS = {("chunks", "meta")}
#: The deepest JSON a ``meta`` may nest when imported (Python's reader recurses once a level).
#: A store's own ``meta`` is not measured at open (``json_tree`` paths are quadratic in a
#: hostile document's depth and key lengths): ``read_meta`` parses it, and one too deep for
#: Python reads as no meta at all.
MAX_JSON_DEPTH = 64


def _tables(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute("SELECT name FROM main.sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%' "
                        "AND sql NOT LIKE 'CREATE VIRTUAL TABLE%' AND name NOT LIKE 'chunks_fts%'")
    return [str(r[0]) for r in rows]


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


_OTHER_TYPE = "a value of another type than the column declares"
_OUT_OF_RANGE = "a value out of the column's range"


def malformed_values(conn: sqlite3.Connection) -> str | None:
    """Where the first value of a type its column does not declare, or out of its range,
    is (``"table.column, row N: ..."``), or None. Call it after the schema check: the tables
    are ours."""
    for table in _tables(conn):
        columns = [(str(r[1]), str(r[2]).upper(), bool(r[3])) for r in conn.execute(f"PRAGMA main.table_info({_quote(table)})")]
        tests = []
        for name, declared, not_null in columns:
            allowed = _ALLOWED.get(declared)
            if allowed is None:
                continue
            kinds = ", ".join(f"'{k}'" for k in (*allowed, *_ALSO_ALLOWED.get((table, name), ()), *(() if not_null else ("null",))))
            tests.append((name, _OTHER_TYPE, f"typeof({_quote(name)}) NOT IN ({kinds})"))
            rule = _VALUE_RULES.get((table, name))
            if rule is not None:
                tests.append((name, _OUT_OF_RANGE, f"({_quote(name)} IS NOT NULL AND NOT coalesce({rule}, 0))"))
            if (table, name) in _JSON_COLUMNS:
                # json_type() raises on text that is not JSON: asked only of valid JSON.
                tests.append((name, _OTHER_TYPE, f"({_quote(name)} IS NOT NULL AND CASE WHEN json_valid({_quote(name)}) "
                                                 f"THEN json_type({_quote(name)}) != 'object' ELSE 1 END)"))
        if not tests:
            continue
        where = " OR ".join(f"({t})" for _, _, t in tests)
        row = conn.execute(f"SELECT rowid, {', '.join(t for _, _, t in tests)} FROM main.{_quote(table)} WHERE {where} LIMIT 1"
                           if _has_rowid(conn, table) else
                           f"SELECT NULL, {', '.join(t for _, _, t in tests)} FROM main.{_quote(table)} WHERE {where} LIMIT 1").fetchone()
        if row is not None:
            column, what = next(((name, what) for (name, what, _), hit in zip(tests, row[1:], strict=True) if hit), tests[0][:2])
            where_row = f", row {row[0]}" if row[0] is not None else ""
            return f"{table}.{column}{where_row}: {what}"
    return _sequence_problem(conn)


def _sequence_problem(conn: sqlite3.Connection) -> str | None:
    """SQLite's own AUTOINCREMENT table holds what SQLite writes: an integer from 0 to
    ``COUNT_LIMIT`` a table (a text there broke every next chunk id)."""
    if conn.execute("SELECT 1 FROM main.sqlite_master WHERE name = 'sqlite_sequence'").fetchone() is None:
        return None
    row = conn.execute("SELECT name, typeof(seq) = 'integer' FROM main.sqlite_sequence "
                       "WHERE typeof(seq) != 'integer' OR seq NOT BETWEEN 0 AND ? LIMIT 1", (COUNT_LIMIT,)).fetchone()
    if row is None:
        return None
    return f"sqlite_sequence.seq of {str(row[0])[:40]!r}: {_OUT_OF_RANGE if row[1] else 'not an integer'}"


def capped_increment(column: str) -> str:
    """SQL: ``column`` plus one, at most ``COUNT_LIMIT`` (a count from elsewhere at 2**63-1 overflowed)."""
    return f"min({column}, {COUNT_LIMIT - 1}) + 1"


def wrapped_increment(column: str) -> str:
    """SQL: a change counter plus one, back to 0 past ``COUNT_LIMIT`` (readers compare it for change only)."""
    return f"CASE WHEN {column} BETWEEN 0 AND {COUNT_LIMIT - 2} THEN {column} + 1 ELSE 0 END"


def _counters(conn: sqlite3.Connection) -> list[tuple[str, str, str]]:
    """(table, column, the SQL condition of a value out of range) of each counter the store has."""
    found = []
    for table, column in COUNTERS:
        if conn.execute("SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone() is not None:
            found.append((table, column, f"typeof({_quote(column)}) != 'integer' OR {_quote(column)} NOT BETWEEN 0 AND {COUNT_LIMIT - 1}"))
    return found


def bad_counters(conn: sqlite3.Connection) -> list[str]:
    """Each counter of ``COUNTERS`` outside [0, ``COUNT_LIMIT``), as ``"vector_meta.version (9223372036854775807)"``."""
    return [f"{table}.{column} ({value!r})" for table, column, bad in _counters(conn)
            for (value,) in conn.execute(f"SELECT {_quote(column)} FROM main.{_quote(table)} WHERE {bad}").fetchall()]


def reset_counters(conn: sqlite3.Connection) -> list[str]:
    """Set each counter ``bad_counters`` names to 0, inside the caller's write transaction; what was reset."""
    reset = bad_counters(conn)
    for table, column, bad in _counters(conn) if reset else ():
        conn.execute(f"UPDATE main.{_quote(table)} SET {_quote(column)} = 0 WHERE {bad}")
    return reset


def _has_rowid(conn: sqlite3.Connection, table: str) -> bool:
    try:
        conn.execute(f"SELECT rowid FROM main.{_quote(table)} LIMIT 0")
    except sqlite3.OperationalError:
        return False  # WITHOUT ROWID
    return True


def read_meta(text: str | None) -> dict[str, Any] | None:
    """A chunk's ``meta`` as a dict, or None: a value the open check let through (valid JSON,
    an object) but nested too deep for Python's reader is no meta, never an internal error."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except (RecursionError, ValueError):
        return None
    return value if isinstance(value, dict) else None


__all__ = ["COUNTERS", "COUNT_LIMIT", "MAX_JSON_DEPTH", "bad_counters", "capped_increment", "malformed_values", "read_meta", "reset_counters",
           "wrapped_increment"]
