"""Red team (issue 39, finding 9): crafted memory stores and registries ended in "internal error".

SQLite checks neither the type nor the range of a value it reads: a memory store or a
registry file written elsewhere (or edited with ``sqlite3``) can hold 1e300, an infinity or
2**63-1 where a time or a counter goes. ``rlm memory list`` and ``show`` turned a time of
+-1e300 into a date (``OverflowError``: "rlm: internal error"), recall divided by zero on a
recall count of -1, an infinite strength decayed to NaN made every prune fail, and a stored
expiry of -1e300 deleted its chunk; a ``vector_meta.version`` of 2**63-1 opened, the next
``rlm memory add`` overflowed it to a REAL and every later open refused the store. The registry
checked no value it read: text, a blob or NULL where a time or a count goes, a negative size,
metadata that is not JSON ended ``rlm context list|show|stats`` the same way. Each crafted
file is built here with ``sqlite3`` and driven through the real ``rlm`` entry point: the
command exits as documented with a clear line (a time that is no time is shown as ``invalid
time`` and counted as unknown; a damaged registry row is left out of lists with a warning
naming it and refused by id, exit 2), never a traceback, and the store or registry still
takes an add and lists afterwards.
"""

from __future__ import annotations

import io
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from rlm_runtime.cli import main
from rlm_runtime.config import paths_from_env
from rlm_runtime.embeddings import installed
from rlm_runtime.memory import default_store_path
from rlm_runtime.registry import Registry

#: Times no clock gives: far past and future, the infinities (SQLite reads 9e999 as inf), int64's ends.
HOSTILE_TIMES = ["1e300", "-1e300", "9e999", "-9e999", "9223372036854775807", "-9223372036854775808"]


def rlm(capsys: pytest.CaptureFixture[str], *argv: str, stdin: str | None = None) -> tuple[int, str, str]:
    """Run ``rlm ARGV``; its exit status, stdout and stderr, checked for tracebacks."""
    if stdin is not None:
        saved, sys.stdin = sys.stdin, io.TextIOWrapper(io.BytesIO(stdin.encode()))
    try:
        code = main(list(argv))
    finally:
        if stdin is not None:
            sys.stdin = saved
    out, err = capsys.readouterr()
    assert "internal error" not in out + err and "Traceback" not in out + err, (argv, out, err)
    return code, out, err


def tamper(path: Path, *statements: str) -> None:
    conn = sqlite3.connect(path)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()


def strict_json(text: str) -> Any:
    """``text`` read as standard JSON (Python's reader takes Infinity and NaN; this one refuses them)."""

    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture
def store(capsys: pytest.CaptureFixture[str]) -> Path:
    """The default store holding one note (chunk 1)."""
    assert rlm(capsys, "memory", "add", "-", stdin="The quokka sleeps in the zeppelin hangar.")[0] == 0
    return default_store_path()


def still_usable(capsys: pytest.CaptureFixture[str]) -> str:
    """A later add and list work; the list's output."""
    assert rlm(capsys, "memory", "add", "-", stdin="Kangaroos box in the evening.")[0] == 0
    code, out, _ = rlm(capsys, "memory", "list")
    assert code == 0 and "Kangaroos" in out
    return out


@pytest.mark.parametrize("value", HOSTILE_TIMES)
def test_times_that_are_no_time_show_as_invalid(store: Path, capsys: pytest.CaptureFixture[str], value: str) -> None:
    """It lists, shows, recalls and prunes (dry run) a chunk whose every time is no time, saying 'invalid time'."""
    tamper(store, f"UPDATE chunks SET created = {value}, modified = {value}, accessed = {value}",
           f"UPDATE chunk_stats SET last_recall = {value}, strength_at = {value}, expires_at = {value}")
    code, out, _ = rlm(capsys, "memory", "list")
    assert code == 0 and out.startswith("1  invalid time  notes:1-1") and "expires invalid time" in out
    code, out, _ = rlm(capsys, "memory", "show", "1")
    assert code == 0 and "created invalid time; recalled 0 times (last invalid time)" in out and "expires invalid time" in out
    code, out, _ = rlm(capsys, "memory", "recall")
    assert code == 0 and "recency 0.00" in out  # an unknown time is not recent
    assert rlm(capsys, "memory", "recall", "quokka")[0] == 0
    assert rlm(capsys, "memory", "prune", "--dry-run")[0] == 0
    assert "quokka" in still_usable(capsys)


