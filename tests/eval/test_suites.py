"""The built-in suites: deterministic for a seed, and every answer follows from its context."""

from __future__ import annotations

import ast
import re
from collections import Counter
from itertools import combinations
from pathlib import Path

import pytest

from rlm_runtime.eval.scorers import score
from rlm_runtime.eval.suites import SUITES, generate_task, list_suites, write_suite
from rlm_runtime.eval.suites import aggregation as agg
from rlm_runtime.eval.suites.base import Generated
from rlm_runtime.eval.tasks import Task, load_tasks

LENGTH = 12_000
SEEDS = range(6)


def _task(gen: Generated) -> Task:
    return Task(id="t", question=gen.question, answer=gen.answer, scorer=gen.scorer, options=gen.options)  # type: ignore[arg-type]


@pytest.mark.parametrize("suite", list(SUITES))
def test_same_seed_same_task_other_seed_other_task(suite: str) -> None:
    """It generates the same task for the same seed, length and index, and another for another seed."""
    a, b = generate_task(suite, 7, LENGTH, 0), generate_task(suite, 7, LENGTH, 0)
    c = generate_task(suite, 8, LENGTH, 0)
    assert (a.question, a.answer, a.context) == (b.question, b.answer, b.context)
    assert (a.question, a.answer, a.context) != (c.question, c.answer, c.context)


@pytest.mark.parametrize("suite", [s for s in SUITES if s != "codeqa"])
def test_length_is_close_to_the_target(suite: str) -> None:
    """It fills the context to about the length asked for."""
    for length in (10_000, 60_000):
        gen = generate_task(suite, 1, length, 0)
        assert isinstance(gen.context, str)
        assert 0.9 * length <= len(gen.context) <= 1.1 * length


def test_needle_answer_is_planted_once_and_scores() -> None:
    """It plants the asked fact once, about a name the question gives, and the answer scores 1."""
    for seed in SEEDS:
        gen = generate_task("needle", seed, LENGTH, 0)
        assert isinstance(gen.context, str) and isinstance(gen.answer, str)
        lines = [x for x in gen.context.splitlines() if gen.answer in x]
        assert len(lines) == 1
        key = re.findall(r"\b[A-Z][a-z]+\b", gen.metadata["key"])[-1]
        assert key in lines[0] and key in gen.question
        assert score(_task(gen), lines[0]) == 1.0


def test_needle_multi_has_three_values_for_the_key() -> None:
    """It plants three values for the key, each on a line naming it, and distractors for other names."""
    for seed in SEEDS:
        gen = generate_task("needle-multi", seed, LENGTH, 0)
        assert isinstance(gen.context, str) and isinstance(gen.answer, list) and len(gen.answer) == 3
        key = re.findall(r"\b[A-Z][a-z]+\b", gen.metadata["key"])[-1]
        for value in gen.answer:
            (line,) = [x for x in gen.context.splitlines() if value in x]
            assert key in line
        found = " ".join(x for x in gen.context.splitlines() if re.search(rf"\b{key}\b", x))
        assert score(_task(gen), found) == 1.0


def test_aggregation_answer_recomputed_from_the_text() -> None:
    """It asks for counts (or the commonest label) that a recount of the item lines confirms."""
    kinds = set()
    for seed in range(12):
        gen = generate_task("aggregation", seed, LENGTH, 0)
        assert isinstance(gen.context, str)
        pattern = re.compile(gen.metadata["item_pattern"])
        labels = [m.group(1) for line in gen.context.splitlines() if (m := pattern.search(line))]
        counts = Counter(labels)
        assert len(labels) == gen.metadata["items"] >= agg.items_for(LENGTH)
        kinds.add(gen.metadata["question"])
        if gen.metadata["question"] == "count":
            assert gen.answer == counts[gen.metadata["label"]]
            assert gen.metadata["label"] in gen.question
        else:
            (top, n), (_, n2) = counts.most_common(2)
            assert gen.answer == top and n > n2
    assert kinds == {"count", "most_common"}


def test_pairs_answer_recomputed_from_the_text() -> None:
    """It lists exactly the pairs of users who both have an entry with the label."""
    for seed in SEEDS:
        gen = generate_task("pairs", seed, LENGTH, 0)
        assert isinstance(gen.context, str) and isinstance(gen.answer, list)
        pattern = re.compile(gen.metadata["item_pattern"])
        users = sorted({m.group(1) for line in gen.context.splitlines() if (m := pattern.search(line))
                        and m.group(2) == gen.metadata["label"]})
        assert gen.answer == [f"{a} {b}" for a, b in combinations(users, 2)]
        assert score(_task(gen), "; ".join(f"({p.replace(' ', ', ')})" for p in gen.answer)) == 1.0


