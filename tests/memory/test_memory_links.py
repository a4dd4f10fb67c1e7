"""Links made on write and on recall: follows, context_of, related_to, co_recalled, user links."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import paragraphs, small_chunks

from rlm_runtime.memory import ChunkNotFound, LinkConfig, MemorySettings, MemoryStore


def types_between(st: MemoryStore, a: int, b: int) -> set[str]:
    return {link.type for link in st.links(a) if {link.src, link.dst} == {a, b}}


def test_follows_links_texts_of_one_source(store: MemoryStore) -> None:
    """It links each text added to a memory source to the one added before it."""
    a = store.add_text("first note about kiwis", source="notes")[0]
    b = store.add_text("second note about kakapos", source="notes")[0]
    c = store.add_text("elsewhere", source="other")[0]
    assert [(lk.src, lk.dst) for lk in store.links(b, "follows")] == [(a, b)]
    assert store.links(c, "follows") == []


def test_context_of_links_chunks_of_one_run(store: MemoryStore) -> None:
    """It links chunks written by the same run, whatever their source."""
    a = store.add_text("plan: count the herons", source="plans", run_id="r1")[0]
    b = store.add_text("result: 12 herons", source="results", run_id="r1")[0]
    c = store.add_text("unrelated run", source="results", run_id="r2")[0]
    assert "context_of" in types_between(store, a, b)
    assert store.links(c, "context_of") == []


def test_related_to_links_shared_rare_terms(store: MemoryStore) -> None:
    """It links chunks of different sources that share rare terms."""
    a = store.add_text("The quetzal nests in cloud forests of Chiapas.", source="birds")[0]
    b = store.add_text("Chiapas cloud forests shelter the quetzal and tapirs.", source="travel")[0]
    c = store.add_text("Completely different: sourdough starter feeding.", source="baking")[0]
    assert "related_to" in types_between(store, a, b)
    assert store.links(c, "related_to") == []


def test_related_to_links_shared_tags(store: MemoryStore) -> None:
    """It links chunks sharing a rare tag even without shared words."""
    a = store.add_text("alpha text", source="s1", tags=["project-heron"])[0]
    b = store.add_text("beta words", source="s2", tags=["project-heron"])[0]
    assert "related_to" in types_between(store, a, b)


def test_common_terms_make_no_links_and_lookups_stay_bounded(open_store: Callable[..., MemoryStore]) -> None:
    """It stops indexing a term once rare_df chunks hold it: no more links, bounded lookups."""
    st = open_store(MemorySettings(links=LinkConfig(rare_df=4)))
    ids = [st.add_text(f"marmot burrow survey number {i}", source=f"s{i}")[0] for i in range(10)]
    per_term = dict(st.db.conn.execute("SELECT term, count(*) FROM chunk_terms GROUP BY term").fetchall())
    assert per_term["marmot"] == 4 and max(per_term.values()) <= 4
    assert st.links(ids[-1], "related_to") == []


def test_related_links_are_capped_per_chunk(open_store: Callable[..., MemoryStore]) -> None:
    """It makes at most related_max related_to links per new chunk."""
    st = open_store(MemorySettings(links=LinkConfig(related_max=2)))
    for i in range(6):
        st.add_text(f"ptarmigan plumage moult {i}", source=f"s{i}")
    last = st.add_text("ptarmigan plumage moult again", source="last")[0]
    assert len([lk for lk in st.links(last, "related_to") if last in (lk.src, lk.dst) and max(lk.src, lk.dst) == last]) == 2


def test_co_recalled_strengthens_each_time(store: MemoryStore) -> None:
    """It strengthens the co_recalled link of chunks found together by every search."""
    a = store.add_text("the ibex climbs dams", source="s1")[0]
    b = store.add_text("an ibex herd in the Alps", source="s2")[0]
    store.search("ibex")
    first = next(lk.strength for lk in store.links(a, "co_recalled"))
    store.search("ibex")
    [link] = store.links(a, "co_recalled")
    assert {link.src, link.dst} == {a, b} and link.strength > first and link.count == 2


def test_user_links_any_type(store: MemoryStore) -> None:
    """It stores a user's link of any type with its strength, and removes it on request."""
    a = store.add_text("claim: the moa is extinct", source="s1")[0]
    b = store.add_text("evidence: no moa seen since 1445", source="s2")[0]
    store.link(b, a, "supports", 0.8)
    [link] = store.links(a, "supports")
    assert (link.src, link.dst, link.strength) == (b, a, 0.8)
    store.link(b, a, "supports", 0.3)
    assert store.links(a, "supports")[0].strength == 0.3
    assert store.unlink(b, a, "supports") and store.links(a, "supports") == []


def test_symmetric_links_are_stored_once(store: MemoryStore) -> None:
    """It stores a symmetric link once whichever way it is given."""
    a = store.add_text("one", source="s1")[0]
    b = store.add_text("two", source="s2")[0]
    store.link(b, a, "contradicts")
    store.link(a, b, "contradicts")
    assert [(lk.src, lk.dst) for lk in store.links(a, "contradicts")] == [(a, b)]


def test_link_to_unknown_chunk_raises(store: MemoryStore) -> None:
    """It refuses a link to a chunk that does not exist."""
    a = store.add_text("one")[0]
    with pytest.raises(ChunkNotFound) as info:
        store.link(a, 999, "supports")
    assert info.value.chunk_id == 999


