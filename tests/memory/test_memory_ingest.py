"""Ingest of files and folders: chunks with their spans, tags, kinds, progress, the report."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from conftest import paragraphs, small_chunks

from rlm_runtime.memory import IngestProgress, MemoryStore
from rlm_runtime.memory.ingest import windows


def test_ingests_a_folder(open_store: Callable[..., MemoryStore], write: Callable[..., Path]) -> None:
    """It stores every text file of a folder tree and reports files, chunks and bytes."""
    a = write("a.md", "# Title\n\n" + paragraphs("alpha", 6))
    b = write("sub/b.txt", paragraphs("beta", 4))
    st = open_store(small_chunks())
    report = st.ingest([a.parent])
    assert report.files == 2
    assert report.bytes == a.stat().st_size + b.stat().st_size
    assert report.chunks_added == st.stats().chunks > 2
    assert report.skipped == [] and report.seconds > 0
    assert {h.source for h in st.search("alpha3word0", record=False, mode="bm25")} == {str(a)}


def test_spans_open_the_chunk_in_place(open_store: Callable[..., MemoryStore], write: Callable[..., Path]) -> None:
    """It keeps each chunk's byte and line span: the file's bytes there are the chunk's text."""
    path = write("notes.md", "# Notes\n\nIntro line é.\n\n" + paragraphs("gamma", 8))
    st = open_store(small_chunks())
    st.ingest([path])
    data = path.read_bytes()
    lines = data.decode().split("\n")
    ids = [r[0] for r in st.db.conn.execute("SELECT id FROM chunks ORDER BY seq")]
    assert len(ids) > 3
    for chunk_id in ids:
        v = st.read(chunk_id, record=False)
        assert data[v.start_byte:v.end_byte].decode() == v.text
        assert v.text in "\n".join(lines[v.start_line - 1:v.end_line])  # a long line may be cut into several chunks


def test_tags_and_kind_apply_to_every_chunk(open_store: Callable[..., MemoryStore], write: Callable[..., Path]) -> None:
    """It gives every chunk the tags and the kind asked for."""
    path = write("d.txt", paragraphs("delta", 5))
    st = open_store(small_chunks())
    st.ingest(path, tags=["project-x", "docs"], kind="note")
    hits = st.search("delta2word0", record=False)
    assert hits and all(h.tags == ("docs", "project-x") and h.kind == "note" for h in hits)


def test_progress_is_reported(open_store: Callable[..., MemoryStore], write: Callable[..., Path]) -> None:
    """It calls progress after each file with files done, chunks and bytes so far."""
    write("one.txt", paragraphs("one", 3))
    write("two.txt", paragraphs("two", 3))
    seen: list[IngestProgress] = []
    st = open_store(small_chunks())
    st.ingest([write("three.txt", "x").parent], progress=seen.append)
    assert [p.files_done for p in seen][-1] == 3 and seen[-1].files_total == 3
    assert seen[-1].chunks == st.stats().chunks and seen[-1].bytes > 0


def test_windows_cut_at_newlines_and_cover_the_file(tmp_path: Path) -> None:
    """It reads a file in windows no longer than asked, cut after newlines, covering every byte once."""
    data = ("ligne é\n" * 500 + "\n" + "x" * 3000 + "\n").encode()
    path = tmp_path / "w.txt"
    path.write_bytes(data)
    with open(path, "rb") as fh:
        parts = list(windows(fh, 1000))
    assert b"".join(p for p, _, _ in parts) == data
    offset, line = 0, 1
    for raw, off, ln in parts:
        assert (off, ln) == (offset, line)
        assert len(raw) <= 1000
        raw.decode("utf-8")  # never a split character
        offset, line = offset + len(raw), line + raw.count(b"\n")


def test_chunks_are_linked_in_order(open_store: Callable[..., MemoryStore], write: Callable[..., Path]) -> None:
    """It links each chunk of a file to the next one by ``follows``."""
    st = open_store(small_chunks())
    st.ingest(write("e.txt", paragraphs("epsilon", 6)))
    ids = [r[0] for r in st.db.conn.execute("SELECT id FROM chunks ORDER BY seq")]
    pairs = st.db.conn.execute("SELECT src, dst FROM links WHERE type = 'follows' ORDER BY src").fetchall()
    assert pairs == list(zip(ids, ids[1:], strict=False))
