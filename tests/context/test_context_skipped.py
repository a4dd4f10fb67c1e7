"""Skipped documents: listed (marked) but left out of grep, count and chunks unless asked, on the host and in a worker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rlm_runtime.context import CorpusHandle, ProbeConfig, describe, mark_skipped_documents, open_context
from rlm_runtime.errors import ContextError
from rlm_runtime.sandbox import CellLimits, Sandbox, contexts

CONFIG = ProbeConfig(keywords=("needle",), min_relevance=0.5)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    root.mkdir()
    (root / "a.txt").write_text("needle in a\nline two\n")
    (root / "b.txt").write_text("hay only\nhay\nhay\n")
    (root / "blob.dat").write_bytes(b"\x00\x01needle")
    (root / "empty.txt").write_text("")
    return root


@pytest.fixture
def marked(folder: Path) -> CorpusHandle:
    """The folder as a corpus, its probe's verdicts acted on: b.txt irrelevant, blob.dat binary, empty.txt empty."""
    corpus = open_context(folder)
    assert isinstance(corpus, CorpusHandle)
    describe([corpus], question="Where is the hay?", config=CONFIG, inline_max_chars=0)
    return corpus


def test_marks_are_listed(marked: CorpusHandle) -> None:
    """It keeps skipped documents in names(), peek and repr, marked with their reason."""
    assert marked.names() == ["a.txt", "b.txt", "blob.dat", "empty.txt"]
    assert marked.skipped == {"b.txt": "relevance below 0.5 for keywords needle", "blob.dat": "binary content",
                              "empty.txt": "empty"}
    text = marked.peek()
    assert "[1] b.txt (17 bytes) [skipped: relevance below 0.5 for keywords needle]" in text
    assert "[2] blob.dat (8 bytes) [skipped: binary content]" in text
    assert "include_skipped=True" in text
    assert "4 documents (3 skipped)" in repr(marked)
    assert "skipped: binary content" in repr(marked.documents[2])


def test_searches_leave_skipped_documents_out(marked: CorpusHandle) -> None:
    """It greps, counts, pages and joins only the documents not skipped, unless include_skipped=True."""
    assert marked.grep("hay") == [] and marked.count("hay") == 0
    assert [m.doc for m in marked.grep("hay", include_skipped=True)] == ["b.txt", "b.txt", "b.txt"]
    assert marked.count("hay", include_skipped=True) == 3
    assert marked.grep("hay", max_matches=1, include_skipped=True).count() == 3
    assert marked.n_chunks(1) == 2 and marked.n_chunks(1, include_skipped=True) == 5
    assert [c.splitlines()[0] for c in marked.chunks(1)] == ["[document 0: a.txt]"] * 2
    assert marked.chunk(2, 1, include_skipped=True) == "[document 1: b.txt]\nhay only"
    assert "hay" not in marked.get_full() and "hay only" in marked.get_full(include_skipped=True)
    assert marked.n_tokens.value == marked.doc("a.txt").n_tokens.value
    assert marked.lines(1) == ["needle in a"]  # the one document searched needs no doc=


def test_a_skipped_document_is_still_readable_by_name(marked: CorpusHandle) -> None:
    """It opens a skipped text document asked for by name; a binary one still refuses with its reason."""
    assert marked.doc("b.txt").lines(1) == ["hay only"]
    with pytest.raises(ContextError, match="binary"):
        marked.doc("blob.dat")


def test_mark_skipped_replaces_the_marks(folder: Path) -> None:
    """It marks exactly the documents given, clears the others, and refuses unknown names."""
    corpus = open_context(folder)
    assert isinstance(corpus, CorpusHandle)
    corpus.mark_skipped({"a.txt": "by hand"})
    assert corpus.skipped == {"a.txt": "by hand"}
    corpus.mark_skipped({})
    assert corpus.skipped == {}
    with pytest.raises(ContextError, match="nope"):
        corpus.mark_skipped({"nope": "x"})


def test_marks_without_a_question(folder: Path) -> None:
    """It marks the same documents as describe, without a question, for a caller to do before a worker starts."""
    corpus, text = open_context(folder), open_context("not a corpus")
    assert mark_skipped_documents([corpus, text], CONFIG) == {"kb": corpus.skipped}
    assert set(corpus.skipped) == {"b.txt", "blob.dat", "empty.txt"}


def test_unreadable_document_found_while_searching_is_marked(folder: Path) -> None:
    """It marks a document skipped when a search finds it binary, so the listing says why it was left out."""
    corpus = open_context(folder)
    assert isinstance(corpus, CorpusHandle) and corpus.skipped == {}
    assert [m.doc for m in corpus.grep("needle")] == ["a.txt"]
    assert corpus.skipped == {"blob.dat": "binary content"}


def test_marks_travel_in_the_specs(marked: CorpusHandle) -> None:
    """It exports every document with its mark (a binary one without a descriptor) and rebuilds the same marks."""
    specs, fds, _ = contexts.export([marked])
    docs = specs[0]["docs"]
    assert [(d["name"], d["fd"] is not None, d["skip"]) for d in docs] == [
        ("a.txt", True, None), ("b.txt", True, "relevance below 0.5 for keywords needle"),
        ("blob.dat", False, "binary content"), ("empty.txt", True, "empty")]
    (rebuilt,) = contexts.build(specs, fds)
    assert rebuilt.skipped == marked.skipped and rebuilt.names() == marked.names()
    assert rebuilt.peek() == marked.peek()


@pytest.fixture
def marked_sandbox(marked: CorpusHandle) -> Iterator[Sandbox]:
    limits = CellLimits(cell_timeout_s=10, kill_grace_s=0.5, memory_mb=256)
    with Sandbox("default", limits, contexts=[marked]) as sb:
        yield sb


def _run(sb: Sandbox, code: str) -> str:
    result = sb.execute(code)
    assert result.ok, (code, result.error)
    return result.stdout


def test_marks_hold_in_the_sandbox(marked_sandbox: Sandbox, marked: CorpusHandle) -> None:
    """It lists skipped documents in the worker, marked, and leaves them out of its searches unless asked."""
    sb = marked_sandbox
    assert _run(sb, "context.names()") == repr(marked.names()) + "\n"
    assert _run(sb, "context.skipped") == repr(marked.skipped) + "\n"
    assert "[skipped: binary content]" in _run(sb, "peek()")
    assert _run(sb, "grep('hay')") == repr(marked.grep("hay")) + "\n"
    assert _run(sb, "grep('hay', include_skipped=True)") == "b.txt:1: hay only\nb.txt:2: hay\nb.txt:3: hay\n"
    assert _run(sb, "context.count('hay', include_skipped=True)") == "3\n"
    assert _run(sb, "len(chunks(1))") == "2\n"
    assert _run(sb, "len(chunks(1, include_skipped=True))") == "5\n"
    assert _run(sb, "chunk(2, 1, include_skipped=True)") == repr(marked.chunk(2, 1, include_skipped=True)) + "\n"
    r = sb.execute("context.doc('blob.dat')")
    assert r.error_type == "ContextError" and "binary content" in r.error


def test_include_skipped_is_harmless_on_a_single_text() -> None:
    """It accepts include_skipped in the sandbox's top-level grep and chunk for a single text, where nothing is skipped."""
    limits = CellLimits(cell_timeout_s=10, kill_grace_s=0.5, memory_mb=256)
    with Sandbox("default", limits, contexts=["one needle\n"]) as sb:
        assert _run(sb, "grep('needle', include_skipped=True)") == "1: one needle\n"
        assert _run(sb, "chunk(0, include_skipped=True)").endswith("one needle\n")
