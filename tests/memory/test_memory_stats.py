"""The store as a whole: stats, forgetting a chunk or a source, pins and expiry, integrity."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from conftest import paragraphs, small_chunks

from rlm_runtime.memory import MemoryStore


def test_stats_describe_the_store(open_store: Callable[..., MemoryStore], write: Callable[..., Path]) -> None:
    """It counts chunks, sources, tokens, links by type, tiers, pins, traces and bytes on disk."""
    st = open_store(small_chunks())
    st.ingest(write("a.txt", paragraphs("newt", 4)))
    st.add_text("a pinned newt fact", pinned=True)
    st.search("newt0word0")
    s = st.stats()
    assert s.chunks == st.db.conn.execute("SELECT count(*) FROM chunks").fetchone()[0] and s.sources == 2
    assert s.tokens > 0 and s.links_by_type["follows"] >= 3 and s.tiers == {"working": s.chunks}
    assert s.pinned == 1 and s.traces == 1 and s.size_bytes > 10_000 and len(s.migrations) >= 5
    assert s.to_dict()["links_by_type"] == s.links_by_type


def test_forget_source_removes_a_file_or_a_memory_source(open_store: Callable[..., MemoryStore], write: Callable[..., Path]) -> None:
    """It deletes every chunk of a file (by path) or of a memory source (by label), and says how many."""
    st = open_store(small_chunks())
    path = write("a.txt", paragraphs("toad", 4))
    st.ingest(path)
    n = st.stats().chunks
    st.add_text("frog notes", source="notes")
    assert st.forget_source(path) == n
    assert st.forget_source("notes") == 1 and st.forget_source("notes") == 0
    assert st.stats().chunks == 0 and st.stats().sources == 0 and st.integrity_check() == []
    assert st.ingest(path).files == 1  # forgotten: ingested again in full


def test_forgetting_the_last_memory_drops_its_source(store: MemoryStore) -> None:
    """It removes a memory source whose last chunk is forgotten and purged."""
    [cid] = store.add_text("a lone salamander", source="lonely")
    assert store.forget(cid) and store.stats().sources == 1
    assert store.purge() == [cid] and store.stats().sources == 0


def test_pin_and_expire(store: MemoryStore) -> None:
    """It pins, unpins and sets expiry of live chunks, and names the ids it could not change."""
    [cid] = store.add_text("the olm lives in caves")
    assert store.pin([cid, 999, cid]).to_dict() == {"done": [cid], "missing": [999]} and store.chunk_stats(cid).pinned
    assert store.expire([cid], 123.0).done == (cid,) and store.chunk_stats(cid).expires_at == 123.0
    assert store.expire([cid], None).done == (cid,) and store.chunk_stats(cid).expires_at is None
    assert store.pin([cid], False).done == (cid,) and not store.chunk_stats(cid).pinned
    store.forget(cid)
    assert store.pin([cid]).missing == (cid,) and not store.chunk_stats(cid).pinned


def test_optimize_keeps_search_working(store: MemoryStore) -> None:
    """It merges the index without changing results."""
    for i in range(20):
        store.add_text(f"caecilian burrow {i}")
    before = [h.chunk_id for h in store.search("caecilian", k=20, record=False)]
    store.optimize()
    assert [h.chunk_id for h in store.search("caecilian", k=20, record=False)] == before
    assert store.integrity_check() == []
