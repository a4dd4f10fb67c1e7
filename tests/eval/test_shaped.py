"""The core families over text shapes: a dev and a held-out part, exact gold, sized, reproducible."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from rlm_runtime.errors import ConfigError
from rlm_runtime.eval.scorers import score
from rlm_runtime.eval.suites import generate_task, write_suite
from rlm_runtime.eval.suites.base import Generated
from rlm_runtime.eval.suites.records import DOMAINS
from rlm_runtime.eval.suites.shaped import SPLITS, TEMPLATES
from rlm_runtime.eval.suites.shapes import SHAPES
from rlm_runtime.eval.tasks import Task, load_tasks

FAMILIES = ("needle", "aggregation", "multi-hop")
SPLIT_NAMES = tuple(SPLITS)


def _gold(gen: Generated) -> str | int:
    """The answer re-derived from the context alone, with the shape's generic parser."""
    meta = gen.metadata
    assert isinstance(gen.context, str)
    records = SHAPES[meta["shape"]].parse(gen.context)
    domain = DOMAINS[meta["domain"]]
    by_key = {r[domain.noun]: r for r in records}
    assert len(by_key) == len(records) == meta["records"]
    if meta["question"] == "lookup":
        return by_key[meta["key"]][meta["field"]]
    if meta["question"] == "count":
        return sum(r[domain.label] == meta["label"] for r in records)
    if meta["question"] == "most_common":
        (top, n), (_, runner_up) = Counter(r[domain.label] for r in records).most_common(2)
        assert n > runner_up
        return top
    bridge = by_key[meta["start"]][domain.ref]
    assert [bridge] == meta["bridges"] and bridge != meta["start"]
    assert by_key[meta["start"]][meta["field"]] != by_key[bridge][meta["field"]]  # one hop is not enough
    return by_key[bridge][meta["field"]]


@pytest.mark.parametrize("split", SPLIT_NAMES)
@pytest.mark.parametrize("family", FAMILIES)
def test_same_seed_same_task_other_seed_other_task(family: str, split: str) -> None:
    """It generates the same task for the same seed, length, index and split, and another for another seed or split."""
    a, b = generate_task(family, 7, 8000, 0, split), generate_task(family, 7, 8000, 0, split)
    c = generate_task(family, 8, 8000, 0, split)
    assert (a.question, a.answer, a.context) == (b.question, b.answer, b.context)
    assert (a.question, a.answer, a.context) != (c.question, c.answer, c.context)
    assert generate_task(family, 7, 8000, 0).context != a.context


@pytest.mark.parametrize("split", SPLIT_NAMES)
@pytest.mark.parametrize("family", FAMILIES)
def test_gold_is_rederived_from_the_text(family: str, split: str) -> None:
    """It gives the answer a generic parser of the task's shape finds in the context, and that answer scores 1."""
    for index in range(12):
        gen = generate_task(family, 3, 6000, index, split)
        assert gen.answer == _gold(gen)
        task = Task(id="t", question=gen.question, answer=gen.answer, scorer=gen.scorer)  # type: ignore[arg-type]
        assert score(task, f"The answer is {gen.answer}.") == 1.0


def test_dev_and_heldout_share_no_shape_and_template() -> None:
    """It splits by shape and by template: no (shape, template) pair of a task is in both parts."""
    dev, held = SPLITS["dev"], SPLITS["heldout"]
    assert not set(dev.shapes) & set(held.shapes) and not set(dev.templates) & set(held.templates)
    assert set(dev.shapes) | set(held.shapes) == set(SHAPES)
    assert all(set(dev.templates) | set(held.templates) == set(range(len(t))) for t in TEMPLATES.values())
    seen: dict[str, set[tuple[str, str, int]]] = {s: set() for s in SPLITS}
    for split in SPLITS:
        for family in FAMILIES:
            for index in range(15):
                meta = generate_task(family, 1, 4000, index, split).metadata
                assert meta["split"] == split and meta["shape"] in SPLITS[split].shapes
                assert meta["question_template"] in SPLITS[split].templates
                seen[split].add((meta["question"], meta["shape"], meta["question_template"]))
    assert not seen["dev"] & seen["heldout"]
    assert {s for _, s, _ in seen["heldout"]} == set(held.shapes)


def test_tasks_draw_several_shapes_templates_and_naming_styles() -> None:
    """It varies the shape, the question wording and the look of the keys from task to task."""
    metas = [generate_task("needle", 2, 4000, i, "heldout").metadata for i in range(30)]
    assert len({m["shape"] for m in metas}) >= 3
    assert len({m["question_template"] for m in metas}) == 3
    assert len({m["naming"] for m in metas}) >= 4


@pytest.mark.parametrize("split", SPLIT_NAMES)
def test_length_is_close_to_the_target(split: str) -> None:
    """It fills the context with records to about the length asked for."""
    for family in FAMILIES:
        for length in (10_000, 100_000):
            gen = generate_task(family, 1, length, 0, split)
            assert isinstance(gen.context, str)
            assert 0.9 * length <= len(gen.context) <= 1.02 * length


def test_a_million_characters() -> None:
    """It makes a context of a million characters whose count is still exact."""
    gen = generate_task("aggregation", 1, 1_000_000, 1, "heldout")
    assert isinstance(gen.context, str) and 0.98e6 <= len(gen.context) <= 1.02e6
    assert gen.answer == _gold(gen)


def test_write_suite_with_a_split(tmp_path: Path) -> None:
    """It writes core's three families for a split, the split in ids and metadata; the other suites refuse a split."""
    out = tmp_path / "h.jsonl"
    tasks = write_suite("core", out, lengths=(4000,), n=2, seed=5, split="heldout")
    loaded = load_tasks(out)
    assert loaded.errors == [] and len(loaded.tasks) == len(tasks) == 6
    assert {t.family for t in loaded.tasks} == set(FAMILIES)
    assert all(t.id.startswith(f"{t.metadata['suite']}-heldout-4000-s5-") and t.metadata["split"] == "heldout"
               for t in loaded.tasks)
    for bad in ("all", "pairs", "codeqa", "needle-multi"):
        with pytest.raises(ConfigError, match="--split"):
            write_suite(bad, out, lengths=(4000,), n=1, split="dev")
    with pytest.raises(ConfigError, match="unknown split"):
        write_suite("core", out, lengths=(4000,), n=1, split="test")


def test_no_split_writes_what_it_always_wrote(tmp_path: Path) -> None:
    """It leaves the suites unchanged without a split: same ids, no shape in the metadata."""
    tasks = write_suite("core", tmp_path / "c.jsonl", lengths=(4000,), n=1, seed=1)
    assert [t.id for t in tasks] == ["needle-4000-s1-0", "aggregation-4000-s1-0", "multi-hop-4000-s1-0"]
    assert all("shape" not in t.metadata and "split" not in t.metadata for t in tasks)
