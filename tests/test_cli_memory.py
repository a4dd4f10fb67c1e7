"""The ``rlm memory`` commands, through the real entry point (RLM_HOME is a temp dir)."""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from rlm_runtime.cli import main
from rlm_runtime.cli.memory import Progress
from rlm_runtime.embeddings import installed
from rlm_runtime.memory import IngestProgress, MemoryStore, default_store_path

SENTENCE = "The quokka named Bartholomew sleeps inside the zeppelin hangar every second Tuesday."


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "animals.md").write_text(f"# Animals\n\n{SENTENCE}\n\nKangaroos box in the evening.\n")
    (folder / "tools.md").write_text("# Tools\n\nA hammer drives nails; a wrench turns bolts.\n")
    (folder / "blob.txt").write_bytes(b"\x00\x01\x02binary\x00" * 20)
    return folder


@pytest.fixture
def store(notes: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """The default store with the notes folder added."""
    assert main(["memory", "add", str(notes), "--tags", "zoo,docs"]) == 0
    capsys.readouterr()
    return default_store_path()


def _json(capsys: pytest.CaptureFixture[str]) -> dict:
    out = capsys.readouterr().out
    assert out.count("\n") == 1, out
    return json.loads(out)


def _one_error(err: str, text: str) -> None:
    assert err.startswith("rlm: error: ") and text in err, err
    assert err.count("\n") == 1 and "Traceback" not in err


def _hit_id(capsys: pytest.CaptureFixture[str], query: str, *extra: str) -> int:
    assert main(["memory", "search", query, "--json", *extra]) == 0
    return int(_json(capsys)["hits"][0]["chunk_id"])


def test_add_stores_a_folder_and_lists_what_it_skipped(notes: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It stores a folder's text files, says so, and lists the binary one it skipped with its reason."""
    assert main(["memory", "add", str(notes), "--tags", "zoo"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("stored 2 files (")
    assert "skipped 1 path:" in out and f"{notes / 'blob.txt'}: binary content" in out
    assert f"store: {default_store_path()} (" in out
    assert "Traceback" not in err
    with MemoryStore(default_store_path(), readonly=True) as s:
        assert s.stats().sources == 2


def test_add_of_a_tree_that_skips_many_counts_them_by_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It sums up many skipped paths by reason (with the first of each) in a few lines, and lists them all with --verbose."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text(f"# Guide\n\n{SENTENCE}\n")
    for n in range(40):
        (docs / f"img{n:02d}.dat").write_bytes(b"\x00\x01binary\x00" * 10)
        (docs / f"empty{n:02d}.txt").write_text("")
    assert main(["memory", "add", str(docs)]) == 0
    out = capsys.readouterr().out
    assert "skipped 80 paths (--verbose lists them):" in out
    assert "  40 binary content (the first: " in out and "  40 empty file (the first: " in out
    assert out.count("\n") < 10
    assert main(["memory", "add", str(docs), "--verbose"]) == 0  # unchanged files now, the skipped ones listed
    listed = capsys.readouterr().out
    assert listed.count(": binary content") == 40 and listed.count(": empty file") == 40


def test_add_again_skips_unchanged_files(store: Path, notes: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It reports unchanged files on a second add, as JSON too."""
    assert main(["memory", "add", str(notes), "--json"]) == 0
    report = _json(capsys)
    assert report["unchanged"] == 2 and report["files"] == 0 and report["store_chunks"] >= 2
    assert [s["reason"] for s in report["skipped"]] == ["binary content"]


def test_add_of_a_missing_path_is_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It refuses a path that does not exist with exit 2, before creating a store."""
    assert main(["memory", "add", str(tmp_path / "nope")]) == 2
    _one_error(capsys.readouterr().err, "no such file or folder")
    assert not default_store_path().exists()


def test_add_that_stores_nothing_exits_1(notes: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It exits 1 when every path given was skipped."""
    assert main(["memory", "add", str(notes / "blob.txt")]) == 1
    assert "binary content" in capsys.readouterr().out


def test_search_finds_a_distinctive_sentence(store: Path, notes: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It ranks the chunk holding a distinctive sentence first and prints where it is."""
    assert main(["memory", "search", "Bartholomew zeppelin"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert f"{notes / 'animals.md'}:1-" in lines[0] and "tags: docs,zoo" in lines[0]
    assert "«Bartholomew»" in lines[1] and "«zeppelin»" in lines[1]


def test_search_json_and_filters(store: Path, notes: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It prints one JSON object, and --source / --tags / -k restrict the hits."""
    assert main(["memory", "search", "hammer", "--json", "-k", "1", "--tags", "zoo", "--source", str(notes)]) == 0
    data = _json(capsys)
    assert len(data["hits"]) == 1 and data["hits"][0]["source"] == str(notes / "tools.md")
    assert data["recorded"] is False
    assert main(["memory", "search", "hammer", "--source", str(notes / "animals.md"), "--mode", "bm25"]) == 1
    assert main(["memory", "search", "hammer", "--tags", "other"]) == 1  # no chunk has the tag: none by meaning either


def test_search_without_hits_exits_1(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It exits 1 like grep when no word matches (by meaning, the nearest chunks always come back), saying so on stderr."""
    assert main(["memory", "search", "xylophone", "--mode", "bm25"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err == "rlm: no chunks match: xylophone\n"


def test_search_does_not_count_as_a_recall(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It leaves recall counts and traces alone: a person looking is not a run recalling."""
    chunk = _hit_id(capsys, "Bartholomew")
    for _ in range(3):
        assert main(["memory", "search", "Bartholomew"]) == 0
    with MemoryStore(store, readonly=True) as s:
        assert s.stats().traces == 0
        assert s.chunk_stats(chunk).recall_count == 0


def test_show_prints_the_chunk_and_its_links(store: Path, notes: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It prints a chunk's place, statistics and text, and with --links its links."""
    a = _hit_id(capsys, "Bartholomew")
    b = _hit_id(capsys, "hammer")
    assert main(["memory", "link", str(a), str(b), "supports", "--strength", "0.5"]) == 0
    assert capsys.readouterr().out == f"linked {a} -> {b} as supports (strength 0.5)\n"
    assert main(["memory", "show", str(a), "--links"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"chunk {a} of {notes / 'animals.md'} (file), lines 1-")
    assert "recalled 0 times" in out and SENTENCE in out
    assert f"  supports -> {b}  strength 0.50 x1  {notes / 'tools.md'}:1-" in out
    assert main(["memory", "show", str(b), "--links", "--json"]) == 0
    data = _json(capsys)
    assert data["chunk"]["text"].startswith("# Tools") and data["stats"]["tier"] == "working"
    assert {"src": a, "dst": b, "type": "supports", "strength": 0.5} in [
        {k: x[k] for k in ("src", "dst", "type", "strength")} for x in data["links"]]


def test_show_around_prints_the_neighbours(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It prints the chunks before and after with --around, marking the one asked for."""
    path = tmp_path / "long.md"
    path.write_text("\n\n".join(f"# Part {i}\n\n" + f"word{i} " * 300 for i in range(4)))
    assert main(["memory", "add", str(path)]) == 0
    capsys.readouterr()
    middle = _hit_id(capsys, "word2")
    assert main(["memory", "show", str(middle), "--around", "1"]) == 0
    out = capsys.readouterr().out
    assert f"--- chunk {middle}, lines" in out and "(this one) ---" in out
    assert out.count("--- chunk ") == 3 and "word1" in out and "word3" in out and "word0" not in out


def test_link_errors(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It exits 1 for an unknown chunk and 2 for a link to itself or a bad strength."""
    a = _hit_id(capsys, "Bartholomew")
    assert main(["memory", "link", str(a), "999", "supports"]) == 1
    _one_error(capsys.readouterr().err, "no chunk with id 999")
    assert main(["memory", "link", str(a), str(a), "supports"]) == 2
    _one_error(capsys.readouterr().err, "cannot be linked to itself")
    with pytest.raises(SystemExit) as bad:
        main(["memory", "link", str(a), "1", "supports", "--strength", "nan"])
    assert bad.value.code == 2


def test_stats_counts(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It reports chunks, sources, links by type, tiers and size, as text and as JSON."""
    a, b = _hit_id(capsys, "Bartholomew"), _hit_id(capsys, "hammer")
    assert main(["memory", "link", str(a), str(b), "contradicts"]) == 0
    capsys.readouterr()
    assert main(["memory", "stats", "--json"]) == 0
    data = _json(capsys)
    assert data["chunks"] == 2 and data["sources"] == 2 and data["links_by_type"]["contradicts"] == 1
    assert data["tiers"] == {"working": 2} and data["size_bytes"] > 0 and data["path"] == str(store)
    assert main(["memory", "stats"]) == 0
    out = capsys.readouterr().out
    assert "chunks: 2 (" in out and "from 2 sources" in out and "contradicts 1" in out and "tiers: working 2" in out
    assert "size on disk: " in out


def test_prune_dry_run_removes_nothing(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It reports what decay and prune would do with --dry-run, changes nothing, then does it."""
    with MemoryStore(store) as s:
        (expired,) = s.add_text("A note that has outlived its time to live.", ttl_s=-60)
    assert main(["memory", "prune", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("decay: ") and f"1 chunk would be removed (expired: {expired})" in out
    assert out.endswith("dry run: nothing was changed\n")
    with MemoryStore(store, readonly=True) as s:
        assert s.read(expired, record=False).chunk_id == expired
    assert main(["memory", "prune", "--json"]) == 0
    data = _json(capsys)
    assert data["prune"]["removed"] == [expired] and data["dry_run"] is False and "decayed" in data["decay"]
    assert main(["memory", "show", str(expired)]) == 1


def test_export_then_import_round_trips(store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It exports a store to JSONL and imports it into a second store that exports the same records."""
    a, b = _hit_id(capsys, "Bartholomew"), _hit_id(capsys, "hammer")
    assert main(["memory", "link", str(a), str(b), "supports"]) == 0
    capsys.readouterr()
    first, second, other = tmp_path / "one.jsonl", tmp_path / "two.jsonl", tmp_path / "other.db"
    assert main(["memory", "export", str(first)]) == 0
    assert capsys.readouterr().out.startswith("exported ")
    assert not first.with_name("one.jsonl.partial").exists()
    assert main(["memory", "import", str(first), "--store", str(other), "--json"]) == 0
    assert {"source": 2, "chunk": 2}.items() <= _json(capsys).items()
    assert main(["memory", "export", str(second), "--store", str(other)]) == 0

    def records(path: Path) -> list[dict]:
        return [r for r in map(json.loads, path.read_text().splitlines()) if r["type"] != "header"]

    assert records(first) == records(second)
    assert main(["memory", "search", "Bartholomew", "--store", str(other)]) == 0


def test_export_and_import_through_standard_streams(store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """It writes the export to stdout with - and reads one from stdin with -."""
    assert main(["memory", "export", "-"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out.splitlines()[0])["format"] == "rlm-memory" and err.startswith("exported ")
    monkeypatch.setattr("sys.stdin", io.StringIO(out))
    assert main(["memory", "import", "-", "--store", str(tmp_path / "piped.db")]) == 0
    assert "2 chunks" in capsys.readouterr().out


def test_import_of_a_bad_file_is_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It exits 2 for a missing file, a file that is not an export, and one that is not text."""
    assert main(["memory", "import", str(tmp_path / "nope.jsonl")]) == 2
    _one_error(capsys.readouterr().err, "no such file")
    junk = tmp_path / "junk.jsonl"
    junk.write_text('{"hello": 1}\n')
    assert main(["memory", "import", str(junk), "--json"]) == 2
    assert _json(capsys)["error_type"] == "StoreError"
    junk.write_bytes(b"\xff\xfe\x00")
    assert main(["memory", "import", str(junk)]) == 2
    _one_error(capsys.readouterr().err, "not UTF-8")


def test_export_onto_the_store_is_refused(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It refuses to overwrite the store itself with its export."""
    assert main(["memory", "export", str(store)]) == 2
    _one_error(capsys.readouterr().err, "is the store itself")
    assert main(["memory", "stats"]) == 0


def test_forget_a_chunk_and_a_source(store: Path, notes: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It moves one chunk to the trash by id and deletes a file's chunks by --source; an unknown one exits 1."""
    a = _hit_id(capsys, "Bartholomew")
    assert main(["memory", "forget", str(a)]) == 0
    assert capsys.readouterr().out.startswith(f"moved to the trash: chunk {a}\n")
    assert main(["memory", "forget", str(a)]) == 1
    _one_error(capsys.readouterr().err, f"no chunk with id {a}")
    assert main(["memory", "search", "Bartholomew", "--mode", "bm25"]) == 1
    assert main(["memory", "forget", "--source", str(notes / "tools.md"), "--json"]) == 0
    assert _json(capsys) == {"source": str(notes / "tools.md"), "chunks": 1, "dry_run": False}
    assert main(["memory", "forget", "--source", str(notes / "tools.md")]) == 1
    _one_error(capsys.readouterr().err, "no source")
    assert main(["memory", "forget", "1", "--source", "x"]) == 2


@pytest.mark.parametrize("argv", [["show", "999"], ["forget", "999"], ["show", "999", "--json"]])
def test_an_unknown_id_exits_1(argv: list[str], store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It reports an unknown chunk id as one line (one JSON object with --json) and exits 1."""
    assert main(["memory", *argv]) == 1
    out, err = capsys.readouterr()
    _one_error(err, "no chunk with id 999 in the memory store")
    if "--json" in argv:
        assert json.loads(out) == {"error": "no chunk with id 999 in the memory store", "error_type": "ChunkNotFound"}
    else:
        assert out == ""


def test_a_huge_id_is_usage(store: Path) -> None:
    """It refuses an id past SQLite's integers as bad usage, not an internal error."""
    with pytest.raises(SystemExit) as bad:
        main(["memory", "show", str(2**70)])
    assert bad.value.code == 2


@pytest.mark.parametrize("command", [["stats"], ["search", "x"], ["show", "1"], ["add", "."], ["prune"], ["forget", "1"]])
def test_a_file_that_is_not_a_store_exits_2(command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It reports a store path holding something else as one line and exits 2."""
    bad = tmp_path / "not-a-store.db"
    bad.write_text("just some text, not SQLite at all " * 200)
    assert main(["memory", *command, "--store", str(bad)]) == 2
    _one_error(capsys.readouterr().err, "is not a memory store")
    assert bad.read_text().startswith("just some text")


def test_another_programs_database_is_left_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str], notes: Path) -> None:
    """It refuses an SQLite database of another program without adding tables to it or changing its journal."""
    other = tmp_path / "places.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE bookmarks (url TEXT)")
    conn.commit()
    conn.close()
    assert main(["memory", "add", str(notes), "--store", str(other), "--json"]) == 2
    assert _json(capsys)["error_type"] == "StoreError"
    conn = sqlite3.connect(other)
    assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")] == ["bookmarks"]
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()


def test_missing_store_and_folder_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It exits 2 when no store exists yet for a reading command, or the path is a folder."""
    assert main(["memory", "search", "x"]) == 2
    _one_error(capsys.readouterr().err, "no memory store at")
    assert not default_store_path().exists()
    assert main(["memory", "stats", "--store", str(tmp_path)]) == 2
    _one_error(capsys.readouterr().err, "is a folder")


HOSTILE = "Owned \x1b]0;pwned-title\x07 here \x1b[2J cleared \u202ereversed\u202c and a bare\rCR overwrite. unicornfish"


def test_hostile_stored_text_is_printed_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It shows terminal controls in stored text, links and file names escaped in every command."""
    folder = tmp_path / "evil"
    folder.mkdir()
    (folder / "x\x1b[31mred.txt").write_text(HOSTILE + "\n")
    (folder / "plain.txt").write_text("unicornfish swims beside the plain reef\n")
    assert main(["memory", "add", str(folder), "--tags", "t\x1b[1mbold"]) == 0
    outputs = list(capsys.readouterr())
    chunk = _hit_id(capsys, "Owned unicornfish")
    other = _hit_id(capsys, "reef")
    assert main(["memory", "link", str(chunk), str(other), "evil\x1b[5mtype"]) == 0
    outputs += list(capsys.readouterr())
    for argv in (["search", "unicornfish"], ["show", str(chunk), "--links"], ["show", str(other), "--links", "--around", "2"], ["stats"]):
        assert main(["memory", *argv]) == 0
        out, err = capsys.readouterr()
        outputs += [out, err]
    text = "".join(outputs)
    for control in ("\x1b", "\x07", "\u202e", "\rCR"):
        assert control not in text
    assert "\\x1b]0;pwned-title\\x07" in text and "\\u202e" in text and "\\x1b[31mred.txt" in text
    assert "evil\\x1b[5mtype" in text and "t\\x1b[1mbold" in text


class _Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def _step(done: int, total: int = 3, path: str = "/d/file.txt") -> IngestProgress:
    return IngestProgress(path, done, total, chunks=done * 10, bytes=done * 2_000_000, seconds=float(done))


def test_progress_on_a_terminal_rewrites_one_line() -> None:
    """It rewrites one escaped progress line in place on a terminal and clears it at the end."""
    stream, now = _Stream(tty=True), [0.0]
    progress = Progress(stream, clock=lambda: now[0])
    for done in (1, 2, 3):
        now[0] += 1
        progress(_step(done, path=f"/d/f{done}\x1b[2J.txt"))
    progress.finish()
    text = stream.getvalue()
    assert text.count("\r") == 4 and "\n" not in text
    assert "\rfiles 3/3  chunks 30  6.0 MB  2.0 MB/s  f3\\x1b[2J.txt\x1b[K" in text
    assert text.endswith("\r\x1b[K") and "\x1b[2J" not in text


def test_progress_elsewhere_prints_plain_lines_now_and_then() -> None:
    """It prints plain lines, at most one every few seconds, when stderr is not a terminal."""
    stream, now = _Stream(tty=False), [0.0]
    progress = Progress(stream, clock=lambda: now[0])
    for done in range(1, 11):
        now[0] += 1
        progress(_step(done, total=10))
    progress.finish()
    lines = stream.getvalue().splitlines()
    assert lines == ["rlm: files 5/10  chunks 50  10.0 MB  2.0 MB/s  file.txt", "rlm: files 10/10  chunks 100  20.0 MB  2.0 MB/s  file.txt"]


def test_forget_a_folder_takes_every_file_under_it_and_no_other(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It forgets every source under a folder (whole path components only), after a dry run that changes nothing."""
    from rlm_runtime.memory import MemoryStore

    store = tmp_path / "m.db"
    for name in ("docs/a.md", "docs/sub/b.md", "docsextra/c.md"):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {name}\n\nThe unique word for {name} is zebraquill.\n")
    assert main(["memory", "add", str(tmp_path / "docs"), str(tmp_path / "docsextra"), "--store", str(store)]) == 0
    with MemoryStore(store) as st:
        before = st.stats().chunks
    capsys.readouterr()
    assert main(["memory", "forget", "--source", str(tmp_path / "docs"), "--dry-run", "--store", str(store)]) == 0
    assert "would forget 2 chunks" in capsys.readouterr().out
    with MemoryStore(store) as st:
        assert st.stats().chunks == before
    assert main(["memory", "forget", "--source", str(tmp_path / "docs") + "/", "--store", str(store)]) == 0
    with MemoryStore(store) as st:
        left = st.search("zebraquill", record=False)
        assert [Path(h.source).name for h in left] == ["c.md"]
    assert main(["memory", "forget", "--source", str(tmp_path / "docs"), "--store", str(store)]) == 1


needs_model = pytest.mark.skipif(not installed(), reason="the embed extra is not installed")


@needs_model
def test_search_modes(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It ranks by --mode: vector finds a chunk sharing no word with the query, bm25 does not, hybrid
    (the default) fuses both, and gives a query whose words no chunk holds its nearest chunks, saying so."""
    assert main(["memory", "search", "marsupial napping within an airship shed", "--mode", "vector", "-k", "1", "--json"]) == 0
    data = _json(capsys)
    assert data["mode"] == "vector" and "Bartholomew" in data["hits"][0]["snippet"]
    assert main(["memory", "search", "marsupial napping within an airship shed", "--mode", "bm25"]) == 1
    capsys.readouterr()
    assert main(["memory", "search", "hammer", "--json"]) == 0
    data = _json(capsys)
    assert data["mode"] == "hybrid" and "«hammer»" in data["hits"][0]["snippet"] and data["hits"][0]["by"] == "words"
    assert main(["memory", "search", "marsupial napping airship", "-k", "1"]) == 0
    out, err = capsys.readouterr()
    assert "Bartholomew" in out and "(by meaning)" in out.splitlines()[0]
    assert "no chunk holds the query's words: these are the nearest in meaning" in err
    with pytest.raises(SystemExit) as exit_:
        main(["memory", "search", "hammer", "--mode", "fuzzy"])
    assert exit_.value.code == 2 and "invalid choice" in capsys.readouterr().err


@needs_model
def test_stats_count_vectors(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It says how many chunks have a vector, and of which model."""
    assert main(["memory", "stats"]) == 0
    out = capsys.readouterr().out
    assert "vectors: 2 of 2 chunks (wordllama-" in out


@needs_model
def test_reindex_gives_an_old_store_vectors(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It embeds the chunks of a store written without vectors, and says so; a vector search then works."""
    conn = sqlite3.connect(store)
    conn.executescript("DELETE FROM chunk_vectors; DELETE FROM vector_meta;")
    conn.commit()
    conn.close()
    assert main(["memory", "search", "hammer", "--mode", "vector"]) == 1
    assert "cannot search by meaning: the store has no vectors yet (rlm memory reindex" in capsys.readouterr().err
    assert main(["memory", "search", "hammer", "--mode", "hybrid"]) == 0
    assert "ranked by words only: the store has no vectors yet" in capsys.readouterr().err
    assert main(["memory", "reindex"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("embedded 2 chunks in ") and "(2 of 2 chunks with a vector)" in out
    assert "vectors 2/2 chunks" in err
    assert main(["memory", "reindex", "--json"]) == 0
    assert _json(capsys)["embedded"] == 0
    assert main(["memory", "search", "hammer", "--mode", "vector"]) == 0


def test_reindex_of_a_missing_store_is_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It exits 2 when there is no store to reindex."""
    assert main(["memory", "reindex", "--store", str(tmp_path / "none.db")]) == 2
    _one_error(capsys.readouterr().err, "no memory store")


def test_reindex_quality_without_the_model_says_how_to_install_it(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It refuses a quality fill without the model (exit 1, one line naming the install), and
    stats says nothing of a quality tier the store does not have."""
    assert main(["memory", "reindex", "--quality"]) == 1
    err = capsys.readouterr().err
    assert "rlm model install minilm-l6" in err and "Traceback" not in err and err.count("\n") == 1
    assert main(["memory", "stats"]) == 0
    assert "quality vectors" not in capsys.readouterr().out


@needs_model
def test_reindex_quality_fills_the_tier_and_stats_show_it(store: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """It fills the quality tier with the model the store is given, says how many, and stats
    shows the tier's count and model."""
    from conftest_models import tiny_quality

    monkeypatch.setattr("rlm_runtime.contextual.factory", lambda folder, threads=None: tiny_quality)
    assert main(["memory", "reindex", "--quality"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("embedded 2 chunks in ") and "(2 of 2 chunks with a quality vector)" in out
    assert main(["memory", "stats"]) == 0
    assert "quality vectors: 2 of 2 chunks (tiny-quality-64)" in capsys.readouterr().out


@needs_model
def test_reindex_quality_threads_reach_the_model_and_out_of_range_is_refused(
        store: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """``--threads N`` is the quality model's threads; 0 or over 256 is a usage error (exit 2)
    naming the flag, and nothing is embedded."""
    from conftest_models import tiny_quality

    asked: list[int | None] = []

    def factory(folder: Path, threads: int | None = None) -> Any:
        asked.append(threads)
        return tiny_quality

    monkeypatch.setattr("rlm_runtime.contextual.factory", factory)
    assert main(["memory", "reindex", "--quality", "--threads", "2"]) == 0
    assert asked == [2]
    for bad in ("0", "257", "two"):
        with pytest.raises(SystemExit) as e:
            main(["memory", "reindex", "--quality", "--threads", bad])
        assert e.value.code == 2 and "--threads" in capsys.readouterr().err
    assert asked == [2]
