"""Red team (hybrid fusion review): a store file whose FTS5 index carries its own ``rank``.

FTS5 keeps a persistent ``rank`` setting in the shadow table ``chunks_fts_config``. The
schema check compares schema objects only and ``malformed_values`` skips the ``chunks_fts*``
tables, so a store file from elsewhere can set ``rank`` to ``highlight(...)`` (text) or a
huge ``bm25`` weight (NULL). ``search.ranked`` (no filters) orders by ``rank`` and reads it
with ``float()``: a ValueError / TypeError leaves the store on every unfiltered bm25 or
hybrid search ("rlm: internal error ... please report" from ``rlm memory search``). A
negative weight (``bm25(-1.0)``) silently ranks the worst match first. Not new with score
fusion; found while attacking it. Fixed: a store file whose index keeps any setting beside its
version is refused at open (``db._fts_settings``). Either refusal at open or a search that
works passes.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from rlm_runtime.errors import RLMError
from rlm_runtime.memory import MemoryStore, NotAMemoryStore

HUGE = "1" + "0" * 320 + ".0"


def hostile(tmp_path: Path, rank: str) -> Path:
    path = tmp_path / "memory.db"
    st = MemoryStore(path, embedder=None)
    for i in range(12):
        st.add_text(f"note {i} about the refund policy number{i}", source=f"s{i}")
    st.close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO chunks_fts (chunks_fts, rank) VALUES ('rank', ?)", (rank,))
    conn.commit()
    conn.close()
    return path


@pytest.mark.parametrize("readonly", [True, False])
@pytest.mark.parametrize("rank", ["highlight(0, 'x', 'y')", "snippet(0, 'a', 'b', 'c', 5)", f"bm25({HUGE})"])
def test_a_hostile_rank_setting_is_refused_or_harmless(tmp_path: Path, rank: str, readonly: bool) -> None:
    """It refuses a store file whose index ranks by an expression of its own, or searches it without an internal error."""
    path = hostile(tmp_path, rank)
    try:
        st = MemoryStore(path, embedder=None, readonly=readonly)
    except NotAMemoryStore:
        return
    try:
        for mode in ("bm25", "hybrid"):
            try:
                st.search("refund number3", mode=mode, record=False)
            except RLMError:
                pass  # a clean refusal is fine; a ValueError/TypeError from float() is not
    finally:
        st.close()


def test_a_negative_rank_weight_does_not_invert_the_ranking(tmp_path: Path) -> None:
    """It never ranks the worst match first because a store file set a negative weight."""
    path = hostile(tmp_path, "bm25(-1.0)")
    try:
        st = MemoryStore(path, embedder=None, readonly=True)
    except NotAMemoryStore:
        return
    try:
        hits = st.search("refund number3", mode="bm25", record=False)
        assert hits and "number3" in hits[0].snippet
    finally:
        st.close()
