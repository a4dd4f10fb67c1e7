"""A folder given as a context cannot be steered outside itself after it was walked.

Between the walk of ``notes/`` and the opening of ``notes/sub/doc.txt``, ``notes/sub`` is
replaced by a symlink to a folder holding a ``doc.txt`` with a secret (or the document by a
FIFO, or ``notes`` itself by a link elsewhere). Each path the host reads a walked folder by
(a corpus on the host, its export to the worker, a sandbox run, the search index,
``rlm memory add``, ``rlm eval``'s direct method) must read no secret, never hang, and say why
in words, not a traceback.
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from rlm_runtime.cli import main
from rlm_runtime.context import open_context
from rlm_runtime.context.corpus import CorpusHandle
from rlm_runtime.errors import ContextError, SourceRefused
from rlm_runtime.eval.methods import context_text
from rlm_runtime.memory import IngestConfig, MemorySettings, MemoryStore
from rlm_runtime.memory import ingest as ingest_mod
from rlm_runtime.sandbox import Sandbox, contexts
from rlm_runtime.searching import ChunkSearch

SECRET = "SWAPPED-DIR-CANARY-5e1d94"
SYMLINK = "sub is a symlink"


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    """``notes/sub/doc.txt`` and ``notes/top.txt``, and beside them ``outside/doc.txt`` holding the secret."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "doc.txt").write_text(f"the secret is {SECRET}\n")
    folder = tmp_path / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "doc.txt").write_text("the harbour lantern is lit at dusk\n")
    (folder / "top.txt").write_text("a top level note about tides\n")
    return folder


def swap_dir(notes: Path) -> None:
    """Replace ``notes/sub`` by a symlink to the folder holding the secret."""
    shutil.rmtree(notes / "sub")
    (notes / "sub").symlink_to(notes.parent / "outside", target_is_directory=True)


def swap_fifo(notes: Path) -> None:
    """Replace ``notes/sub/doc.txt`` by a FIFO nobody writes to (opening it to read blocks)."""
    (notes / "sub" / "doc.txt").unlink()
    os.mkfifo(notes / "sub" / "doc.txt")


@contextmanager
def within(seconds: int) -> Iterator[None]:
    """Fail, rather than hang the suite, if the block takes longer than ``seconds``."""
    def expired(*_: Any) -> None:
        raise TimeoutError(f"blocked for {seconds} s (a FIFO opened?)")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def exported_text(corpus: CorpusHandle) -> tuple[list[dict[str, Any]], str]:
    """(document specs, every byte the worker would get), through the export a run uses."""
    specs, fds, _ = contexts.export([corpus])
    try:
        data = b"".join(os.pread(fd, 1 << 20, 0) for fd in fds)
    finally:
        for fd in fds:
            os.close(fd)
    return specs[0]["docs"], data.decode("utf-8", "replace")


# ----------------------------------------------------------------- the corpus (rlm ask -c notes/)


def test_a_nested_folder_still_reads(notes: Path) -> None:
    """It lists and reads the documents of nested folders as before."""
    corpus = open_context(notes)
    assert isinstance(corpus, CorpusHandle)
    assert corpus.names() == ["sub/doc.txt", "top.txt"]
    assert "harbour lantern" in corpus.doc("sub/doc.txt").get_full()
    docs, text = exported_text(corpus)
    assert [d["skip"] for d in docs] == [None, None] and "harbour lantern" in text and "tides" in text


def test_symlinks_inside_the_folder_are_still_not_listed(notes: Path) -> None:
    """It lists no symlink at walk time, to a folder inside or outside, as before."""
    (notes / "inside").symlink_to(notes / "sub", target_is_directory=True)
    (notes / "out").symlink_to(notes.parent / "outside", target_is_directory=True)
    (notes / "again.txt").symlink_to(notes / "top.txt")
    assert open_context(notes).names() == ["sub/doc.txt", "top.txt"]  # type: ignore[attr-defined]


def test_a_folder_swapped_for_a_symlink_is_not_read_on_the_host(notes: Path) -> None:
    """It reads nothing through a folder swapped for a symlink after the walk, and says why."""
    corpus = open_context(notes)
    assert isinstance(corpus, CorpusHandle)
    swap_dir(notes)
    doc = corpus.documents[0]
    assert doc.name == "sub/doc.txt"
    reason = doc.check()
    assert reason is not None and reason.startswith("unreadable: ") and SYMLINK in reason, reason
    with pytest.raises(ContextError, match=f"cannot open document 'sub/doc.txt': {SYMLINK}"):
        corpus.doc("sub/doc.txt").get_full()
    text = corpus.get_full()
    assert SECRET not in text and "tides" in text
    assert SYMLINK in corpus.skipped["sub/doc.txt"]
    assert not corpus.grep("secret") and SECRET not in corpus.get_full(include_skipped=True)