@pytest.mark.parametrize("value", HOSTILE_TIMES)
def test_a_time_in_the_trash_that_is_no_time(store: Path, capsys: pytest.CaptureFixture[str], value: str) -> None:
    """It lists the trash when a chunk was forgotten at a time that is no time, and purges it."""
    assert rlm(capsys, "memory", "forget", "1")[0] == 0
    tamper(store, f"UPDATE chunks SET deleted_at = {value}")
    code, out, _ = rlm(capsys, "memory", "list", "--deleted")
    assert code == 0 and "forgotten invalid time" in out
    assert rlm(capsys, "memory", "purge", "--dry-run")[0] == 0
    assert rlm(capsys, "memory", "purge")[0] == 0
    assert "quokka" not in still_usable(capsys)


@pytest.mark.parametrize("value", ["-1e300", "-9e999", "-9223372036854775808"])
def test_an_expiry_that_is_no_time_deletes_nothing(store: Path, capsys: pytest.CaptureFixture[str], value: str) -> None:
    """It keeps a chunk whose expiry is no time (unknown, not long past) through a prune; a real past expiry still goes."""
    assert rlm(capsys, "memory", "add", "-", stdin="A second note that expired yesterday.")[0] == 0
    tamper(store, f"UPDATE chunk_stats SET expires_at = {value} WHERE chunk_id = 1",
           "UPDATE chunk_stats SET expires_at = strftime('%s', 'now') - 86400 WHERE chunk_id = 2")
    code, out, _ = rlm(capsys, "memory", "prune")
    assert code == 0 and "1 chunk removed (expired: 2)" in out
    code, out, _ = rlm(capsys, "memory", "list")
    assert "quokka" in out and "expired yesterday" not in out


