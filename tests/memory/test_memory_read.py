"""Reading chunks back: text, position, neighbours, several at once, unknown ids."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Clock, paragraphs, small_chunks

from rlm_runtime.memory import ChunkNotFound, MemoryStore


@pytest.fixture
def book(open_store: Callable[..., MemoryStore], write: Callable[..., Path]) -> tuple[MemoryStore, list[int]]:
    st = open_store(small_chunks())
    st.ingest(write("book.txt", paragraphs("jay", 8)))
    ids = [r[0] for r in st.db.conn.execute("SELECT id FROM chunks ORDER BY seq")]
    return st, ids


def test_reads_a_chunk_with_its_neighbours(book: tuple[MemoryStore, list[int]]) -> None:
    """It returns the chunk and up to ``around`` chunks of the same source on each side, in order."""
    st, ids = book
    v = st.read(ids[3], around=2)
    assert [c.chunk_id for c in v.before] == ids[1:3] and [c.chunk_id for c in v.after] == ids[4:6]
    assert v.full_text == "\n".join(st.read(i).text for i in ids[1:6])
    edge = st.read(ids[0], around=1)
    assert edge.before == () and [c.chunk_id for c in edge.after] == ids[1:2]


def test_view_says_where_the_chunk_lies(book: tuple[MemoryStore, list[int]]) -> None:
    """It gives the source, kind, tokens and byte and line span."""
    st, ids = book
    v = st.read(ids[0])
    assert v.source.endswith("book.txt") and v.source_kind == "file" and v.kind == "prose"
    assert v.start_line == 1 and v.start_byte == 0 and v.tokens > 0 and v.seq == 0


def test_unknown_id_raises(store: MemoryStore) -> None:
    """It raises ChunkNotFound, naming the id, for an id no chunk has."""
    with pytest.raises(ChunkNotFound, match="no chunk with id 42") as info:
        store.read(42)
    assert info.value.chunk_id == 42


def test_read_many_keeps_order_and_skips_unknown(book: tuple[MemoryStore, list[int]]) -> None:
    """It returns the chunks asked for, in that order, leaving out unknown ids."""
    st, ids = book
    assert [v.chunk_id for v in st.read_many([ids[2], 999, ids[0]])] == [ids[2], ids[0]]


def test_reading_sets_accessed(store: MemoryStore, clock: Clock) -> None:
    """It records when a chunk was read, unless asked not to."""
    [cid] = store.add_text("the wombat digs burrows")
    clock.advance(100)
    store.read(cid, record=False)
    assert store.db.conn.execute("SELECT accessed FROM chunks").fetchone()[0] is None
    store.read(cid)
    assert store.db.conn.execute("SELECT accessed FROM chunks").fetchone()[0] == clock()