def test_multi_hop_chain_resolvable_only_through_the_first_fact() -> None:
    """It names only the start; each bridge appears in exactly its two facts; the answer once;
    and the last relation alone has many candidates."""
    hops = set()
    for seed in range(10):
        gen = generate_task("multi-hop", seed, LENGTH, 0)
        assert isinstance(gen.context, str) and isinstance(gen.answer, str)
        lines = gen.context.splitlines()
        start, bridges = gen.metadata["start"], gen.metadata["bridges"]
        hops.add(gen.metadata["hops"])
        assert start in gen.question and not any(b in gen.question for b in bridges)
        assert sum(start in x for x in lines) == 1
        for b in bridges:
            assert sum(re.search(rf"\b{re.escape(b)}\b", x) is not None for x in lines) == 2
        (last,) = [x for x in lines if re.search(rf"\b{re.escape(gen.answer)}\b", x)]
        assert bridges[-1] in last
        # Follow the chain from the start: each fact found through the previous entity.
        entity = start
        for b in bridges:
            (fact,) = [x for x in lines if entity in x and b in x]
            entity = b
        assert entity in last and gen.metadata["chains"] >= 3
    assert hops == {2, 3}


def test_codeqa_answers_checked_against_the_source() -> None:
    """It asks about a module that is in the folder, and the source gives the answer."""
    kinds = set()
    for seed in range(12):
        gen = generate_task("codeqa", seed, 20_000, 0)
        assert isinstance(gen.context, dict)
        meta = gen.metadata
        source = gen.context[meta["file"]]
        tree = ast.parse(source)
        kinds.add(meta["question"])
        answers = gen.answer if isinstance(gen.answer, list) else [gen.answer]
        if meta["question"] == "constant":
            (value,) = [n.value.value for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
                        and any(isinstance(t, ast.Name) and t.id == meta["name"] for t in n.targets)]
            assert str(value) == answers[0]
        elif meta["question"] == "raise":
            owners = [f.name for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                      and any(isinstance(r, ast.Raise) and meta["msg"] in ast.unparse(r) for r in ast.walk(f))]
            assert answers[0] in owners
        else:
            func = meta["func"].rsplit(".", 1)[-1]
            (f,) = [f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name == func
                    and meta["param"] in [a.arg for a in f.args.posonlyargs + f.args.args]][:1]
            params = [a.arg for a in f.args.posonlyargs + f.args.args]
            default = f.args.defaults[params.index(meta["param"]) - (len(params) - len(f.args.defaults))]
            assert repr(ast.literal_eval(default)) == answers[0]
        assert meta["module"] in gen.question
    assert len(kinds) >= 2


def test_write_suite_writes_tasks_and_contexts(tmp_path: Path) -> None:
    """It writes a valid task file with its contexts beside it, metadata naming family and length."""
    out = tmp_path / "s.jsonl"
    tasks = write_suite("all", out, lengths=(5000,), n=1, seed=2)
    loaded = load_tasks(out)
    assert loaded.errors == [] and len(loaded.tasks) == len(tasks) == 6
    assert {t.family for t in loaded.tasks} == {"needle", "aggregation", "pairs", "multi-hop", "codeqa"}
    assert all(t.length == 5000 and t.metadata["seed"] == 2 for t in loaded.tasks)
    code = next(t for t in loaded.tasks if t.family == "codeqa")
    assert (tmp_path / "s_contexts" / code.id).is_dir()
    again = tmp_path / "again.jsonl"
    write_suite("all", again, lengths=(5000,), n=1, seed=2)
    assert [t.model_dump(exclude={"context"}) for t in load_tasks(again).tasks] == \
        [t.model_dump(exclude={"context"}) for t in loaded.tasks]
    for t in loaded.tasks:
        if t.family != "codeqa":
            assert (tmp_path / f"again_contexts/{t.id}.txt").read_text() == (tmp_path / f"s_contexts/{t.id}.txt").read_text()


def test_every_suite_is_listed_with_its_text_and_licence() -> None:
    """It lists every suite with the text it uses and that text's licence."""
    names = {s.name for s in list_suites()}
    assert {"needle", "needle-multi", "aggregation", "pairs", "multi-hop", "codeqa", "core", "all"} <= names
    assert all("PSF" in s.source for s in list_suites())
