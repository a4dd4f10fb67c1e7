"""Editing a chunk in place (``MemoryStore.edit``, ``edits.py``): the id, links, statistics and
recall history stay, the state before is kept as a version, and the new text is indexed again."""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Clock, TinyEmbedder

from rlm_runtime.memory import ChunkNotFound, IngestConfig, MemorySettings, MemoryStore, NotAMemoryStore, StoreError
from rlm_runtime.memory.edits import MAX_VERSIONS, Edit

Open = Callable[..., MemoryStore]


def test_an_edit_keeps_id_links_and_recalls_and_the_version_before(store: MemoryStore, clock: Clock) -> None:
    """It changes a note's text, kind and tags in place: the id, a person's link and the recall count stay, and history holds the old state."""
    [a] = store.add_text("We decided to run billing on Postgres.", tags=["decision", "db"])
    [b] = store.add_text("The deploy window is Tuesday night.")
    store.link(a, b, "supports")
    store.recall("billing Postgres")
    recalls = store.chunk_stats(a).recall_count
    assert recalls >= 1
    clock.advance(60)
    done = store.edit(a, Edit(text="We decided to run billing on SQLite instead.", kind="decision",
                              add_tags=("sqlite",), remove_tags=("db",)))
    assert done.changed == ("text", "tags") and done.kept_version == 1
    view = store.read(a, record=False)
    assert view.chunk_id == a and view.text == "We decided to run billing on SQLite instead."
    assert view.tags == ("decision", "sqlite")
    assert any(link.type == "supports" and {link.src, link.dst} == {a, b} for link in store.links(a))
    assert store.chunk_stats(a).recall_count == recalls
    old, now = store.history(a)
    assert (old.version, old.text, old.tags, old.replaced) == (1, "We decided to run billing on Postgres.", ("db", "decision"), clock())
    assert (now.version, now.text, now.replaced, now.since) == (2, view.text, None, clock())


def test_the_new_text_is_searched_and_the_old_is_not(store: MemoryStore) -> None:
    """It indexes the new text again: a word only the new text holds finds the chunk, a word only the old one held does not."""
    [a] = store.add_text("The quarterly report goes to Marguerite.")
    store.edit(a, Edit(text="The quarterly report goes to Bartholomew."))
    assert [h.chunk_id for h in store.search("Bartholomew", mode="bm25")] == [a]
    assert list(store.search("Marguerite", mode="bm25")) == []
    with sqlite3.connect(store.path) as conn:
        terms = {t for (t,) in conn.execute("SELECT term FROM chunk_terms WHERE chunk_id = ?", (a,))}
    assert "bartholomew" in terms and "marguerite" not in terms


def test_the_fast_vector_is_made_again_from_the_new_text(open_store: Open, tiny: TinyEmbedder) -> None:
    """It re-embeds an edited note: a search by meaning finds it by its new subject and no longer by its old one."""
    st = open_store(embedder=lambda: tiny)
    [a] = st.add_text("The tabby naps by the window.")
    [b] = st.add_text("Parking is reserved for staff.")
    before = {h.chunk_id: h.score for h in st.search("kitten", mode="vector", k=2)}
    assert before[a] > 0.3 > before[b]
    st.edit(a, Edit(text="Refunds are paid within thirty days."))
    assert st.search("reimbursement", mode="vector", k=1)[0].chunk_id == a
    after = {h.chunk_id: h.score for h in st.search("kitten", mode="vector", k=2)}
    assert after[a] < 0.1


def test_summary_and_confidence_show_in_search_and_read(store: MemoryStore) -> None:
    """It keeps a summary and a confidence beside the text, carried by search hits and reads, and clears them with None."""
    [a] = store.add_text("Ops rotates the deploy key every Monday.")
    store.edit(a, Edit(summary="  deploy key:\n rotated Mondays ", confidence=0.75))
    hit = store.search("deploy key", mode="bm25")[0]
    assert (hit.summary, hit.confidence) == ("deploy key: rotated Mondays", 0.75)
    assert store.read(a, record=False).confidence == 0.75
    store.edit(a, Edit(summary=None, confidence=None))
    view = store.read(a, record=False)
    assert (view.summary, view.confidence) == (None, None)
    assert [v.confidence for v in store.history(a)] == [None, 0.75, None]


