"""The curation commands of ``rlm memory`` (``add -``, ``list``, ``pin``/``unpin``, ``ttl``,
``unlink``, ``forget``/``restore``/``purge``), through the real entry point, on a store given
with ``--store`` (RLM_HOME is a temp dir)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from rlm_runtime.cli import main
from rlm_runtime.cli.memory_curate import NOTE_MAX_BYTES
from rlm_runtime.memory import MemoryStore

Cap = pytest.CaptureFixture[str]


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "mem" / "memory.db")


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def _note(monkeypatch: pytest.MonkeyPatch, capsys: Cap, db: str, text: str, *extra: str) -> list[int]:
    _stdin(monkeypatch, text.encode())
    assert main(["memory", "add", "-", "--store", db, "--json", *extra]) == 0
    return [int(i) for i in json.loads(capsys.readouterr().out)["ids"]]


def _json(capsys: Cap) -> dict:
    out = capsys.readouterr().out
    assert out.count("\n") == 1, out
    return json.loads(out)


def _usage(argv: list[str]) -> None:
    """``argv`` is refused by argparse: exit 2 (it raises SystemExit from main)."""
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code  # type: ignore[assignment]
    assert code == 2


def _error(capsys: Cap, text: str) -> None:
    err = capsys.readouterr().err
    assert "rlm: error: " in err and text in err and "Traceback" not in err, err


def test_add_a_note_from_stdin(monkeypatch: pytest.MonkeyPatch, capsys: Cap, db: str) -> None:
    """It stores standard input as a note of the source, kind and tags given, and search finds it."""
    _stdin(monkeypatch, b"The wombat's burrow is behind the shed.\n")
    assert main(["memory", "add", "-", "--store", db, "--tags", "garden", "--kind", "fact", "--source", "home"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("stored a note from standard input as chunk 1 of home")
    with MemoryStore(db, readonly=True) as st:
        view = st.read(1, record=False)
    assert (view.source, view.kind, view.tags) == ("home", "fact", ("garden",))
    [cid] = _note(monkeypatch, capsys, db, "Another note.")
    with MemoryStore(db, readonly=True) as st:
        assert st.read(cid, record=False).source == "notes"


@pytest.mark.parametrize(("data", "message"), [
    (b"x" * (NOTE_MAX_BYTES + 1), "more than 1,048,576 bytes"),
    (b"\x00\x01\x02\x03binary" * 10, "binary"),
    (b"caf\xe9 au lait", "not UTF-8"),
    (b"   \n\n ", "empty"),
])
def test_add_refuses_hostile_stdin(monkeypatch: pytest.MonkeyPatch, capsys: Cap, db: str, data: bytes, message: str) -> None:
    """It refuses standard input that is too big, binary, not UTF-8 or blank, in one line, storing nothing."""
    _stdin(monkeypatch, data)
    assert main(["memory", "add", "-", "--store", db]) == 2
    _error(capsys, message)
    assert not Path(db).exists() or MemoryStore(db, readonly=True).stats().chunks == 0


def test_add_dash_with_paths_or_source_without_dash_is_usage(tmp_path: Path, capsys: Cap, db: str) -> None:
    """It refuses - among other paths, and --source without -."""
    (tmp_path / "a.txt").write_text("some text here")
    assert main(["memory", "add", "-", str(tmp_path / "a.txt"), "--store", db]) == 2
    _error(capsys, "cannot be given with other paths")
    assert main(["memory", "add", str(tmp_path / "a.txt"), "--source", "x", "--store", db]) == 2
    _error(capsys, "--source")


def test_list_newest_first_with_filters(monkeypatch: pytest.MonkeyPatch, capsys: Cap, db: str) -> None:
    """It lists chunks newest first, filtered by tag, kind, date, tier and pin, as text and JSON."""
    a = _note(monkeypatch, capsys, db, "The heron fishes at dawn.", "--tags", "birds")[0]
    b = _note(monkeypatch, capsys, db, "The kettle whistles.", "--kind", "fact")[0]
    c = _note(monkeypatch, capsys, db, "The owl hunts at night.", "--tags", "birds,night")[0]
    assert main(["memory", "list", "--store", db]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [int(line.split()[0]) for line in out[::2]] == [c, b, a]
    assert "tags: birds,night" in out[0] and out[1].strip() == "The owl hunts at night."

    def ids(*extra: str) -> list[int]:
        code = main(["memory", "list", "--store", db, "--json", *extra])
        found = [int(x["chunk_id"]) for x in _json(capsys)["chunks"]]
        assert code == (0 if found else 1)
        return found

    assert ids("--tag", "birds") == [c, a] and ids("--tag", "birds", "--tag", "night") == [c]
    assert ids("--kind", "fact") == [b] and ids("-n", "1") == [c]
    assert ids("--since", "1d") == [c, b, a] and ids("--until", "2000-01-01") == []
    assert ids("--since", "2000-01-01", "--until", "2999-12-31") == [c, b, a]
    assert ids("--tier", "long_term") == [] and ids("--pinned") == []
    assert main(["memory", "pin", str(b), "--store", db]) == 0
    capsys.readouterr()
    assert ids("--pinned") == [b]
    # The names other commands use: --tier pinned (as stats lists it), long-term, --tag on add.
    assert ids("--tier", "pinned") == [b] and ids("--tier", "long-term") == []
    d = _note(monkeypatch, capsys, db, "The wren sings.", "--tag", "birds")[0]
    assert ids("--tag", "birds") == [d, c, a]


def test_show_takes_the_id_search_chunks_and_the_repl_print(monkeypatch: pytest.MonkeyPatch, capsys: Cap, db: str) -> None:
    """``rlm memory show m12`` is chunk 12, as search_chunks and the REPL name it; ``mx`` is refused."""
    [a] = _note(monkeypatch, capsys, db, "The heron fishes at dawn.")
    assert main(["memory", "show", f"m{a}", "--store", db]) == 0
    assert "The heron fishes at dawn." in capsys.readouterr().out
    _usage(["memory", "show", "mx", "--store", db])


@pytest.mark.parametrize("argv", [["--since", "yesterday"], ["--until", "2026-13-45"], ["-n", "0"], ["-n", "many"],
                                  ["--tier", "gold"], ["--since", "2026-02-01", "--until", "2026-01-01"]])
def test_list_refuses_bad_options(monkeypatch: pytest.MonkeyPatch, capsys: Cap, db: str, argv: list[str]) -> None:
    """It refuses a bad date, count, tier or an empty date range as usage (exit 2), without a traceback."""
    _note(monkeypatch, capsys, db, "a note")
    _usage(["memory", "list", "--store", db, *argv])
    assert "Traceback" not in capsys.readouterr().err


def test_pin_unpin_names_the_ids_it_could_not_change(monkeypatch: pytest.MonkeyPatch, capsys: Cap, db: str) -> None:
    """It pins the chunks that exist, names each unknown id on stderr and exits 1; unpin undoes the pin."""
    [a] = _note(monkeypatch, capsys, db, "Pin me.")
    assert main(["memory", "pin", str(a), "77", "--store", db]) == 1
    out, err = capsys.readouterr()
    assert out.strip() == f"pinned chunk {a}" and "no chunk with id 77" in err and "Traceback" not in err
    with MemoryStore(db, readonly=True) as st:
        assert st.chunk_stats(a).pinned
    assert main(["memory", "unpin", str(a), "--store", db, "--json"]) == 0
    assert _json(capsys)["done"] == [a]
    with MemoryStore(db, readonly=True) as st:
        assert not st.chunk_stats(a).pinned


@pytest.mark.parametrize("bad", ["soon", "0d", "-3d", "1y", "99999999999d", "3.1415926535d", "nan", "inf"])
def test_ttl_and_bad_ids_and_durations(monkeypatch: pytest.MonkeyPatch, capsys: Cap, db: str, bad: str) -> None:
    """It refuses a bad duration or id as usage (exit 2) and leaves the chunk's expiry alone."""
    [a] = _note(monkeypatch, capsys, db, "Expire me.")
    _usage(["memory", "ttl", str(a), bad, "--store", db])
    _usage(["memory", "ttl", "not-an-id", "30d", "--store", db])
    _usage(["memory", "pin", "-5", "--store", db])
    _usage(["memory", "forget", str(2**70), "--store", db])
    assert "Traceback" not in capsys.readouterr().err
    with MemoryStore(db, readonly=True) as st:
        assert st.chunk_stats(a).expires_at is None


