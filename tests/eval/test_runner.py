"""The runner end to end with the scripted model: results, resume, the budget, Ctrl-C and kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlm_runtime.errors import ConfigError
from rlm_runtime.eval.results import read_results
from rlm_runtime.eval.runner import EvalConfig, Runner
from rlm_runtime.eval.tasks import load_tasks
from rlm_runtime.llm import ScriptedClient, register_provider
from rlm_runtime.llm.base import Completion

from .conftest import write_jsonl

HERE = Path(__file__).parent


def _run(tasks: Path, out: Path, model: str, **kw: object) -> tuple[Runner, object]:
    config = EvalConfig(model=model, out=out, **kw)  # type: ignore[arg-type]
    runner = Runner(config, load_tasks(tasks))
    return runner, runner.run()


def test_rlm_and_direct_end_to_end(needle_tasks: Path, script: Path, tmp_path: Path) -> None:
    """It runs every task under each method, scores it, and appends one full record per job."""
    out = tmp_path / "run"
    _, summary = _run(needle_tasks, out, f"scripted:{script}", methods=("rlm", "direct", "rlm-nosub"), concurrency=2)
    records = read_results(out / "results.jsonl")
    assert len(records) == 12 and summary.done == 12 and summary.stopped is None  # type: ignore[attr-defined]
    by = {(r["task_id"], r["method"]): r for r in records}
    rlm = by[("needle-4000-s3-0", "rlm")]
    assert rlm["score"] == 1.0 and rlm["iterations"] == 1 and rlm["error"] is None
    assert rlm["input_tokens"] > 0 and rlm["usage"] and rlm["family"] == "needle" and rlm["length"] == 4000
    assert (out / rlm["trajectory"]).exists() and rlm["trajectory"].startswith("trajectories/")
    direct = by[("needle-4000-s3-0", "direct")]
    assert direct["answer"] == "unknown" and direct["score"] == 0.0 and direct["window"] == 8192
    assert direct["extra"]["cut"] is False and direct["iterations"] == 1
    assert by[("needle-8000-s3-1", "rlm-nosub")]["score"] == 1.0
    assert summary.accuracy == {"rlm": 1.0, "direct": 0.0, "rlm-nosub": 1.0}  # type: ignore[attr-defined]


def test_direct_cuts_the_context_to_the_window(needle_tasks: Path, script: Path, tmp_path: Path) -> None:
    """It pastes only what fits the window, and says so in the prompt."""
    out = tmp_path / "run"
    _run(needle_tasks, out, f"scripted:{script}", methods=("direct",), window=1200)
    for r in read_results(out / "results.jsonl"):
        assert r["extra"]["cut"] is True and r["extra"]["pasted_chars"] < r["extra"]["context_chars"]
        assert r["input_tokens"] <= 1200


def test_nosub_refuses_sub_calls(tmp_path: Path) -> None:
    """It runs rlm-nosub without sub-calls: not in the prompt, and llm_query raises in the cell."""
    tasks = write_jsonl(tmp_path / "t.jsonl", [{"id": "1", "question": "q?", "context": {"text": "the word is kiwi"}, "answer": "kiwi",
                                                "scorer": "contains"}])
    s = write_jsonl(tmp_path / "s.jsonl", [
        {"content": "```python\ntry:\n    llm_query('hi')\n    FINAL('sub-call worked')\nexcept Exception:\n    FINAL('refused kiwi')\n```"}])
    out = tmp_path / "run"
    _run(tasks, out, f"scripted:{s}", methods=("rlm-nosub",))
    (r,) = read_results(out / "results.jsonl")
    assert r["answer"] == "refused kiwi" and r["depth"] == 0
    events = [json.loads(line) for line in (out / r["trajectory"]).read_text().splitlines()]
    (system,) = [e["text"] for e in events if e["type"] == "system_prompt"]
    assert "grep(" in system and "llm_query" not in system and "rlm_query" not in system


def test_words_ranks_search_chunks_by_words_alone(tmp_path: Path) -> None:
    """``rlm-words`` runs the same loop with ``search_chunks`` ranking by words: a query that
    shares no word with the text finds nothing, where ``rlm`` (hybrid, with the embedding
    model installed) gives the nearest chunks, each marked by meaning."""
    from rlm_runtime.embeddings import installed

    if not installed():
        pytest.skip("no embedding model installed (the embed extra)")
    text = "\n\n".join(f"Paragraph {i}: the harbour cranes unloaded timber and grain all week." for i in range(30))
    tasks = write_jsonl(tmp_path / "t.jsonl", [{"id": "1", "question": "q?", "context": {"text": text}, "answer": "x",
                                                "scorer": "contains"}])
    s = write_jsonl(tmp_path / "s.jsonl", [
        {"content": "```python\nhits = search_chunks('pizza restaurant reviews', k=3)\n"
                    "FINAL(str(len(hits)) + ' ' + ','.join(sorted({h['by'] for h in hits})))\n```"}] * 2)
    out = tmp_path / "run"
    _run(tasks, out, f"scripted:{s}", methods=("rlm", "rlm-words"))
    by = {r["method"]: r["answer"] for r in read_results(out / "results.jsonl")}
    found, marks = by["rlm"].split()
    assert by["rlm-words"] == "0 " and int(found) >= 1 and marks == "meaning"


def test_resume_skips_done_jobs_and_a_new_configuration_reruns(needle_tasks: Path, script: Path, tmp_path: Path) -> None:
    """It refuses a folder with results without resume, skips done jobs with it, and reruns a changed configuration."""
    out = tmp_path / "run"
    model = f"scripted:{script}"
    _run(needle_tasks, out, model, methods=("direct",))
    with pytest.raises(ConfigError, match="--resume"):
        _run(needle_tasks, out, model, methods=("direct",))
    _, again = _run(needle_tasks, out, model, methods=("direct",), resume=True)
    assert again.skipped == 4 and again.jobs == 0  # type: ignore[attr-defined]
    _, wider = _run(needle_tasks, out, model, methods=("direct", "rlm"), resume=True, limits={"max_iterations": 3})
    assert wider.skipped == 4 and wider.done == 4  # type: ignore[attr-defined]
    _, other = _run(needle_tasks, out, model, methods=("direct",), resume=True, window=4000)
    assert other.done == 4  # type: ignore[attr-defined]
    assert len(read_results(out / "results.jsonl")) == 12


class _Costly(ScriptedClient):
    """A scripted model that charges one cent per call."""

    def complete(self, messages, **kw):  # type: ignore[no-untyped-def]
        c = super().complete(messages, **kw)
        c.usage.cost_usd = 0.01
        return Completion(c.text, c.model, c.usage, c.finish_reason, c.duration_s)


def test_budget_stops_the_batch_cleanly(needle_tasks: Path, script: Path, tmp_path: Path) -> None:
    """It stops starting jobs once the batch budget is spent; resume with more budget finishes."""
    register_provider("costly:", lambda name, **o: _Costly(name.removeprefix("costly:"), model=name), replace=True)
    out = tmp_path / "run"
    _, summary = _run(needle_tasks, out, f"costly:{script}", methods=("direct",), concurrency=1, budget_usd=0.025, window=8192)
    assert summary.stopped == "budget" and summary.done == 3  # type: ignore[attr-defined]
    assert summary.cost_usd == pytest.approx(0.03)  # type: ignore[attr-defined]
    _, rest = _run(needle_tasks, out, f"costly:{script}", methods=("direct",), resume=True, budget_usd=1.0, window=8192)
    assert rest.done == 1 and rest.skipped == 3 and rest.stopped is None  # type: ignore[attr-defined]


def test_a_session_capped_by_the_batch_budget_is_not_recorded(needle_tasks: Path, script: Path, tmp_path: Path) -> None:
    """It does not record an rlm job the batch's budget stopped (resume runs it again)."""
    register_provider("costly:", lambda name, **o: _Costly(name.removeprefix("costly:"), model=name), replace=True)
    out = tmp_path / "run"
    _, summary = _run(needle_tasks, out, f"costly:{script}", methods=("rlm",), concurrency=1, budget_usd=0.0)
    assert summary.stopped == "budget" and summary.done == 0  # type: ignore[attr-defined]


