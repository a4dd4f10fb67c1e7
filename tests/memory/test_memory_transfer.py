"""Export and import as JSON lines: a round trip reproduces the store; import merges into a store with content."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import paragraphs, small_chunks

from rlm_runtime.memory import MemoryStore, StoreError


def records(st: MemoryStore) -> list[dict[str, object]]:
    buf = io.StringIO()
    st.export_jsonl(buf)
    return [r for r in map(json.loads, buf.getvalue().splitlines()) if r["type"] != "header"]


@pytest.fixture
def full(open_store: Callable[..., MemoryStore], write: Callable[..., Path]) -> MemoryStore:
    st = open_store(small_chunks())
    st.ingest(write("a.csv", "name,weight\n" + "".join(f"tapir{i},{300 + i}\n" for i in range(40))), tags=["zoo"])
    st.ingest(write("b.txt", paragraphs("lynx", 4)))
    st.remember("which lynx?", "the Iberian lynx", run_id="r1", read_chunk_ids=[1, 2], cells=["x = 1"])
    st.add_text("pinned note", pinned=True, ttl_s=100)
    st.search("lynx1word0")
    st.link(1, 3, "supports", 0.7)
    st.forget(2)
    return st


def test_round_trip_reproduces_the_store(full: MemoryStore, open_store: Callable[..., MemoryStore], tmp_path: Path) -> None:
    """It imports an export into an empty store with the same ids, chunks, links, stats and traces."""
    path = tmp_path / "export.jsonl"
    n = full.export_jsonl(path)
    assert n == len(path.read_text().splitlines())
    copy = open_store(small_chunks(), path=tmp_path / "copy.db")
    counts = copy.import_jsonl(path)
    assert counts["chunk"] == full.stats().chunks and counts["merged"] == 0
    assert records(copy) == records(full)
    assert copy.integrity_check() == []
    assert copy.search("lynx1word0", record=False)[0].chunk_id == full.search("lynx1word0", record=False)[0].chunk_id
    assert copy.add_text("after import")[0] > max(r["id"] for r in records(full) if r["type"] == "chunk")  # type: ignore[type-var]


def test_import_merges_into_a_store_with_content(full: MemoryStore, open_store: Callable[..., MemoryStore], tmp_path: Path) -> None:
    """It maps sources and already-stored texts onto what the target holds and adds the rest with new ids."""
    path = tmp_path / "export.jsonl"
    full.export_jsonl(path)
    target = open_store(small_chunks(), path=tmp_path / "target.db")
    target.add_text("pinned note", pinned=True)  # the same text in the same memory source
    target.add_text("an unrelated memory", source="other")
    counts = target.import_jsonl(path)
    assert counts["merged"] == 1
    assert target.stats().chunks == full.stats().chunks + 1
    assert len(target.search("pinned note", record=False, mode="bm25")) == 1
    assert target.stats().links_by_type == full.stats().links_by_type
    assert target.integrity_check() == []


def test_import_rejects_other_files(store: MemoryStore, tmp_path: Path) -> None:
    """It refuses a file that is not an export, or a line that is not a valid record."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "chunk"}\n')
    with pytest.raises(StoreError, match="header"):
        store.import_jsonl(bad)
    bad.write_text('{"type": "header", "format": "rlm-memory", "version": 1}\n{"type": "weird"}\n')
    with pytest.raises(StoreError, match="line 2: unknown record type"):
        store.import_jsonl(bad)
    bad.write_text('{"type": "header", "format": "rlm-memory", "version": 1}\nnot json\n')
    with pytest.raises(StoreError, match="line 2 is not JSON"):
        store.import_jsonl(bad)