def test_a_folder_swapped_for_a_symlink_is_not_sent_to_the_worker(notes: Path) -> None:
    """It sends the worker no descriptor of the secret: the document goes as skipped, with the reason."""
    corpus = open_context(notes)
    assert isinstance(corpus, CorpusHandle)
    swap_dir(notes)
    docs, text = exported_text(corpus)
    assert SECRET not in text and "tides" in text
    assert docs[0]["fd"] is None and SYMLINK in docs[0]["skip"], docs[0]


def test_a_run_over_the_swapped_folder_reads_no_secret(notes: Path) -> None:
    """It runs a sandboxed cell over the corpus: the cell finds no secret and is told the document was skipped."""
    corpus = open_context(notes)
    swap_dir(notes)
    with Sandbox("default", contexts=[corpus]) as sb:
        r = sb.execute("print(context.grep('secret'))\nprint(context.get_full(include_skipped=True))\n"
                       "for d in context.documents:\n    print(d.name, '|', d.skip)")
    out = (r.stdout or "") + (r.error or "")
    assert SECRET not in out
    assert "Traceback" not in out and "tides" in out
    assert any(line.startswith("sub/doc.txt |") and SYMLINK in line for line in out.splitlines()), out


def test_the_folder_itself_replaced_is_not_read(notes: Path) -> None:
    """It reads nothing once the folder it walked is replaced by a link to another holding the same names."""
    corpus = open_context(notes)
    assert isinstance(corpus, CorpusHandle)
    elsewhere = notes.parent / "elsewhere"
    (elsewhere / "sub").mkdir(parents=True)
    (elsewhere / "sub" / "doc.txt").write_text(f"{SECRET}\n")
    (elsewhere / "top.txt").write_text(f"{SECRET}\n")
    notes.rename(notes.parent / "old-notes")
    notes.symlink_to(elsewhere, target_is_directory=True)
    assert SECRET not in corpus.get_full()
    assert all("folder was replaced" in reason for reason in corpus.skipped.values()) and len(corpus.skipped) == 2


def test_a_fifo_swapped_in_does_not_hang_the_host(notes: Path) -> None:
    """It skips a document become a FIFO, or a folder become one, at once, and says it is not a regular file."""
    corpus = open_context(notes)
    assert isinstance(corpus, CorpusHandle)
    swap_fifo(notes)
    with within(10):
        assert "not a regular file" in (corpus.documents[0].check() or "")
        docs, text = exported_text(corpus)
        assert docs[0]["fd"] is None and "not a regular file" in docs[0]["skip"]
        assert "tides" in corpus.get_full()
    shutil.rmtree(notes / "sub")
    os.mkfifo(notes / "sub")
    with within(10):
        assert (corpus.documents[0].check() or "").startswith("unreadable: ")
        assert "tides" in corpus.get_full()


def test_the_search_index_of_a_swapped_folder_holds_no_secret(notes: Path, tmp_path: Path) -> None:
    """It builds the search_chunks index of the folder without the secret."""
    corpus = open_context(notes)
    swap_dir(notes)
    search = ChunkSearch(tmp_path / "index")
    search.set_contexts([corpus])
    try:
        for query in ("secret", SECRET, "harbour lantern"):
            assert not search.search(query, mode="bm25")
            for mode in ("hybrid", "vector"):  # by meaning the nearest chunks come back: none holds the secret
                assert SECRET not in repr(search.search(query, mode=mode))
        assert search.search("tides")
    finally:
        search.close()


# ----------------------------------------------------------------- rlm memory add FOLDER


def stored_text(store: Path) -> str:
    with MemoryStore(store, readonly=True) as s:
        return "\n".join(str(r[0]) for r in s.db.conn.execute("SELECT text FROM chunks"))


