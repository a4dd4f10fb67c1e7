"""Corpora: a folder, a glob or a list of documents, searched and paged across documents."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlm_runtime.context import CorpusHandle, Document, TextHandle, open_context
from rlm_runtime.context.corpus import walk_folder
from rlm_runtime.errors import ContextError


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A small project folder with the usual clutter."""
    root = tmp_path / "proj"
    files = {
        "README.md": "# Project\nneedle in the readme\n",
        "src/app.py": "def main():\n    return 'needle'\n",
        "src/util/helpers.py": "def helper():\n    pass\n",
        "src/util/deep/deeper/leaf.txt": "deep needle\n",
        "docs/guide.txt": "line one\nline two\n",
        "notes.txt": "n1\nn2\nn3\n",
        ".git/config": "[core]\nneedle = git\n",
        "node_modules/pkg/index.js": "needle from node_modules\n",
        "src/__pycache__/app.cpython-311.pyc": "needle in bytecode\n",
        "build/out.txt": "needle in build output\n",
        "dist/pkg.txt": "needle in dist\n",
        "pkg.egg-info/PKG-INFO": "needle in egg-info\n",
        ".venv/lib.py": "needle in venv\n",
    }
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 50)
    (root / "model.gguf").write_bytes(b"needle" * 10)
    return root


def test_folder_corpus_lists_text_documents_and_excludes_clutter(project: Path) -> None:
    """It lists the folder's text files by relative path, sorted, leaving out VCS, caches, build outputs and binaries."""
    corpus = open_context(project)
    assert isinstance(corpus, CorpusHandle) and corpus.kind == "corpus"
    assert corpus.names() == sorted([
        "README.md", "docs/guide.txt", "notes.txt", "src/app.py", "src/util/deep/deeper/leaf.txt", "src/util/helpers.py",
    ])
    assert len(corpus) == 6
    assert [d.id for d in corpus] == list(range(6))
    assert all(isinstance(d, Document) for d in corpus)
    assert corpus.n_bytes == sum((project / n).stat().st_size for n in corpus.names())
    assert corpus.name == "proj" and corpus.root == str(project)


def test_folder_documents_open_lazily(project: Path) -> None:
    """It opens no document until one is used."""
    corpus = CorpusHandle.from_folder(project)
    assert all(d._handle is None for d in corpus)
    corpus.doc(0)
    assert corpus.documents[0]._handle is not None and corpus.documents[1]._handle is None


def test_folder_extension_filter_and_depth(project: Path) -> None:
    """It keeps only the given extensions (with or without the dot) and stops at max_depth."""
    assert CorpusHandle.from_folder(project, extensions=[".py"]).names() == ["src/app.py", "src/util/helpers.py"]
    assert CorpusHandle.from_folder(project, extensions=["txt", "md"]).names() == [
        "README.md", "docs/guide.txt", "notes.txt", "src/util/deep/deeper/leaf.txt"]
    assert CorpusHandle.from_folder(project, max_depth=0).names() == ["README.md", "notes.txt"]
    assert CorpusHandle.from_folder(project, max_depth=1).names() == ["README.md", "docs/guide.txt", "notes.txt", "src/app.py"]


def test_folder_custom_excludes(project: Path) -> None:
    """It takes its own exclusion globs, which replace the defaults."""
    names = CorpusHandle.from_folder(project, excludes=["src", "*.md"]).names()
    assert "README.md" not in names and not any(n.startswith("src/") for n in names)
    assert ".git/config" in names  # the defaults were replaced


def test_extension_filter_is_case_insensitive(tmp_path: Path) -> None:
    """It matches configured extensions whatever their case."""
    (tmp_path / "README.MD").write_text("x\n")
    assert CorpusHandle.from_folder(tmp_path, extensions=[".MD"]).names() == ["README.MD"]


def test_missing_folder_is_a_context_error(tmp_path: Path) -> None:
    """It raises a ContextError for a folder that does not exist."""
    with pytest.raises(ContextError, match="not found"):
        walk_folder(tmp_path / "nowhere")


