"""The task file format: forms of context, validation errors by line and field."""

from __future__ import annotations

from pathlib import Path

from rlm_runtime.eval.confine import SourceRules
from rlm_runtime.eval.tasks import InlineText, load_tasks

from .conftest import write_jsonl


def test_valid_forms_of_context(tmp_path: Path) -> None:
    """It accepts a path, a list of paths, a folder, inline text, memory: (when allowed) and null, resolved against the file."""
    (tmp_path / "a.txt").write_text("alpha")
    (tmp_path / "docs").mkdir()
    store = tmp_path / "m.db"
    store.write_bytes(b"")
    path = write_jsonl(tmp_path / "t.jsonl", [
        {"id": "1", "question": "q", "context": "a.txt", "answer": "x"},
        {"id": "2", "question": "q", "context": ["a.txt", "docs"], "answer": ["x", "y"]},
        {"id": "3", "question": "q", "context": {"text": "inline words"}, "answer": 3},
        {"id": "4", "question": "q", "context": "memory:", "answer": "x", "scorer": "judge"},
        {"id": "5", "question": "q", "context": "memory:m.db", "answer": "x"},
        {"id": "6", "question": "q", "answer": "x", "metadata": {"family": "f", "length": 10}},
    ])
    loaded = load_tasks(path, SourceRules(allow_memory=True))
    assert loaded.errors == []
    t = {x.id: x for x in loaded.tasks}
    assert loaded.sources(t["1"]) == ([tmp_path / "a.txt"], None)
    assert loaded.sources(t["2"])[0] == [tmp_path / "a.txt", tmp_path / "docs"]
    assert isinstance(t["3"].context, InlineText) and loaded.sources(t["3"]) == (["inline words"], None)
    assert t["3"].scorer_name == "numeric" and t["1"].scorer_name == "exact"
    assert loaded.sources(t["4"]) == ([], True)
    assert loaded.sources(t["5"]) == ([], tmp_path / "m.db")
    assert t["6"].family == "f" and t["6"].length == 10


def test_bad_lines_name_their_line_and_field(tmp_path: Path) -> None:
    """It reports each bad line with its number and field, and keeps the good lines."""
    path = write_jsonl(tmp_path / "t.jsonl", [
        {"id": "ok1", "question": "q", "answer": "x"},
        "{not json",
        {"id": "2", "answer": "x"},
        {"id": "3", "question": "q", "answer": "x", "scorer": "fuzzy"},
        {"id": "4", "question": "q", "answer": "many", "scorer": "numeric"},
        {"id": "5", "question": "q", "answer": "x", "context": "missing.txt"},
        {"id": "ok1", "question": "q", "answer": "x"},
        {"id": "7", "question": "q", "answer": "x", "colour": "red"},
        {"id": "8", "question": "q", "answer": "(", "scorer": "regex"},
        {"id": "9", "question": "  ", "answer": "x"},
        [1, 2],
        {"id": "ok2", "question": "q", "answer": 4.5},
    ])
    loaded = load_tasks(path)
    assert [t.id for t in loaded.tasks] == ["ok1", "ok2"]
    got = {e.line: e.field for e in loaded.errors}
    assert got == {2: "(line)", 3: "question", 4: "scorer", 5: "scorer", 6: "context", 7: "id", 8: "colour", 9: "scorer",
                   10: "question", 11: "(line)"}
    by_line = {e.line: e.message for e in loaded.errors}
    assert "numeric needs a number" in by_line[5]
    assert "missing.txt" in by_line[6]
    assert "duplicate" in by_line[7] and "line 1" in by_line[7]
    assert "regex" in by_line[9]
    assert str(loaded.errors[0]).startswith("line 2: (line): not JSON")


def test_digest_follows_the_line(tmp_path: Path) -> None:
    """It gives equal tasks equal digests and a changed answer another."""
    from rlm_runtime.eval.tasks import Task

    a = Task(id="1", question="q", answer="x")
    assert a.digest() == Task(id="1", question="q", answer="x").digest()
    assert a.digest() != Task(id="1", question="q", answer="y").digest()