def test_ttl_sets_and_clears_the_expiry(monkeypatch: pytest.MonkeyPatch, capsys: Cap, db: str) -> None:
    """It sets a chunk's expiry a duration from now, clears it with never, and exits 1 for an unknown id."""
    [a] = _note(monkeypatch, capsys, db, "Expire me.")
    assert main(["memory", "ttl", str(a), "2d", "--store", db, "--json"]) == 0
    at = _json(capsys)["expires_at"]
    with MemoryStore(db, readonly=True) as st:
        assert st.chunk_stats(a).expires_at == at and abs(at - st.clock() - 2 * 86400) < 60
    assert main(["memory", "ttl", str(a), "never", "--store", db]) == 0
    assert "never expires" in capsys.readouterr().out
    with MemoryStore(db, readonly=True) as st:
        assert st.chunk_stats(a).expires_at is None
    assert main(["memory", "ttl", "4242", "1h", "--store", db]) == 1
    _error(capsys, "no chunk with id 4242")


def test_unlink_removes_a_link_once(monkeypatch: pytest.MonkeyPatch, capsys: Cap, db: str) -> None:
    """It removes a link between two chunks, and exits 1 when there is no such link."""
    [a] = _note(monkeypatch, capsys, db, "Claim.")
    [b] = _note(monkeypatch, capsys, db, "Evidence.")
    assert main(["memory", "link", str(b), str(a), "supports", "--store", db]) == 0
    assert main(["memory", "unlink", str(b), str(a), "supports", "--store", db]) == 0
    assert "removed the supports link" in capsys.readouterr().out
    with MemoryStore(db, readonly=True) as st:
        assert st.links(a, "supports") == []
    assert main(["memory", "unlink", str(b), str(a), "supports", "--store", db]) == 1
    _error(capsys, "no supports link between chunks")


