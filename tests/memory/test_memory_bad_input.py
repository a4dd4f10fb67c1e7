"""Bad input to ingest: each file is skipped or handled with a reason, the ingest goes on, and
nothing stored before is lost."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import pytest
from conftest import paragraphs, small_chunks

from rlm_runtime.memory import IngestConfig, MemorySettings, MemoryStore
from rlm_runtime.memory import ingest as ingest_mod


def reasons(report: object) -> dict[str, str]:
    return {Path(s.path).name: s.reason for s in report.skipped}  # type: ignore[attr-defined]


def test_skips_binary_files(store: MemoryStore, write: Callable[..., Path]) -> None:
    """It skips a binary extension unread and a file whose first bytes hold NULs, and goes on."""
    write("image.png", b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    write("blob.txt", b"abc\x00\x01\x02" * 100)
    good = write("good.txt", "the capybara is the largest rodent\n")
    report = store.ingest([good.parent])
    assert reasons(report) == {"image.png": "binary file type (.png)", "blob.txt": "binary content"}
    assert report.files == 1 and store.search("capybara", record=False)


def test_replaces_invalid_utf8_and_says_so(store: MemoryStore, write: Callable[..., Path]) -> None:
    """It stores a file with invalid UTF-8, bad bytes replaced by U+FFFD, and reports it."""
    path = write("latin1.txt", "café au lait\n".encode("latin-1") + b"plain ascii tail about narwhals\n")
    report = store.ingest(path)
    [skip] = report.skipped
    assert skip.stored and "invalid UTF-8 replaced" in skip.reason
    [hit] = store.search("narwhals", record=False)
    assert "caf\ufffd" in store.read(hit.chunk_id).text
    assert report.files == 1


def test_skips_a_file_whose_name_is_not_utf8(store: MemoryStore, write: Callable[..., Path]) -> None:
    """It skips a file whose name is not UTF-8 (the store keeps paths as text) with a reason, in a
    folder or named, and stores the rest: the ingest raised UnicodeEncodeError and stored nothing."""
    good = write("good.txt", "the capybara is the largest rodent\n")
    bad = os.path.join(os.fsencode(good.parent), b"caf\xe9.txt")
    with open(bad, "wb") as f:
        f.write(b"the okapi lives in the forest\n")
    report = store.ingest([good.parent])
    assert [(s.path, s.reason) for s in report.skipped] == [(os.fsdecode(bad), "its name is not UTF-8")]
    assert report.files == 1 and store.search("capybara", record=False) and not store.search("okapi", record=False, mode="bm25")
    assert [s.reason for s in store.ingest(os.fsdecode(bad)).skipped] == ["its name is not UTF-8"]


def test_a_text_holding_a_lone_surrogate_is_stored_with_u_fffd(store: MemoryStore) -> None:
    """It stores a text or a source name holding a lone surrogate (a model's string, a folder's
    listing of a file name that is not UTF-8) with U+FFFD in its place: SQLite refused it."""
    [chunk] = store.add_text("the narwhal\udcff tusk", source="caf\udce9")
    assert store.read(chunk).text == "the narwhal\ufffd tusk"
    assert store.search("narwhal", record=False)


def test_skips_empty_files(store: MemoryStore, write: Callable[..., Path]) -> None:
    """It skips an empty file with a reason."""
    report = store.ingest(write("empty.txt", b""))
    assert reasons(report) == {"empty.txt": "empty file"} and store.stats().chunks == 0


def test_survives_symlink_loops_and_broken_links(store: MemoryStore, write: Callable[..., Path]) -> None:
    """It walks a folder reached again through a symlink once, and reports loops and broken links."""
    good = write("sub/good.txt", "the axolotl regrows its limbs\n")
    docs = good.parent.parent
    os.symlink(docs, docs / "sub" / "back")  # a loop to an ancestor
    os.symlink(docs / "self", docs / "self")  # a link to itself
    os.symlink(docs / "missing.txt", docs / "broken.txt")
    report = store.ingest([docs])
    found = reasons(report)
    assert found["back"] == "symlink loop (a link back to a folder above it)"
    assert found["self"] == "symlink loop"
    assert found["broken.txt"] == "broken symlink"
    assert report.files == 1 and len(store.search("axolotl", record=False)) == 1


def test_a_second_link_to_a_folder_is_not_called_a_loop(store: MemoryStore, write: Callable[..., Path]) -> None:
    """It walks a folder linked twice (latest -> v2) once and says why, without calling it a loop."""
    doc = write("docs/v2/guide.txt", "the pangolin curls into a ball\n")
    docs = doc.parent.parent
    os.symlink(docs / "v2", docs / "latest")
    report = store.ingest([docs])
    found = reasons(report)
    assert list(found.values()) == ["a second path to a folder already walked"]  # v2 or latest, whichever came second
    assert report.files == 1 and len(store.search("pangolin", record=False)) == 1


def test_skips_unreadable_files(store: MemoryStore, write: Callable[..., Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """It skips a file it may not open, with the OS's reason, and ingests the others."""
    secret = write("secret.txt", "classified\n")
    write("open.txt", "the pangolin has scales\n")
    real = ingest_mod._open_binary

    def refuse(path: str, *beneath: Any) -> IO[bytes]:
        if path == str(secret):
            raise PermissionError(13, "Permission denied")
        return real(path, *beneath)

    monkeypatch.setattr(ingest_mod, "_open_binary", refuse)
    report = store.ingest([secret.parent])
    assert reasons(report) == {"secret.txt": "unreadable: Permission denied"}
    assert report.files == 1


