"""Hostile memory imports (``rlm memory import``): deeply nested JSON, huge numbers, NaN and
Infinity, wrong types, invalid UTF-8, huge lines. Each ends in one clear error naming its line
(no "internal error", no traceback) and the store is left as it was."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rlm_runtime.cli import main
from rlm_runtime.memory import MemoryStore

Records = list[dict[str, Any]]


def good_export(tmp_path: Path) -> Records:
    with MemoryStore(tmp_path / "source.db") as store:
        first = store.add_text("The river passes the lantern works.", source="notes", tags=["a"])
        second = store.add_text("A second note, about copper.", source="notes")
        store.link(first[0], second[0], "supports")
        store.search("river", mode="bm25")
        store.export_jsonl(tmp_path / "good.jsonl")
    return [json.loads(line) for line in (tmp_path / "good.jsonl").read_text().splitlines()]


def lines_of(records: Records) -> list[str]:
    return [json.dumps(r) for r in records]


def field(kind: str, name: str, value: Any) -> Callable[[Records], list[str]]:
    def change(records: Records) -> list[str]:
        rec = next(r for r in records if r["type"] == kind)
        rec[name] = value
        return lines_of(records)

    return change


def line(text: str, at: int = 2) -> Callable[[Records], list[str]]:
    def change(records: Records) -> list[str]:
        out = lines_of(records)
        out.insert(at, text)
        return out

    return change


# name: (how the export is changed, the line the error names, what it says)
CASES: dict[str, tuple[Callable[[Records], list[str]], int, str]] = {
    "deeply nested JSON": (line('{"type": "chunk", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"), 3, "nested too deeply"),
    "a deeply nested line that is not an object": (line("[" * 100_000 + "]" * 100_000), 3, "nested too deeply"),
    "an id too large for SQLite": (field("chunk", "id", 10**30), 3, "integer of 31 digits"),
    "an integer of 5000 digits": (line('{"type": "source", "id": ' + "9" * 5000 + "}"), 3, "integer of 5000 digits"),
    "NaN": (line('{"type": "chunk", "id": NaN}'), 3, "NaN is not a number"),
    "Infinity": (field("link", "strength", float("inf")), 5, "Infinity is not a number"),
    "a number out of range": (line('{"type": "trace", "at": 1e400}'), 3, "out of range"),
    "text that is an object": (field("chunk", "text", {"a": 1}), 3, "'text' is not a string"),
    "tags that are a string": (field("chunk", "tags", "abc"), 3, "'tags' is not a list of strings"),
    "stats that are a list": (field("chunk", "stats", [1]), 3, "'stats' is not an object"),
    "meta that is a number": (field("chunk", "meta", 5), 3, "'meta' is not an object or null"),
    "a source id that is a list": (field("chunk", "source_id", [1]), 3, "'source_id' is not a positive integer"),
    "an id that is true": (field("source", "id", True), 2, "'id' is not a positive integer"),
    "trace chunks that are not triples": (field("trace", "chunks", [[1]]), 7, "'chunks' is not a list of"),
    "a link type that is a number": (field("link", "link_type", 5), 5, "'link_type' is not a string"),
    "a record that is a list": (line("[1, 2, 3]"), 3, "is a JSON list, not a record"),
    "a record that is a string": (line('"hello"'), 3, "is a JSON str, not a record"),
    "a lone surrogate": (field("source", "path", "\ud800"), 2, "'path' is not a string"),
    "a duplicate id": (line(json.dumps({"type": "source", "id": 1, "kind": "memory", "path": "other", "size": None,
                                        "mtime_ns": None, "hash": None, "state": "complete", "note": None,
                                        "created": 1.0, "updated": 1.0}), 2), 3, "UNIQUE constraint failed"),
}


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")
    return path


def chunks_in(store: Path) -> int:
    if not store.exists():
        return 0
    conn = sqlite3.connect(store)
    try:
        return int(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
    finally:
        conn.close()


def import_fails(capsys: pytest.CaptureFixture[str], file: Path, store: Path, at: int, says: str) -> None:
    code = main(["memory", "import", str(file), "--store", str(store)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("rlm: error: ") and err.count("\n") == 1, err
    assert f"line {at}" in err and says in err and "nothing was imported" in err, err
    assert "internal error" not in err and "Traceback" not in err
    assert chunks_in(store) == 0


@pytest.mark.parametrize("case", list(CASES))
def test_hostile_import_line_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    """It refuses each hostile line with one error naming the line, and imports nothing."""
    change, at, says = CASES[case]
    file = write(tmp_path / "hostile.jsonl", change(good_export(tmp_path)))
    import_fails(capsys, file, tmp_path / "target.db", at, says)


def test_invalid_utf8_names_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It names the line holding bytes that are not UTF-8, and imports nothing."""
    good = lines_of(good_export(tmp_path))
    file = tmp_path / "bytes.jsonl"
    file.write_bytes(("\n".join(good[:3]) + "\n").encode() + b'{"type": "chunk", "text": "\xff\xfe"}\n')
    import_fails(capsys, file, tmp_path / "target.db", 4, "is not UTF-8 text")


def test_a_huge_line_is_refused_before_it_is_parsed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It refuses a line over the line limit without reading the rest of it."""
    from rlm_runtime.memory.import_check import MAX_LINE_CHARS

    good = lines_of(good_export(tmp_path))
    huge = '{"type": "source", "note": "' + "x" * (MAX_LINE_CHARS + 10) + '"}'
    file = write(tmp_path / "huge.jsonl", [*good[:2], huge, *good[2:]])
    import_fails(capsys, file, tmp_path / "target.db", 3, "is longer than")


def test_a_good_export_still_imports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It still imports an export this code wrote, whole."""
    file = write(tmp_path / "good2.jsonl", lines_of(good_export(tmp_path)))
    assert main(["memory", "import", str(file), "--store", str(tmp_path / "target.db")]) == 0
    assert chunks_in(tmp_path / "target.db") == 2
