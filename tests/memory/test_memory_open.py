"""Opening a store: where it lives, WAL, the FTS5 check, files that are not stores, read-only."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from rlm_runtime.config import Paths
from rlm_runtime.errors import RLMError
from rlm_runtime.memory import MemoryStore, StoreError, default_store_path
from rlm_runtime.memory import db as memdb


def test_default_path_is_under_rlm_home(_rlm_home: Path) -> None:
    """It puts the store at $RLM_HOME/brain/memory.db by default."""
    assert default_store_path() == _rlm_home / "brain" / "memory.db"
    assert default_store_path(Paths(home=Path("/x"))) == Path("/x/brain/memory.db")


def test_opens_with_default_path(_rlm_home: Path) -> None:
    """It creates the store and its folder at the default path."""
    with MemoryStore() as st:
        assert st.path == _rlm_home / "brain" / "memory.db"
    assert (_rlm_home / "brain" / "memory.db").exists()


def test_uses_wal_and_foreign_keys(store: MemoryStore) -> None:
    """It opens the file in WAL mode with foreign keys on and a busy timeout."""
    conn = store.db.conn
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 10_000


def test_reports_missing_fts5(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """It refuses a SQLite without FTS5 with a message that says what to do."""
    monkeypatch.setattr(memdb, "fts5_features", lambda conn: {"fts5": False, "trigram": False})
    with pytest.raises(StoreError, match="no FTS5.*sqlite3 module is built with FTS5"):
        MemoryStore(tmp_path / "m.db")


def test_this_sqlite_has_fts5_and_trigram(store: MemoryStore) -> None:
    """It finds FTS5 (porter, unicode61) and the trigram tokenizer in this Python's SQLite."""
    assert memdb.fts5_features(store.db.conn) == {"fts5": True, "trigram": True}


def test_rejects_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    """It raises StoreError (an RLMError) for a file that is not SQLite."""
    path = tmp_path / "notes.db"
    path.write_text("just some text, not a database\n" * 100)
    with pytest.raises(StoreError) as info:
        MemoryStore(path)
    assert isinstance(info.value, RLMError)
    assert path.read_text().startswith("just some text")


def test_readonly_store_reads_but_never_writes(open_store: Callable[..., MemoryStore], store_path: Path) -> None:
    """It searches a read-only store without recording and refuses writes."""
    with open_store() as st:
        st.add_text("the okapi is a forest giraffe", source="zoo")
    ro = open_store(readonly=True)
    assert [h.source for h in ro.search("okapi")] == ["zoo"]
    with pytest.raises(StoreError, match="read-only"):
        ro.add_text("more")
    assert ro.chunk_stats(1).recall_count == 0


def test_readonly_needs_an_existing_store(tmp_path: Path) -> None:
    """It does not create a store when asked to open one read-only."""
    with pytest.raises(StoreError, match="no memory store"):
        MemoryStore(tmp_path / "none.db", readonly=True)
    assert not (tmp_path / "none.db").exists()
