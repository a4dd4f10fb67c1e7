"""The lifecycle: recall ranking (relevance, links, recency, reinforcement), reinforce, decay
with a half-life, promotion, prune with a dry run."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Clock

from rlm_runtime.memory import MemorySettings, MemoryStore, RecallConfig

HOUR = 3600.0
DAY = 86400.0


def test_recency_is_exponential_in_hours(store: MemoryStore, clock: Clock) -> None:
    """It scores recency exp(-age / tau), tau in hours (72 by default): 1/e after three days."""
    [cid] = store.add_text("the dodo was flightless")
    clock.advance(72 * HOUR)
    [hit] = store.recall("dodo", record=False)
    assert hit.parts is not None and hit.parts.recency == pytest.approx(math.exp(-1))
    clock.advance(72 * HOUR)
    assert store.recall("dodo", record=False)[0].parts.recency == pytest.approx(math.exp(-2))  # type: ignore[union-attr]


def test_reinforcement_rises_with_recalls_and_falls_with_time(store: MemoryStore, clock: Clock) -> None:
    """It scores reinforcement by recalls per unit time: more recalls score more, idle time less."""
    a = store.add_text("quagga stripes", source="a")[0]
    b = store.add_text("quagga hooves", source="b")[0]

    def reinforcement(cid: int) -> float:
        hit = next(h for h in store.recall("quagga", record=False) if h.chunk_id == cid)
        assert hit.parts is not None
        return hit.parts.reinforcement

    assert reinforcement(a) == reinforcement(b) == 0
    store.reinforce([a])
    once = reinforcement(a)
    store.reinforce([a, a])  # duplicates count once per call
    store.reinforce([a])
    assert reinforcement(a) > once > reinforcement(b)
    busy = reinforcement(a)
    clock.advance(10 * DAY)
    assert reinforcement(a) < busy


def test_recall_ranks_by_relevance(store: MemoryStore) -> None:
    """It ranks the best text match first, with a text term of 1."""
    store.add_text("the aurochs was a wild cow", source="a")
    best = store.add_text("aurochs aurochs: the aurochs, ancestor of cattle", source="b")[0]
    hits = store.recall("aurochs", record=False)
    assert hits[0].chunk_id == best and hits[0].parts.text == 1.0  # type: ignore[union-attr]


def test_recall_from_seeds_follows_links(store: MemoryStore) -> None:
    """It ranks chunks strongly linked to the seeds first and leaves the seeds out."""
    seed = store.add_text("seed: the thylacine", source="s")[0]
    strong = store.add_text("strongly linked", source="x")[0]
    weak = store.add_text("weakly linked", source="y")[0]
    store.add_text("not linked at all", source="z")
    store.link(seed, strong, "supports", 3.0)
    store.link(weak, seed, "mentions", 0.2)
    hits = store.recall(seeds=[seed], record=False)
    assert [h.chunk_id for h in hits] == [strong, weak]
    assert hits[0].parts.link == pytest.approx(1 - math.exp(-3.0))  # type: ignore[union-attr]


def test_recall_without_query_or_seeds_gives_recent_memories(store: MemoryStore, clock: Clock) -> None:
    """It ranks recently created or recalled chunks when given nothing to go on."""
    old = store.add_text("old memory", source="a")[0]
    clock.advance(30 * DAY)
    new = store.add_text("new memory", source="b")[0]
    assert [h.chunk_id for h in store.recall(k=2, record=False)] == [new, old]


def test_weights_come_from_config(open_store: Callable[..., MemoryStore], clock: Clock) -> None:
    """It weighs the terms as RecallConfig says: with only recency weighted, newer wins over relevant."""
    st = open_store(MemorySettings(recall=RecallConfig(w_text=0, w_link=0, w_reinforcement=0, w_recency=1)))
    relevant = st.add_text("moa moa moa moa", source="a")[0]
    clock.advance(DAY)
    newer = st.add_text("a moa bone", source="b")[0]
    assert [h.chunk_id for h in st.recall("moa", record=False)] == [newer, relevant]


def test_recall_records_when_asked(store: MemoryStore) -> None:
    """It counts recalled chunks as recalled together (trace, counts, co_recalled)."""
    a = store.add_text("the great auk", source="a")[0]
    b = store.add_text("great auk eggs", source="b")[0]
    store.recall("auk", run_id="r9")
    assert store.chunk_stats(a).recall_count == store.chunk_stats(b).recall_count == 1
    assert store.db.conn.execute("SELECT op, run_id FROM recall_traces").fetchall() == [("recall", "r9")]
    assert store.links(a, "co_recalled")


def test_strength_halves_every_half_life(store: MemoryStore, clock: Clock) -> None:
    """It decays strength with a one-day half-life, read at any time, written by decay_and_promote."""
    [cid] = store.add_text("the passenger pigeon")
    assert store.chunk_stats(cid).strength == 1.0
    clock.advance(DAY)
    assert store.chunk_stats(cid).strength == pytest.approx(0.5)
    report = store.decay_and_promote(dry_run=True)
    assert report.dry_run and report.decayed == 1
    assert store.db.conn.execute("SELECT strength FROM chunk_stats").fetchone()[0] == 1.0
    store.decay_and_promote()
    assert store.db.conn.execute("SELECT strength FROM chunk_stats").fetchone()[0] == pytest.approx(0.5)
    clock.advance(DAY)
    assert store.chunk_stats(cid).strength == pytest.approx(0.25)


def test_reinforce_boosts_decayed_strength(store: MemoryStore, clock: Clock) -> None:
    """It adds the boost to the decayed strength, up to max_strength."""
    [cid] = store.add_text("the bluebuck")
    clock.advance(DAY)
    store.reinforce([cid])
    assert store.chunk_stats(cid).strength == pytest.approx(1.5)
    for _ in range(20):
        store.reinforce([cid])
    assert store.chunk_stats(cid).strength == 10.0


def test_promotes_after_n_recalls(store: MemoryStore, clock: Clock) -> None:
    """It moves a chunk recalled three times to long-term, clears its expiry, and slows its decay."""
    often = store.add_text("the tarpan horse", source="a", ttl_s=3 * DAY)[0]
    rare = store.add_text("the tarpan coat", source="b")[0]
    for _ in range(3):
        store.reinforce([often])
    store.reinforce([rare])
    dry = store.decay_and_promote(dry_run=True)
    assert dry.promoted == (often,) and store.chunk_stats(often).tier == "working"
    assert store.decay_and_promote().promoted == (often,)
    stats = store.chunk_stats(often)
    assert (stats.tier, stats.expires_at) == ("long_term", None)
    assert store.chunk_stats(rare).tier == "working"
    before = stats.strength
    clock.advance(DAY)
    assert store.chunk_stats(often).strength == pytest.approx(before * 0.5 ** (1 / 30))


def test_prune_removes_expired_and_faded_memories(store: MemoryStore, clock: Clock, write: Callable[..., Path]) -> None:
    """It removes expired and faded unpinned memories, never pinned or file chunks; a dry run only tells."""
    expiring = store.add_text("expires soon", source="a", ttl_s=HOUR)[0]
    pinned = store.add_text("pinned but expired", source="b", ttl_s=HOUR, pinned=True)[0]
    fading = store.add_text("never recalled", source="c")[0]
    kept = store.add_text("recalled often", source="d")[0]
    store.ingest(write("doc.txt", "a document never recalled\n"))
    file_chunk = store.search("document", record=False)[0].chunk_id
    clock.advance(2 * HOUR)
    assert store.prune().removed == (expiring,)
    clock.advance(5 * DAY)  # strength 1 -> ~0.03, under the 0.05 floor
    store.reinforce([kept] * 1)
    dry = store.prune(dry_run=True)
    assert dry.removed == (fading,) and dry.reasons[fading].startswith("strength")
    assert store.chunk_stats(fading)
    report = store.prune()
    assert report.removed == (fading,)
    for cid in (pinned, kept, file_chunk):
        assert store.chunk_stats(cid)
    store.pin([kept], False)
    assert store.prune().removed == ()


def test_prune_drops_old_traces(open_store: Callable[..., MemoryStore], clock: Clock) -> None:
    """It removes recall traces older than trace_retention_days."""
    st = open_store(MemorySettings(trace_retention_days=1))
    st.add_text("the sea mink", pinned=True)
    st.search("mink")
    clock.advance(2 * DAY)
    st.search("mink")
    assert st.prune().traces_removed == 1 and st.stats().traces == 1


def test_the_upkeep_runs_on_open_once_a_day(open_store: Callable[..., MemoryStore], clock: Clock) -> None:
    """It decays, promotes and moves expired memories to the trash when a store is opened a day after its last upkeep, and not again that day."""
    store = open_store()
    assert store.maintain() is None  # the first open started the clock
    lasting = store.add_text("the okapi lives in the Ituri forest", source="a")[0]
    fleeting = store.add_text("the kiosk closes at noon today", source="b")[0]
    store.expire([fleeting], clock() + HOUR)
    for _ in range(RecallConfig().promote_after):
        store.reinforce([lasting])
    store.close()

    clock.advance(2 * HOUR)
    store = open_store()  # not a day yet: nothing moved
    assert store.read_many([fleeting], record=False) and store.chunk_stats(lasting).tier == "working"
    store.close()

    clock.advance(DAY)
    store = open_store()
    assert store.chunk_stats(lasting).tier == "long_term"
    assert store.read_many([fleeting], record=False) == []  # in the trash, not gone
    assert store.restore([fleeting]).done == (fleeting,)
    assert store.maintain() is None  # ran on open: not due again today
    forced = store.maintain(force=True)
    assert forced is not None and forced.removed == (fleeting,) and forced.reasons[fleeting] == "expired"
    store.close()


def test_no_upkeep_on_open_when_switched_off(open_store: Callable[..., MemoryStore], clock: Clock) -> None:
    """It leaves an expired memory alone on open when maintain_every_s is 0 (prune still removes it by hand)."""
    off = MemorySettings(maintain_every_s=0)
    store = open_store(off)
    gone_soon = store.add_text("the ferry leaves at six", source="b")[0]
    store.expire([gone_soon], clock() + HOUR)
    store.close()
    clock.advance(3 * DAY)
    store = open_store(off)
    assert store.read_many([gone_soon], record=False)
    assert store.prune().removed == (gone_soon,)
    store.close()
