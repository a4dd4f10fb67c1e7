"""The quality tier of search by meaning: a second model's vectors, kept apart from the fast
tier's, filled after ingest (newest first, in batches, resumable), used by search wherever they
exist. A test model stands for the contextual one: ``plain`` (the fast tier) knows no synonyms,
``tiny`` (the quality tier) reads the words of a concept as one."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import TinyEmbedder

from rlm_runtime.memory import MemoryStore, StoreError

Open = Callable[..., MemoryStore]


def plain() -> TinyEmbedder:
    model = TinyEmbedder("plain-64")
    model.concept = {}
    return model


def stocked(open_store: Open, quality: TinyEmbedder | None, n: int = 40) -> MemoryStore:
    fast = plain()
    st = open_store(embedder=lambda: fast, quality=(lambda: quality) if quality is not None else None)
    for i in range(n):
        st.add_text(f"Entry {i}: the warehouse counted crates of batch {i}.", source=f"log{i}")
    st.add_text("Reimbursement is granted within thirty days of purchase.", source="policy")
    return st


def quality_rows(path: Path) -> list[int]:
    conn = sqlite3.connect(path)
    try:
        return [int(r[0]) for r in conn.execute("SELECT chunk_id FROM quality_vectors ORDER BY chunk_id")]
    finally:
        conn.close()


def test_the_fill_gives_every_chunk_a_quality_vector_newest_first_and_keeps_the_fast_ones(
        open_store: Open, store_path: Path, tiny: TinyEmbedder) -> None:
    """It embeds the chunks without a quality vector newest first, a batch at a time, leaves
    the fast tier's vectors as they were, and a second fill finds nothing to do."""
    st = stocked(open_store, tiny)
    fast_before = st.stats().vectors
    seen: list[int] = []
    report = st.fill_quality(batch=8, progress=lambda p: seen.append(p.done))
    assert report.embedded == 41 and report.kept == 0 and report.model == "tiny-64"
    assert seen == [8, 16, 24, 32, 40, 41]
    assert len(quality_rows(store_path)) == 41 and st.stats().vectors == fast_before == 41
    s = st.stats()
    assert (s.quality_vectors, s.quality_model, s.quality_eta_s) == (41, "tiny-64", None)
    assert st.fill_quality().embedded == 0


def test_a_stopped_fill_keeps_its_batches_and_the_next_goes_on(open_store: Open, store_path: Path, tiny: TinyEmbedder) -> None:
    """It keeps what a fill stopped between batches wrote (the newest chunks), gives an ETA for
    the rest at the rate it measured, and the next fill embeds only the chunks left."""
    st = stocked(open_store, tiny)

    def stop() -> None:
        if len(quality_rows(store_path)) >= 20:  # two batches written
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        st.fill_quality(batch=10, stop=stop)
    held = quality_rows(store_path)
    assert len(held) == 20 and held == list(range(22, 42))  # the newest twenty
    assert st.stats().quality_eta_s is not None and st.stats().quality_eta_s > 0
    tiny.calls = 0
    assert st.fill_quality(batch=10).embedded == 21 and tiny.calls == 21
    assert st.stats().quality_eta_s is None


def test_search_uses_the_quality_vectors_where_they_exist(open_store: Open, store_path: Path, tiny: TinyEmbedder) -> None:
    """It finds by the quality tier a passage the fast tier cannot (a synonym), once filled; and
    with the fill half done, it still ranks the filled chunks by it and the others by the fast tier."""
    st = stocked(open_store, tiny)
    question = "money back"
    before = st.search(question, mode="vector", k=3, record=False)
    assert all("Reimbursement" not in h.snippet for h in before)
    st.fill_quality(batch=5, stop=_stop_after(store_path, 5))  # the newest five only: the policy among them
    half = st.search(question, mode="vector", k=3, record=False)
    assert "Reimbursement" in half[0].snippet and half[0].by == "meaning"
    st.fill_quality()
    full = st.search(question, k=3, record=False)
    assert "Reimbursement" in full[0].snippet and full[0].by == "meaning"  # no word of the query: by meaning alone
    assert full.strength > 0.2  # the quality model's cosine (each word of the policy counts)


def _stop_after(path: Path, rows: int) -> Callable[[], None]:
    """A fill's ``stop`` that ends it once ``rows`` quality vectors are written."""
    def stop() -> None:
        if len(quality_rows(path)) >= rows:
            raise _Stop

    return stop


class _Stop(Exception):
    pass