def test_forget_restore_purge(monkeypatch: pytest.MonkeyPatch, capsys: Cap, db: str, tmp_path: Path) -> None:
    """It moves a chunk to the trash (out of search, show and export; counted apart), restores it, and purges it for good."""
    [a] = _note(monkeypatch, capsys, db, "The narwhal tusk is a tooth.")
    [b] = _note(monkeypatch, capsys, db, "The narwhal sings under the ice.")
    assert main(["memory", "forget", str(a), "--store", db]) == 0
    assert f"moved to the trash: chunk {a}" in capsys.readouterr().out
    assert main(["memory", "search", "narwhal", "--store", db, "--json", "--mode", "bm25"]) == 0
    assert [h["chunk_id"] for h in _json(capsys)["hits"]] == [b]
    assert main(["memory", "show", str(a), "--store", db]) == 1
    _error(capsys, f"no chunk with id {a} in the memory store (it is in the trash: rlm memory restore {a})")
    assert main(["memory", "stats", "--store", db, "--json"]) == 0
    assert (lambda s: (s["chunks"], s["deleted"]))(_json(capsys)) == (1, 1)
    assert main(["memory", "list", "--deleted", "--store", db, "--json"]) == 0
    assert [c["chunk_id"] for c in _json(capsys)["chunks"]] == [a]
    assert main(["memory", "export", str(tmp_path / "x.jsonl"), "--store", db]) == 0
    assert "tusk" not in (tmp_path / "x.jsonl").read_text()
    assert main(["memory", "forget", str(a), "--store", db]) == 1  # already in the trash
    _error(capsys, "in the trash already")
    assert main(["memory", "restore", str(a), "--store", db]) == 0
    assert capsys.readouterr().out.strip() == f"restored chunk {a}"
    assert main(["memory", "search", "tusk", "--store", db, "--json", "--mode", "bm25"]) == 0
    assert [h["chunk_id"] for h in _json(capsys)["hits"]] == [a]
    assert main(["memory", "forget", str(a), str(b), "--store", db]) == 0
    capsys.readouterr()
    assert main(["memory", "purge", "--older-than", "1d", "--store", db, "--json"]) == 0
    assert _json(capsys)["purged"] == []
    assert main(["memory", "purge", "--dry-run", "--store", db]) == 0
    assert "would delete 2 chunks" in capsys.readouterr().out
    assert main(["memory", "purge", "--store", db]) == 0
    assert "deleted 2 chunks of the trash for good" in capsys.readouterr().out
    assert main(["memory", "restore", str(a), "--store", db]) == 1
    _error(capsys, f"no chunk with id {a} in the memory store (in the trash)")
    with MemoryStore(db) as st:
        assert st.stats().chunks == 0 and st.integrity_check() == []