def test_memory_add_reads_no_file_through_a_folder_swapped_after_the_walk(notes: Path, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """It stores nothing reached through a folder swapped for a symlink between the walk and the read, and says why."""
    real = ingest_mod.collect

    def collect_then_swap(*args: Any, **kw: Any) -> Any:
        found = real(*args, **kw)
        swap_dir(notes)
        return found

    monkeypatch.setattr(ingest_mod, "collect", collect_then_swap)
    store = tmp_path / "memory.db"
    assert main(["memory", "add", str(notes), "--store", str(store)]) == 0
    said = capsys.readouterr()
    out = said.out + said.err
    assert SECRET not in out and "Traceback" not in out
    assert f"sub/doc.txt: unreadable: {SYMLINK}" in out, out
    assert SECRET not in stored_text(store) and "tides" in stored_text(store)


def test_memory_add_lists_no_folder_swapped_during_the_walk(notes: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It does not list a folder swapped for a symlink after it was found and before it was listed."""
    real = ingest_mod.list_beneath

    def swap_then_list(base: Any, under: Any = "") -> Any:
        if under == "sub" and not (notes / "sub").is_symlink():
            swap_dir(notes)
        return real(base, under)

    monkeypatch.setattr(ingest_mod, "list_beneath", swap_then_list)
    with MemoryStore(tmp_path / "memory.db") as store:
        report = store.ingest([notes])
    reasons = {os.path.relpath(s.path, notes): s.reason for s in report.skipped}
    assert reasons == {"sub": f"unreadable folder: {SYMLINK} (put there after the folder was listed): not followed, "
                              "nothing outside the folder is read"}
    assert report.files == 1 and SECRET not in stored_text(tmp_path / "memory.db")


def test_memory_add_skips_a_fifo_swapped_in_without_blocking(notes: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It skips a file become a FIFO between the walk and the read, at once."""
    real = ingest_mod.collect

    def collect_then_swap(*args: Any, **kw: Any) -> Any:
        found = real(*args, **kw)
        swap_fifo(notes)
        return found

    monkeypatch.setattr(ingest_mod, "collect", collect_then_swap)
    with within(10), MemoryStore(tmp_path / "memory.db") as store:
        report = store.ingest([notes])
    reasons = {os.path.relpath(s.path, notes): s.reason for s in report.skipped}
    assert list(reasons) == ["sub/doc.txt"] and "not a regular file" in reasons["sub/doc.txt"]
    assert report.files == 1


def test_memory_add_still_follows_links_that_stay_inside(notes: Path, tmp_path: Path) -> None:
    """It stores a file reached only through a symlink that stays inside the folder, under the link's path."""
    (notes / "hidden").mkdir()
    (notes / "hidden" / "note.md").write_text("the quokka smiles at the ferry\n")
    (notes / "link.md").symlink_to(notes / "hidden" / "note.md")
    (notes / "linked").symlink_to(notes / "hidden", target_is_directory=True)
    settings = MemorySettings(ingest=IngestConfig(excludes=("hidden",)))
    with MemoryStore(tmp_path / "memory.db", settings=settings) as store:
        report = store.ingest([notes])
        sources = {os.path.relpath(str(r[0]), notes) for r in store.db.conn.execute("SELECT path FROM sources")}
    assert report.files == 3, report.skipped
    assert {"link.md", "sub/doc.txt", "top.txt"} <= sources or {"linked/note.md", "sub/doc.txt", "top.txt"} <= sources, sources
    assert "quokka" in stored_text(tmp_path / "memory.db")


# ----------------------------------------------------------------- rlm eval --method direct


def test_direct_pastes_a_nested_folder(notes: Path) -> None:
    """It pastes every regular file of a nested folder, each under its path."""
    text, _ = context_text([notes])
    assert "=== sub/doc.txt ===\nthe harbour lantern" in text and "=== top.txt ===" in text


def test_direct_refuses_a_folder_swapped_for_a_symlink(notes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It refuses, naming the symlink, a task folder whose subfolder was swapped after the walk; no secret is pasted."""
    from rlm_runtime.context import beneath

    real = beneath.walk_beneath

    def walk_then_swap(*args: Any, **kw: Any) -> Iterator[Any]:
        found = list(real(*args, **kw))
        swap_dir(notes)
        return iter(found)

    monkeypatch.setattr(beneath, "walk_beneath", walk_then_swap)
    with pytest.raises(SourceRefused, match=SYMLINK) as refused:
        context_text([notes])
    assert SECRET not in str(refused.value)


def test_direct_refuses_a_fifo_swapped_in_without_blocking(notes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It refuses a task folder whose file became a FIFO after the walk, at once."""
    from rlm_runtime.context import beneath

    real = beneath.walk_beneath

    def walk_then_swap(*args: Any, **kw: Any) -> Iterator[Any]:
        found = list(real(*args, **kw))
        swap_fifo(notes)
        return iter(found)

    monkeypatch.setattr(beneath, "walk_beneath", walk_then_swap)
    with within(10), pytest.raises(SourceRefused, match="not a regular file"):
        context_text([notes])