def test_skips_fifos_without_blocking(store: MemoryStore, write: Callable[..., Path]) -> None:
    """It never opens a FIFO (that would block): not a regular file."""
    good = write("good.txt", "the quokka smiles\n")
    os.mkfifo(good.parent / "pipe")
    assert reasons(store.ingest([good.parent])) == {"pipe": "not a regular file"}


def test_reports_paths_that_do_not_exist(store: MemoryStore, tmp_path: Path) -> None:
    """It reports a path that does not exist and goes on."""
    assert reasons(store.ingest([tmp_path / "nope.txt"])) == {"nope.txt": "not found"}


def test_keeps_what_was_stored_when_a_file_turns_bad(open_store: Callable[..., MemoryStore], write: Callable[..., Path],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """It keeps a file's chunks when the file turns binary, empty or unreadable."""
    st = open_store(small_chunks())
    a = write("a.txt", paragraphs("aardvark", 3))
    b = write("b.txt", paragraphs("bison", 3))
    c = write("c.txt", paragraphs("caracal", 3))
    st.ingest([a.parent])
    before = st.stats().chunks
    a.write_bytes(b"\x00" * 50)
    b.write_bytes(b"")
    c.write_text(paragraphs("caracal", 4))
    monkeypatch.setattr(ingest_mod, "_open_binary", lambda path, *_: (_ for _ in ()).throw(OSError(5, "Input/output error"))
                        if path == str(c) else open(path, "rb"))
    report = st.ingest([a.parent])
    found = reasons(report)
    assert found["a.txt"].startswith("binary content") and "kept" in found["a.txt"]
    assert found["b.txt"].startswith("empty file") and "kept" in found["b.txt"]
    assert found["c.txt"].startswith("unreadable")
    assert st.stats().chunks == before
    for word in ("aardvark0word0", "bison0word0", "caracal0word0"):
        assert st.search(word, record=False)


def test_large_file_is_streamed_in_bounded_windows(open_store: Callable[..., MemoryStore], write: Callable[..., Path],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """It reads a long file one bounded window at a time and writes chunks before reaching its end."""
    path = write("big.txt", paragraphs("huge", 800, words=40))
    size = path.stat().st_size
    window = 16 * 1024
    reads: list[int] = []
    events: list[tuple[int, int]] = []  # (bytes read so far, chunks written so far)

    class Recording:
        def __init__(self, fh: IO[bytes]) -> None:
            self.fh = fh

        def read(self, n: int = -1) -> bytes:
            data = self.fh.read(n)
            reads.append(len(data) if n >= 0 else 1 << 62)
            return data

        def seek(self, pos: int) -> int:
            reads.clear()
            return self.fh.seek(pos)

        def fileno(self) -> int:  # the ingest checks the file it opened is the one it found
            return self.fh.fileno()

        def __enter__(self) -> Recording:
            return self

        def __exit__(self, *exc: object) -> None:
            self.fh.close()

    monkeypatch.setattr(ingest_mod, "_open_binary", lambda p: Recording(open(p, "rb")))
    st = open_store(MemorySettings(ingest=IngestConfig(window_bytes=window, batch_chunks=8)))
    report = st.ingest(path, progress=lambda ev: events.append((sum(reads), ev.chunks)))
    assert report.bytes == size > 15 * window and report.chunks_added > 50
    assert max(reads) <= window + 1
    first_write = next(read for read, chunks in events if chunks > 0)
    assert first_write < size / 4, "chunks are written while the file is still being read"
    v = st.read(st.search("huge799word0", record=False)[0].chunk_id)
    assert path.read_bytes()[v.start_byte:v.end_byte].decode() == v.text


def test_spans_of_a_file_with_invalid_utf8_are_its_own_bytes(open_store, write) -> None:  # type: ignore[no-untyped-def]
    """It keeps byte spans in the file's bytes when invalid UTF-8 before a chunk is replaced."""
    path = write("bad.txt", "")
    body = b"caf\xe9 \xff\xfe broken bytes here.\n\n" + b"Zebra facts live in the second paragraph.\n"
    path.write_bytes(body)
    st = open_store(small_chunks())
    st.ingest(path)
    hit = st.search("zebra", record=False)[0]
    view = st.read(hit.chunk_id, record=False)
    assert view.start_byte > 0, "the zebra paragraph must be a chunk of its own"
    assert body[view.start_byte:view.end_byte].decode("utf-8", "replace").strip() == view.text.strip()
