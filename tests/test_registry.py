"""The registry of contexts from Python: add, list, get, rm, refresh, stats; id, name, tag
and text rules; the schema's migrations; corrupt and foreign files; several threads."""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
import time
from pathlib import Path

import pytest

from rlm_runtime.config import paths_from_env
from rlm_runtime.errors import ContextError, RegistryError, UnknownContext
from rlm_runtime.registry import Registry
from rlm_runtime.registry import migrations as registry_migrations
from rlm_runtime.registry.metadata import MAX_TEXT_BYTES
from rlm_runtime.registry.store import RECENT_RUNS


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "notes.md").write_text("# Notes\n\nthe launch code is K-7\n")
    (tmp_path / "data.csv").write_text("name,age\nann,31\nbob,42\n")
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "a.txt").write_text("alpha\n")
    (tmp_path / "kb" / "b.txt").write_text("beta\n")
    return tmp_path


@pytest.fixture
def registry() -> Registry:
    with Registry.open() as reg:
        yield reg


def test_add_derives_an_id_and_keeps_the_probe(files: Path, registry: Registry) -> None:
    """It registers a file under an id derived from its name, with the probe's metadata and the real path."""
    entry = registry.add(files / "notes.md", tags=["work", "q3"])
    assert entry.id == "notes.md" and entry.ref == "ctx:notes.md" and entry.kind == "file"
    assert entry.source == str((files / "notes.md").resolve())
    assert entry.tags == ("q3", "work")
    assert entry.meta["lines"] == 3 and entry.meta["size_bytes"] == (files / "notes.md").stat().st_size
    assert entry.meta["type"] == "markdown" and entry.meta["decision"] == "load" and entry.meta["tokens"] > 0
    assert entry.created == entry.refreshed
    assert registry.get("notes.md") == entry == registry.get("ctx:notes.md")
    assert entry.to_json()["usage"] == {"peeks": 0, "greps": 0, "chunks": 0, "loads": 0, "searches": 0,
                                        "last_access": None, "runs": []}


def test_kinds_are_detected_or_checked(files: Path, registry: Registry) -> None:
    """It detects a folder, refuses a kind that does not fit, and holds a text of its own."""
    folder = registry.add(files / "kb")
    assert folder.kind == "folder" and folder.meta["files"] == 2 and folder.meta["lines"] == 2
    with pytest.raises(RegistryError, match="is a folder, not a file"):
        registry.add(files / "kb", kind="file")
    with pytest.raises(RegistryError, match="not an SQLite file"):
        registry.add(files / "notes.md", kind="memory")
    text = registry.add("first line\nsecond line\n", kind="text", name="Two Lines")
    assert text.kind == "text" and text.source is None and text.id == "two-lines" and text.meta["lines"] == 2
    assert registry.resolve("ctx:two-lines").text == "first line\nsecond line\n"


def test_a_memory_store_is_a_kind(files: Path, registry: Registry) -> None:
    """It registers a memory store file as kind memory, with its chunk count."""
    from rlm_runtime.memory import MemoryStore

    store = MemoryStore(files / "mem.db")
    store.add_text("remember the milk", source="note")
    store.close()
    entry = registry.add(files / "mem.db", id="mem")
    assert entry.kind == "memory" and entry.meta["chunks"] == 1


def test_the_same_path_twice_keeps_one_entry_refreshed(files: Path, registry: Registry) -> None:
    """Registering a path registered already returns its entry (same id, same creation time)
    probed again, with the new tags added and a new name when one is given; ``another=True``
    or an id of its own makes a second entry; a text is never merged."""
    import os

    first = registry.add(files / "notes.md", tags=["work"])
    (files / "notes.md").write_text((files / "notes.md").read_text() + "one more line\n")
    os.utime(files / "notes.md", ns=(1, 1))
    again = registry.add(files / "notes.md", tags=["q3"])
    assert again.id == first.id and again.created == first.created and again.refreshed >= first.refreshed
    assert set(again.tags) == {"work", "q3"} and again.meta["mtime_ns"] == 1 and again.name == first.name
    assert registry.add(files / "notes.md", name="Renamed").name == "Renamed"
    assert [e.id for e in registry.list()] == [first.id]
    second = registry.add(files / "notes.md", another=True)
    assert second.id != first.id and len(registry.list()) == 2
    assert registry.add(files / "notes.md").id == first.id  # the first registered is the one reused
    t1 = registry.add("same text", kind="text")
    assert registry.add("same text", kind="text").id != t1.id