def test_a_negative_recall_count_ranks(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It recalls and searches a chunk whose recall count is -1 (the rate's denominator was 0: ZeroDivisionError)."""
    tamper(store, "UPDATE chunk_stats SET recall_count = -1")
    for argv in (("recall",), ("recall", "quokka"), ("search", "quokka")):
        code, out, _ = rlm(capsys, "memory", *argv)
        assert code == 0 and "quokka" in out
    still_usable(capsys)


@pytest.mark.parametrize("strength", ["9e999", "-9e999"])
def test_an_infinite_strength_decays_without_nan(store: Path, capsys: pytest.CaptureFixture[str], strength: str) -> None:
    """It prunes a store whose strength is infinite and set in 1970 (inf * 0.5**20000 was NaN: NULL in a NOT NULL column)."""
    tamper(store, f"UPDATE chunk_stats SET strength = {strength}, strength_at = 0")
    code, out, err = rlm(capsys, "memory", "prune")
    assert code == 0 and "decay: 1 strength decayed" in out, err
    still_usable(capsys)


def test_an_upkeep_time_in_the_far_future_is_due(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It runs the daily upkeep again when its last run is a time that is no time (1e300 was never due)."""
    tamper(store, "UPDATE upkeep SET last_run = 1e300")
    still_usable(capsys)
    conn = sqlite3.connect(store)
    last_run = conn.execute("SELECT last_run FROM upkeep").fetchone()[0]
    conn.close()
    assert last_run < 1e11


def test_json_output_stays_json(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It prints --json of a chunk whose times are infinite as standard JSON (null), not Infinity."""
    tamper(store, "UPDATE chunks SET created = 9e999", "UPDATE chunk_stats SET expires_at = -9e999, strength = 9e999")
    for argv in (("list", "--json"), ("show", "1", "--json")):
        code, out, _ = rlm(capsys, "memory", *argv)
        assert code == 0 and "Infinity" not in out
        strict_json(out)


def test_an_export_stays_json(store: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """It exports infinite times, strengths and scores as standard JSON lines (null); importing that export refuses its line."""
    tamper(store, "UPDATE chunks SET accessed = 9e999", "UPDATE chunk_stats SET strength = -9e999",
           "INSERT INTO recall_traces (id, at, op) VALUES (1, 1700000000, 'search')",
           "INSERT INTO trace_chunks (trace_id, rank, chunk_id, score) VALUES (1, 0, 1, 9e999)")
    export = tmp_path / "export.jsonl"
    assert rlm(capsys, "memory", "export", str(export))[0] == 0  # the trace's Inf from SQLite's JSON was a JSONDecodeError
    records = [strict_json(line) for line in export.read_text().splitlines()]
    chunk = next(r for r in records if r["type"] == "chunk")
    assert chunk["accessed"] is None and chunk["stats"]["strength"] is None
    assert next(r for r in records if r["type"] == "trace")["chunks"] == [[0, 1, None]]
    code, _, err = rlm(capsys, "memory", "import", str(export), "--store", str(tmp_path / "other.db"))
    assert code == 2 and "the chunk record's 'stats' is not an object of the chunk's statistics" in err
    still_usable(capsys)


# ---------------------------------------------------------------------------------- counters

needs_model = pytest.mark.skipif(not installed(), reason="the embed extra is not installed (no vectors, no version)")


def column(path: Path, sql: str) -> Any:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchone()[0]
    finally:
        conn.close()


@needs_model
@pytest.mark.parametrize("value", ["9223372036854775807", "-1", "9.3e18"])
def test_a_vector_version_out_of_range_is_reset(store: Path, capsys: pytest.CaptureFixture[str], value: str) -> None:
    """It searches a store whose vector_meta.version is out of range, then resets it at the next add with a warning; no open refuses it after."""
    tamper(store, f"UPDATE vector_meta SET version = {value}, epoch = {value}")  # 9.3e18: the REAL an overflow wrote
    code, out, _ = rlm(capsys, "memory", "search", "quokka", "--mode", "vector")
    assert code == 0 and "quokka" in out
    code, _, err = rlm(capsys, "memory", "add", "-", stdin="Owls hunt at night.")
    assert code == 0 and "rlm: warning: the memory store" in err and "out of the range 0 to 2**62: reset to 0" in err
    assert f"vector_meta.version ({float(value) if '.' in value else int(value)!r})" in err
    assert column(store, "SELECT version FROM vector_meta") == 1 and column(store, "SELECT epoch FROM vector_meta") == 0
    code, _, err = rlm(capsys, "memory", "add", "-", stdin="Bats hunt at dusk.")
    assert code == 0 and "warning" not in err
    code, out, _ = rlm(capsys, "memory", "search", "hunt", "--mode", "vector")
    assert code == 0 and "Owls" in out and "Bats" in out
    still_usable(capsys)


@needs_model
def test_a_vector_version_never_overflows(tmp_path: Path) -> None:
    """It adds to a store whose version is at the last value before the wrap: the counter goes back to 0, an open after takes it."""
    from rlm_runtime.memory import MemoryStore
    from rlm_runtime.memory.value_check import COUNT_LIMIT

    path = tmp_path / "memory.db"
    with MemoryStore(path) as st:
        st.add_text("The quokka sleeps.")
    tamper(path, f"UPDATE vector_meta SET version = {COUNT_LIMIT - 1}")
    with MemoryStore(path) as st:
        st.add_text("The owl hunts.")
    assert column(path, "SELECT version FROM vector_meta") == 0
    with MemoryStore(path, readonly=True) as st:
        assert st.search("owl", mode="vector", record=False)


def test_counts_at_int64s_end_never_overflow(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It counts more recalls of a chunk and of its links at 2**63-1 (capped, not a REAL the next open refuses)."""
    from rlm_runtime.memory import MemoryStore

    path = tmp_path / "memory.db"
    with MemoryStore(path, embedder=None) as st:
        st.add_text("The quokka sleeps in the hangar.", source="a")
        st.add_text("The quokka wakes at noon.", source="b")
        st.search("quokka")  # links the two co_recalled
    tamper(path, "UPDATE chunk_stats SET recall_count = 9223372036854775807", "UPDATE links SET count = 9223372036854775807")
    with MemoryStore(path, embedder=None) as st:
        assert len(st.search("quokka")) == 2 and st.recall("quokka")
    assert column(path, "SELECT typeof(recall_count) || typeof(count) FROM chunk_stats, links") == "integerinteger"
    code, out, _ = rlm(capsys, "memory", "show", "1", "--links", "--store", str(path))
    assert code == 0 and f"recalled {1 << 62:,} times" in out and "co_recalled" in out


def test_a_position_at_int64s_end_takes_another_note(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It appends a note to a source whose last chunk's position is 2**63-1 (2**63 overflowed SQLite: 'internal error')."""
    tamper(store, "UPDATE chunks SET seq = 9223372036854775807")
    still_usable(capsys)


def test_token_counts_that_overflow_a_sum(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It prints stats of a store whose token counts add up past 2**63 (SQLite's sum() raised 'integer overflow')."""
    assert rlm(capsys, "memory", "add", "-", stdin="A second note, with its own tokens.")[0] == 0
    tamper(store, "UPDATE chunks SET tokens = 9223372036854775807")
    code, out, _ = rlm(capsys, "memory", "stats")
    assert code == 0 and "18,446,744,073,709,551,616 tokens" in out
    still_usable(capsys)


def test_links_of_opposite_infinite_strength(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It recalls from a chunk whose two links to another are +inf and -inf strong (their sum, NaN, read as None: TypeError)."""
    assert rlm(capsys, "memory", "add", "-", stdin="Kangaroos box in the evening.")[0] == 0
    tamper(store, "DELETE FROM links", "INSERT INTO links VALUES (1, 2, 'supports', 9e999, 1, 0, 0)",
           "INSERT INTO links VALUES (1, 2, 'contradicts', -9e999, 1, 0, 0)")
    code, out, _ = rlm(capsys, "memory", "recall", "--from", "1")
    assert code == 0 and "Kangaroos" in out
    assert rlm(capsys, "memory", "show", "1", "--links")[0] == 0


@pytest.mark.parametrize(("statement", "named"), [
    ("UPDATE sqlite_sequence SET seq = 'many' WHERE name = 'chunks'", "sqlite_sequence.seq of 'chunks': not an integer"),
    ("UPDATE sqlite_sequence SET seq = 1e300 WHERE name = 'chunks'", "sqlite_sequence.seq of 'chunks': not an integer"),
    ("UPDATE sqlite_sequence SET seq = 9223372036854775807 WHERE name = 'chunks'", "sqlite_sequence.seq of 'chunks': a value out of"),
    ("UPDATE chunks SET id = 9223372036854775807", "chunks.id, row 9223372036854775807: a value out of the column's range"),
    ("UPDATE chunks SET meta = ''", "chunks.meta, row 1: a value of another type"),
])
def test_ids_no_row_can_follow_are_refused_at_open(store: Path, capsys: pytest.CaptureFixture[str], statement: str,
                                                   named: str) -> None:
    """It refuses, naming the column, a store whose ids or AUTOINCREMENT sequence leave no room (or are not numbers), and leaves it unchanged."""
    tamper(store, "PRAGMA foreign_keys = OFF", statement)
    before = store.read_bytes()
    for argv in (("list",), ("add", "-")):
        code, _, err = rlm(capsys, "memory", *argv, stdin="Owls hunt at night." if argv == ("add", "-") else None)
        assert code == 2 and "is not a memory store this version wrote: " + named in err and err.count("\n") == 1
    assert store.read_bytes() == before


# ---------------------------------------------------------------------------------- the registry


def null_in(path: Path, table: str, column: str, where: str) -> None:
    """NULL in a NOT NULL column: the constraint lifted for one update, then put back."""
    conn = sqlite3.connect(path)
    sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
    lifted = sql.replace(f"{column} REAL NOT NULL", f"{column} REAL").replace(f"{column} INTEGER NOT NULL", f"{column} INTEGER")
    assert lifted != sql
    for schema, update in ((lifted, f"UPDATE {table} SET {column} = NULL WHERE {where}"), (sql, None)):
        conn.execute("PRAGMA writable_schema = ON")
        conn.execute("UPDATE sqlite_master SET sql = ? WHERE name = ?", (schema, table))
        conn.commit()
        conn.close()
        conn = sqlite3.connect(path)
        if update:
            conn.execute(update)
            conn.commit()
    conn.close()


@pytest.fixture
def registry(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Path:
    """The registry of $RLM_HOME: ctx:a (a file with a tag, a run and a lead) and ctx:b."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.txt").write_text("alpha needle\n")
    (tmp_path / "b.txt").write_text("beta\n")
    assert rlm(capsys, "context", "add", "a.txt", "--id", "a", "--tag", "t1")[0] == 0
    assert rlm(capsys, "context", "add", "b.txt", "--id", "b")[0] == 0
    with Registry.open() as reg:
        reg.record_run("run-1", {"a": {"peeks": 2, "loads": 1}})
        reg.record_leads({"a": ["grep('needle')"]})
    return paths_from_env().registry


#: A damage done to ctx:a's rows, and how a message names it.
DAMAGES = {
    "text as a time": ("UPDATE contexts SET created = 'yesterday' WHERE id = 'a'", "contexts.created: not a time"),
    "a blob as a time": ("UPDATE contexts SET refreshed = x'00' WHERE id = 'a'", "contexts.refreshed: not a time"),
    "a time of 1e300": ("UPDATE contexts SET created = 1e300 WHERE id = 'a'", "contexts.created: not a time"),
    "an infinite time": ("UPDATE contexts SET refreshed = -9e999 WHERE id = 'a'", "contexts.refreshed: not a time"),
    "NULL as a time": (("contexts", "created"), "contexts.created: not a time"),
    "a blob as a name": ("UPDATE contexts SET name = x'00ff' WHERE id = 'a'", "contexts.name: not a name"),
    "a kind of no context": ("UPDATE contexts SET kind = 'web' WHERE id = 'a'", "contexts.kind: not a kind"),
    "a blob as a path": ("UPDATE contexts SET source = x'2f746d70' WHERE id = 'a'", "contexts.source: not a path"),
    "metadata that is not JSON": ("UPDATE contexts SET meta = '{not json' WHERE id = 'a'", "contexts.meta: not JSON"),
    "metadata as a blob": ("UPDATE contexts SET meta = x'7b7d' WHERE id = 'a'", "contexts.meta: not JSON text"),
    "metadata that is a list": ("UPDATE contexts SET meta = '[1, 2]' WHERE id = 'a'", "contexts.meta: not a JSON object"),
    "a negative size": ("UPDATE contexts SET meta = json_set(meta, '$.size_bytes', -5) WHERE id = 'a'",
                        "contexts.meta: size_bytes is -5"),
    "a huge float size": ("UPDATE contexts SET meta = json_set(meta, '$.size_bytes', 1e300) WHERE id = 'a'",
                          "contexts.meta: size_bytes is 1e+300"),
    "text as lines": ("UPDATE contexts SET meta = json_set(meta, '$.lines', 'many') WHERE id = 'a'",
                      "contexts.meta: lines is 'many'"),
    "an object as a shape": ("UPDATE contexts SET meta = json_set(meta, '$.shape', json('{}')) WHERE id = 'a'",
                             "contexts.meta: shape is a JSON dict"),
    "text as a count": ("UPDATE context_usage SET peeks = 'many' WHERE id = 'a'", "context_usage.peeks: not a count"),
    "a negative count": ("UPDATE context_usage SET greps = -3 WHERE id = 'a'", "context_usage.greps: not a count"),
    "a float count": ("UPDATE context_usage SET loads = 2.5 WHERE id = 'a'", "context_usage.loads: not a count"),
    "NULL as a count": (("context_usage", "chunks"), "context_usage.chunks: not a count"),
    "a blob as a last access": ("UPDATE context_usage SET last_access = x'01' WHERE id = 'a'", "context_usage.last_access: not a time"),
    "a last access of -1e300": ("UPDATE context_usage SET last_access = -1e300 WHERE id = 'a'",
                                "context_usage.last_access: not a time"),
    "a blob as a tag": ("UPDATE context_tags SET tag = x'00' WHERE id = 'a'", "context_tags.tag: not a tag"),
    "a blob as a run id": ("UPDATE context_runs SET run_id = x'00' WHERE id = 'a'", "context_runs.run_id: not a run id"),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_context_is_left_out_and_refused_by_id(registry: Path, capsys: pytest.CaptureFixture[str], damage: str) -> None:
    """It lists every other context with a one-line warning naming the damaged one, refuses it by id (exit 2), and rm removes it."""
    statement, named = DAMAGES[damage]
    if isinstance(statement, tuple):
        null_in(registry, *statement, "id = 'a'")
    else:
        tamper(registry, "PRAGMA ignore_check_constraints = ON", statement)
    said = f"ctx:a is damaged in registry.db ({named}): rlm context rm a removes it\n"
    for argv in (("list",), ("stats",)):
        code, out, err = rlm(capsys, "context", *argv)
        assert code == 0 and ("b.txt" in out or "ctx:b:" in out)
        assert "a.txt" not in out and "ctx:a" not in out and err == f"rlm: warning: left out of the list: {said}"
    code, out, _ = rlm(capsys, "context", "list", "--json")
    assert code == 0 and [c["id"] for c in strict_json(out)["contexts"]] == ["b"]
    for argv in (("context", "show", "a"), ("context", "stats", "a"), ("context", "refresh", "a"), ("peek", "ctx:a")):
        code, out, err = rlm(capsys, *argv)
        assert (code, out, err) == (2, "", f"rlm: error: {said}"), argv
    code, out, _ = rlm(capsys, "context", "show", "ctx:a", "--json")
    assert code == 2 and strict_json(out) == {"error": said.strip(), "error_type": "DamagedContext"}
    assert rlm(capsys, "context", "show", "b")[0] == 0
    assert rlm(capsys, "context", "rm", "a")[1] == "removed ctx:a (damaged)\n"
    assert rlm(capsys, "context", "add", "a.txt", "--id", "a")[0] == 0
    code, out, err = rlm(capsys, "context", "list")
    assert code == 0 and [line.split()[0] for line in out.splitlines()] == ["a", "b"] and err == ""


def test_a_row_whose_id_is_no_id_is_left_out(registry: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It lists the other contexts of a registry holding a row whose id breaks the id rule, naming that id in its warning."""
    tamper(registry, "UPDATE contexts SET id = 'Not An Id' WHERE id = 'a'")
    code, out, err = rlm(capsys, "context", "list")
    assert code == 0 and out.startswith("b  file") and err == (
        "rlm: warning: left out of the list: a context of id 'Not An Id' is damaged in registry.db (contexts.id: not an id)\n")
    assert rlm(capsys, "context", "add", "a.txt", "--id", "c")[0] == 0


def test_a_text_context_whose_text_is_a_blob(registry: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It refuses to read a text context whose text is a blob (its bytes were printed as b'...'), and removes it."""
    assert rlm(capsys, "context", "add", "-", "--kind", "text", "--id", "tx", stdin="some words\n")[0] == 0
    tamper(registry, "UPDATE context_texts SET text = x'00ff' WHERE id = 'tx'")
    code, out, err = rlm(capsys, "peek", "ctx:tx")
    assert code == 2 and out == "" and "ctx:tx is damaged in registry.db (context_texts.text: not a text)" in err
    assert rlm(capsys, "context", "rm", "tx")[0] == 0


def test_usage_counts_at_int64s_end_never_overflow(registry: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It counts one more peek and lead of a context whose counts are 2**63-1: capped, not a REAL the next read calls damaged."""
    tamper(registry, "UPDATE context_usage SET peeks = 9223372036854775807", "UPDATE context_leads SET questions = 9223372036854775807")
    assert rlm(capsys, "peek", "ctx:a")[0] == 0
    with Registry.open() as reg:
        reg.record_leads({"a": ["grep('needle')"]})
    code, out, err = rlm(capsys, "context", "show", "a")
    assert code == 0 and f"peeks {(1 << 62) + 1}," in out and err == ""