def test_the_judges_calls_count_in_the_record_and_the_batch_budget(tmp_path: Path) -> None:
    """It adds the judge's usage to each judged record (``judge:<model>``) and to the batch's spend."""
    register_provider("costly:", lambda name, **o: _Costly(name.removeprefix("costly:"), model=name), replace=True)
    tasks = write_jsonl(tmp_path / "t.jsonl", [
        {"id": str(n), "question": "q?", "context": {"text": "the word is kiwi"}, "answer": "kiwi", "scorer": "judge"}
        for n in range(3)])
    s = write_jsonl(tmp_path / "s.jsonl", [{"when": "Answer with the answer alone", "content": "kiwi"},
                                           {"when": "CORRECT", "content": "CORRECT"}])
    out = tmp_path / "run"
    _, summary = _run(tasks, out, f"costly:{s}", methods=("direct",), concurrency=1, window=8192, budget_usd=0.035)
    records = read_results(out / "results.jsonl")
    assert [r["score"] for r in records] == [1.0, 1.0]  # two tasks at two cents each spend the 3.5 cents
    judged = records[0]["usage"][f"judge:costly:{s}"]
    assert judged["calls"] == 1 and judged["cost_usd"] == pytest.approx(0.01)
    assert records[0]["cost_usd"] == pytest.approx(0.02)
    assert summary.stopped == "budget" and summary.cost_usd == pytest.approx(0.04)  # type: ignore[attr-defined]


