"""``rlm eval`` through the real entry point."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .conftest import write_jsonl


def test_suites_and_make(rlm_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """It lists the suites and writes one as a task file with contexts beside it."""
    r = rlm_cli("eval", "suites", "--json")
    assert r.code == 0 and "needle" in {s["name"] for s in r.json()["suites"]}
    out = tmp_path / "t.jsonl"
    r = rlm_cli("eval", "make", "multi-hop", "--lengths", "5000,6000", "--n", "2", "--seed", "4", "-o", out)
    assert r.code == 0 and "wrote 4 tasks" in r.out
    assert len(out.read_text().splitlines()) == 4 and (tmp_path / "t_contexts").is_dir()
    assert rlm_cli("eval", "make", "nope", "-o", out).code == 2


def test_make_with_a_split(rlm_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """It writes core's dev and held-out parts over text shapes, lists the splits, and refuses a split elsewhere."""
    r = rlm_cli("eval", "suites")
    assert r.code == 0 and "heldout: shapes block, tsv, jsonl, prose" in r.out
    splits = rlm_cli("eval", "suites", "--json").json()["splits"]
    assert not set(splits["dev"]["shapes"]) & set(splits["heldout"]["shapes"])
    shapes = {}
    for split in ("dev", "heldout"):
        out = tmp_path / f"{split}.jsonl"
        r = rlm_cli("eval", "make", "core", "--lengths", "3000", "--n", "2", "--split", split, "-o", out)
        assert r.code == 0 and "wrote 6 tasks" in r.out
        rows = [json.loads(x) for x in out.read_text().splitlines()]
        assert all(row["metadata"]["split"] == split and f"-{split}-3000-" in row["id"] for row in rows)
        shapes[split] = {row["metadata"]["shape"] for row in rows}
    assert shapes["dev"] <= set(splits["dev"]["shapes"]) and shapes["heldout"] <= set(splits["heldout"]["shapes"])
    r = rlm_cli("eval", "make", "core", "--lengths", "3000", "--n", "1", "-o", tmp_path / "plain.jsonl")
    assert r.code == 0 and '"needle-3000-s1-0"' in (tmp_path / "plain.jsonl").read_text()
    r = rlm_cli("eval", "make", "pairs", "--split", "dev", "-o", tmp_path / "p.jsonl")
    assert r.code == 2 and "--split" in r.err
    assert rlm_cli("eval", "make", "core", "--split", "test", "-o", tmp_path / "p.jsonl").code == 2


