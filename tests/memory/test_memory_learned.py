"""Search ranks with what the store recorded: the sources of an earlier answer that matches
the query come up even when they hold none of its words; a store that recorded nothing, or
``w_memory`` 0, keeps the text's order; an answer never lifts chunks derived from a hit."""

from __future__ import annotations

from collections.abc import Callable

from conftest import Clock

from rlm_runtime.memory import MemorySettings, MemoryStore, SearchConfig

DAY = 86400.0


def _filler(store: MemoryStore) -> None:
    """Paragraphs about other things, so the words searched are rare."""
    for i in range(30):
        store.add_text(f"Notes on topic {i}: gardening{i} compost{i} seedlings and watering.", source=f"filler{i}")


def test_an_answers_source_comes_up_for_the_question_asked_again(store: MemoryStore, clock: Clock) -> None:
    """It ranks the chunk a remembered answer came from among the hits, though the chunk has none of the query's words."""
    _filler(store)
    source = store.add_text("Refunds are accepted within thirty days of purchase with a receipt.", source="policy")[0]
    question = "when may I get my money back"
    assert source not in [h.chunk_id for h in store.search(question, record=False, mode="bm25")]  # words alone miss it
    store.remember(question, "within thirty days", run_id="r1", read_chunk_ids=[source])
    clock.advance(DAY)
    hits = store.search(question, record=False, mode="bm25")
    ids = [h.chunk_id for h in hits]
    assert source in ids[:2], ids  # the answer first, the text it came from next
    mine = next(h for h in hits if h.chunk_id == source)
    assert mine.parts is not None and mine.parts.text == 0.0 and mine.parts.link > 0.5


def test_scores_stay_on_the_texts_scale(open_store: Callable[..., MemoryStore], store_path: object, clock: Clock) -> None:
    """It scores the best hit at least its text score and within the record's weight of it: the
    record re-ranks the text's hits, on the text's scale."""
    st = open_store()
    _filler(st)
    source = st.add_text("Refunds are accepted within thirty days of purchase.", source="policy")[0]
    st.remember("when may I get my money back", "thirty days", run_id="r1", read_chunk_ids=[source])
    clock.advance(DAY)
    text_only = open_store(MemorySettings(search=SearchConfig(w_memory=0)), readonly=True)
    plain = text_only.search("when may I get my money back", record=False, mode="bm25")[0].score
    blended = st.search("when may I get my money back", record=False, mode="bm25")[0].score
    cfg = SearchConfig()
    assert plain <= blended <= plain * (1 + cfg.w_learned_link + cfg.w_recalled_recency + cfg.w_recalled_rate)
    assert plain > 1.0  # BM25's scale, not a [0, 1] blend


def test_w_memory_zero_ranks_by_text_alone(open_store: Callable[..., MemoryStore], clock: Clock) -> None:
    """It leaves the text's order untouched when w_memory is 0, whatever was recorded."""
    st = open_store(MemorySettings(search=SearchConfig(w_memory=0)))
    _filler(st)
    source = st.add_text("Refunds are accepted within thirty days of purchase.", source="policy")[0]
    st.remember("when may I get my money back", "thirty days", run_id="r1", read_chunk_ids=[source])
    hits = st.search("when may I get my money back", record=False, mode="bm25")
    assert source not in [h.chunk_id for h in hits]
    assert all(h.parts is None for h in hits)


def test_a_store_that_recorded_nothing_keeps_the_text_order(store: MemoryStore) -> None:
    """It returns the BM25 order and scores as they are when nothing was ever recalled or answered."""
    _filler(store)
    a = store.add_text("compost compost compost heap", source="a")[0]
    b = store.add_text("a compost heap", source="b")[0]
    hits = store.search("compost heap", record=False, mode="bm25")
    assert [h.chunk_id for h in hits][:2] == [a, b]
    assert hits[0].parts is None and hits[0].score > 1.0  # a BM25 score, not a blended one


def test_a_source_never_lifts_the_answers_derived_from_it(store: MemoryStore, clock: Clock) -> None:
    """It follows derived_from from an answer to its sources only: a hit does not bring up every answer that cited it."""
    _filler(store)
    source = store.add_text("The lighthouse keeper logs the tides at dawn.", source="log")[0]
    answer_ids = store.remember("an unrelated question about ferries", "see the log", run_id="r1", read_chunk_ids=[source])
    clock.advance(DAY)
    ids = [h.chunk_id for h in store.search("lighthouse tides", record=False)]
    assert ids[0] == source
    assert answer_ids[0] not in ids


def test_recorded_recalls_do_not_reorder_a_clear_text_match(store: MemoryStore, clock: Clock) -> None:
    """It keeps the best text match first when another hit was recalled many times (recalls are weak evidence)."""
    _filler(store)
    best = store.add_text("otters otters otters hold hands while sleeping", source="best")[0]
    other = store.add_text("a note that mentions otters once among many other words about rivers", source="other")[0]
    for _ in range(20):
        store.reinforce([other])
        clock.advance(60)
    ids = [h.chunk_id for h in store.search("otters sleeping", record=False)]
    assert ids.index(best) < ids.index(other)


def test_filters_apply_to_chunks_brought_by_links(store: MemoryStore, clock: Clock) -> None:
    """It leaves out a linked chunk that the search's filters exclude (another kind)."""
    _filler(store)
    source = store.add_text("Refunds are accepted within thirty days.", source="policy", kind="note")[0]
    store.remember("when may I get my money back", "thirty days", run_id="r1", read_chunk_ids=[source])
    assert source in [h.chunk_id for h in store.search("when may I get my money back", record=False)]
    assert source not in [h.chunk_id for h in store.search("when may I get my money back", kind="answer", record=False)]


def test_asking_whether_anything_was_recorded_reads_an_index_not_every_link(store: MemoryStore, clock: Clock) -> None:
    """It answers has_record from the indexes alone (no scan of the links table, which holds
    every next and related_to link of a store of files), false before and true after an
    answer is linked to its source."""
    import sqlite3

    from rlm_runtime.memory import learned

    _filler(store)
    conn = sqlite3.connect(store.path)
    try:
        assert not learned.has_record(conn)
        assert conn.execute("SELECT count(*) FROM links").fetchone()[0] > 0
        plan = " ".join(str(r[-1]) for r in conn.execute("EXPLAIN QUERY PLAN SELECT 1 FROM links WHERE type = 'derived_from' LIMIT 1"))
        assert "links_learned" in plan, plan  # a partial index: it holds only derived_from links
    finally:
        conn.close()
    source = store.add_text("Refunds are accepted within thirty days of purchase.", source="policy")[0]
    store.remember("refund window", "thirty days", run_id="r1", read_chunk_ids=[source])
    conn = sqlite3.connect(store.path)
    try:
        assert learned.has_record(conn)
    finally:
        conn.close()
