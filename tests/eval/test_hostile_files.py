"""Task and results files someone else wrote: tampered trajectory links, malformed lines and
catastrophic patterns end in per-line errors, a report written inside its folder alone, and
a batch that goes on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .conftest import write_jsonl


def _record(task_id: str, **kw: object) -> dict[str, object]:
    return {"schema": 1, "task_id": task_id, "method": "rlm", "config_hash": f"h{task_id}", "model": "m",
            "family": "f", "score": 1.0, "correct": True, "answer": "x", "gold": "x", **kw}


def _snapshot(folder: Path) -> dict[str, tuple[str, bytes]]:
    """Every entry under ``folder`` (not following links): its kind and content."""
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_symlink():
            out[str(p)] = ("link", os.readlink(p).encode())
        elif p.is_file():
            out[str(p)] = ("file", p.read_bytes())
        else:
            out[str(p)] = ("dir", b"")
    return out


def test_a_tampered_results_file_links_and_writes_only_inside_the_run(rlm_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """It links only trajectories inside the run folder, as ./ relative links, and writes nothing outside it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "t.jsonl").write_text('{"event": "run_start"}\n')
    (outside / "canary.html").write_text("CANARY-PAGE")
    (outside / "report-canary.md").write_text("CANARY-REPORT")
    os.utime(outside / "canary.html", (0, 0))
    run = tmp_path / "run"
    traj = run / "trajectories"
    traj.mkdir(parents=True)
    (traj / "ok.jsonl").write_text('{"event": "run_start"}\n')
    (traj / "ok.html").symlink_to(outside / "canary.html")  # a page to be written through
    (traj / "out.jsonl").symlink_to(outside / "t.jsonl")
    (run / "javascript:alert(1).jsonl").write_text('{"event": "run_start"}\n')
    (run / "report.md").symlink_to(outside / "report-canary.md")
    write_jsonl(run / "results.jsonl", [
        _record("js", trajectory="javascript:alert(document.cookie)//x.jsonl"),
        _record("abs", trajectory=str(outside / "t.jsonl")),
        _record("dotdot", trajectory="../outside/t.jsonl"),
        _record("link", trajectory="trajectories/out.jsonl"),
        _record("named", trajectory="javascript:alert(1).jsonl"),
        _record("ok", trajectory="trajectories/ok.jsonl"),
    ])
    before = _snapshot(outside)
    r = rlm_cli("eval", "report", run)
    assert r.code == 0, r.err
    assert _snapshot(outside) == before
    assert not (run / "report.md").is_symlink() and (run / "report.md").is_file()
    assert not (traj / "ok.html").is_symlink() and "trajectory" in (traj / "ok.html").read_text()
    page = (run / "report.html").read_text()
    hrefs = [chunk.split("'", 1)[0] for chunk in page.split("href='")[1:]]
    assert sorted(hrefs) == ["./javascript%3Aalert%281%29.html", "./trajectories/ok.html"]
    md = (run / "report.md").read_text()
    assert "(<./trajectories/ok.html>)" in md and "javascript:" not in md.replace("| js |", "")
    assert str(outside) not in md and str(outside) not in page


