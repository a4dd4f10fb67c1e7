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
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

#: The types ``typeof()`` may report for a declared column type (NULL is allowed apart).
_ALLOWED = {"INTEGER": ("integer",), "REAL": ("real", "integer"), "TEXT": ("text",), "BLOB": ("blob",)}
#: What a value must also be, beyond its type: the CHECK constraints of the migrations (SQLite
#: checks them on writes only, not on a file written elsewhere) and the size of a vector.
_VALUE_RULES = {
    ("vector_meta", "id"): '"id" = 1',
    ("vector_meta", "dim"): '"dim" > 0 AND "dim" <= 4096 AND "dim" % 64 = 0',
    ("vector_meta", "bytes"): '"bytes" * 4 = "dim"',
    ("chunk_vectors", "bits"): 'length("bits") = (SELECT "bytes" FROM main."vector_meta" WHERE "id" = 1)',
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


def malformed_values(conn: sqlite3.Connection) -> str | None:
    """Where the first value of a type its column does not declare is (``"table.column, row
    N: ..."``), or None. Call it after the schema check: the tables are ours."""
    for table in _tables(conn):
        columns = [(str(r[1]), str(r[2]).upper(), bool(r[3])) for r in conn.execute(f"PRAGMA main.table_info({_quote(table)})")]
        tests = []
        for name, declared, not_null in columns:
            allowed = _ALLOWED.get(declared)
            if allowed is None:
                continue
            kinds = ", ".join(f"'{k}'" for k in (*allowed, *(() if not_null else ("null",))))
            tests.append((name, f"typeof({_quote(name)}) NOT IN ({kinds})"))
            rule = _VALUE_RULES.get((table, name))
            if rule is not None:
                tests.append((name, f"({_quote(name)} IS NOT NULL AND NOT coalesce({rule}, 0))"))
            if (table, name) in _JSON_COLUMNS:
                tests.append((name, f"({_quote(name)} IS NOT NULL AND (NOT json_valid({_quote(name)}) "
                                    f"OR json_type({_quote(name)}) != 'object'))"))
        if not tests:
            continue
        where = " OR ".join(f"({t})" for _, t in tests)
        row = conn.execute(f"SELECT rowid, {', '.join(t for _, t in tests)} FROM main.{_quote(table)} WHERE {where} LIMIT 1"
                           if _has_rowid(conn, table) else
                           f"SELECT NULL, {', '.join(t for _, t in tests)} FROM main.{_quote(table)} WHERE {where} LIMIT 1").fetchone()
        if row is not None:
            column = next((name for (name, _), hit in zip(tests, row[1:], strict=True) if hit), tests[0][0])
            where_row = f", row {row[0]}" if row[0] is not None else ""
            return f"{table}.{column}{where_row}: a value of another type than the column declares"
    return None


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


__all__ = ["MAX_JSON_DEPTH", "malformed_values", "read_meta"]