@pytest.mark.parametrize("argv", [["forget"], ["forget", "1", "--source", "notes"], ["restore"], ["pin"],
                                  ["purge", "--older-than", "forever"], ["unlink", "1", "2", " "]])
def test_curation_usage_errors(monkeypatch: pytest.MonkeyPatch, capsys: Cap, db: str, argv: list[str]) -> None:
    """It refuses missing ids, ids with --source, a bad age and a blank link type as usage (exit 2)."""
    _note(monkeypatch, capsys, db, "a note")
    _usage(["memory", *argv, "--store", db])
    assert "Traceback" not in capsys.readouterr().err


def test_an_old_store_is_migrated_by_a_write(tmp_path: Path, capsys: Cap) -> None:
    """It lists a store made before the trash (at the earlier schema) read-only, and a curation command migrates it."""
    path = tmp_path / "old.db"
    with MemoryStore(path, embedder=None) as st:
        [cid] = st.add_text("The old store's only note.")
    import sqlite3

    conn = sqlite3.connect(path)
    conn.executescript("""DROP INDEX chunks_text_key; ALTER TABLE chunks DROP COLUMN text_key;
                          DROP INDEX chunks_deleted; ALTER TABLE chunks DROP COLUMN deleted_at;
                          DELETE FROM _migrations WHERE name IN ('m007_soft_delete', 'm008_text_keys');""")
    conn.close()
    assert main(["memory", "list", "--store", str(path), "--json"]) == 0  # read-only: the file is not migrated
    assert [c["chunk_id"] for c in _json(capsys)["chunks"]] == [cid]
    assert main(["memory", "forget", str(cid), "--store", str(path)]) == 0
    capsys.readouterr()
    assert main(["memory", "list", "--deleted", "--store", str(path), "--json"]) == 0
    assert [c["chunk_id"] for c in _json(capsys)["chunks"]] == [cid]


def test_add_the_same_note_twice_keeps_one(monkeypatch: pytest.MonkeyPatch, capsys: Cap, db: str) -> None:
    """It says a note is held already, stores no second chunk, and adds the new tags to the one held."""
    [a] = _note(monkeypatch, capsys, db, "Water the ferns on Sunday.")
    _stdin(monkeypatch, b"Water the ferns\non Sunday.\n")
    assert main(["memory", "add", "-", "--store", db, "--tags", "plants"]) == 0
    assert f"already held as chunk {a}" in capsys.readouterr().out
    with MemoryStore(db, readonly=True) as st:
        assert st.stats().chunks == 1 and st.read(a, record=False).tags == ("plants",)


