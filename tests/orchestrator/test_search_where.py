"""Where a search hit is, and how stores' hits are merged: a folder's hits name their file and
the file's own line numbers; a note in a store of one chunk ranks with a large context's best
hits; hybrid is the default, and a chunk found by meaning alone says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlm_runtime.context import open_context
from rlm_runtime.context.corpus import CorpusHandle
from rlm_runtime.embeddings import installed
from rlm_runtime.memory.store import MemoryStore
from rlm_runtime.searching import ChunkSearch

needs_model = pytest.mark.skipif(not installed(), reason="the embed extra is not installed")


def folder(tmp_path: Path) -> Path:
    """Two files: a long one first, then one holding the fact on its own line 7."""
    root = tmp_path / "handbook"
    (root / "ops").mkdir(parents=True)
    (root / "a-intro.md").write_text("\n\n".join(f"Intro paragraph {i} about routine matters." for i in range(200)) + "\n")
    lines = [f"Line {i} of the rota." for i in range(1, 13)]
    lines[6] = "The quarterly generator drill happens on the second Tuesday."
    (root / "ops" / "drills.md").write_text("\n".join(lines) + "\n")
    return root


def test_a_folders_hits_name_their_file_and_its_own_lines(tmp_path: Path) -> None:
    """It indexes each file of a folder as a source of its own: the hit says ops/drills.md and
    a line range holding line 7, not the line of the folder's concatenation (over 400)."""
    corpus = CorpusHandle.from_folder(folder(tmp_path))
    search = ChunkSearch(tmp_path / "index")
    search.set_contexts([corpus])
    try:
        hits = search.search("generator drill", k=3, mode="bm25")
        top = hits[0]
        first, last = (int(x) for x in top["lines"].split("-"))
        assert top["source"] == "ops/drills.md" and first <= 7 <= last <= 12, top
        assert "generator" in search.read(top["id"])
    finally:
        search.close()
        corpus.close()


@needs_model
def test_semantic_grep_names_the_file_of_a_paragraph(tmp_path: Path) -> None:
    """It gives each paragraph semantic_grep returns in a folder the file it is in, with its own lines."""
    corpus = CorpusHandle.from_folder(folder(tmp_path))
    search = ChunkSearch(tmp_path / "index")
    search.set_contexts([corpus])
    try:
        found = search.semantic_grep("generator drill practice", k=20)
        mine = [h for h in found if "generator" in h["text"]]
        assert mine and mine[0]["source"] == "ops/drills.md" and int(mine[0]["lines"].split("-")[-1]) <= 12
    finally:
        search.close()
        corpus.close()


def test_a_remembered_note_ranks_with_a_large_contexts_best(tmp_path: Path) -> None:
    """It puts each store's hits on one scale before merging: a note holding the query's words,
    alone in its store, comes before context chunks holding only some of them (by raw BM25 it
    scored a millionth of theirs and came last)."""
    doc = tmp_path / "log.md"
    doc.write_text("\n\n".join(f"Entry {i}: the backup {'password' if i % 3 == 0 else 'schedule'} was checked." for i in range(300)))
    memory = MemoryStore(tmp_path / "memory.db", embedder=None)
    memory.add_text("The vault password rotates every Friday at noon.", source="notes")
    search = ChunkSearch(tmp_path / "index", memory, embedder=None)
    search.set_contexts([open_context(doc)])
    try:
        hits = search.search("vault password rotates", k=5, mode="bm25")
        assert hits[0]["id"].startswith("m") and hits[0]["score"] == 1.0, hits[:2]
        assert all(0 <= h["score"] <= hits[0]["score"] for h in hits)
        assert [h["id"][0] for h in hits[1:]] == ["c"] * 4
    finally:
        search.close()
        memory.close()


@needs_model
def test_hybrid_is_the_default_and_a_hit_by_meaning_alone_says_so(tmp_path: Path) -> None:
    """It ranks by words and meaning when no mode is given, and labels a chunk that holds none of
    the query's words "by": "meaning" (a word hit: "words")."""
    doc = tmp_path / "policy.md"
    doc.write_text("Refunds are accepted within thirty days of purchase with a receipt.\n\n"
                   "Parking is free for visitors on weekends.\n")
    search = ChunkSearch(tmp_path / "index")
    search.set_contexts([open_context(doc)])
    try:
        worded = search.search("parking weekends", k=2)
        assert worded[0]["by"] == "words" and "Parking" in worded[0]["snippet"]
        nearest = search.search("money back", k=2)
        assert nearest and all(h["by"] == "meaning" for h in nearest)
        assert search.search("money back", k=2, mode="bm25") == []
    finally:
        search.close()