def test_an_edit_that_changes_nothing_keeps_no_version(store: MemoryStore) -> None:
    """It keeps no version when the chunk already holds everything the edit says."""
    [a] = store.add_text("A note.", tags=["x"])
    done = store.edit(a, Edit(text="A note.", add_tags=("x",)))
    assert done.changed == () and len(store.history(a)) == 1


@pytest.mark.parametrize("edit, message", [
    (Edit(text="   "), "cannot be empty"),
    (Edit(kind=""), "kind cannot be empty"),
    (Edit(confidence=1.5), "from 0 to 1"),
    (Edit(confidence=float("nan")), "from 0 to 1"),
    (Edit(confidence=True), "from 0 to 1"),
    (Edit(summary="x" * 2001), "at most"),
    (Edit(add_tags=("a",), remove_tags=("a",)), "added and removed"),
])
def test_bad_values_are_refused_and_nothing_changes(store: MemoryStore, edit: Edit, message: str) -> None:
    """It refuses an empty text or kind, a confidence outside [0, 1], an overlong summary, a tag added and removed, changing nothing."""
    [a] = store.add_text("Keep me as I am.")
    with pytest.raises(StoreError, match=message):
        store.edit(a, edit)
    assert store.read(a, record=False).text == "Keep me as I am." and len(store.history(a)) == 1


def test_a_file_chunk_keeps_its_text_but_takes_tags(store: MemoryStore, write: Callable[[str, str], Path]) -> None:
    """It refuses to change the text of a file's chunk (the file would put it back) and says how; its tags and summary change."""
    path = write("plan.md", "The launch is planned for March.\n")
    store.ingest([path])
    [hit] = store.search("launch", mode="bm25")
    with pytest.raises(StoreError, match="part of the file .*rlm memory add"):
        store.edit(hit.chunk_id, Edit(text="The launch is planned for May."))
    store.edit(hit.chunk_id, Edit(add_tags=("launch",), summary="March launch"))
    view = store.read(hit.chunk_id, record=False)
    assert view.text.startswith("The launch is planned for March.") and view.tags == ("launch",)


def test_a_text_longer_than_one_chunk_is_refused(open_store: Open) -> None:
    """It refuses a new text the store would cut into several chunks, naming the limit."""
    st = open_store(MemorySettings(ingest=IngestConfig(min_tokens=5, max_tokens=20)))
    [a] = st.add_text("Short note.")
    with pytest.raises(StoreError, match="chunks long"):
        st.edit(a, Edit(text=" ".join(f"word{i}." for i in range(200))))
    assert st.read(a, record=False).text == "Short note."


def test_unknown_and_forgotten_chunks_are_not_edited(store: MemoryStore) -> None:
    """It raises ChunkNotFound for an id never stored and for a chunk in the trash."""
    [a] = store.add_text("Soon forgotten.")
    store.forget(a)
    for chunk_id in (a, 999):
        with pytest.raises(ChunkNotFound):
            store.edit(chunk_id, Edit(kind="fact"))
        with pytest.raises(ChunkNotFound):
            store.history(chunk_id)


def test_versions_are_bounded(store: MemoryStore) -> None:
    """It keeps at most MAX_VERSIONS earlier versions of a chunk edited in a loop."""
    [a] = store.add_text("v0")
    for i in range(MAX_VERSIONS + 5):
        store.edit(a, Edit(text=f"v{i + 1}"))
    versions = store.history(a)
    assert len(versions) == MAX_VERSIONS + 1
    assert versions[0].text == "v5" and versions[-1].text == f"v{MAX_VERSIONS + 5}"