def test_ids_are_unique_and_checked(files: Path, registry: Registry) -> None:
    """It makes a derived id unique, refuses a taken or malformed id, and keeps names and tags bounded."""
    assert registry.add(files / "notes.md").id == "notes.md"
    assert registry.add(files / "notes.md", another=True).id == "notes.md-2"
    assert registry.add(files / "notes.md", name="Ünïcode Notes!!", another=True).id == "unicode-notes"
    assert registry.add(files / "notes.md", id="n1").id == "n1"
    with pytest.raises(RegistryError, match="taken"):
        registry.add(files / "data.csv", id="n1")
    for bad in ("N1", "-x", "", "a" * 65, "a b", "a/b", "ctx:x"):
        with pytest.raises(RegistryError, match="not a valid context id"):
            registry.add(files / "data.csv", id=bad)
    with pytest.raises(RegistryError, match="characters"):
        registry.add(files / "data.csv", name="n" * 201)
    with pytest.raises(RegistryError, match="control character"):
        registry.add(files / "data.csv", name="two\nlines")
    with pytest.raises(RegistryError, match="not a valid tag"):
        registry.add(files / "data.csv", tags=["has space"])
    with pytest.raises(RegistryError, match="more than 32 tags"):
        registry.add(files / "data.csv", tags=[f"t{i}" for i in range(33)])
    with pytest.raises(RegistryError, match="not a context kind"):
        registry.add(files / "data.csv", kind="url")
    assert [e.id for e in registry.list()] == ["n1", "notes.md", "notes.md-2", "unicode-notes"]


