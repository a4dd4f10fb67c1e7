"""One ContextHandle protocol: every handle kind, on the host and rebuilt in a worker, keeps it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rlm_runtime.context import (
    AccessStats,
    BufferHandle,
    Chunk,
    ContextHandle,
    CorpusHandle,
    FileHandle,
    GrepResult,
    LazyHandle,
    ProbeReport,
    TextHandle,
    TokenCount,
    open_context,
)
from rlm_runtime.context.protocol import DEFAULT_CHUNK_SIZE
from rlm_runtime.errors import ContextError
from rlm_runtime.sandbox import contexts

TEXT = "first line\nthe needle is here\nthird line é\n"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.txt").write_text(TEXT)
    (root / "b.md").write_text("# B\nanother needle\n")
    return root


def _rebuilt(handles: list[Any]) -> list[Any]:
    """The handles as a worker rebuilds them: exported to descriptors, then mapped again."""
    specs, fds, _ = contexts.export(handles)
    return contexts.build(specs, fds)


def _handles(tmp_path: Path, folder: Path) -> Iterator[tuple[str, ContextHandle]]:
    (tmp_path / "f.txt").write_text(TEXT)
    yield "text", TextHandle(TEXT, name="t")
    yield "file", FileHandle(tmp_path / "f.txt")
    yield "lazy", LazyHandle(lambda: TEXT, name="lz")
    yield "folder corpus", open_context(folder)
    yield "list corpus", CorpusHandle.from_items([TEXT, "x needle\n"])
    worker_text, worker_file, worker_corpus = _rebuilt([TextHandle(TEXT), FileHandle(tmp_path / "f.txt"), open_context(folder)])
    yield "worker text", worker_text
    yield "worker file", worker_file
    yield "worker corpus", worker_corpus


def _exercise(h: ContextHandle) -> None:
    assert isinstance(h.name, str) and h.name
    assert isinstance(h.kind, str) and isinstance(h.stats, AccessStats)
    assert isinstance(len(h), int) and len(h) > 0
    assert isinstance(h.peek(10), str)
    found = h.grep("needle", context_lines=1, max_matches=5, ignore_case=True)
    assert isinstance(found, GrepResult) and len(found) >= 1 and found[0].line.strip()
    assert h.count("needle") == h.count("NEEDLE", ignore_case=True) >= 1
    # A corpus numbers lines per document, so it is told which; its first document holds TEXT.
    assert (h.lines(1, 2, doc=0) if isinstance(h, CorpusHandle) else h.lines(1, 2)) == ["first line", "the needle is here"]
    first = h.chunk(0)
    assert isinstance(first, Chunk) and first.index == 0 and first.size == DEFAULT_CHUNK_SIZE["lines"]
    assert isinstance(h.chunk(0, 5, unit="chars"), Chunk)
    n = h.n_chunks(1)
    pages = list(h.chunks(1))
    assert n == len(pages) >= 2 and all(isinstance(c, Chunk) and c.total == n for c in pages)
    assert h.n_chunks() == len(list(h.chunks()))
    count = h.n_tokens
    assert isinstance(count, TokenCount) and count.value > 0
    assert isinstance(h.n_bytes, int) and h.n_bytes > 0
    assert "needle" in h.get_full()
    probe = h.probe()
    assert isinstance(probe, ProbeReport) and probe.decision.action in ("load", "excerpt", "skip")
    assert isinstance(probe.summary(brief=True), str)
    json.dumps(probe.to_dict())
    with pytest.raises(ContextError):
        h.chunk(0, unit="pages")
    with pytest.raises(ContextError):
        h.grep("(a)\\1")


def test_every_handle_keeps_the_protocol(tmp_path: Path, folder: Path) -> None:
    """It finds every handle kind, host-side and worker-side, an instance of ContextHandle, and each method answers in type."""
    seen = []
    for label, h in _handles(tmp_path, folder):
        assert isinstance(h, ContextHandle), label
        _exercise(h)
        seen.append(label)
    assert len(seen) == 8


def test_worker_side_handles_are_the_host_classes(tmp_path: Path, folder: Path) -> None:
    """It rebuilds one text as a FileHandle (a BufferHandle) and a corpus as a CorpusHandle."""
    text, corpus = _rebuilt([TextHandle(TEXT), open_context(folder)])
    assert isinstance(text, FileHandle) and isinstance(text, BufferHandle)
    assert isinstance(corpus, CorpusHandle) and corpus.names() == ["a.txt", "b.md"]


def test_n_tokens_has_one_type() -> None:
    """It gives a corpus's token count as a TokenCount, the sum of its documents' counts."""
    docs = [TextHandle("alpha beta\n", name="a"), TextHandle("gamma delta epsilon\n", name="b")]
    corpus = CorpusHandle.from_items(docs)
    total = corpus.n_tokens
    assert isinstance(total, TokenCount)
    assert total.value == sum(d.n_tokens.value for d in docs)
    assert total.exact == all(d.n_tokens.exact for d in docs)
    assert CorpusHandle([]).n_tokens.value == 0


def test_isinstance_reads_nothing() -> None:
    """It answers isinstance(h, ContextHandle) without loading a lazy handle or counting tokens."""
    calls: list[int] = []

    def load() -> str:
        calls.append(1)
        return "text"

    lazy = LazyHandle(load)
    assert isinstance(lazy, ContextHandle) and calls == []


@pytest.mark.parametrize("value", ["plain str", b"bytes", ["a list"], 3, None])
def test_non_handles_are_not_handles(value: object) -> None:
    """It does not take a str, bytes, list, int or None for a handle."""
    assert not isinstance(value, ContextHandle)


def test_open_context_returns_any_protocol_handle_as_is(folder: Path) -> None:
    """It hands back a handle of either class unchanged."""
    corpus = open_context(folder)
    text = TextHandle("x")
    assert open_context(corpus) is corpus and open_context(text) is text


def test_corpus_lines_need_a_document_when_there_are_several(folder: Path) -> None:
    """It numbers corpus lines per document: doc= picks one, and is required among several."""
    corpus = open_context(folder)
    assert corpus.lines(2, doc="b.md") == ["another needle"]
    assert corpus.lines(1, 2, doc=0) == ["first line", "the needle is here"]
    with pytest.raises(ContextError, match="per document"):
        corpus.lines(1)
    assert CorpusHandle.from_items(["only\none\n"]).lines(2) == ["one"]
    assert corpus.stats.lines == 2


def test_chunk_defaults_come_from_one_place() -> None:
    """It pages every handle with the same default size per unit, the top-level sandbox chunks() too."""
    long = "".join(f"line {i}\n" for i in range(450))
    for h in (TextHandle(long), CorpusHandle.from_items([long])):
        assert h.n_chunks() == 3 and h.chunk(0).size == DEFAULT_CHUNK_SIZE["lines"]
        assert h.chunk(0, unit="chars").size == DEFAULT_CHUNK_SIZE["chars"]
    ns = contexts.namespace([TextHandle(long)])
    assert len(ns["chunks"]()) == 3