def test_corpus_grep_names_the_document(project: Path) -> None:
    """It greps every document and prefixes each match with its document's name."""
    res = open_context(project).grep("needle")
    assert [(m.doc, m.line_no, m.line) for m in res] == [
        ("README.md", 2, "needle in the readme"),
        ("src/app.py", 2, "    return 'needle'"),
        ("src/util/deep/deeper/leaf.txt", 1, "deep needle"),
    ]
    assert repr(res).splitlines() == ["README.md:2: needle in the readme", "src/app.py:2:     return 'needle'",
                                      "src/util/deep/deeper/leaf.txt:1: deep needle"]
    assert res.complete


def test_corpus_grep_with_context_lines_and_limits(project: Path) -> None:
    """It applies context_lines, ignore_case and max_matches across documents."""
    corpus = open_context(project)
    (m,) = corpus.grep("^LINE TWO$", ignore_case=True, context_lines=1)
    assert m.doc == "docs/guide.txt" and m.before == ["line one"]
    assert repr(m) == "docs/guide.txt:1- line one\ndocs/guide.txt:2: line two"
    limited = corpus.grep("needle", max_matches=2)
    assert len(limited) == 2 and not limited.complete
    assert corpus.count("needle") == 3
    with pytest.raises(ContextError):
        corpus.grep("(x)\\1")


def test_corpus_grep_exactly_max_matches_is_complete() -> None:
    """It reports complete=True when the matches found are all there are."""
    corpus = CorpusHandle.from_items(["foo\nfoo\n", "bar\n"])
    res = corpus.grep("foo", max_matches=2)
    assert len(res) == 2 and res.complete


def test_corpus_lines_without_a_range_are_one_documents_lines() -> None:
    """It returns every line of the one searched document, or of the one named, and asks which
    document when there are several."""
    assert CorpusHandle.from_items(["a\nb\n"]).lines() == ["a", "b"]
    several = CorpusHandle.from_items(["a\nb\n", "c\n"])
    assert several.lines(doc=1) == ["c"]
    with pytest.raises(ContextError, match=r"say which, e\.g\. lines\(doc="):
        several.lines()


def test_corpus_doc_by_index_and_name(project: Path) -> None:
    """It returns a document's own handle by index (negative too) or by name."""
    corpus = open_context(project)
    assert corpus.doc("notes.txt").lines(2) == ["n2"]
    assert corpus["notes.txt"][:2] == "n1"
    assert corpus.doc(0).name == "README.md" and corpus.doc(-1).name == "src/util/helpers.py"
    with pytest.raises(ContextError, match="out of range"):
        corpus.doc(6)


def test_corpus_doc_unknown_name_suggests_similar(project: Path) -> None:
    """It names similar documents when a name is not found."""
    corpus = open_context(project)
    with pytest.raises(ContextError, match="similar: .*src/app.py"):
        corpus.doc("app")
    with pytest.raises(ContextError, match="README.md"):
        corpus.doc("readme")


def test_corpus_doc_typo_suggests_close_name(project: Path) -> None:
    """It suggests the closest name for a misspelt one."""
    with pytest.raises(ContextError, match="notes.txt"):
        open_context(project).doc("note.txt")


def test_corpus_peek_is_an_inventory(project: Path) -> None:
    """It peeks at a corpus as a list of documents with sizes, cut at about n characters."""
    corpus = open_context(project)
    text = corpus.peek()
    assert text.splitlines()[0].startswith("corpus proj: 6 documents")
    assert "[0] README.md" in text and "[5] src/util/helpers.py" in text
    short = corpus.peek(80)
    assert "more; corpus.names()" in short


def test_corpus_chunks_never_span_documents(project: Path) -> None:
    """It pages documents in order, each chunk naming its document, with navigation over the whole corpus."""
    corpus = open_context(project)
    total = corpus.n_chunks(1, "lines")
    assert total == sum(d.handle.n_lines for d in corpus)
    chunks = list(corpus.chunks(1))
    assert len(chunks) == total == chunks[0].total
    assert chunks[0].startswith("[document 0: README.md]\n# Project")
    assert chunks[-1] == "[document 5: src/util/helpers.py]\n    pass"
    assert chunks[0].prev is None and chunks[-1].next is None and chunks[3].prev == 2
    with pytest.raises(ContextError, match="out of range"):
        corpus.chunk(total, 1)