@pytest.fixture(autouse=True)
def _stop_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fill stopped by ``_stop_after`` ends quietly: the test goes on with what it wrote."""
    real = MemoryStore.fill_quality

    def fill(self: MemoryStore, **kw: Any) -> Any:
        try:
            return real(self, **kw)
        except _Stop:
            return None

    monkeypatch.setattr(MemoryStore, "fill_quality", fill)


def test_a_chunk_removed_during_a_fill_gets_no_vector(open_store: Open, store_path: Path, tiny: TinyEmbedder) -> None:
    """It writes no quality vector for a chunk removed between its read and its write."""
    st = stocked(open_store, tiny, n=3)
    real = tiny.embed

    def embed_and_remove(texts: Any) -> Any:
        if texts and "Entry 2:" in texts[0]:  # the first chunk the fill reads: chunk 1 goes meanwhile
            conn = sqlite3.connect(store_path)
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("DELETE FROM chunks WHERE id = 1")
            conn.commit()
            conn.close()
        return real(texts)

    tiny.embed = embed_and_remove  # type: ignore[method-assign]
    st.fill_quality()
    assert 1 not in quality_rows(store_path) and len(quality_rows(store_path)) == 3


def test_no_quality_model_or_a_read_only_store_is_a_clear_error(open_store: Open, store_path: Path, tiny: TinyEmbedder) -> None:
    """It refuses a fill without a quality model (saying how to install one), and on a store
    opened read-only; a search of a store without quality vectors never loads the model."""
    st = stocked(open_store, None)
    with pytest.raises(StoreError, match="rlm model install minilm-l6"):
        st.fill_quality()
    loads = {"n": 0}

    def counting() -> TinyEmbedder:
        loads["n"] += 1
        return tiny

    reader = open_store(embedder=plain, quality=counting, readonly=True)
    with pytest.raises(StoreError, match="read-only"):
        reader.fill_quality()
    assert reader.search("crates", mode="hybrid", record=False) and loads["n"] == 1  # the fill's own load only
    other = open_store(embedder=plain, quality=counting)
    other.search("crates", mode="hybrid", record=False)
    assert loads["n"] == 1


def test_a_quality_vector_of_the_wrong_size_in_a_store_file_is_refused(open_store: Open, store_path: Path,
                                                                        tiny: TinyEmbedder) -> None:
    """It refuses at open a store whose quality vector is not its model's size (read past its end)."""
    st = stocked(open_store, tiny, n=2)
    st.fill_quality()
    st.close()
    conn = sqlite3.connect(store_path)
    conn.execute("UPDATE quality_vectors SET bits = x'00' WHERE chunk_id = 1")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="quality_vectors.bits"):
        MemoryStore(store_path, embedder=plain)


def test_the_quality_tier_ranks_alone_only_when_it_covers_every_chunk(open_store: Open, store_path: Path,
                                                                      tiny: TinyEmbedder) -> None:
    """It joins the tiers while some chunk with a fast vector has no quality one, even when the
    two tiers hold as many vectors (chunks written by a process without the fast model, filled
    by the quality tier first): the chunk only the fast tier holds is still found by meaning."""
    fast = TinyEmbedder("fast-64")  # knows the concepts too: it finds the cat chunk
    first = open_store(embedder=lambda: fast)
    first.add_text("The tabby sleeps on the windowsill all afternoon.", source="cat")
    for i in range(4):
        first.add_text(f"Invoice {i} was paid in full by the supplier.", source=f"inv{i}")
    first.close()
    second = open_store(embedder=None, quality=lambda: plain())
    for i in range(5):
        second.add_text(f"Shipment {i} left the dock on schedule.", source=f"ship{i}")
    second.fill_quality(batch=5, stop=_stop_after(store_path, 5))  # the five newest: those without a fast vector
    second.close()
    st = open_store(embedder=lambda: fast, quality=lambda: plain())
    assert st.stats().quality_vectors == 5 and st.stats().vectors == 5
    found = st.search("kitten", mode="vector", k=5, record=False)
    assert any("tabby" in h.snippet for h in found), [h.snippet for h in found]


def test_a_query_that_is_not_utf8_and_a_rate_out_of_range_are_handled(open_store: Open, store_path: Path,
                                                                      tiny: TinyEmbedder) -> None:
    """It searches a query holding a lone surrogate (a name that is not UTF-8) in every mode,
    and gives no ETA for a rate so small the time would be infinite."""
    st = stocked(open_store, tiny, n=3)
    st.fill_quality()
    for mode in ("bm25", "hybrid", "vector"):
        st.search("warehouse\udcff crates", mode=mode, record=False)
    st.add_text("A note added after the fill.", source="late")
    conn = sqlite3.connect(store_path)
    conn.execute("UPDATE quality_meta SET rate = 5e-324")
    conn.commit()
    conn.close()
    assert st.stats().quality_eta_s is None


def test_a_fill_can_be_stopped_between_any_two_chunks(open_store: Open, tiny: TinyEmbedder) -> None:
    """It calls ``stop`` before each chunk's embedding, not only between batches: a request or
    a server's close waits for one chunk, however large the batch."""
    st = stocked(open_store, tiny, n=10)
    calls = {"n": 0}

    def stop() -> None:
        calls["n"] += 1

    st.fill_quality(batch=32, stop=stop)
    assert calls["n"] >= 11  # one a chunk (and one a batch)


