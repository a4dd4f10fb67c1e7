"""Nested documents read as records (``context/nested.py``): a JSON document's objects that
hold values, each knowing the object around it, read whole or from a window of the document."""

from __future__ import annotations

import json
import time

import pytest

from rlm_runtime.context import TextHandle, nested
from rlm_runtime.context import records as R

GREENHOUSE = {
    "site": "north field",
    "houses": {
        "fern house": {"heated": True, "beds": {"bed 1": {"crop": "basil", "rows": 4}, "bed 2": {"crop": "mint", "rows": 2}}},
        "cactus house": {"heated": False, "beds": {"bed 9": {"crop": "aloe", "rows": 6}}},
    },
    "tools": [{"name": "rake", "count": 3}, {"name": "hoe", "count": 1, "tags": ["iron", "old"]}],
}


def test_it_reads_objects_holding_values_as_records_through_containers() -> None:
    """It reads each object that holds a value as a record, its key first, and links it to the
    record around it through objects and lists that only hold others."""
    recs = R.parse_text(json.dumps(GREENHOUSE, indent=2))
    assert recs.shape == "json" and recs.coverage == 1.0
    assert [r.get("key") or r.get("name") or r.get("site") for r in recs] == [
        "north field", "fern house", "bed 1", "bed 2", "cactus house", "bed 9", "rake", "hoe"]
    assert [r["key"] for r in recs.children_of("fern house")] == ["bed 1", "bed 2"]
    assert recs.parent_of("bed 9")[0]["key"] == "cactus house"
    assert recs.parent_of("rake")[0]["site"] == "north field"  # a list's items belong to the record around it
    assert recs.count("crop", "mint") == 1 and recs.find("hoe")[0]["tags"] == ["iron", "old"]
    assert recs.find("bed 1")[0]["rows"] == 4  # values keep their JSON types


def test_each_record_starts_on_its_first_keys_line() -> None:
    """It numbers each record by the line of its object's first key (its name in the parent)."""
    text = json.dumps(GREENHOUSE, indent=2)
    lines = text.split("\n")
    for r in R.parse_text(text):
        first = r.get("key") or next(iter(r))
        assert json.dumps(first) in lines[r.line - 1] or f'"{first}"' in lines[r.line - 1], (r.line, first)


def test_a_window_of_a_document_reads_its_whole_objects() -> None:
    """It reads a window cut from a document at both ends (a chunk, a file cut short): the
    objects closed in it, opened at its first key and closed after its last whole object."""
    text = json.dumps(GREENHOUSE, indent=2)
    window = text[text.index('"fern house"'):text.index('"name": "hoe"')]
    recs = R.parse_text(window)
    assert recs.shape == "json"
    assert [r.get("key") or r.get("name") for r in recs] == ["fern house", "bed 1", "bed 2", "cactus house", "bed 9", "rake"]
    assert recs.parent_of("bed 2")[0]["key"] == "fern house"
    assert 0.9 < recs.coverage < 1.0  # the last object's opening line is cut off


def test_a_window_cut_inside_a_long_value_says_the_share_it_reads() -> None:
    """A window whose last object runs on past its end reads only what comes before that
    object, and its coverage says so rather than claiming every line."""
    doc = {"crates": [{"id": "c1", "fruit": "plum"}, {"id": "c2", "fruit": "fig", "labels": [f"l{i}" for i in range(300)]}]}
    text = json.dumps(doc, indent=2)
    window = text[:text.index('"l150"')]  # half of c2's labels, and c2 never closes
    assert nested.read_json(window, most=10) is not None
    items, coverage = nested.read_json(window, most=10) or ([], 1.0)
    assert [dict(pairs)["id"] for _, pairs, _ in items] == ["c1"] and 0.0 < coverage < 0.1, coverage
    recs = R.parse_text(window)  # under the gate: no fields offered, and why
    assert recs.shape == "paragraphs" and "under the 80% needed" in recs._note


def test_it_leaves_other_text_to_the_other_readers() -> None:
    """It reads no records from a scalar, prose or an unbalanced fragment: the other readers
    (or none) take them. JSON lines are its own: each line's object, a line that does not
    parse left out of the coverage."""
    items, coverage = nested.read_json('{"a": 1}\n{"a": 2}\nnot json\n{"a": 3}', most=100) or ([], 0.0)
    assert [(line, pairs) for line, pairs, _ in items] == [(0, [("a", 1)]), (1, [("a", 2)]), (3, [("a", 3)])]
    assert coverage == 0.75
    for text in ["42", '"just a string"', "The fern house holds basil.",
                 '{"a": [1, 2}', "]]]]{{", '{"a": {}}']:
        assert nested.read_json(text, most=100) is None, text
    assert R.parse_text('{"a": 1}\n{"a": 2}\n{"a": 3}').shape == "json"


def test_hostile_documents_are_refused_or_read_in_one_pass() -> None:
    """It gives up on nesting past its depth, refuses more records than asked for, and stops
    searching for lines at a key written with other escapes (no scan per record)."""
    assert nested.read_json("[" * 100_000, most=10) is None
    assert nested.read_json("[" * 150 + "]" * 150, most=10) is None  # no object holds a value
    many = json.dumps([{"n": i} for i in range(1000)])
    try:
        nested.read_json(many, most=10)
        raise AssertionError("more records than asked for were read")
    except ValueError:
        pass
    escaped = "[" + ",".join(['{"\\u0041": 1}'] * 20_000) + "]"  # "A" written as an escape
    began = time.perf_counter()
    read = nested.read_json(escaped, most=100_000)
    assert read is not None
    items, _ = read
    assert len(items) == 20_000 and {line for line, _, _ in items} == {0}
    assert time.perf_counter() - began < 5


def test_the_brief_offers_a_documents_records() -> None:
    """It tells the model, in the probe's shape, that a JSON document's objects are records
    with children (so the prompts lead with records())."""
    report = TextHandle(json.dumps(GREENHOUSE, indent=2), name="greenhouse").probe()
    assert report.shape == "json" and "a JSON document" in report.structure["shape"]


def test_lines_that_cannot_be_json_objects_cost_no_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    """It parses no line that does not end in '}' as JSON, and stops once half of a text's
    lines have failed: hostile text of such lines is refused at a glance, not parsed line by line."""
    calls: list[int] = []
    real = nested.json.loads

    def counted(text: str, *args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(text, *args, **kwargs)

    monkeypatch.setattr(nested.json, "loads", counted)
    assert nested.read_json("{\n" * 1_000, most=100) is None
    assert len(calls) <= 2  # the whole text once (and its mended window), no line
    calls.clear()
    assert nested.read_json('{"a": }\n' * 1_000, most=100) is None
    assert len(calls) <= 503  # the whole text, then lines until half of them failed
    calls.clear()
    items, coverage = nested.read_json('{"a": 1}\n' * 50, most=100) or ([], 0.0)
    assert len(items) == 50 and coverage == 1.0
