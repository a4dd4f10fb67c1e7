"""Curation of the store: the trash (forget, restore, purge) left out by every reader, list, and
the soft-delete migration on a store made before it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Clock, TinyEmbedder

from rlm_runtime.memory import ChunkNotFound, MemoryStore
from rlm_runtime.memory.curation import ListFilter
from rlm_runtime.memory.db import Database
from rlm_runtime.memory.migrations import MIGRATIONS, migrate

Open = Callable[..., MemoryStore]
#: A store as m001-m006 left it: what the later migrations added, taken away.
BEFORE_M007 = """DROP INDEX chunks_text_key; ALTER TABLE chunks DROP COLUMN text_key;
                 DROP INDEX chunks_deleted; ALTER TABLE chunks DROP COLUMN deleted_at;
                 DELETE FROM _migrations WHERE name IN ('m007_soft_delete', 'm008_text_keys');"""


def _three(st: MemoryStore) -> list[int]:
    ids = st.add_text("The axolotl regrows its limbs in the pond.", source="notes", tags=["zoo"])
    ids += st.add_text("The pangolin rolls into a ball when the axolotl visits.", source="notes", tags=["zoo"])
    ids += st.add_text("A teapot holds the Earl Grey.", source="kitchen", kind="fact")
    return ids


def test_a_forgotten_chunk_leaves_every_reader(open_store: Open, tiny: TinyEmbedder) -> None:
    """It leaves a chunk in the trash out of search by words and by meaning, recall, read, links and stats, until restored."""
    st = open_store(embedder=lambda: tiny)
    a, b, _ = _three(st)
    st.link(a, b, "supports")
    assert {h.chunk_id for h in st.search("axolotl", record=False, mode="bm25")} == {a, b}
    assert st.forget(a).done == (a,)
    assert [h.chunk_id for h in st.search("axolotl", record=False, mode="bm25")] == [b]
    assert a not in [h.chunk_id for h in st.search("axolotl limbs", record=False, mode="vector")]
    assert a not in [h.chunk_id for h in st.search("axolotl limbs", record=False, mode="hybrid")]
    assert a not in [h.chunk_id for h in st.recall("axolotl", record=False)]
    assert a not in [h.chunk_id for h in st.recall(seeds=[b], record=False)]
    assert a not in [h.chunk_id for h in st.recall(record=False)]
    assert st.read_many([a, b], record=False)[0].chunk_id == b
    assert all(a not in (lk.src, lk.dst) for lk in st.links(b))
    stats = st.stats()
    assert (stats.chunks, stats.deleted, stats.vectors) == (2, 1, 2)
    assert st.restore([a, 999]).to_dict() == {"done": [a], "missing": [999]}
    assert {h.chunk_id for h in st.search("axolotl", record=False, mode="bm25")} == {a, b}
    assert any(lk.type == "supports" for lk in st.links(b)) and st.stats().deleted == 0


def test_read_of_a_forgotten_chunk_is_not_found(store: MemoryStore) -> None:
    """It answers a read of a chunk in the trash as of no chunk, and skips it among a chunk's neighbours."""
    ids = store.add_text("first note.\n\n" + "second note " * 200 + "\n\n" + "third note " * 200, source="notes")
    assert len(ids) >= 2
    store.forget(ids[0])
    with pytest.raises(ChunkNotFound):
        store.read(ids[0], record=False)
    assert ids[0] not in [v.chunk_id for v in store.read(ids[1], around=3, record=False).before]


def test_purge_deletes_the_trash_for_good_by_age(store: MemoryStore, clock: Clock) -> None:
    """It purges only chunks forgotten long enough ago, says what a dry run would take, and a purged chunk cannot be restored."""
    a, b, c = _three(store)
    store.forget([a])
    clock.advance(3 * 86400)
    store.forget([b])
    assert store.purge(86400, dry_run=True) == [a] and store.stats().deleted == 2
    assert store.purge(86400) == [a]
    assert store.restore([a]).missing == (a,)
    assert store.purge() == [b] and store.stats().deleted == 0 and store.stats().chunks == 1
    assert store.integrity_check() == []


def test_export_leaves_the_trash_out_and_round_trips(open_store: Open, tmp_path: Path) -> None:
    """It exports no chunk of the trash, nor its links, and the export imports into an equal store."""
    st = open_store()
    a, b, c = _three(st)
    st.link(a, c, "supports")
    st.search("axolotl")  # a trace holding a and b
    st.forget(a)
    path = tmp_path / "out.jsonl"
    st.export_jsonl(path)
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    assert a not in [r["id"] for r in recs if r["type"] == "chunk"]
    assert all(a not in (r["src"], r["dst"]) for r in recs if r["type"] == "link")
    assert all(a not in [x[1] for x in r["chunks"]] for r in recs if r["type"] == "trace")
    copy = open_store(path=tmp_path / "copy.db")
    copy.import_jsonl(path)
    assert copy.stats().chunks == st.stats().chunks == 2
    assert copy.stats().links_by_type == st.stats().links_by_type


