"""A folder's loading plan (``context/plan.py``): the most relevant and smallest documents whole
within a budget, the rest excerpted, the unsearchable skipped; line counts in the folder probe;
``rlm probe --plan`` and ``--exit-code``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlm_runtime.cli import main
from rlm_runtime.context import ProbeConfig
from rlm_runtime.context.plan import plan


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "small.md").write_text("the budget review\n" * 10)          # ~45 tokens, relevant
    (root / "big.md").write_text("budget line\n" * 3000)                # ~9,000 tokens, relevant
    (root / "other.md").write_text("unrelated words here\n" * 20)       # ~105 tokens
    (root / "empty.md").write_text("")
    return root


def test_plan_takes_the_relevant_and_small_within_the_budget(folder: Path) -> None:
    """It reads whole, within the budget, the relevant documents first and then the smaller ones; a relevant one too
    large goes to excerpt; an empty one is skipped; the folder probe counts every line."""
    probe = folder_probe_with_rank(folder)
    made = plan(probe, 1000)
    assert [n for n, _ in made.load] == ["small.md", "other.md"]
    assert [n for n, _ in made.excerpt] == ["big.md"] and [n for n, _ in made.skip] == ["empty.md"]
    assert made.load_tokens <= 1000
    assert probe.lines == 10 + 3000 + 20 and probe.lines_complete
    assert {d["name"]: d["lines"] for d in probe.documents}["big.md"] == 3000
    everything = plan(probe, 100_000)
    assert [n for n, _ in everything.load] == ["big.md", "small.md", "other.md"] and not everything.excerpt  # by relevance


def folder_probe_with_rank(folder: Path):  # type: ignore[no-untyped-def]
    from rlm_runtime.context.corpus import CorpusHandle

    return CorpusHandle.from_folder(folder).probe(ProbeConfig(load_max_tokens=1000), rank_keywords=("budget",))


def test_the_brief_says_the_plan(folder: Path) -> None:
    """It puts the plan's first lines in the folder's summary, names quoted."""
    text = folder_probe_with_rank(folder).summary(brief=True)
    assert "plan within 1,000 tokens: read whole 2 documents" in text and "'small.md'" in text
    assert "excerpt (grep, chunk) 1 documents" in text and "3030 lines" in text


def test_cli_plan_and_exit_code(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """rlm probe --plan lists every document by tier (JSON too); --exit-code exits 1 on a skip and 0 otherwise;
    --plan of one file is a usage error."""
    assert main(["probe", str(folder), "--plan", "--budget", "200"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("plan within 200 tokens") and "excerpt" in out and "skip" in out and "empty.md" in out
    assert main(["probe", str(folder), "--plan", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["plan"]["budget"] == 20000
    assert main(["probe", str(folder / "small.md"), "--exit-code"]) == 0
    capsys.readouterr()
    assert main(["probe", str(folder / "empty.md"), "--exit-code"]) == 1
    capsys.readouterr()
    assert main(["probe", str(folder / "small.md"), "--plan"]) == 2
    assert "--plan is a folder's" in capsys.readouterr().err
