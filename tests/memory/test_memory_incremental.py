"""Incremental re-ingest: unchanged files are skipped, a changed file keeps its unchanged
chunks (ids, statistics, links), files gone from a folder lose their chunks."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import IO

import pytest
from conftest import paragraphs, small_chunks

from rlm_runtime.memory import MemoryStore
from rlm_runtime.memory import ingest as ingest_mod


def chunk_ids(st: MemoryStore, path: Path) -> dict[str, list[int]]:
    """Text -> ids of the file's chunks holding it (a text may repeat), in file order."""
    rows = st.db.conn.execute("""SELECT c.text, c.id FROM chunks c JOIN sources s ON s.id = c.source_id
                                 WHERE s.path = ? ORDER BY c.seq""", (str(path),))
    out: dict[str, list[int]] = {}
    for text, chunk_id in rows:
        out.setdefault(text, []).append(chunk_id)
    return out


def count(ids: dict[str, list[int]]) -> int:
    return sum(map(len, ids.values()))


def test_unchanged_files_are_not_read(open_store: Callable[..., MemoryStore], write: Callable[..., Path],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """It skips a file whose size and mtime did not change without opening it."""
    st = open_store(small_chunks())
    path = write("a.txt", paragraphs("ant", 4))
    st.ingest([path.parent])

    def never(p: str) -> IO[bytes]:
        raise AssertionError(f"{p} was opened")

    monkeypatch.setattr(ingest_mod, "_open_binary", never)
    report = st.ingest([path.parent])
    assert (report.unchanged, report.files, report.chunks_added) == (1, 0, 0)


def test_touched_file_with_same_content_is_skipped_by_hash(open_store: Callable[..., MemoryStore], write: Callable[..., Path]) -> None:
    """It skips a file whose mtime changed but whose content hash did not, and keeps every chunk."""
    st = open_store(small_chunks())
    path = write("a.txt", paragraphs("bee", 4))
    st.ingest(path)
    before = chunk_ids(st, path)
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 5_000_000_000))
    report = st.ingest(path)
    assert (report.unchanged, report.chunks_added, report.chunks_removed) == (1, 0, 0)
    assert chunk_ids(st, path) == before
    assert st.ingest(path).unchanged == 1  # the new mtime was recorded: no hash this time


def test_changed_file_keeps_unchanged_chunks(open_store: Callable[..., MemoryStore], write: Callable[..., Path]) -> None:
    """It replaces only the chunks whose text changed; the others keep their ids, statistics and links."""
    st = open_store(small_chunks())
    parts = paragraphs("cat", 6).split("\n\n")
    path = write("a.txt", "\n\n".join(parts))
    st.ingest(path)
    before = chunk_ids(st, path)
    assert count(before) >= 6
    kept_id = before[next(t for t in before if "cat5word0" in t)][0]
    other = st.add_text("a note about cat5word0 and a user link", source="notes")[0]
    st.link(kept_id, other, "supports")
    st.search("cat5word0")  # one recall
    parts[1] = parts[1].replace("cat1word0", "dog1word0")
    path.write_text("\n\n".join(parts))
    report = st.ingest(path)
    after = chunk_ids(st, path)
    changed = [t for t in before if t not in after]
    assert changed and all("cat1word" in t for t in changed)  # the edited paragraph's chunks only
    n_changed = sum(len(before[t]) for t in changed)
    assert report.chunks_removed == report.chunks_added == n_changed and report.chunks_kept == count(before) - n_changed
    assert {t: i for t, i in after.items() if t in before} == {t: i for t, i in before.items() if t in after}
    assert st.chunk_stats(kept_id).recall_count == 1
    assert any(link.type == "supports" for link in st.links(kept_id))
    ids = [r[0] for r in st.db.conn.execute("SELECT id FROM chunks WHERE source_id = 1 ORDER BY seq")]
    follows = st.db.conn.execute("SELECT src, dst FROM links WHERE type = 'follows' AND src IN (SELECT id FROM chunks WHERE source_id = 1)")
    assert sorted(follows) == sorted(zip(ids, ids[1:], strict=False))
    assert st.integrity_check() == []


def test_moved_text_keeps_its_chunk_at_its_new_place(open_store: Callable[..., MemoryStore], write: Callable[..., Path]) -> None:
    """It keeps a chunk whose text moved down the file, with its new span."""
    st = open_store(small_chunks())
    parts = paragraphs("elk", 4).split("\n\n")
    path = write("a.txt", "\n\n".join(parts))
    st.ingest(path)
    before = chunk_ids(st, path)
    path.write_text("A new first paragraph about moose, long enough to be its own chunk here.\n\n" + "\n\n".join(parts))
    st.ingest(path)
    data = path.read_bytes()
    for text, ids in before.items():
        for chunk_id in ids:
            v = st.read(chunk_id, record=False)
            assert data[v.start_byte:v.end_byte].decode() == v.text == text


def test_files_gone_from_a_folder_lose_their_chunks(open_store: Callable[..., MemoryStore], write: Callable[..., Path]) -> None:
    """It removes the chunks of a file deleted from a re-ingested folder, and only those."""
    st = open_store(small_chunks())
    a = write("a.txt", paragraphs("fox", 3))
    b = write("b.txt", paragraphs("gnu", 3))
    st.ingest([a.parent])
    b.unlink()
    report = st.ingest([a.parent])
    assert report.removed_files == 1 and report.chunks_removed > 0
    assert not st.search("gnu0word0", record=False, mode="bm25") and st.search("fox0word0", record=False)
    assert st.stats().sources == 1 and st.integrity_check() == []


def test_interrupted_ingest_is_redone(open_store: Callable[..., MemoryStore], write: Callable[..., Path]) -> None:
    """It redoes a file whose last ingest did not finish, keeping the chunks it had committed."""
    st = open_store(small_chunks())
    path = write("a.txt", paragraphs("hen", 5))
    st.ingest(path)
    before = chunk_ids(st, path)
    with st.db.write() as conn:  # as a killed ingest leaves it: not complete, some chunks missing
        conn.execute("UPDATE sources SET state = 'ingesting', hash = NULL")
        last = max(max(ids) for ids in before.values())
        conn.execute("DELETE FROM chunks WHERE id = ?", (last,))
    report = st.ingest(path)
    assert report.files == 1 and report.chunks_added == 1 and report.chunks_kept == count(before) - 1
    assert st.db.conn.execute("SELECT state FROM sources").fetchone()[0] == "complete"
    assert st.ingest(path).unchanged == 1