def test_malformed_results_lines_are_skipped_and_listed(rlm_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """It skips NaN, 1e999, deep nesting, wrong types, huge numbers, invalid UTF-8 and an overlong line, naming each line."""
    run = tmp_path / "run"
    run.mkdir()
    lines = [
        json.dumps(_record("good", length=1000, wall_s=1.5)).encode(),
        json.dumps(_record("nan")).replace("1.0,", "NaN,", 1).encode(),
        json.dumps(_record("inf", cost_usd=1)).replace('"cost_usd": 1', '"cost_usd": 1e999').encode(),
        b'{"task_id": "deep", "method": "rlm", "extra": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        json.dumps(_record("type", score="abc")).encode(),
        json.dumps(_record({"a": 1})).encode(),  # type: ignore[arg-type]
        json.dumps(_record("big", length=10**30)).encode(),
        json.dumps(_record("len", length=1e300)).encode(),
        b'{"task_id": "bytes\xff\xfe", "method": "rlm"}',
        json.dumps(_record("sur", answer="\ud800")).encode(),
        b'{"task_id": "huge", "method": "rlm", "answer": "' + b"x" * (33 << 20) + b'"}',
        b"[1, 2, 3]",
        json.dumps(_record("good2", length=2000)).encode(),
    ]
    (run / "results.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    (run / "runs.jsonl").write_text('{"window": Infinity}\n[1]\n' + "[" * 50_000 + "\n")
    r = rlm_cli("eval", "report", run, "--json")
    assert r.code == 0, r.err
    assert "internal error" not in r.err and "Traceback" not in r.err
    skipped = r.json()["skipped"]
    assert [int(s.split(":")[0].removeprefix("line ")) for s in skipped] == list(range(2, 13))
    assert "score" in skipped[3] and "task_id" in skipped[4] and "UTF-8" in skipped[7] and "surrogate" in skipped[8]
    assert "over" in skipped[9]
    md = (run / "report.md").read_text()
    assert "2 results" in md and "| good |" in md and "| good2 |" in md
    from rlm_runtime.eval.results import load_results

    records, bad = load_results(run / "results.jsonl")
    assert [x["task_id"] for x in records] == ["good", "good2"] and len(bad) == 11


def test_malformed_task_lines_are_bad_lines_and_the_batch_goes_on(rlm_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """It reports infinite, huge and deeply nested values, wrong types, bad UTF-8 and unsupported patterns per line, and runs the rest."""
    task = {"question": "q", "context": {"text": "the word is kiwi"}, "answer": "kiwi"}
    lines = [
        json.dumps({"id": "ok1", **task}).encode(),
        b'{"id": "inf", "question": "q", "answer": "x", "metadata": {"length": Infinity}}',
        b'{"id": "nan", "question": "q", "answer": "x", "metadata": {"length": NaN}}',
        b'{"id": "e999", "question": "q", "answer": "x", "metadata": {"length": 1e999}}',
        b'{"id": "deep", "question": "q", "answer": "x", "metadata": {"m": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}",
        b'{"id": "bigint", "question": "q", "answer": "x", "metadata": {"length": ' + b"9" * 5000 + b"}}",
        b'{"id": "bytes\xff", "question": "q", "answer": "x"}',
        json.dumps({"id": "sur\ud800", **task}).encode(),
        json.dumps({"id": "type", "question": "q", "answer": "x", "context": 5}).encode(),
        json.dumps({"id": "backref", "question": "q", "answer": "(a)\\1", "scorer": "regex"}).encode(),
        json.dumps({"id": "look", "question": "q", "answer": "a", "scorer": "set",
                    "options": {"item_pattern": "(?<=x)a"}}).encode(),
        b'{"id": "huge", "question": "' + b"q" * (33 << 20) + b'", "answer": "x"}',
        json.dumps({"id": "ok2", **task, "metadata": {"length": 1e300}}).encode(),
        json.dumps({"id": "ok3", **task, "scorer": "regex", "answer": "(k+)+iwi$"}).encode(),
    ]
    tasks = tmp_path / "t.jsonl"
    tasks.write_bytes(b"\n".join(lines) + b"\n")
    r = rlm_cli("eval", "check", tasks, "--json")
    assert r.code == 1 and "internal error" not in r.err, r.err
    errors = r.json()["errors"]
    assert [e["line"] for e in errors] == list(range(2, 13))
    messages = [e["message"] for e in errors]
    assert "Infinity" in messages[0] and "NaN" in messages[1] and "1e999" in messages[2] and "nested" in messages[3]
    assert "digits" in messages[4] and "UTF-8" in messages[5] and "surrogate" in messages[6]
    assert "RE2" in messages[8] and "RE2" in messages[9] and "over" in messages[10]
    script = write_jsonl(tmp_path / "s.jsonl", [{"when": "Answer with the answer alone", "content": "kiwi"}])
    r = rlm_cli("eval", tasks, "--model", f"scripted:{script}", "--method", "direct", "--out", tmp_path / "o", "--json",
                "--window", "8192", "-q")
    assert r.code == 0 and "internal error" not in r.err, r.err
    summary = r.json()
    assert summary["done"] == 3 and summary["failed"] == 0 and summary["invalid_lines"] == 11
    assert summary["accuracy"] == {"direct": 1.0}


def test_a_catastrophic_regex_answer_is_scored_promptly(tmp_path: Path) -> None:
    """It scores (a+)+$ against 'a'*50+'b' in linear time (a subprocess with a generous timeout)."""
    code = ("from rlm_runtime.eval.tasks import Task\nfrom rlm_runtime.eval.scorers import score\n"
            "t = Task(id='1', question='q', answer='(a+)+$', scorer='regex')\n"
            "print(score(t, 'a' * 50 + 'b'), score(t, 'x' + 'a' * 100_000))\n"
            "s = Task(id='2', question='q', answer='aaa', scorer='set', options={'item_pattern': '(a|aa)+$'})\n"
            "print(score(s, 'a' * 50 + 'b'))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    except subprocess.TimeoutExpired as e:
        raise AssertionError("the regex scorer did not finish in 60 s") from e
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0.0", "1.0", "0.0"]


def test_an_infinite_length_is_one_bad_line_not_a_stopped_batch(rlm_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """It skips a task whose metadata length is Infinity and runs every other task of the batch."""
    tasks = tmp_path / "t.jsonl"
    tasks.write_text('{"id": "inf", "question": "q", "context": {"text": "kiwi"}, "answer": "kiwi", '
                     '"metadata": {"length": Infinity}}\n'
                     + "".join(json.dumps({"id": f"ok{n}", "question": "q", "context": {"text": "kiwi"}, "answer": "kiwi"})
                               + "\n" for n in range(3)))
    script = write_jsonl(tmp_path / "s.jsonl", [{"when": "Answer with the answer alone", "content": "kiwi"}])
    r = rlm_cli("eval", tasks, "--model", f"scripted:{script}", "--method", "direct", "--out", tmp_path / "o", "--json",
                "--window", "8192", "-q")
    assert r.code == 0 and "line 1: (line): Infinity" in r.err, r.err
    assert r.json()["done"] == 3 and r.json()["invalid_lines"] == 1


def test_direct_reads_a_huge_context_in_bounded_memory(tmp_path: Path) -> None:
    """It pastes what the window takes of a 256 MB context file, counting the rest without holding it."""
    import tracemalloc

    from rlm_runtime.eval.results import read_results
    from rlm_runtime.eval.runner import EvalConfig, Runner
    from rlm_runtime.eval.tasks import load_tasks

    with (tmp_path / "big.txt").open("wb") as f:
        f.truncate(256 << 20)  # sparse: no disk used
    tasks = write_jsonl(tmp_path / "t.jsonl", [{"id": "big", "question": "q", "context": "big.txt", "answer": "x"}])
    script = write_jsonl(tmp_path / "s.jsonl", [{"when": "Answer with the answer alone", "content": "x"}])
    runner = Runner(EvalConfig(model=f"scripted:{script}", methods=("direct",), out=tmp_path / "o", window=4096),
                    load_tasks(tasks))
    tracemalloc.start()
    try:
        runner.run()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    record = read_results(tmp_path / "o" / "results.jsonl")[0]
    assert record["score"] == 1.0 and record["extra"]["context_chars"] == 256 << 20 and record["extra"]["cut"]
    assert peak < 32 << 20  # an eighth of the file


def test_an_answer_with_an_unpaired_surrogate_is_recorded(tmp_path: Path) -> None:
    """It writes a record whose answer holds a lone surrogate (as '?') instead of failing the batch."""
    from rlm_runtime.eval.results import ResultsFile, read_results

    results = ResultsFile(tmp_path / "results.jsonl")
    results.append({"task_id": "1", "method": "direct", "answer": "ok \ud800"})
    assert read_results(results.path)[0]["answer"] == "ok ?"


def test_a_run_does_not_write_through_a_symlink_in_its_folder(rlm_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """It refuses, with a usage error, a run folder whose results, runs or trajectories entry is a symlink."""
    tasks = write_jsonl(tmp_path / "t.jsonl", [{"id": "1", "question": "q", "context": {"text": "kiwi"}, "answer": "kiwi"}])
    script = write_jsonl(tmp_path / "s.jsonl", [{"when": "Answer with the answer alone", "content": "kiwi"}])
    outside = tmp_path / "outside"
    outside.mkdir()
    for name in ("results.jsonl", "runs.jsonl", "trajectories"):
        run = tmp_path / f"run-{name}"
        run.mkdir()
        (run / name).symlink_to(outside / name)
        r = rlm_cli("eval", tasks, "--model", f"scripted:{script}", "--method", "direct", "--out", run, "--resume",
                    "--window", "8192", "-q")
        assert r.code == 2 and "is a symlink" in r.err, r.err
    assert list(outside.iterdir()) == []


def test_rag_stops_indexing_a_huge_context_at_the_wall_clock_limit(tmp_path: Path) -> None:
    """It ends a rag task whose context takes long to index at max_wall_s, as a failed task naming the limit."""
    import time

    from rlm_runtime.eval.results import read_results
    from rlm_runtime.eval.runner import EvalConfig, Runner
    from rlm_runtime.eval.tasks import load_tasks

    line = b"the quick brown fox jumps over the lazy dog near the river bank today\n"
    with (tmp_path / "big.txt").open("wb") as f:
        f.write(line * ((48 << 20) // len(line)))
    tasks = write_jsonl(tmp_path / "t.jsonl", [{"id": "big", "question": "where is the fox?", "context": "big.txt",
                                                "answer": "x"}])
    script = write_jsonl(tmp_path / "s.jsonl", [{"when": "fox", "content": "x"}])
    runner = Runner(EvalConfig(model=f"scripted:{script}", methods=("rag",), out=tmp_path / "o", window=4096,
                               limits={"max_wall_s": 1.0}), load_tasks(tasks))
    began = time.monotonic()
    runner.run()
    wall = time.monotonic() - began
    record = read_results(tmp_path / "o" / "results.jsonl")[0]
    assert record["error_type"] == "BudgetExceeded" and "wall-clock limit" in record["error"]
    assert wall < 30  # the whole 48 MB index takes far longer here


def test_a_results_file_that_is_a_fifo_or_a_device_is_refused_not_waited_on(tmp_path: Path) -> None:
    """It answers rlm eval report and compare over a results.jsonl that is a FIFO (no writer
    ever comes) or a link to /dev/zero (no end) with a usage error at once, never a hang and
    never an internal error."""
    good, fifo, zero = tmp_path / "good", tmp_path / "fifo", tmp_path / "zero"
    for folder in (good, fifo, zero):
        folder.mkdir()
    write_jsonl(good / "results.jsonl", [_record("t1")])
    os.mkfifo(fifo / "results.jsonl")
    (zero / "results.jsonl").symlink_to("/dev/zero")
    env = {**os.environ, "RLM_HOME": str(tmp_path / "home")}
    for args in (["report", str(fifo)], ["report", str(zero)], ["compare", str(good), str(fifo)],
                 ["compare", str(good), str(zero)]):
        done = subprocess.run([sys.executable, "-m", "rlm_runtime.cli", "eval", *args], capture_output=True, text=True,
                              env=env, timeout=60)
        assert done.returncode == 2, (args, done.stderr)
        assert "not a regular file" in done.stderr and "internal error" not in done.stderr