def test_run_report_compare_json(rlm_cli, needle_tasks: Path, script: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """It runs a task file, prints one JSON summary, writes the report; report and compare rebuild and diff."""
    out = tmp_path / "run"
    r = rlm_cli("eval", needle_tasks, "--model", f"scripted:{script}", "--method", "rlm,direct", "--out", out, "--json", "-q")
    assert r.code == 0, r.err
    data = r.json()
    assert data["done"] == 8 and data["accuracy"] == {"rlm": 1.0, "direct": 0.0}
    assert (out / "report.md").exists() and (out / "report.html").exists()
    r = rlm_cli("eval", needle_tasks, "--model", f"scripted:{script}", "--out", out)
    assert r.code == 2 and "--resume" in r.err
    r = rlm_cli("eval", needle_tasks, "--model", f"scripted:{script}", "--method", "rlm,direct", "--out", out, "--resume", "--json")
    assert r.code == 0 and r.json()["skipped"] == 8
    assert rlm_cli("eval", "report", out).code == 0
    r = rlm_cli("eval", "compare", out, out)
    assert r.code == 0 and "needle" in r.out


def test_suite_name_runs_the_suite(rlm_cli, script: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """It generates a suite named instead of a file into the run folder and runs it."""
    out = tmp_path / "run"
    r = rlm_cli("eval", "needle", "--lengths", "3000", "--n", "2", "--model", f"scripted:{script}", "--out", out, "--json",
                "--no-report")
    assert r.code == 0, r.err
    assert r.json()["done"] == 2 and (out / "tasks" / "needle-s1.jsonl").exists()
    out = tmp_path / "held"
    r = rlm_cli("eval", "core", "--split", "heldout", "--lengths", "3000", "--n", "1", "--model", f"scripted:{script}",
                "--out", out, "--json", "--no-report")
    assert r.code == 0, r.err
    assert r.json()["done"] == 3 and (out / "tasks" / "core-heldout-s1.jsonl").exists()


def test_check_and_bad_lines(rlm_cli, tmp_path: Path, script: Path) -> None:  # type: ignore[no-untyped-def]
    """It names bad lines on stderr, exits 1 from check, and still runs the good lines."""
    tasks = write_jsonl(tmp_path / "t.jsonl", [{"id": "1", "question": "q", "answer": "x"}, {"id": "2", "answer": "x"},
                                               {"id": "3", "question": "q", "context": {"text": "x"}, "answer": "unknown"}])
    r = rlm_cli("eval", "check", tasks)
    assert r.code == 1 and "line 2: question" in r.err
    r = rlm_cli("eval", tasks, "--model", f"scripted:{script}", "--method", "direct", "--out", tmp_path / "o", "--json")
    assert r.code == 0 and "line 2: question" in r.err and r.json()["done"] == 2


def test_usage_errors(rlm_cli, needle_tasks: Path, script: Path, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """It exits 2 for a missing file, an unknown method and the Ray executor without Ray, with one JSON error."""
    r = rlm_cli("eval", tmp_path / "none.jsonl", "--model", "scripted:x", "--json")
    assert r.code == 2 and "no such task file" in json.loads(r.out)["error"]
    r = rlm_cli("eval", needle_tasks, "--model", "scripted:x", "--method", "magic", "--out", tmp_path / "o")
    assert r.code == 2 and "unknown method" in r.err
    monkeypatch.setitem(sys.modules, "ray", None)  # as if the ray extra were not installed
    r = rlm_cli("eval", needle_tasks, "--model", f"scripted:{script}", "--executor", "ray", "--out", tmp_path / "o")
    assert r.code == 2 and "pip install 'rlm_runtime[ray]'" in r.err
    assert rlm_cli("eval", "--help").code == 0


def test_the_assists_flag_reaches_the_run_and_its_hash(rlm_cli, needle_tasks: Path, script: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """It runs with --assists, records it with the run's limits, and reruns on resume when it changes."""
    out = tmp_path / "run"
    args = ("eval", needle_tasks, "--model", f"scripted:{script}", "--out", out, "--json", "-q", "--no-report")
    r = rlm_cli(*args, "--assists", "none")
    assert r.code == 0, r.err
    runs = [json.loads(line) for line in (out / "runs.jsonl").read_text(encoding="utf-8").splitlines()]
    assert runs[-1]["limits"]["assists"] == "none"
    assert rlm_cli(*args, "--assists", "none", "--resume").json()["skipped"] == 4
    assert rlm_cli(*args, "--resume").json()["done"] == 4
    r = rlm_cli(*args, "--assists", "magic", "--resume")
    assert r.code != 0 and "no assist named 'magic'" in (r.err + r.out)


def test_a_model_that_cannot_run_is_refused_before_any_job(rlm_cli, needle_tasks: Path, script: Path,  # type: ignore[no-untyped-def]
                                                             tmp_path: Path) -> None:
    """A local model not installed, an unknown provider, or a missing script exits 2 naming
    the problem, before a job runs: no results file, no "accuracy 0%"; the same for a bad
    --sub-model or --judge-model beside a good model."""
    out = tmp_path / "run"
    for bad in ("local:no-such-model", "nosuchprovider/x", f"scripted:{tmp_path / 'missing.jsonl'}"):
        r = rlm_cli("eval", needle_tasks, "-m", bad, "--out", out, "-q")
        assert r.code == 2, (bad, r.err)
        assert "accuracy" not in r.out + r.err and not (out / "results.jsonl").exists()
    for flag in ("--sub-model", "--judge-model"):
        r = rlm_cli("eval", needle_tasks, "-m", f"scripted:{script}", flag, "local:no-such-model", "--out", out, "-q")
        assert r.code == 2 and "no-such-model" in r.err and not (out / "results.jsonl").exists()


def test_resume_runs_again_a_job_that_failed_for_want_of_a_model(rlm_cli, needle_tasks: Path, script: Path,  # type: ignore[no-untyped-def]
                                                                  tmp_path: Path) -> None:
    """A results file whose jobs ended in a setup error (ConfigError: the model was not
    installed when they ran) is not "done": --resume runs them again and scores them."""
    out = tmp_path / "run"
    assert rlm_cli("eval", needle_tasks, "-m", f"scripted:{script}", "--method", "direct", "--out", out, "-q").code == 0
    results = out / "results.jsonl"
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    broken = [{**row, "answer": None, "score": 0.0, "error": "local model not installed", "error_type": "ConfigError"}
              for row in rows]
    results.write_text("".join(json.dumps(row) + "\n" for row in broken))
    r = rlm_cli("eval", needle_tasks, "-m", f"scripted:{script}", "--method", "direct", "--out", out, "--resume", "--json")
    assert r.code == 0
    summary = r.json()
    assert summary["skipped"] == 0 and summary["done"] == len(rows)
