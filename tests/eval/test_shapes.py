"""Text shapes: every shape writes records that its parser reads back unchanged."""

from __future__ import annotations

import random

import pytest

from rlm_runtime.eval.suites.records import DOMAINS, NAMING, build, names
from rlm_runtime.eval.suites.shapes import SHAPES, field_name


def _normal(records: list[dict[str, str]]) -> list[dict[str, str]]:
    return [{field_name(k): v for k, v in r.items()} for r in records]


@pytest.mark.parametrize("shape", list(SHAPES))
def test_every_shape_parses_back_to_its_records(shape: str) -> None:
    """It reads back the same records, fields in order, for every domain and naming style."""
    for domain in DOMAINS.values():
        for style in NAMING:
            records = build(random.Random(f"{shape}{domain.noun}{style}"), domain, style, SHAPES[shape], 3000)
            parsed = SHAPES[shape].parse(SHAPES[shape].render(records))
            assert parsed == _normal(records)
            assert [list(r) for r in parsed] == [[field_name(f) for f in domain.fields()]] * len(records)


def test_the_six_shapes_of_the_issue_are_there() -> None:
    """It has records one a line, multi-line records, CSV and TSV, JSON lines, markdown and prose."""
    assert {"line", "block", "csv", "tsv", "jsonl", "markdown", "prose"} <= set(SHAPES)


def test_shapes_write_the_same_records_differently() -> None:
    """It writes one set of records as seven different texts."""
    records = build(random.Random(3), DOMAINS["vessels"], "words", SHAPES["line"], 2000)
    texts = {SHAPES[s].render(records) for s in SHAPES}
    assert len(texts) == len(SHAPES)
    assert "home_port" in SHAPES["csv"].render(records) and "Home port: " in SHAPES["block"].render(records)
    assert SHAPES["prose"].render(records).startswith(f"There is a vessel called {records[0]['vessel']}.")


def test_build_fills_the_length_and_refers_to_other_records() -> None:
    """It draws records up to about the length asked for, each referring to another record, one label the commonest."""
    domain = DOMAINS["hosts"]
    for length in (5_000, 80_000):
        records = build(random.Random(length), domain, "lower-id", SHAPES["jsonl"], length)
        size = len(SHAPES["jsonl"].render(records))
        assert 0.95 * length <= size <= 1.05 * length
        keys = [r["host"] for r in records]
        assert len(set(keys)) == len(keys)
        assert all(r["failover"] in keys and r["failover"] != r["host"] for r in records)
        counts = sorted((sum(r["status"] == lab for r in records) for lab in domain.labels), reverse=True)
        assert counts[0] > counts[1]


def test_names_stay_distinct_past_a_styles_room() -> None:
    """It joins two draws into one key once a style's own keys run out."""
    taken: set[str] = set()
    rng = random.Random(5)
    keys = [names(rng, "words", taken) for _ in range(10_000)]  # more than the ~8,400 of the style's own
    assert len(set(keys)) == 10_000
    assert any(len(k.split()) >= 4 for k in keys)


def test_keys_are_not_only_capitalised_invented_names() -> None:
    """It draws lower-case ids, codes and several lower-case words as keys, besides invented and people's names."""
    rng = random.Random(1)
    sample = {style: names(rng, style, set()) for style in NAMING}
    assert sample["lower-id"].islower() and "-" in sample["lower-id"]
    assert sample["code"].isupper() and any(c.isdigit() for c in sample["code"])
    assert sample["words"].islower() and " " in sample["words"]