def test_forgetting_a_middle_chunk_keeps_the_chain(open_store: Callable[..., MemoryStore], write: Callable[..., Path]) -> None:
    """It hides a forgotten chunk's links, and once purged links the chunks before and after it and drops its links."""
    st = open_store(small_chunks())
    st.ingest(write("chain.txt", paragraphs("kea", 5)))
    ids = [r[0] for r in st.db.conn.execute("SELECT id FROM chunks ORDER BY seq")]
    assert st.forget(ids[2]) and not st.forget(ids[2])
    assert {(lk.src, lk.dst) for lk in st.links(ids[1], "follows")} == {(ids[0], ids[1])}
    assert st.purge() == [ids[2]]
    assert {(lk.src, lk.dst) for lk in st.links(ids[1], "follows")} == {(ids[0], ids[1]), (ids[1], ids[3])}
    assert st.db.conn.execute("SELECT count(*) FROM links WHERE src = ? OR dst = ?", (ids[2], ids[2])).fetchone()[0] == 0
    assert st.integrity_check() == []


def _related_degrees(st: MemoryStore) -> dict[int, int]:
    degree: dict[int, int] = {}
    for src, dst in st.db.conn.execute("SELECT src, dst FROM links WHERE type = 'related_to'"):
        degree[src] = degree.get(src, 0) + 1
        degree[dst] = degree.get(dst, 0) + 1
    return degree


def test_a_tagged_ingest_links_each_chunk_to_a_few_neighbours(open_store: Callable[..., MemoryStore],
                                                              write: Callable[..., Path]) -> None:
    """It gives no chunk of a tagged ingest more related_to links than related_cap, each new one linked to its nearest, the same every time."""
    paths = [write(f"n{i:02d}.txt", f"Note {i} about the harbour.") for i in range(15)]  # rare tag: every note shares it
    made = []
    for name in ("a.db", "b.db"):
        st = open_store(small_chunks(related_max=3, related_cap=4), path=Path(paths[0]).parent / name)
        st.ingest(paths, tags=["harbour"])
        made.append(sorted((lk.src, lk.dst) for cid in range(1, 16) for lk in st.links(cid, "related_to")))
        degree = _related_degrees(st)
        assert degree and max(degree.values()) <= 4 and len(degree) > 10
    assert made[0] == made[1]  # deterministic
    first_links = {dst for src, dst in made[0] if src == 2} | {src for src, dst in made[0] if dst == 2}
    assert first_links <= {1, 3, 4, 5}  # chunk 2's partners are its nearest, never the far end of the ingest


def test_related_cap_zero_makes_no_related_links(open_store: Callable[..., MemoryStore], write: Callable[..., Path]) -> None:
    """It makes no related_to link at all when related_cap is 0."""
    st = open_store(small_chunks(related_cap=0))
    st.ingest([write(f"m{i}.txt", f"Memo {i} on the lighthouse.") for i in range(6)], tags=["light"])
    assert _related_degrees(st) == {}


def test_links_over_the_cap_are_trimmed_once_on_a_writable_open(open_store: Callable[..., MemoryStore],
                                                                 write: Callable[..., Path]) -> None:
    """It trims a store's related_to links to the cap the store is opened with, when they were
    made under a larger one (or before the cap was kept): every chunk keeps its strongest,
    nearest ones; a second open reads one row and deletes nothing; a larger cap adds nothing."""
    paths = [write(f"w{i:02d}.txt", f"Log {i} of the weir.") for i in range(20)]
    folder = Path(paths[0]).parent
    st = open_store(small_chunks(related_max=5, related_cap=40), path=folder / "wide.db")
    st.ingest(paths, tags=["weir"])
    before = _related_degrees(st)
    assert max(before.values()) > 6
    kept_by_2 = sorted((abs(lk.src - lk.dst), lk.src, lk.dst) for lk in st.links(2, "related_to"))
    st.db.conn.execute("UPDATE upkeep SET related_cap = NULL")  # as a store from before the cap reads
    st.close()
    st = open_store(small_chunks(related_max=5, related_cap=3), path=folder / "wide.db")
    after = _related_degrees(st)
    assert after and max(after.values()) <= 3
    assert set(after) <= set(before)
    # what went from chunk 2 was its farthest (all links of one ingest tie on strength)
    left = sorted((abs(lk.src - lk.dst), lk.src, lk.dst) for lk in st.links(2, "related_to"))
    assert set(left) <= set(kept_by_2) and all(d <= min(d2 for d2, *_ in kept_by_2[len(left):]) for d, *_ in left)
    assert st.apply_related_cap() == 0
    st.close()
    st = open_store(small_chunks(related_max=5, related_cap=10), path=folder / "wide.db")
    assert _related_degrees(st) == after and st.apply_related_cap() == 0


def test_remembered_answers_are_not_linked_by_the_words_of_their_form(store: MemoryStore) -> None:
    """Two remembered answers that share nothing but the store's own "Question:" and
    "Answer:" are not related_to each other; two that share a rare word are."""
    a = store.remember("Which herons nest by the weir?", "Grey herons nest by the weir.", run_id="r1")[0]
    b = store.remember("What does the kettle do?", "The kettle whistles when boiling.", run_id="r2")[0]
    c = store.remember("When do herons leave the weir?", "Herons leave the weir in October.", run_id="r3")[0]
    assert "related_to" not in types_between(store, a, b) and "related_to" not in types_between(store, b, c)
    assert "related_to" in types_between(store, a, c)