def test_ray_without_ray_installed(needle_tasks: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It refuses --executor ray without Ray with a ConfigError naming the extra to install."""
    monkeypatch.setitem(sys.modules, "ray", None)  # as if the ray extra were not installed
    with pytest.raises(ConfigError, match=r"pip install 'rlm_runtime\[ray\]'"):
        Runner(EvalConfig(model="scripted:x", out=tmp_path, executor="ray"), load_tasks(needle_tasks))


def _slow_run(tasks: Path, script: Path, out: Path, delay: float, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "RLM_TEST_SLOW_S": str(delay), "PYTHONPATH": str(HERE.parent.parent)}
    return subprocess.Popen([sys.executable, str(HERE / "slow_rlm.py"), "eval", str(tasks), "--model", f"slow:{script}",
                             "--method", "direct", "--concurrency", "2", "--window", "8192", "--out", str(out), "--no-report", *extra],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_lines(path: Path, n: int, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists() and len(path.read_text().splitlines()) >= n:
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} did not reach {n} lines")


def _fast_slow(script: Path) -> str:
    """The subprocess's model name, served here without the sleep (resume needs the same name)."""
    register_provider("slow:", lambda name, **o: ScriptedClient(name.removeprefix("slow:"), model=name), replace=True)
    return f"slow:{script}"


@pytest.fixture
def six_tasks(tmp_path: Path) -> Path:
    from rlm_runtime.eval.suites import write_suite

    path = tmp_path / "six.jsonl"
    write_suite("needle", path, lengths=(3000, 4000, 5000), n=2, seed=1)
    return path


def test_kill_9_loses_at_most_the_jobs_in_flight(six_tasks: Path, script: Path, tmp_path: Path) -> None:
    """It keeps every finished job's line whole after kill -9, and resume runs only the rest."""
    out = tmp_path / "run"
    proc = _slow_run(six_tasks, script, out, 1.5)  # seconds per call: time to signal on a busy machine
    try:
        _wait_for_lines(out / "results.jsonl", 2)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        proc.kill()
    text = (out / "results.jsonl").read_text()
    assert text.endswith("\n")
    before = [json.loads(line) for line in text.splitlines()]
    assert 2 <= len(before) < 6
    _, rest = _run(six_tasks, out, _fast_slow(script), methods=("direct",), resume=True)
    assert rest.skipped == len(before) and rest.done == 6 - len(before)  # type: ignore[attr-defined]
    ids = [r["task_id"] for r in read_results(out / "results.jsonl")]
    assert sorted(ids) == sorted(set(ids)) and len(ids) == 6


def test_ctrl_c_stops_cleanly_and_resume_finishes(six_tasks: Path, script: Path, tmp_path: Path) -> None:
    """It exits 130 on SIGINT with the finished jobs recorded and the cancelled ones not."""
    out = tmp_path / "run"
    proc = _slow_run(six_tasks, script, out, 1.5)  # seconds per call: time to signal on a busy machine
    try:
        _wait_for_lines(out / "results.jsonl", 1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "--resume" in err
    done = read_results(out / "results.jsonl")
    assert 1 <= len(done) < 6 and all(r["error"] is None for r in done)
    _, rest = _run(six_tasks, out, _fast_slow(script), methods=("direct",), resume=True)
    assert rest.done + len(done) == 6  # type: ignore[attr-defined]


def test_a_run_folder_is_private_whatever_the_umask(needle_tasks: Path, script: Path, tmp_path: Path) -> None:
    """It writes the run folder 0700 and its results, runs and trajectories 0600 under umask 022 (answers quote contexts)."""
    out = tmp_path / "run"
    old = os.umask(0o022)
    try:
        _run(needle_tasks, out, f"scripted:{script}", methods=("rlm",))
    finally:
        os.umask(old)
    wrong = {}
    for path in [out, *out.rglob("*")]:
        mode = os.lstat(path).st_mode & 0o777
        if mode != (0o700 if path.is_dir() else 0o600):
            wrong[str(path)] = oct(mode)
    assert (out / "results.jsonl").exists() and (out / "runs.jsonl").exists()
    assert not wrong, wrong


def test_the_assists_setting_is_part_of_the_configuration_hash(needle_tasks: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """It hashes assists for the rlm methods when not auto (auto leaves the hash of results
    made before the setting existed), and refuses an unknown assist."""
    from rlm_runtime.assist import REGISTRY, Assist
    from rlm_runtime.budget import RunLimits
    from rlm_runtime.eval.results import config_hash

    monkeypatch.setitem(REGISTRY, "leads", type("Leads", (Assist,), {"name": "leads"}))  # no assist ships: one of the test's own

    def job(limits: dict[str, object]) -> dict[str, object]:
        return Runner(EvalConfig(model="scripted:x", out=tmp_path, limits=limits), load_tasks(needle_tasks)).job_config("rlm")

    auto, none = job({}), job({"assists": "none"})
    assert "assists" not in auto and "assists" not in auto["limits"]  # type: ignore[operator]
    assert auto["limits"] == RunLimits.for_model("scripted:x").model_dump(exclude={"assists"})
    assert none["assists"] == "none" and job({"assists": "leads"})["assists"] == ("leads",)
    task = load_tasks(needle_tasks).tasks[0]
    assert config_hash(task, "rlm", auto) != config_hash(task, "rlm", none) != config_hash(task, "rlm", job({"assists": "leads"}))
    with pytest.raises(ConfigError, match="no assist named"):
        job({"assists": "magic"})
