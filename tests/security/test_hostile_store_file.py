"""A memory store file from elsewhere is hostile: SQLite triggers, views or tables it carries
would run inside the host on the first search. Such a file is refused at open, before anything
runs in it, and no statement on a store's connection runs unbounded."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _timing import SLACK_S

from rlm_runtime.memory import MemoryStore, NotAMemoryStore
from rlm_runtime.memory.db import Database

#: An endless recursive query (it counts, so it holds no memory and writes nothing).
ENDLESS = "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT count(*) FROM r"

# What a hostile file adds to a real store, by name: a canary table and an object using it.
PLANTS = {
    "a trigger writing a canary row on the first search":
        "CREATE TRIGGER watch AFTER INSERT ON recall_traces BEGIN INSERT INTO canary VALUES ('ran'); END",
    "a trigger running an endless query on the first search":
        f"CREATE TRIGGER spin AFTER INSERT ON recall_traces BEGIN INSERT INTO canary {ENDLESS}; END",
    "a trigger on the chunks table":
        "CREATE TRIGGER on_add AFTER INSERT ON chunks BEGIN INSERT INTO canary VALUES ('ran'); END",
    "a view running an endless query": f"CREATE VIEW spin_view AS {ENDLESS}",
}

_CHILD = """
import sys
from rlm_runtime.memory import MemoryStore, NotAMemoryStore
try:
    store = MemoryStore(sys.argv[1], readonly=sys.argv[2] == "ro")
    store.search("river lantern")
    store.add_text("a later note about the river")
except NotAMemoryStore as e:
    print("refused:", e)
"""


def real_store(path: Path) -> Path:
    with MemoryStore(path) as store:
        store.add_text("The river passes the old lantern works. The copper harbour is north of it.")
    return path


def plant(path: Path, sql: str) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE canary (note)")
    conn.execute(sql)
    conn.commit()
    conn.close()


def canary_rows(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT count(*) FROM canary").fetchone()[0])
    finally:
        conn.close()


@pytest.mark.parametrize("readonly", [False, True], ids=["read-write", "read-only"])
@pytest.mark.parametrize("what", list(PLANTS))
def test_store_with_foreign_schema_objects_is_refused(tmp_path: Path, what: str, readonly: bool) -> None:
    """It refuses a store carrying a trigger or view of its own, in bounded time, and the canary is never written."""
    path = real_store(tmp_path / "memory.db")
    plant(path, PLANTS[what])
    try:
        done = subprocess.run([sys.executable, "-c", _CHILD, str(path), "ro" if readonly else "rw"],
                              capture_output=True, text=True, timeout=20 + SLACK_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"opening and searching a store with {what} did not end in {20 + SLACK_S:.0f} s")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused:" in done.stdout and "schema objects the memory store does not make" in done.stdout, done.stdout
    assert "Traceback" not in done.stderr
    assert canary_rows(path) == 0


def test_an_extra_table_or_an_edited_trigger_is_refused(tmp_path: Path) -> None:
    """It refuses a store with a table of its own, or with one of the store's triggers rewritten."""
    extra = real_store(tmp_path / "extra.db")
    conn = sqlite3.connect(extra)
    conn.execute("CREATE TABLE stash (secret TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(NotAMemoryStore, match="table stash"):
        MemoryStore(extra)

    edited = real_store(tmp_path / "edited.db")
    conn = sqlite3.connect(edited)
    conn.execute("DROP TRIGGER chunks_fts_delete")
    conn.execute("CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN SELECT 1; END")
    conn.commit()
    conn.close()
    with pytest.raises(NotAMemoryStore, match="trigger chunks_fts_delete"):
        MemoryStore(edited)


def test_a_real_store_still_opens(tmp_path: Path) -> None:
    """It opens a store this code made, after optimize() added SQLite's statistics table."""
    path = real_store(tmp_path / "memory.db")
    with MemoryStore(path) as store:
        store.optimize()
    with MemoryStore(path, readonly=True) as store:
        assert store.search("lantern")


def test_no_statement_runs_past_the_time_limit(tmp_path: Path) -> None:
    """It interrupts an endless statement on a store's connection at the statement time limit."""
    path = real_store(tmp_path / "memory.db")
    db = Database(path, statement_timeout_s=1.0)
    try:
        began = time.monotonic()
        with pytest.raises(sqlite3.OperationalError, match="interrupt"):
            db.conn.execute(ENDLESS).fetchone()
        assert time.monotonic() - began < 1.0 + SLACK_S
        assert db.conn.execute("SELECT count(*) FROM chunks").fetchone()[0] >= 1  # the connection goes on
    finally:
        db.close()