def test_export_and_import_carry_versions_summary_and_confidence(open_store: Open, tmp_path: Path) -> None:
    """It exports an edited chunk with its summary, confidence and earlier versions, and an import into a new store keeps them."""
    st = open_store()
    [a] = st.add_text("First thought.")
    st.edit(a, Edit(text="Second thought.", summary="changed my mind", confidence=0.4))
    buf = io.StringIO()
    st.export_jsonl(buf)
    other = open_store(path=tmp_path / "other.db")
    buf.seek(0)
    other.import_jsonl(buf)
    assert [v.text for v in other.history(a)] == ["First thought.", "Second thought."]
    assert (other.read(a, record=False).summary, other.read(a, record=False).confidence) == ("changed my mind", 0.4)


def test_an_import_with_a_bad_confidence_or_version_is_refused(open_store: Open, tmp_path: Path) -> None:
    """It refuses an export line whose confidence is out of range or whose versions are not versions, importing nothing."""
    st = open_store()
    [a] = st.add_text("A note to export.")
    buf = io.StringIO()
    st.export_jsonl(buf)
    lines = buf.getvalue().splitlines()
    state = {"text": "t", "kind": "note", "tags": [], "summary": None, "confidence": None, "since": 1.0, "replaced": 2.0}
    for n, bad in enumerate(({"confidence": 7}, {"versions": [{"version": 1}]}, {"versions": "x"},
                             {"versions": [{**state, "version": 2**63 - 1}]}, {"versions": [{**state, "version": -3}]})):
        chunk = json.loads(lines[2])
        assert chunk["type"] == "chunk"
        chunk.update(bad)
        target = open_store(path=tmp_path / f"t{n}.db")
        with pytest.raises(StoreError, match="line 3.*(confidence|versions)"):
            target.import_jsonl(io.StringIO("\n".join([*lines[:2], json.dumps(chunk), *lines[3:]]) + "\n"))
        assert target.stats().chunks == 0
    assert a


def test_a_store_whose_versions_are_numbered_past_the_bound_refuses_the_edit(store: MemoryStore) -> None:
    """It refuses, with a sentence and no overflow, the edit of a chunk whose earlier versions
    a store written elsewhere numbered at SQLite's largest integer; the chunk stays as it was."""
    [a] = store.add_text("Numbered by hand.")
    store.edit(a, Edit(text="Once edited."))
    with sqlite3.connect(store.path) as conn:
        conn.execute("UPDATE chunk_versions SET version = ? WHERE chunk_id = ?", (2**63 - 1, a))
    with pytest.raises(StoreError, match="numbered past"):
        store.edit(a, Edit(text="Edited again."))
    assert store.read(a, record=False).text == "Once edited."


def test_a_store_file_with_an_out_of_range_confidence_is_refused(store_path: Path) -> None:
    """It refuses at open a store file from elsewhere whose chunk_notes holds a confidence outside [0, 1]."""
    with MemoryStore(store_path) as st:
        [a] = st.add_text("A note.")
    conn = sqlite3.connect(store_path)
    conn.execute("PRAGMA ignore_check_constraints = ON")
    conn.execute("INSERT INTO chunk_notes (chunk_id, summary, confidence) VALUES (?, 's', 5.0)", (a,))
    conn.commit()
    conn.close()
    with pytest.raises(NotAMemoryStore, match="chunk_notes.confidence"):
        MemoryStore(store_path)


def test_a_store_before_versions_reads_read_only(store_path: Path) -> None:
    """It opens read-only a store made before the versions migration: a chunk's history is its current state, hits carry no summary."""
    with MemoryStore(store_path, embedder=None) as st:
        [a] = st.add_text("Written before edits existed.")
    conn = sqlite3.connect(store_path)
    conn.executescript("DROP TABLE chunk_versions; DROP TABLE chunk_notes; "
                       "DELETE FROM _migrations WHERE name = 'm013_chunk_versions';")
    conn.close()
    with MemoryStore(store_path, readonly=True, embedder=None) as ro:
        [only] = ro.history(a)
        assert (only.version, only.text, only.replaced) == (1, "Written before edits existed.", None)
        assert ro.search("edits existed", mode="bm25")[0].summary is None
        with pytest.raises(StoreError):
            ro.edit(a, Edit(kind="fact"))
    conn = sqlite3.connect(store_path)
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'chunk_versions'").fetchone()[0] == 0
    conn.close()
