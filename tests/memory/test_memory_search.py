"""Search by words (``mode="bm25"``; test_memory_vectors.py has search by meaning): BM25 ranking, safe quoting of any text,
bounded stop-word queries, filters, recording."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import paragraphs, small_chunks

from rlm_runtime.memory import MemorySettings, MemoryStore, SearchConfig


@pytest.fixture
def zoo(store: MemoryStore) -> MemoryStore:
    store.add_text("The okapi lives in the Ituri rainforest. It is related to the giraffe.", source="zoo", tags=["africa", "mammal"])
    store.add_text("The giraffe is the tallest living animal; giraffes eat acacia leaves.", source="zoo", tags=["africa"])
    store.add_text("Decision: we feed the tapir at noon.", source="keeper", tags=["mammal"])
    store.add_text("def feed(animal): return animal.eat('leaves')", source="code", kind="code")
    return store


def test_finds_and_ranks_by_bm25(zoo: MemoryStore) -> None:
    """It returns the chunks holding the terms, best first, with scores that fall."""
    hits = zoo.search("giraffe acacia", record=False, mode="bm25")
    assert hits[0].snippet.startswith("The «giraffe» is") and "«acacia»" in hits[0].snippet
    assert len(hits) == 2 and hits[0].score > hits[1].score > 0


def test_stems_words(zoo: MemoryStore) -> None:
    """It matches other forms of a word (porter stemming): 'lived' finds 'lives' and 'living'."""
    assert {h.snippet.split("«")[1].split("»")[0] for h in zoo.search("lived", record=False, mode="bm25")} == {"lives", "living"}


@pytest.mark.parametrize("query", [
    "don't", "-okapi", "okapi-giraffe", "a.b.c", "'quoted'", '"unbalanced', "okapi AND", "OR NOT", "NEAR(okapi giraffe)",
    "col:okapi", "okapi*", "^okapi", "(okapi", "okapi)", "{okapi}", "a+b", "x = y;", "\\", "'", '"', "--", "*", "é ü 中文",
    "animal.eat('leaves')", "feed(animal)", "_", "__", "²", "\u200b",
])
def test_never_raises_on_any_text(zoo: MemoryStore, query: str) -> None:
    """It searches any text as words, never as FTS5 syntax, by words or by meaning."""
    for mode in ("bm25", "hybrid", "vector"):
        zoo.search(query, record=False, mode=mode)


def test_punctuation_joined_words_are_a_phrase(zoo: MemoryStore) -> None:
    """It searches 'animal.eat' as the phrase 'animal eat'."""
    [hit] = zoo.search("animal.eat", record=False, mode="bm25")
    assert hit.kind == "code"


def test_empty_query_finds_nothing(zoo: MemoryStore) -> None:
    """It returns no hits for a query without a word."""
    assert zoo.search("  ?! ", record=False, mode="bm25") == []


def test_drops_stop_words_when_others_remain(zoo: MemoryStore) -> None:
    """It leaves stop words out of a query that has other words, and says so."""
    hits = zoo.search("what is the okapi", record=False, mode="bm25")
    assert hits.terms == ("okapi",) and hits.dropped == ("what", "is", "the") and not hits.capped
    assert len(hits) == 1


def test_stop_word_query_is_capped(store: MemoryStore) -> None:
    """It answers a query of stop words only with the newest chunks holding them all, unranked, and says so."""
    for i in range(20):
        store.add_text(f"the note number {i} of the day", source="notes")
    store.add_text("only the first word", source="notes")
    hits = store.search("the of", k=3, record=False, mode="bm25")
    assert hits.capped and hits.all_of and [h.chunk_id for h in hits] == [20, 19, 18]
    assert {h.score for h in hits} == {0.0}
    assert "newest chunks holding all of: the, of, unranked" in hits.note


def test_common_words_are_dropped_for_rarer_ones(open_store: Callable[..., MemoryStore]) -> None:
    """It ranks the rarest words within rank_budget matches and leaves out the others, saying so."""
    st = open_store(MemorySettings(search=SearchConfig(rank_budget=5)))
    for i in range(10):
        st.add_text(f"penguin colony report {i}", source="notes")
    st.add_text("penguin and walrus", source="notes")
    hits = st.search("penguin walrus", record=False, mode="bm25")
    assert hits.terms == ("walrus",) and hits.dropped == ("penguin",) and len(hits) == 1 and not hits.capped
    assert "penguin" in hits.note
    only_common = st.search("penguin", record=False, mode="bm25")
    assert only_common.capped and len(only_common) == 10


def test_all_common_words_rank_chunks_holding_all_first(open_store: Callable[..., MemoryStore]) -> None:
    """It ranks the newest chunks holding every word when enough do, else those holding any."""
    st = open_store(MemorySettings(search=SearchConfig(rank_budget=1)))
    for i in range(6):
        st.add_text(f"penguin colony {i}", source="a")
        st.add_text(f"walrus colony {i}", source="b")
    both = st.add_text("penguin meets walrus", source="c")[0]
    st.add_text("walrus again", source="b")
    found = st.search("penguin walrus", k=1, record=False, mode="bm25")
    assert found.capped and found.all_of and [h.chunk_id for h in found] == [both]
    wider = st.search("penguin walrus", k=5, record=False, mode="bm25")
    assert wider.capped and not wider.all_of and len(wider) == 5


def test_filters_by_kind_tags_and_source(zoo: MemoryStore, open_store: Callable[..., MemoryStore], write: Callable[..., Path]) -> None:
    """It keeps only hits of the kind, with every tag, from the source or folder asked for."""
    assert [h.kind for h in zoo.search("leaves", kind="code", record=False, mode="bm25")] == ["code"]
    assert [h.source for h in zoo.search("giraffe", tags=["africa", "mammal"], record=False, mode="bm25")] == ["zoo"]
    assert len(zoo.search("giraffe", tags="africa", record=False, mode="bm25")) == 2
    assert zoo.search("okapi", tags=["nope"], record=False, mode="bm25") == []
    assert [h.source for h in zoo.search("tapir", source="keeper", record=False, mode="bm25")] == ["keeper"]
    f = write("sub/river.txt", "the hippo wallows\n")
    zoo.ingest(f)
    assert len(zoo.search("hippo", source=f.parent.parent, record=False, mode="bm25")) == 1
    assert len(zoo.search("hippo", source=f, record=False, mode="bm25")) == 1
    assert zoo.search("hippo", source=f.parent / "other", record=False, mode="bm25") == []


def test_k_is_capped(open_store: Callable[..., MemoryStore]) -> None:
    """It never returns more than max_k hits."""
    st = open_store(MemorySettings(search=SearchConfig(max_k=3)))
    for i in range(6):
        st.add_text(f"lemur sighting {i}")
    assert len(st.search("lemur", k=50, record=False, mode="bm25")) == 3


def test_record_counts_each_hit_as_a_recall(zoo: MemoryStore) -> None:
    """It counts every hit as recalled (count, trace, co_recalled link) only when asked to."""
    zoo.search("giraffe", record=False, mode="bm25")
    assert zoo.stats().traces == 0 and zoo.chunk_stats(1).recall_count == 0
    hits = zoo.search("giraffe", run_id="run-1")
    assert hits.recorded
    assert {zoo.chunk_stats(h.chunk_id).recall_count for h in hits} == {1}
    trace = zoo.db.conn.execute("SELECT op, query, run_id FROM recall_traces").fetchall()
    assert trace == [("search", "giraffe", "run-1")]
    assert any(link.type == "co_recalled" for link in zoo.links(hits[0].chunk_id))


def test_hits_are_plain_data(zoo: MemoryStore) -> None:
    """It gives hits that serialise to JSON (for the sandbox RPC and --json)."""
    data = zoo.search("okapi", record=False, mode="bm25").to_dict()
    assert json.loads(json.dumps(data))["hits"][0]["tags"] == ["africa", "mammal"]


def test_snippets_of_long_chunks_are_short(open_store: Callable[..., MemoryStore], write: Callable[..., Path]) -> None:
    """It shows a snippet around the match, not the whole chunk."""
    st = open_store(small_chunks())
    st.ingest(write("long.txt", paragraphs("ibis", 3, words=50)))
    [hit, *_] = st.search("ibis1word0", record=False, mode="bm25")
    assert "«ibis1word0»" in hit.snippet and len(hit.snippet) < 400
