"""A file that is not a memory store is refused before anything writes to it, and left as it was."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from rlm_runtime.memory import MemoryStore, NotAMemoryStore


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def siblings(path: Path) -> set[str]:
    return {p.name for p in path.parent.iterdir()}


def other_programs_db(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO users (name) VALUES ('ada')")
    conn.commit()
    conn.close()
    return path


@pytest.mark.parametrize("readonly", [False, True])
def test_another_programs_sqlite_database_is_refused_and_unchanged(tmp_path: Path, readonly: bool) -> None:
    """It refuses someone else's SQLite file, for writing and for reading, byte for byte untouched."""
    path = other_programs_db(tmp_path / "app.db")
    before, files = digest(path), siblings(path)
    with pytest.raises(NotAMemoryStore, match="something else .*users.*left unchanged"):
        MemoryStore(path, readonly=readonly)
    assert digest(path) == before
    assert siblings(path) == files  # no -wal or -shm left behind


@pytest.mark.parametrize("content", [b"just some notes\n" * 50, bytes(range(256)) * 40])
def test_a_file_that_is_not_sqlite_is_refused_and_unchanged(tmp_path: Path, content: bytes) -> None:
    """It refuses a text or binary file that is not a database, unchanged."""
    path = tmp_path / "notes.db"
    path.write_bytes(content)
    with pytest.raises(NotAMemoryStore, match="is not a memory store"):
        MemoryStore(path)
    assert path.read_bytes() == content


def test_an_empty_file_and_a_missing_one_are_new_stores(tmp_path: Path) -> None:
    """It makes a store in an empty file and at a path that does not exist yet, and reopens both."""
    empty = tmp_path / "empty.db"
    empty.touch()
    for path in (empty, tmp_path / "new" / "memory.db"):
        with MemoryStore(path) as store:
            store.add_text("a fact worth keeping", source="note")
        with MemoryStore(path) as store:
            assert store.stats().chunks == 1
