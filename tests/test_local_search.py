"""The embedded 1.5B model answers through ranked search a question whose answer chunk no
regex of the question's words matches (issue 12's "done means", with the real model).

Opt-in by installation: it runs where qwen2.5-coder-1.5b is installed (`rlm model install
qwen2.5-coder-1.5b`, 1.1 GB) and is skipped elsewhere, CI included (CI installs only the
0.5B model, which writes too poor code for this). About a minute on 2 cores.
"""

from __future__ import annotations

import importlib.util
import json
import random
import re
from pathlib import Path

import pytest

from rlm_runtime import Session
from rlm_runtime.budget import RunLimits
from rlm_runtime.config import paths_from_env

# Read at import, before the autouse fixture points RLM_HOME at a temp dir.
REAL_MODELS_DIR = paths_from_env().models
GGUF = REAL_MODELS_DIR / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"

QUESTION = "Where is the yearly meeting of the beekeepers?"
ANSWER_LINE = "The regional beekeeper gathering is held every spring in the town of Ljubljana, next to the river."
CONTENT_WORDS = ["yearly", "meeting", "beekeepers"]


def _minutes(path: Path) -> Path:
    rng = random.Random(1)
    words = "committee reviewed routine matters budget adjourned early minutes report staff agenda item approved noted".split()
    paras = [f"Item {i}. " + " ".join(rng.choice(words) for _ in range(25)) + "." for i in range(1500)]
    paras[987] = f"Item 987. {ANSWER_LINE}"
    path.write_text("\n\n".join(paras) + "\n", encoding="utf-8")
    return path


@pytest.mark.slow
def test_the_local_model_answers_through_search_where_grep_finds_nothing(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """It answers, with the 1.5B model, a question none of whose words a regex finds in the answer."""
    if importlib.util.find_spec("xllamacpp") is None or not GGUF.is_file():
        pytest.skip("needs the local engine and qwen2.5-coder-1.5b (rlm model install qwen2.5-coder-1.5b)")
    monkeypatch.setenv("RLM_MODELS_DIR", str(REAL_MODELS_DIR))
    doc = _minutes(tmp_path / "minutes.md")
    for word in CONTENT_WORDS:  # the premise: grep of the question's words cannot find it
        assert not re.search(word, ANSWER_LINE, re.IGNORECASE)
    trace = tmp_path / "t.jsonl"
    # The ranked chunks an empty grep brings are the search_hint assist's, named here: no assist
    # is on by default since the held-out measurement of issue 23.
    limits = RunLimits.for_small_model(assists="search_hint")
    with Session("local:qwen2.5-coder-1.5b", contexts=[doc], trace=trace, limits=limits) as s:
        result = s.ask(QUESTION)
    assert result.answer is not None, result.error
    assert "Ljubljana" in result.answer
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    searched = [e for e in events if (e["type"] == "tool_call" and e["name"] == "search_chunks")
                or (e["type"] == "assist" and any(x.startswith("search_chunks ") for x in e.get("lookups", [])))]
    assert searched, "the answer did not come through ranked search"
