"""Reports and comparisons of runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlm_runtime.assist import REGISTRY, Answer, Assist, AssistState, Host, Question
from rlm_runtime.eval import plots
from rlm_runtime.eval.report import build_report, compare_runs, token_reduction
from rlm_runtime.eval.runner import EvalConfig, Runner
from rlm_runtime.eval.tasks import load_tasks


@pytest.fixture
def run_dir(needle_tasks: Path, script: Path, tmp_path: Path) -> Path:
    out = tmp_path / "run"
    Runner(EvalConfig(model=f"scripted:{script}", methods=("rlm", "direct"), out=out), load_tasks(needle_tasks)).run()
    return out


def test_report_tables_links_and_escaping(run_dir: Path) -> None:
    """It writes report.md and a self-contained report.html with tables, the reduction and trace links."""
    built = build_report(run_dir)
    md = built.markdown.read_text()
    # The count judged correct and the mean score, each named, with a note saying how they differ.
    assert "| rlm | needle | 4 | 4/4 | 100% |" in md and "| direct | needle | 4 | 0/4 | 0% |" in md
    assert "mean score: the scorers' mean" in md
    assert "Tokens of rlm against direct" in md and "\"40% fewer\" means" in md
    # needle_tasks: two tasks at each of 4,000 and 8,000 characters; rlm finds both, direct neither.
    assert "| family | length (chars) | direct correct | direct median s | rlm correct | rlm median s |" in md
    assert "| needle | 4,000 | 0/2 |" in md and "| needle | 8,000 | 0/2 |" in md
    assert md.count("| 2/2 |") == 2
    page = built.html.read_text()
    assert "By family and context length" in page
    assert "<a href='./trajectories/" in page and ".html'>trace</a>" in page
    assert "src='http" not in page and "<script src" not in page
    for link in [p for p in run_dir.glob("trajectories/*.html")]:
        assert link.stat().st_size > 0


@pytest.mark.skipif(not plots.available(), reason="matplotlib is not installed (the eval extra)")
def test_plots_are_png_and_inlined(run_dir: Path) -> None:
    """It draws accuracy by length and tokens against accuracy as PNG, inlined in the HTML."""
    built = build_report(run_dir)
    names = {p.name for p in built.plots}
    assert names == {"accuracy_by_length.png", "tokens_vs_accuracy.png"}
    for p in built.plots:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert built.html.read_text().count("data:image/png;base64,") == 2


def test_token_reduction_counts_tasks_both_ran() -> None:
    """It compares tokens over tasks both methods ran, and over those both got right."""
    recs = [
        {"task_id": "a", "method": "rlm", "family": "f", "input_tokens": 100, "output_tokens": 0, "score": 1, "correct": True},
        {"task_id": "a", "method": "direct", "family": "f", "input_tokens": 400, "output_tokens": 0, "score": 1, "correct": True},
        {"task_id": "b", "method": "rlm", "family": "f", "input_tokens": 300, "output_tokens": 0, "score": 1, "correct": True},
        {"task_id": "b", "method": "direct", "family": "f", "input_tokens": 400, "output_tokens": 0, "score": 0, "correct": False},
        {"task_id": "c", "method": "rlm", "family": "f", "input_tokens": 999, "output_tokens": 0, "score": 0, "correct": False},
    ]
    (row,) = [r for r in token_reduction(recs) if r["family"] == "f"]
    assert row["tasks"] == 2 and row["token_reduction_percent"] == 50.0
    assert row["both_correct"] == 1 and row["token_reduction_percent_at_equal_accuracy"] == 75.0


def test_compare_shows_per_family_differences(run_dir: Path, tmp_path: Path) -> None:
    """It lists each method and family of two runs with the accuracy difference."""
    result = compare_runs(run_dir, run_dir)
    row = next(r for r in result.rows if r["method"] == "rlm" and r["family"] == "needle")
    assert row["accuracy_a"] == row["accuracy_b"] == 1.0 and row["diff"] == 0.0
    assert "+0 pts" in result.text()


def _counting_run(tmp_path: Path, assists: str) -> Path:
    """One counting task: the scripted model answers a count no output showed (wrong), then counts in code."""
    import json

    (tmp_path / "crates.txt").write_text("".join(f"crate {i}: {'sealed' if i % 3 == 0 else 'open'}\n" for i in range(1, 31)))
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "crates-sealed", "question": "How many crates are sealed?", "context": "crates.txt",
                                 "answer": "10", "scorer": "numeric"}) + "\n")
    replies = ["```python\nprint(grep('sealed', max_matches=3))\n```", "```python\nFINAL('There are 4 sealed crates')\n```",
               "```python\nprint(grep('sealed').count())\n```", "```python\nFINAL(10)\n```"]
    script = tmp_path / f"script-{assists}.jsonl"
    script.write_text("".join(json.dumps({"content": r}) + "\n" for r in replies))
    out = tmp_path / f"run-{assists}"
    limits = {"max_iterations": 6, "max_wall_s": 60.0, "assists": assists}
    Runner(EvalConfig(model=f"scripted:{script}", methods=("rlm",), out=out, limits=limits), load_tasks(tasks)).run()
    return out


class _AskOnce(Assist):
    """Questions the first answer of a run, whatever it is: a stand-in for an answer check."""

    name = "ask-once"

    def __init__(self) -> None:
        self.asked = False

    def on_answer(self, host: Host, state: AssistState, answer: Answer) -> Question | None:
        if self.asked:
            return None
        self.asked = True
        return Question("Count them in code before answering.")


class _AskToo(_AskOnce):
    """Questions the same first answer, after ``ask-once`` in hook order (it never gets to)."""

    name = "ask-too"

    def on_answer(self, host: Host, state: AssistState, answer: Answer) -> Question | None:
        return super().on_answer(host, state, answer) if answer.text.startswith("There are") else None


def test_report_counts_what_each_assist_did(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It reports, per assist, the tasks it fired in and the answers it flipped, from the trace events; none with the assists off."""
    from rlm_runtime.eval.assist_stats import assist_rows
    from rlm_runtime.eval.report import load

    for cls in (_AskOnce, _AskToo):  # no assist ships: the test's own, registered in hook order
        monkeypatch.setitem(REGISTRY, cls.name, cls)
    on = _counting_run(tmp_path, "ask-too,ask-once")
    checks = [r for r in assist_rows(on, load(on)) if r.checked]
    assert len(checks) == 1  # the first assist that questions an answer wins
    check = checks[0]
    assert check.name == "ask-once"
    assert (check.tasks, check.fired, check.checked, check.wrong_to_right, check.right_to_wrong) == (1, 1, 1, 1, 0)
    md = build_report(on).markdown.read_text()
    assert "## Assists" in md and f"| rlm | {check.name} | 1/1 | 100% | {check.events} | 1 | 1 | 0 |" in md
    off = _counting_run(tmp_path, "none")
    assert assist_rows(off, load(off)) == []
    assert "## Assists" not in build_report(off).markdown.read_text()


