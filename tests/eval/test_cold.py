"""``rlm eval --cold``: each job starts the local model's engine afresh, so a task's run does
not depend on the tasks before it.

Why it is needed (bench/formats/README.md): llama.cpp reuses the cached prompt of the task
before when the next one shares its opening, and the reused cells differ from cold ones in
the last bits; at temperature 0 a different bit can pick a different token. The same task
gave different trajectories alone and after another task of the same text.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rlm_runtime.errors import ConfigError
from rlm_runtime.eval.results import read_results
from rlm_runtime.eval.runner import EvalConfig, Runner
from rlm_runtime.eval.tasks import load_tasks
from tests.test_local_smoke import MODEL, REAL_MODELS_DIR, _missing

from .conftest import write_jsonl


def test_cold_is_refused_where_it_means_nothing_or_cannot_hold(needle_tasks: Path, script: Path, tmp_path: Path) -> None:
    """It refuses --cold for a run with no local model (nothing to restart), with more than one
    job at a time, and on Ray (a job elsewhere would lose its engine mid-run)."""
    tasks = load_tasks(needle_tasks)
    with pytest.raises(ConfigError, match="no local: model|has none"):
        Runner(EvalConfig(model=f"scripted:{script}", out=tmp_path / "a", cold=True), tasks)
    local = f"local:{MODEL}"
    with pytest.raises(ConfigError, match="one job at a time"):
        Runner(EvalConfig(model=local, out=tmp_path / "b", cold=True, concurrency=2), tasks)
    assert Runner(EvalConfig(model=local, out=tmp_path / "c", cold=True), tasks).concurrency == 1
    pytest.importorskip("ray")
    with pytest.raises(ConfigError, match="local executor"):
        Runner(EvalConfig(model=local, out=tmp_path / "d", cold=True, executor="ray"), tasks)


def test_cold_stops_the_engines_before_every_job(needle_tasks: Path, script: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """It stops this process's local engines before each job (the next call starts one
    afresh), and says --cold in the run's configuration; without it, never."""
    import rlm_runtime.llm.local as local

    stops: list[int] = []
    monkeypatch.setattr(local, "stop_all", lambda: stops.append(1))
    # A scripted main model answers; the sub-model names a local one, which is never called.
    for cold, out in ((True, tmp_path / "cold"), (False, tmp_path / "warm")):
        stops.clear()
        config = EvalConfig(model=f"scripted:{script}", sub_model=f"local:{MODEL}", out=out, cold=cold)
        summary = Runner(config, load_tasks(needle_tasks)).run()
        assert summary.done == 4
        assert len(stops) == (4 if cold else 0)
        assert json.loads((out / "runs.jsonl").read_text().splitlines()[-1])["cold"] is cold


@pytest.mark.slow
def test_a_task_run_cold_after_another_is_the_task_run_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the embedded 0.5B: two tasks over one text, run --cold one after the other, give
    the second one the same replies, token for token, as that task run alone."""
    missing = _missing()
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the local model's tests: {missing}")
        pytest.skip(missing)
    monkeypatch.setenv("RLM_MODELS_DIR", str(REAL_MODELS_DIR))
    text = tmp_path / "shelf.txt"
    text.write_text("".join(f"jar {i}: {('fig', 'plum', 'quince')[i % 3]} jam, {1990 + i}\n" for i in range(60)), encoding="utf-8")
    first = {"id": "first", "question": "Which jam is in jar 7?", "context": str(text), "answer": "plum"}
    second = {"id": "second", "question": "In what year was jar 12 filled?", "context": str(text), "answer": "2002"}
    both = write_jsonl(tmp_path / "both.jsonl", [first, second])
    alone = write_jsonl(tmp_path / "alone.jsonl", [second])

    def replies(tasks: Path, out: Path) -> list[str]:
        config = EvalConfig(model=f"local:{MODEL}", out=out, cold=True, limits={"max_iterations": 2})
        Runner(config, load_tasks(tasks)).run()
        record = next(r for r in read_results(out / "results.jsonl") if r["task_id"] == "second")
        events = [json.loads(line) for line in (out / record["trajectory"]).read_text().splitlines()]
        return [e["response"] for e in events if e["type"] == "iteration"]

    after = replies(both, tmp_path / "both")
    assert after and after == replies(alone, tmp_path / "alone")