def test_a_fill_gives_a_model_that_runs_texts_side_by_side_as_many_a_call(open_store: Open, tiny: TinyEmbedder,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A model that says it runs ``threads`` at once is given that many texts a call (no more
    than the machine's cores), with ``stop`` called before each call: the texts run side by
    side, and a stop still waits for one call only."""
    seen: list[int] = []

    class Side(TinyEmbedder):
        threads = 3

        def embed(self, texts: Any) -> Any:
            seen.append(len(texts))
            return super().embed(texts)

    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    st = stocked(open_store, Side("tiny-64"), n=10)
    calls = {"n": 0}

    def stop() -> None:
        calls["n"] += 1

    assert st.fill_quality(batch=32, stop=stop).embedded == 11
    assert seen == [3, 3, 3, 2] and calls["n"] == 4 + 2  # one a call, one a batch (the last finds none)
    seen.clear()
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert st.fill_quality(batch=32, rebuild=True).embedded == 11
    assert seen == [2, 2, 2, 2, 2, 1]


def test_a_fill_killed_by_sigkill_keeps_its_batches(tmp_path: Path) -> None:
    """It keeps the batches a fill wrote before the process was killed with SIGKILL in the
    middle of the next one, and the next fill embeds only the chunks left."""
    import subprocess
    import sys
    import textwrap

    store = tmp_path / "store.db"
    code = textwrap.dedent(f"""
        import os, signal, sqlite3, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from conftest import TinyEmbedder
        from rlm_runtime.memory import MemoryStore
        st = MemoryStore({str(store)!r}, embedder=None, quality=TinyEmbedder)
        for i in range(30):
            st.add_text(f"entry {{i}} of the ledger", source=f"s{{i}}")
        def stop():
            conn = sqlite3.connect({str(store)!r})
            held = conn.execute("SELECT count(*) FROM quality_vectors").fetchone()[0]
            conn.close()
            if held >= 20:
                os.kill(os.getpid(), signal.SIGKILL)
        st.fill_quality(batch=10, stop=stop)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr
    assert len(quality_rows(store)) == 20
    tiny = TinyEmbedder()
    with MemoryStore(store, embedder=None, quality=lambda: tiny) as st:
        assert st.fill_quality().embedded == 10 and tiny.calls == 10


def _wait(cond: Callable[[], bool], timeout: float = 20.0) -> bool:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def test_a_store_fills_its_quality_tier_while_its_owner_is_idle(open_store: Open, store_path: Path, tiny: TinyEmbedder) -> None:
    """``fill_while_idle`` fills the tier on a thread of its own once the owner has been idle;
    work marked ``busy()`` holds it off; ``close()`` stops the thread; asking twice returns the
    fill already running."""
    import threading

    st = stocked(open_store, tiny)
    with st.busy():  # no fill yet: nothing to hold off
        pass
    fill = st.fill_while_idle(idle_s=0.2, recheck_s=0.2)
    assert st.fill_while_idle() is fill
    with st.busy():
        assert not _wait(lambda: bool(quality_rows(store_path)), timeout=0.8)  # busy: nothing filled
    assert _wait(lambda: len(quality_rows(store_path)) == 41)
    # The rows are committed before the fill's count is added up: wait for the count too.
    assert _wait(lambda: fill.embedded == 41) and not fill.errors
    st.add_text("A note remembered later about refunds.", source="later")
    assert _wait(lambda: len(quality_rows(store_path)) == 42)  # looked at again after recheck_s
    st.close()
    assert not any(t.name == "rlm-quality-fill" for t in threading.enumerate())


def test_fill_while_idle_refuses_a_store_it_cannot_fill(open_store: Open, store_path: Path, tiny: TinyEmbedder) -> None:
    """A store without a quality model, or read-only, cannot be filled: a StoreError, no thread."""
    import threading

    st = stocked(open_store, None)
    with pytest.raises(StoreError, match="without a quality model"):
        st.fill_while_idle()
    st.close()
    ro = MemoryStore(store_path, readonly=True, quality=lambda: tiny)
    with pytest.raises(StoreError, match="read-only"):
        ro.fill_while_idle()
    ro.close()
    assert not any(t.name == "rlm-quality-fill" for t in threading.enumerate())


def test_a_session_holds_the_fill_off_while_it_answers(open_store: Open, tmp_path: Path, tiny: TinyEmbedder) -> None:
    """A ``Session`` over a store that fills while idle marks each question as work: while the
    question runs, the fill is not idle; after it, the fill goes on."""
    from rlm_runtime import Session
    from rlm_runtime.llm import ScriptedClient

    st = stocked(open_store, tiny)
    fill = st.fill_while_idle(idle_s=0.05, recheck_s=0.05)
    idle_during: list[bool] = []
    client = ScriptedClient(["```python\nFINAL('done')\n```"])
    with Session(client, memory=st, trace=False, on_event=lambda e: idle_during.append(fill.idle())) as session:
        assert session.ask("anything?").answer == "done"
    assert idle_during and not any(idle_during[1:-1])
    st.close()