def test_token_figures_read_as_words() -> None:
    """It writes a reduction as "N% fewer" and an increase as "Nx as many", never a bare negative percent."""
    from rlm_runtime.eval.report import _fewer

    assert _fewer(40.0) == "40% fewer" and _fewer(-150.0) == "2.5x as many" and _fewer(None) == "-"


@pytest.mark.skipif(not plots.available(), reason="matplotlib is not installed (the eval extra)")
def test_labels_of_close_points_do_not_overlap(tmp_path: Path) -> None:
    """It places the labels of points that nearly coincide apart, inside the plot, and writes ticks as counts."""
    from matplotlib.text import Annotation

    from rlm_runtime.eval.plots import _count, _figure, _place_labels

    fig, ax = _figure()
    points = [("needle", 3500.0, 1.0), ("aggregation", 3510.0, 0.99), ("multi-hop", 3520.0, 1.0), ("lookup", 9000.0, 0.5)]
    ax.scatter([p[1] for p in points], [p[2] for p in points])
    ax.set_xlim(3000, 9100)
    ax.set_ylim(0, 1.1)
    _place_labels(ax, fig, points)
    renderer = fig.canvas.get_renderer()
    boxes = [a.get_window_extent(renderer) for a in ax.get_children() if isinstance(a, Annotation)]
    assert len(boxes) == 4
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    area = ax.get_window_extent(renderer)
    assert all(area.x0 <= b.x0 and b.x1 <= area.x1 for b in boxes)  # the last point's label went left, not off the plot
    assert [_count(v) for v in (500, 3500, 100_000, 1_000_000)] == ["500", "3.5k", "100k", "1M"]


def test_the_length_table_keeps_tenths_of_a_second() -> None:
    """Median seconds in the length table keep a decimal: 0.4 s is not shown as 0."""
    from rlm_runtime.eval.report import length_table

    records = [{"label": "rlm", "family": "needle", "length": 4000, "wall_s": s, "score": 1.0, "correct": True}
               for s in (0.31, 0.42, 0.55)]
    assert length_table(records) == [["needle", "4,000", "3/3", "0.4"]]


