"""An import is all or nothing: a bad line anywhere leaves the store exactly as it was."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from rlm_runtime.memory import MemoryStore, StoreError


def tables_digest(path: Path) -> list[tuple[str, int]]:
    conn = sqlite3.connect(path)
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '%fts%'")]
        return [(n, conn.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0]) for n in sorted(names)]
    finally:
        conn.close()


def an_export(tmp_path: Path, chunks: int) -> list[str]:
    with MemoryStore(tmp_path / "source.db") as store:
        for n in range(chunks):
            store.add_text(f"Fact number {n}: the widget {n} weighs {n * 3} grams.", source=f"note-{n}")
        store.export_jsonl(tmp_path / "export.jsonl")
    return (tmp_path / "export.jsonl").read_text().splitlines()


@pytest.mark.parametrize("into", ["empty", "filled"])
def test_a_bad_line_after_many_good_ones_imports_nothing(tmp_path: Path, into: str) -> None:
    """It rolls back every record, those of earlier batches too, and names the bad line."""
    lines = an_export(tmp_path, 1200)  # more records than one batch of the importer
    bad_at = len(lines) - 5
    lines[bad_at] = "{not json"
    (tmp_path / "bad.jsonl").write_text("\n".join(lines) + "\n")
    target = tmp_path / "target.db"
    with MemoryStore(target) as store:
        if into == "filled":
            store.add_text("kept from before", source="mine")
    before = tables_digest(target)
    with MemoryStore(target) as store, pytest.raises(StoreError, match=f"line {bad_at + 1} is not JSON.*nothing was imported"):
        store.import_jsonl(tmp_path / "bad.jsonl")
    assert tables_digest(target) == before
    with MemoryStore(target) as store:
        assert [h.text for h in store.search("widget", record=False, mode="bm25")] == []


def test_a_record_with_a_wrong_field_imports_nothing(tmp_path: Path) -> None:
    """It refuses a record with a field of the wrong type, by line, and keeps the store as it was."""
    lines = an_export(tmp_path, 20)
    for n, line in enumerate(lines):
        rec = json.loads(line)
        if rec.get("type") == "chunk":
            rec.pop("text", None)
            lines[n] = json.dumps(rec)
            bad = n + 1
            break
    (tmp_path / "bad.jsonl").write_text("\n".join(lines) + "\n")
    with MemoryStore(tmp_path / "t.db") as store:
        with pytest.raises(StoreError, match=f"line {bad}"):
            store.import_jsonl(tmp_path / "bad.jsonl")
        assert store.stats().chunks == 0


def test_a_good_export_still_imports_whole(tmp_path: Path) -> None:
    """It imports a valid export completely (the round trip is unchanged)."""
    an_export(tmp_path, 1200)
    with MemoryStore(tmp_path / "t.db") as store:
        counts = store.import_jsonl(tmp_path / "export.jsonl")
        assert counts["chunk"] == 1200 and store.stats().chunks == 1200
