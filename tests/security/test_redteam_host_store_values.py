"""Red-team pass on store files (rt-a): a store whose schema is ours but whose values are not
(SQLite checks no type when it reads a row) is refused when opened, with one line naming the
column, instead of an internal error in search or export."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from rlm_runtime.memory import MemoryStore
from rlm_runtime.memory.errors import NotAMemoryStore

TAMPERS = {
    "a blob as a chunk's text": "UPDATE chunks SET text = X'00ff41'",
    "text as a line number": "UPDATE chunks SET start_line = 'first', end_line = 'last'",
    "a blob as a strength": "UPDATE chunk_stats SET strength = X'01'",
    "a blob as a source path": "UPDATE sources SET path = X'2f6574632f706173737764'",
    "meta that is not JSON": "UPDATE chunks SET meta = '{not json'",
    "meta nested 5,000 deep": "UPDATE chunks SET meta = '{\"a\": " + "[" * 5000 + "]" * 5000 + "}'",
    "a NULL in a NOT NULL column": "NULL",
    "text as a link's strength": ("INSERT INTO links VALUES ((SELECT min(id) FROM chunks), (SELECT max(id) FROM chunks), "
                                  "'supports', 'strong', 1, 0, 0)"),
}


def _null_in_not_null(path: Path) -> None:
    """A NULL in chunks.created (NOT NULL): the constraint lifted for one update, then put back."""
    nullable = "REPLACE(sql, 'created REAL NOT NULL,', 'created REAL,')"
    strict = "REPLACE(sql, 'created REAL,', 'created REAL NOT NULL,')"
    for step in (f"PRAGMA writable_schema = ON; UPDATE sqlite_master SET sql = {nullable} WHERE name = 'chunks';",
                 "UPDATE chunks SET created = NULL;",
                 f"PRAGMA writable_schema = ON; UPDATE sqlite_master SET sql = {strict} WHERE name = 'chunks';"):
        conn = sqlite3.connect(path)
        conn.executescript(step)
        conn.close()


@pytest.fixture
def store_file(tmp_path: Path) -> Path:
    doc = tmp_path / "notes.txt"
    doc.write_text("alpha beta gamma\n\nthe access code is 42\n")
    path = tmp_path / "shared.db"
    with MemoryStore(path) as store:
        store.ingest([doc])
    return path


@pytest.mark.parametrize("tamper", list(TAMPERS))
def test_a_store_with_values_of_other_types_is_refused_at_open(store_file: Path, tamper: str) -> None:
    """It refuses a store file holding a value its column does not declare, naming the column; search and export never see it."""
    if TAMPERS[tamper] == "NULL":
        _null_in_not_null(store_file)
    else:
        conn = sqlite3.connect(store_file)
        conn.executescript(TAMPERS[tamper])
        conn.commit()
        conn.close()
    with pytest.raises(NotAMemoryStore, match=r"not a memory store") as raised:
        with MemoryStore(store_file) as store:
            store.search("access code")
            store.export_jsonl(store_file.with_suffix(".jsonl")) if hasattr(store, "export_jsonl") else None
    assert "Error" not in str(raised.value).split(":")[0]


def test_a_store_this_version_wrote_opens(store_file: Path) -> None:
    """It opens a store written by this version, meta and links included, and finds its text."""
    with MemoryStore(store_file) as store:
        assert store.search("access code")


def test_an_import_cannot_store_a_meta_the_next_open_would_refuse(store_file: Path, tmp_path: Path) -> None:
    """It refuses an export line whose meta nests past MAX_JSON_DEPTH, so no import leaves a store that no longer opens."""
    import json

    from rlm_runtime.memory.errors import StoreError
    from rlm_runtime.memory.value_check import MAX_JSON_DEPTH

    export = tmp_path / "export.jsonl"
    with MemoryStore(store_file) as store:
        store.export_jsonl(export)
    lines = [json.loads(line) for line in export.read_text().splitlines()]
    deep: object = 1
    for _ in range(MAX_JSON_DEPTH + 5):
        deep = [deep]
    for rec in lines:
        if rec.get("type") == "chunk":
            rec["meta"] = {"a": deep}
    export.write_text("".join(json.dumps(r) + "\n" for r in lines))
    target = tmp_path / "fresh.db"
    with pytest.raises(StoreError, match="meta"):
        with MemoryStore(target) as store:
            store.import_jsonl(export)
    with MemoryStore(target) as store:
        assert not store.search("access code")


def test_a_meta_too_deep_for_python_reads_as_no_meta(store_file: Path, tmp_path: Path) -> None:
    """It opens a store whose meta is valid JSON 1,900 deep, and search and export read that meta as none (no RecursionError)."""
    conn = sqlite3.connect(store_file)
    conn.execute("UPDATE chunks SET meta = ?", ('{"a": ' + "[" * 1900 + "]" * 1900 + "}",))
    conn.commit()
    conn.close()
    with MemoryStore(store_file) as store:
        assert store.search("access code")
        store.export_jsonl(tmp_path / "out.jsonl")
    assert '"meta": null' in (tmp_path / "out.jsonl").read_text()


def test_opening_a_store_with_long_keyed_meta_is_linear(store_file: Path) -> None:
    """It opens a store whose 280 KB meta nests 60 levels of 4 KB keys over 20,000 items quickly (a json_tree depth check took 34 s a row)."""
    meta = "[" + ",".join(["0"] * 20000) + "]"
    for _ in range(60):
        meta = '{"' + "k" * 4000 + '": ' + meta + "}"
    conn = sqlite3.connect(store_file)
    conn.execute("UPDATE chunks SET meta = ?", (meta,))
    conn.commit()
    conn.close()
    code = ("import sys; from rlm_runtime.memory.store import MemoryStore\n"
            f"with MemoryStore({str(store_file)!r}) as s: s.search('access code')\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=20, env={**os.environ})