def test_the_window_line_is_labelled_in_the_axis_unit(tmp_path: Path) -> None:
    """The accuracy plot's window line says its place in characters (the axis), then tokens."""
    pytest.importorskip("matplotlib")
    said: list[str] = []
    import matplotlib.axes

    original = matplotlib.axes.Axes.text

    def text(self: object, x: float, y: float, s: str, *args: object, **kwargs: object) -> object:
        said.append(s)
        return original(self, x, y, s, *args, **kwargs)  # type: ignore[arg-type]

    matplotlib.axes.Axes.text = text  # type: ignore[assignment, method-assign]
    try:
        plots.accuracy_by_length({"rlm": {4000: 1.0, 40000: 0.5}}, tmp_path / "a.png", window_chars=32768, window_tokens=8192)
    finally:
        matplotlib.axes.Axes.text = original  # type: ignore[method-assign]
    assert any(s.startswith("model window: ~32,768 characters (~8,192 tokens)") for s in said)


def test_load_all_tokens_and_probe_time_are_recorded_and_reported(run_dir: Path) -> None:
    """It records for each rlm task what loading every context would cost and the probes' time, and reports the
    reduction against loading everything (markdown and --json); direct records none."""
    import json

    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    rlm = [r for r in records if r["method"] == "rlm"]
    assert rlm and all(isinstance(r["load_all_tokens"], int) and r["load_all_tokens"] > 0 for r in rlm)
    assert all(r["probe_s"] is not None and 0 <= r["probe_s"] <= r["wall_s"] for r in rlm)
    assert all(r["load_all_tokens"] is None for r in records if r["method"] == "direct")
    built = build_report(run_dir)
    assert "## Tokens against loading everything" in built.markdown.read_text()
    [whole] = [x for x in built.to_dict()["load_all"] if x["method"] == "rlm" and x["family"] == "(all)"]
    used = sum(r["input_tokens"] + r["output_tokens"] for r in rlm)
    assert whole["tokens"] == used and whole["load_all_tokens"] == sum(r["load_all_tokens"] for r in rlm)
    assert whole["reduction_percent"] == round(100 * (1 - used / whole["load_all_tokens"]), 1)


def test_history_and_baseline(run_dir: Path, tmp_path: Path, _rlm_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """rlm eval history lists each run's figures from its own results; baseline remembers one, history marks it, and
    compare with one run compares against it; a damaged baseline file is a clear error."""
    import json
    import shutil

    from rlm_runtime.cli import main

    later = tmp_path / "runs" / "b"
    later.parent.mkdir()
    shutil.copytree(run_dir, later)
    shutil.copytree(run_dir, tmp_path / "runs" / "a")
    assert main(["eval", "baseline", str(tmp_path / "runs" / "a")]) == 0
    assert "rlm: 4/4" in capsys.readouterr().out
    assert main(["eval", "history", str(tmp_path / "runs"), "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert [Path(r["folder"]).name for r in runs] == ["a", "b"] and [r["baseline"] for r in runs] == [True, False]
    assert runs[0]["methods"]["rlm"]["correct"] == 4 and runs[0]["methods"]["rlm"]["load_all_reduction_percent"] is not None
    assert main(["eval", "compare", str(later), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["a"].endswith("a")
    (_rlm_home / "eval" / "baseline.json").write_text("[1, 2")
    assert main(["eval", "baseline"]) == 2
    assert "rlm eval baseline DIR sets it again" in capsys.readouterr().err


def test_load_all_savings_groups_each_method_and_family_and_refuses_a_flag_as_a_count(tmp_path: Path) -> None:
    """It sums each method's and family's tokens apart (many methods, a family named like the
    total), and a record whose load_all_tokens is true (not a count) is a bad line, not 1."""
    import json

    from rlm_runtime.eval.report import load_all_savings
    from rlm_runtime.eval.results import load_results

    rows = [{"task_id": f"t{i}", "method": f"m{i % 3}", "config_hash": f"h{i}", "family": ["a", "b", "(all)"][i % 2 * 2],
             "input_tokens": 10, "load_all_tokens": 100, "score": 1.0} for i in range(12)]
    rows.append({"task_id": "flag", "method": "m0", "config_hash": "hf", "input_tokens": 1, "load_all_tokens": True})
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    records, bad = load_results(tmp_path / "results.jsonl")
    assert len(records) == 12 and len(bad) == 1 and "load_all_tokens" in bad[0]
    out = {(x["method"], x["family"]): x for x in load_all_savings(records)}
    assert set(out) == {(f"m{k}", f) for k in range(3) for f in ("(all)", "a", "'(all)'")}
    assert all(out[(f"m{k}", "(all)")]["tasks"] == 4 and out[(f"m{k}", "(all)")]["reduction_percent"] == 90.0 for k in range(3))
    assert sum(out[(m, "a")]["tasks"] + out[(m, "'(all)'")]["tasks"] for m in ("m0", "m1", "m2")) == 12
