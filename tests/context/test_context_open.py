"""open_context(source) returns the right handle for each kind of source."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlm_runtime.context import CorpusHandle, FileHandle, LazyHandle, TextHandle, open_context
from rlm_runtime.errors import ContextError


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "doc.txt").write_text("file content\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.md").write_text("# a\n")
    (tmp_path / "sub" / "b.md").write_text("# b\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_plain_text_str_is_a_text_handle() -> None:
    """It treats a str that names no path as the text itself."""
    for text in ["hello world", "several\nlines\nof text", "", "x" * 5000, "C:not a path at all"]:
        h = open_context(text)
        assert isinstance(h, TextHandle) and h[:] == text


def test_as_text_forces_text(files: Path) -> None:
    """It keeps an existing path name as text when as_text=True."""
    h = open_context("doc.txt", as_text=True)
    assert isinstance(h, TextHandle) and h[:] == "doc.txt"


def test_name_is_used(files: Path) -> None:
    """It gives the handle the name passed."""
    assert open_context("some text", name="question").name == "question"
    assert open_context(files / "doc.txt", name="d").name == "d"


def test_str_and_path_to_a_file_are_file_handles(files: Path) -> None:
    """It maps a file given as an absolute str, a relative str or a Path."""
    for source in [str(files / "doc.txt"), "doc.txt", "./doc.txt", files / "doc.txt", Path("doc.txt")]:
        h = open_context(source)
        assert isinstance(h, FileHandle) and h[:4] == "file", source


def test_folder_is_a_corpus(files: Path) -> None:
    """It opens a folder (str or Path) as a corpus."""
    for source in [str(files / "sub"), files / "sub", "sub"]:
        c = open_context(source)
        assert isinstance(c, CorpusHandle) and c.names() == ["a.md", "b.md"], source


def test_glob_is_a_corpus(files: Path) -> None:
    """It opens a glob as a corpus of the matching files."""
    c = open_context(str(files / "sub" / "*.md"))
    assert isinstance(c, CorpusHandle) and len(c) == 2
    assert len(open_context("sub/?.md")) == 2


def test_list_and_tuple_are_corpora(files: Path) -> None:
    """It opens a list or a tuple as a corpus of its items."""
    assert isinstance(open_context(["a", "b"]), CorpusHandle)
    assert isinstance(open_context((files / "doc.txt",)), CorpusHandle)


def test_callable_is_lazy() -> None:
    """It wraps a callable in a lazy handle named after it, calling it only when used."""
    calls = []

    def load_report() -> str:
        calls.append(1)
        return "report body"

    h = open_context(load_report)
    assert isinstance(h, LazyHandle) and h.name == "load_report" and calls == []
    assert h[:6] == "report" and calls == [1]
    assert open_context(lambda: "x", name="mine").name == "mine"


def test_handle_passes_through(files: Path) -> None:
    """It returns a handle or corpus unchanged."""
    t = TextHandle("x")
    c = open_context(files / "sub")
    assert open_context(t) is t and open_context(c) is c


def test_missing_paths_are_context_errors(files: Path) -> None:
    """It raises a ContextError for a path-looking str or a Path that does not exist, and for an empty glob."""
    for source in ["/no/such/file.txt", "./missing.txt", "../missing/dir", files / "missing.txt", "nothing/*.md"]:
        with pytest.raises(ContextError):
            open_context(source)


def test_other_types_are_refused() -> None:
    """It refuses bytes (pointing at decoding) and other types with a ContextError."""
    with pytest.raises(ContextError, match="decode"):
        open_context(b"raw bytes")
    for bad in [3, 2.5, None, {"a": 1}]:
        with pytest.raises(ContextError, match="cannot open"):
            open_context(bad)


@pytest.mark.parametrize("text", ["Is this a question?", "What is 2*3?", "Rate it * to *****"])
def test_short_text_with_glob_characters_is_text(files: Path, text: str) -> None:
    """It opens a one-line question as text, not as a glob that matches nothing."""
    h = open_context(text)
    assert isinstance(h, TextHandle) and h[:] == text


def test_tilde_path_is_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It expands ~ to the home folder."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "notes.txt").write_text("home notes\n")
    h = open_context("~/notes.txt")
    assert isinstance(h, FileHandle) and h[:4] == "home"


def test_an_unknown_users_home_is_a_context_error() -> None:
    """It refuses ~nosuchuser/... with a ContextError naming it (pathlib raised a bare RuntimeError)."""
    with pytest.raises(ContextError, match="nosuchuser"):
        open_context("~nosuchuser-rlm-test/notes.txt")