def test_corpus_char_chunks_with_default_size(tmp_path: Path) -> None:
    """It pages by characters with the default size consistently."""
    (tmp_path / "a.txt").write_text("x\n" * 500)
    (tmp_path / "b.txt").write_text("y\n" * 500)
    corpus = open_context(tmp_path)
    assert corpus.n_chunks(unit="chars") == 2
    assert [c.size for c in corpus.chunks(unit="chars")] == [8000, 8000]


def test_corpus_with_binary_content_document(tmp_path: Path) -> None:
    """It skips a document whose content is binary for every operation, as grep does."""
    (tmp_path / "a.txt").write_text("needle\n")
    (tmp_path / "data.dat").write_bytes(b"\x00\x01\x02" * 100)
    corpus = open_context(tmp_path)
    assert [m.doc for m in corpus.grep("needle")] == ["a.txt"]
    assert corpus.n_chunks() == 1
    assert "needle" in corpus.chunk(0)
    assert corpus.n_tokens.value > 0


def test_glob_corpus(project: Path) -> None:
    """It builds a corpus from a glob (recursive **), naming documents by their paths."""
    corpus = open_context(str(project / "src" / "**" / "*.py"))
    assert isinstance(corpus, CorpusHandle)
    assert corpus.names() == [str(project / "src/app.py"), str(project / "src/util/helpers.py")]
    assert [m.doc for m in corpus.grep("def")] == corpus.names()
    with pytest.raises(ContextError, match="no files match"):
        CorpusHandle.from_glob(str(project / "*.nothing"))


def test_list_corpus_of_texts_paths_and_handles(project: Path) -> None:
    """It builds a corpus from a list mixing in-memory texts, paths (str or Path) and handles."""
    own = TextHandle("handle text needle\n", name="mine")
    corpus = open_context(["first text\nneedle one\n", project / "notes.txt", str(project / "README.md"), own])
    assert isinstance(corpus, CorpusHandle)
    assert corpus.names() == ["doc0", str(project / "notes.txt"), str(project / "README.md"), "mine"]
    assert corpus.doc(3) is own
    assert [(m.doc, m.line_no) for m in corpus.grep("needle")] == [
        ("doc0", 2), (str(project / "README.md"), 2), ("mine", 1)]
    assert open_context(("a", "b")).names() == ["doc0", "doc1"]


def test_list_corpus_refuses_other_items() -> None:
    """It refuses list items that are neither text, path nor handle."""
    with pytest.raises(ContextError, match="int"):
        open_context(["ok", 3])


def test_list_corpus_with_missing_path_is_a_context_error(tmp_path: Path) -> None:
    """It raises a ContextError for a list item naming a missing file."""
    with pytest.raises(ContextError, match="missing.txt"):
        open_context([tmp_path / "missing.txt"])


def test_corpus_full_text_and_stats(project: Path) -> None:
    """It joins documents under headers in get_full and records corpus-level accesses."""
    corpus = open_context(project)
    full = corpus.get_full()
    assert full.startswith("=== README.md ===\n# Project")
    assert "=== notes.txt ===\nn1\nn2\nn3\n" in full
    corpus.peek()
    corpus.grep("x")
    assert (corpus.stats.peeks, corpus.stats.greps, corpus.stats.full_loads) == (1, 1, 1)
    assert "6 documents" in repr(corpus)


def test_empty_folder_corpus(tmp_path: Path) -> None:
    """It opens an empty folder as an empty corpus."""
    corpus = open_context(tmp_path)
    assert len(corpus) == 0 and corpus.n_bytes == 0 and list(corpus.grep("x")) == [] and corpus.n_chunks() == 0


def test_corpus_empty_phrase_grep_names_the_words_that_match_alone() -> None:
    """It gives a corpus grep the same hint as a single text: the phrase's words that match."""
    corpus = CorpusHandle.from_items([TextHandle("Staff note: Casey reports to Quinn.\n", name="a"),
                                      TextHandle("Quinn works in room 589.\n", name="b")])
    hint = repr(corpus.grep("Casey works in"))
    assert "'Casey' 1 line" in hint and "'works' 1 line" in hint
    assert "Try grep('Casey', ignore_case=True)" in hint