def test_recall_from_a_chunk_shows_its_linked_chunks(monkeypatch: pytest.MonkeyPatch, capsys: Cap, db: str) -> None:
    """It ranks the chunks linked to --from first, shows each score's terms, counts nothing as a recall, and refuses an unknown chunk."""
    [a] = _note(monkeypatch, capsys, db, "The lighthouse keeper logs the fog horn hours.")
    [b] = _note(monkeypatch, capsys, db, "Fog horn repairs are billed to the harbour board.")
    [c] = _note(monkeypatch, capsys, db, "Seagulls nest on the north pier in April.")
    assert main(["memory", "link", str(a), str(c), "supports", "--store", db]) == 0
    capsys.readouterr()
    assert main(["memory", "recall", "--from", str(a), "--store", db]) == 0
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first.startswith(f"{c}  ") and "(text 0.00, link " in first and "link 0.00" not in first
    assert f"\n{a}  " not in "\n" + out  # the seed is not listed
    assert main(["memory", "recall", "fog horn", "--from", str(a), "-k", "1", "--store", db, "--json"]) == 0
    hits = _json(capsys)["hits"]
    assert [h["chunk_id"] for h in hits] == [b] and hits[0]["parts"]["text"] > 0
    with MemoryStore(db) as store:
        assert store.chunk_stats(c).recall_count == 0
    assert main(["memory", "recall", "--from", "999", "--store", db]) != 0
    _error(capsys, "no chunk with id 999")


def test_edit_changes_a_note_and_show_lists_its_history(monkeypatch: pytest.MonkeyPatch, capsys: Cap, db: str) -> None:
    """rlm memory edit changes a note's text and tags in place (same id); show --history lists the version before."""
    [a] = _note(monkeypatch, capsys, db, "Billing runs on Postgres.", "--tags", "decision,db")
    assert main(["memory", "edit", str(a), "--store", db, "--text", "Billing runs on SQLite.", "--untag", "db",
                 "--summary", "billing on SQLite", "--confidence", "0.9"]) == 0
    assert "edited chunk" in capsys.readouterr().out
    assert main(["memory", "show", f"m{a}", "--store", db, "--history"]) == 0
    out = capsys.readouterr().out
    assert "Billing runs on SQLite." in out and "summary: billing on SQLite; confidence 0.90" in out
    assert "1 earlier version" in out and "Billing runs on Postgres." in out and "tags: db,decision" in out
    assert main(["memory", "show", str(a), "--store", db, "--history", "--json"]) == 0
    shown = _json(capsys)
    assert shown["chunk"]["tags"] == ["decision"] and [v["text"] for v in shown["history"]] == ["Billing runs on Postgres."]
    assert main(["memory", "search", "SQLite", "--store", db]) == 0
    assert "summary: billing on SQLite" in capsys.readouterr().out


def test_edit_reads_text_from_stdin_and_refuses_an_empty_edit(monkeypatch: pytest.MonkeyPatch, capsys: Cap, db: str) -> None:
    """rlm memory edit --text - reads the new text from standard input; no change asked, or a bad confidence, is a usage error."""
    [a] = _note(monkeypatch, capsys, db, "Old text.")
    _stdin(monkeypatch, b"New text from a pipe.\n")
    assert main(["memory", "edit", str(a), "--store", db, "--text", "-", "--json"]) == 0
    assert _json(capsys) == {"chunk_id": a, "changed": ["text"], "kept_version": 1}
    with MemoryStore(db, readonly=True) as st:
        assert st.read(a, record=False).text == "New text from a pipe."
    assert main(["memory", "edit", str(a), "--store", db]) == 2
    assert "say what to change" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        main(["memory", "edit", str(a), "--store", db, "--confidence", "1.5"])
    assert stop.value.code == 2
    assert main(["memory", "edit", "999", "--store", db, "--kind", "fact"]) == 1
    assert "no chunk with id 999" in capsys.readouterr().err