def test_a_text_is_size_capped(registry: Registry) -> None:
    """It refuses a text over the cap, and a text that is not valid Unicode, before storing anything."""
    with pytest.raises(RegistryError, match="at most 8 MB"):
        registry.add("x" * (MAX_TEXT_BYTES + 1), kind="text")
    with pytest.raises(RegistryError, match="at most 8 MB"):
        registry.add("é" * (MAX_TEXT_BYTES // 2 + 1), kind="text")
    with pytest.raises(RegistryError, match="surrogate"):
        registry.add("bad \udc80 text", kind="text")
    assert registry.list() == []


def test_missing_and_odd_paths_are_refused(tmp_path: Path, registry: Registry) -> None:
    """It refuses a missing path and a FIFO with a one-line error."""
    with pytest.raises(ContextError, match="no such file or folder"):
        registry.add(tmp_path / "nope.txt")
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(RegistryError, match="neither a regular file nor a folder"):
        registry.add(tmp_path / "fifo")
    with pytest.raises(ContextError, match="binary"):
        (tmp_path / "blob.txt").write_bytes(b"\x00\x01\x02" * 100)
        registry.add(tmp_path / "blob.txt")


def test_list_filters_by_kind_and_tag(files: Path, registry: Registry) -> None:
    """It lists by id, filtered by kind and by tag."""
    registry.add(files / "notes.md", tags=["work"])
    registry.add(files / "kb", tags=["work", "kb"])
    registry.add("some text", kind="text", name="t")
    assert [e.id for e in registry.list()] == ["kb", "notes.md", "t"]
    assert [e.id for e in registry.list(kind="folder")] == ["kb"]
    assert [e.id for e in registry.list(tag="work")] == ["kb", "notes.md"]
    assert [e.id for e in registry.list(kind="file", tag="kb")] == []


def test_list_refuses_a_tag_no_entry_could_carry(files: Path, registry: Registry) -> None:
    """It refuses to list by a tag that breaks the tag rule, a lone surrogate among them (SQLite
    cannot bind one: an MCP client's contexts_list crashed the call), as it refuses such a tag at add."""
    registry.add(files / "notes.md", tags=["work"])
    for tag in ("\ud800", "wo\udfffrk", "has space", ""):
        with pytest.raises(RegistryError, match="not a valid tag"):
            registry.list(tag=tag)


def test_unknown_ids_suggest_the_nearest(files: Path, registry: Registry) -> None:
    """It raises UnknownContext naming the nearest id (or the id of a name typed instead)."""
    registry.add(files / "notes.md", id="project-notes", name="Project Notes")
    with pytest.raises(UnknownContext, match=r"did you mean ctx:project-notes\?") as info:
        registry.get("ctx:project-note")
    assert info.value.suggestion == "project-notes" and info.value.context_id == "project-note"
    with pytest.raises(UnknownContext, match="did you mean ctx:project-notes"):
        registry.get("Project Notes")
    with pytest.raises(UnknownContext, match="rlm context list shows them"):
        registry.get("zzz")
    with pytest.raises(UnknownContext):
        registry.remove("zzz")
    with pytest.raises(UnknownContext):
        registry.record("zzz", "peeks")


def test_remove_forgets_everything_of_a_context(files: Path, registry: Registry) -> None:
    """It removes the entry, its tags, text and usage, and leaves the file alone."""
    registry.add(files / "notes.md", id="n", tags=["x"])
    registry.record("n", "loads", "run-1")
    registry.remove("ctx:n")
    assert registry.list() == [] and (files / "notes.md").exists()
    with registry.db.read() as conn:
        for table in ("context_tags", "context_usage", "context_runs"):
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0


def test_refresh_probes_a_changed_file_and_drops_its_index(files: Path, registry: Registry) -> None:
    """It keeps an unchanged file's metadata, probes a changed one again and removes its search index."""
    from rlm_runtime.searching import _path_key

    path = files / "notes.md"
    entry = registry.add(path, id="n")
    assert registry.refresh("n").meta == entry.meta
    index = registry.index_dir / f"{_path_key(os.path.realpath(path))}.db"
    index.parent.mkdir(parents=True, exist_ok=True)
    index.write_bytes(b"stale index")
    path.write_text(path.read_text() + "one more line\n")
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    fresh = registry.refresh("n")
    assert fresh.meta["lines"] == 4 and fresh.refreshed > entry.refreshed
    assert not index.exists()
    path.unlink()
    with pytest.raises(ContextError, match="no such file or folder"):
        registry.refresh("n")
    path.mkdir()
    with pytest.raises(RegistryError, match="is now a folder, not a file"):
        registry.refresh("n")


def test_usage_is_aggregated_and_bounded(files: Path, registry: Registry) -> None:
    """It adds counts across runs, keeps the last RECENT_RUNS run ids newest first, and refuses bad counts."""
    registry.add(files / "notes.md", id="n")
    registry.record("n", "peeks", "run-a", n=3)
    registry.record_run("run-b", {"n": {"greps": 2, "loads": 1}, "gone": {"loads": 1}})
    registry.record("ctx:n", "chunks")
    usage = registry.stats("n")["n"]
    assert (usage.peeks, usage.greps, usage.chunks, usage.loads, usage.searches) == (3, 2, 1, 1, 0)
    assert usage.runs == ("run-b", "run-a") and usage.last_access is not None
    for k in range(RECENT_RUNS + 20):
        registry.record("n", "loads", f"r{k:03d}")
    runs = registry.get("n").usage.runs
    assert len(runs) == RECENT_RUNS and runs[0] == f"r{RECENT_RUNS + 19:03d}"
    with registry.db.read() as conn:
        assert conn.execute("SELECT count(*) FROM context_runs").fetchone()[0] == RECENT_RUNS
    for op, n in (("reads", 1), ("peeks", -1), ("peeks", True), ("peeks", 2**40)):
        with pytest.raises(RegistryError):
            registry.record("n", op, n=n)
    assert set(registry.stats()) == {"n"}


def test_files_are_private(files: Path) -> None:
    """It creates $RLM_HOME and registry.db 0700 and 0600 whatever the umask."""
    old = os.umask(0o022)
    try:
        with Registry.open() as reg:
            reg.add(files / "notes.md")
    finally:
        os.umask(old)
    home = paths_from_env().home
    assert stat.S_IMODE(os.stat(home / "registry.db").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(home).st_mode) & 0o077 == 0


def test_migrating_an_empty_database(tmp_path: Path) -> None:
    """It applies every migration, in order, to an empty file, and none a second time."""
    path = tmp_path / "registry.db"
    path.write_bytes(b"")
    with Registry.open(path) as reg:
        names = registry_migrations.applied(reg.db.conn)
        assert names == [fn.__name__ for fn in registry_migrations.MIGRATIONS]
        assert registry_migrations.migrate(reg.db.conn) == []
        assert registry_migrations.unexpected_objects(reg.db.conn) == []
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


@pytest.mark.parametrize("content", [b"this is not a database at all" * 100, b"SQLite format 3\x00" + b"\xff" * 4000])
def test_a_corrupt_file_is_refused(tmp_path: Path, content: bytes) -> None:
    """It refuses a registry.db that is not SQLite, or a damaged one, with a clear error, leaving it unchanged."""
    path = tmp_path / "registry.db"
    path.write_bytes(content)
    with pytest.raises(RegistryError, match="not a usable registry of contexts.*left unchanged"):
        Registry.open(path)
    assert path.read_bytes() == content


def test_a_foreign_or_trapped_database_is_refused(tmp_path: Path) -> None:
    """It refuses another program's database, and one of ours with a trigger planted in it, before writing."""
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE people (name TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(RegistryError, match="another program's database"):
        Registry.open(other)
    trapped = tmp_path / "trapped.db"
    Registry.open(trapped).close()
    conn = sqlite3.connect(trapped)
    conn.execute("CREATE TRIGGER t AFTER INSERT ON contexts BEGIN DELETE FROM contexts; END")
    conn.commit()
    conn.close()
    with pytest.raises(RegistryError, match="schema objects the registry does not make: trigger t"):
        Registry.open(trapped)


def test_threads_share_one_registry_and_several(files: Path) -> None:
    """It serves threads sharing one Registry and threads each with their own, losing no count."""
    with Registry.open() as shared:
        shared.add(files / "notes.md", id="n")
        errors: list[BaseException] = []

        def work(k: int) -> None:
            try:
                for j in range(20):
                    shared.record("n", "peeks", f"shared-{k}-{j}")
                with Registry.open() as own:
                    own.add(files / "data.csv", tags=[f"t{k}"])
                    for _ in range(20):
                        own.record("n", "greps")
            except BaseException as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        usage = shared.get("n").usage
        assert (usage.peeks, usage.greps) == (120, 120)
        # Six registrations of one path from six connections: one entry, every thread's tag on it.
        ids = [e.id for e in shared.list()]
        assert sorted(ids) == ["data.csv", "n"]
        assert set(shared.get("data.csv").tags) == {f"t{k}" for k in range(6)}


def test_processes_share_one_file(files: Path) -> None:
    """It serves several processes writing the same registry at once, losing no count."""
    import subprocess
    import sys

    path = paths_from_env().registry
    with Registry.open() as reg:
        reg.add(files / "notes.md", id="n")
    script = ("import sys\nfrom rlm_runtime.registry import Registry\n"
              "with Registry.open(sys.argv[1]) as reg:\n"
              "    for k in range(40):\n"
              "        reg.record('n', 'loads', f'{sys.argv[2]}-{k}')\n")
    procs = [subprocess.Popen([sys.executable, "-c", script, str(path), f"p{i}"]) for i in range(3)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    with Registry.open() as reg:
        usage = reg.get("n").usage
    assert usage.loads == 120 and len(usage.runs) == RECENT_RUNS
