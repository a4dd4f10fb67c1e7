"""Red team of the checks the loop runs on an answer, and on printed output, before taking
it (issue 22, class 2): a model's answer that is a long list, or a cell that prints a
listing full of names, made them quadratic (minutes for a megabyte). Each run goes in a
subprocess with a generous timeout (linear work takes a second or two here) and must end
with the model's answer, as an ordinary run does. The answers are quoted, so that no step
tries them as a Python expression first."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

#: Linear checks of a megabyte take well under this; the quadratic ones took minutes.
TIMEOUT_S = 60

RUN = textwrap.dedent("""
    import json, sys
    from rlm_runtime import Session
    from rlm_runtime.budget import RunLimits
    from rlm_runtime.llm import ScriptedClient
    spec = json.loads(open(sys.argv[1], encoding="utf-8").read())
    limits = RunLimits(max_iterations=4, max_wall_s=600, max_output_tokens_per_call=10_000_000,
                       max_output_tokens=100_000_000, max_input_tokens=100_000_000)
    with Session(ScriptedClient(spec["replies"]), contexts=spec["contexts"], limits=limits, trace=False) as s:
        result = s.ask(spec["question"])
    print(json.dumps({"answer": (result.answer or "")[:60], "error": result.error}))
""")


def _run(tmp_path: Path, question: str, replies: list[str], contexts: list[str] | None = None) -> dict[str, object]:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"question": question, "replies": replies, "contexts": contexts or []}), encoding="utf-8")
    try:
        done = subprocess.run([sys.executable, "-c", RUN, str(spec)], capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the answer checks ran for over {TIMEOUT_S} s")
    assert done.returncode == 0, done.stderr[-2000:]
    out: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def _name(i: int) -> str:
    """A capitalised word without digits, different for every i (names the checks collect)."""
    letters = ""
    i += 10_000
    while i:
        letters += chr(97 + i % 26)
        i //= 26
    return letters.capitalize()


def test_an_answer_that_is_a_megabyte_of_numbers(tmp_path: Path) -> None:
    """It checks a typed count answer of 150,000 numbers in linear time and takes it."""
    answer = " ".join(str(i) for i in range(150_000))
    out = _run(tmp_path, "How many sightings are in the log?", [f'FINAL("{answer}")'] * 2)  # questioned once, given again
    assert str(out["answer"]).startswith("0 1 2 3"), out


def test_an_answer_that_is_a_long_list_of_kinds(tmp_path: Path) -> None:
    """It checks a "most common" answer of 150,000 kinds against a printed output in linear time and takes it."""
    answer = " ".join(f"kind{_name(i).lower()}" for i in range(150_000))
    replies = ["```python\nprint('filler words ' * 1400)\n```", f'FINAL("{answer}")', f'FINAL("{answer}")']
    out = _run(tmp_path, "Which kind is the most common in the log?", replies)
    assert str(out["answer"]).startswith("kind"), out


def test_an_answer_that_is_a_long_list_of_names(tmp_path: Path) -> None:
    """It checks an answer of 60,000 two-word names (codes, grounding, links) in linear time and takes it."""
    answer = ", ".join(f"{_name(i)} {_name(i + 70_000)}" for i in range(60_000))
    out = _run(tmp_path, "Who leads project Belpex?", [f'FINAL("{answer}")'] * 2)
    assert out["error"] is None and out["answer"], out


def test_a_printed_listing_full_of_names_tied_to_the_question(monkeypatch: pytest.MonkeyPatch) -> None:
    """It follows no chain from a listing where the question's name ties in a thousand new names: a few greps, not one per name."""
    from rlm_runtime import Session
    from rlm_runtime.budget import RunLimits
    from rlm_runtime.llm import ScriptedClient
    from rlm_runtime.sandbox import Sandbox

    rows = [f"Belpex: {_name(i)}." for i in range(1_000)]  # ~14 characters a row: the whole listing is printed
    replies = ["```python\nprint(grep('Belpex', max_matches=5000))\n```", "```python\nFINAL('nobody')\n```"]
    calls = 0
    execute = Sandbox.execute

    def counted(self: Sandbox, code: str, *args: object, **kwargs: object) -> object:
        nonlocal calls
        calls += 1
        return execute(self, code, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Sandbox, "execute", counted)
    with Session(ScriptedClient(replies), contexts=["\n".join(rows) + "\n"], limits=RunLimits(max_iterations=3, max_wall_s=120),
                 trace=False) as s:
        assert s.ask("Who leads project Belpex?").answer == "nobody"
    assert calls < 40