def test_list_filters_newest_first(store: MemoryStore, clock: Clock) -> None:
    """It lists chunks newest first, by tag, kind, date, tier, pin, and the trash apart."""
    a, b, c = _three(store)
    clock.advance(86400)
    [d] = store.add_text("A later note on the axolotl.", tags=["zoo", "late"])
    ids = lambda **kw: [x.chunk_id for x in store.list_chunks(ListFilter(**kw), limit=10)]  # noqa: E731
    assert ids() == [d, c, b, a]
    assert ids(tags=("zoo",)) == [d, b, a] and ids(tags=("zoo", "late")) == [d]
    assert ids(kinds=("fact",)) == [c]
    assert ids(since=clock() - 10) == [d] and ids(until=clock() - 10) == [c, b, a]
    store.pin([b])
    assert ids(pinned=True) == [b] and ids(tier="long_term") == []
    store.forget([c])
    assert ids() == [d, b, a] and ids(deleted=True) == [c]
    assert [x.chunk_id for x in store.list_chunks(limit=2)] == [d, b]


def test_the_soft_delete_migration_opens_an_old_store(tmp_path: Path, clock: Clock) -> None:
    """It brings a store made before the trash, with its chunks, to the current schema: all live, forgettable and restorable."""
    path = tmp_path / "old.db"
    with MemoryStore(path, clock=clock, embedder=None) as st:
        ids = st.add_text("The capybara chairs the meeting of the rodents.", source="notes")
    db = Database(path)
    db.conn.executescript(BEFORE_M007)
    assert "deleted_at" not in [r[1] for r in db.conn.execute("PRAGMA table_info(chunks)")]
    db.close()
    with MemoryStore(path, clock=clock, embedder=None, readonly=True) as ro:  # read-only: reads as a store with an empty trash
        assert [h.chunk_id for h in ro.search("capybara", record=False)] == ids
        assert ro.stats().deleted == 0 and ro.read(ids[0], record=False).chunk_id == ids[0]
        assert [c.chunk_id for c in ro.list_chunks()] == ids and ro.list_chunks(ListFilter(deleted=True)) == []
        assert ro.recall("capybara", record=False)[0].chunk_id == ids[0]
    with MemoryStore(path, clock=clock, embedder=None) as st:
        assert "m007_soft_delete" in st.stats().migrations
        assert [h.chunk_id for h in st.search("capybara", record=False)] == ids
        assert st.forget(ids) and st.search("capybara", record=False) == [] and st.restore(ids)
        assert st.integrity_check() == []


def test_the_soft_delete_migration_is_last_and_applies_to_an_empty_store(tmp_path: Path) -> None:
    """It adds the trash's column and index to an empty database by a named migration of its own."""
    db = Database(tmp_path / "e.db")
    try:
        assert "m007_soft_delete" in migrate(db.conn) and "m007_soft_delete" in [m.__name__ for m in MIGRATIONS]
        assert "deleted_at" in [r[1] for r in db.conn.execute("PRAGMA table_info(chunks)")]
    finally:
        db.close()


def test_identical_notes_are_stored_once_anywhere_in_memory(store: MemoryStore) -> None:
    """It stores a note whose text, whitespace aside, a live note of any memory source holds as that chunk, adding its tags and pin."""
    [a] = store.add_text("Buy oat milk on Friday.", source="notes", tags=["shop"])
    added = store.store_text("  Buy oat   milk\non Friday. ", source="errands", tags=["week"], pinned=True)
    assert added.to_dict() == {"ids": [a], "new": []}
    view = store.read(a, record=False)
    assert view.tags == ("shop", "week") and store.chunk_stats(a).pinned
    assert store.stats().chunks == 1 and store.stats().sources == 1  # no empty "errands" source
    assert store.store_text("buy oat milk on friday.").new != ()  # case is text: another note
    store.forget(a)
    assert store.store_text("Buy oat milk on Friday.").new != ()  # the trash does not count


def test_file_chunks_and_a_context_index_are_never_deduplicated(store: MemoryStore, write: Callable[..., Path]) -> None:
    """It keeps a note equal to a file's chunk as a note of its own, and with dedup=False stores a repeated paragraph twice."""
    store.ingest(write("f.txt", "The river floods in spring."))
    assert store.store_text("The river floods in spring.").new != ()
    ids = store.add_text("Same paragraph.\n\nSame paragraph.", source="ctx", dedup=False)
    again = store.add_text("Other paragraph.\n\nOther paragraph.", source="notes2")
    assert len(set(ids)) == len(ids) and len(set(again)) == 1


def test_the_text_key_migration_keys_old_notes(tmp_path: Path, clock: Clock) -> None:
    """It gives the notes of a store made before text keys their keys, so a note added after is not stored twice."""
    path = tmp_path / "old.db"
    with MemoryStore(path, clock=clock, embedder=None) as st:
        [a] = st.add_text("The lighthouse keeper retires in May.")
    db = Database(path)
    db.conn.executescript("DROP INDEX chunks_text_key; ALTER TABLE chunks DROP COLUMN text_key; "
                          "DELETE FROM _migrations WHERE name = 'm008_text_keys';")
    db.close()
    with MemoryStore(path, clock=clock, embedder=None) as st:
        assert st.add_text("The lighthouse keeper  retires in May.") == [a] and st.stats().chunks == 1


def test_an_imported_note_is_not_stored_twice(open_store: Open, tmp_path: Path) -> None:
    """It keys the notes an import brings, so adding the same text after is not a second chunk."""
    src = open_store(path=tmp_path / "src.db")
    src.add_text("Passport renewal is due in March.")
    src.export_jsonl(tmp_path / "x.jsonl")
    dst = open_store(path=tmp_path / "dst.db")
    dst.add_text("an unrelated note")
    dst.import_jsonl(tmp_path / "x.jsonl")
    n = dst.stats().chunks
    assert dst.store_text("Passport renewal is due in March.").new == () and dst.stats().chunks == n
