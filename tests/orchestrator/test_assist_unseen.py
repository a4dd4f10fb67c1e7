"""``unseen_answer``: a typed answer no output of the code showed is questioned once, with the
code's last output; an answer the output showed, one code computed, or one of the question's
words goes through. The text is a kiln firing log as a table, a shape of its own."""

from __future__ import annotations

import uuid
from pathlib import Path

from rlm_runtime import Session
from rlm_runtime.assist.registry import SMALL_MODEL_ASSISTS
from rlm_runtime.llm import ScriptedClient

from .support import code, fast, of_type, read_trace

QUESTION = "Which glaze did kiln K-12 fire on its last run?"


def kilns(tmp_path: Path) -> Path:
    rows = ["kiln\tglaze\tcone"] + [f"K-{i}\t{('shino', 'tenmoku', 'ash')[i % 3]}\t{6 + i % 4}" for i in range(40)]
    path = tmp_path / "kilns.tsv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def ask(tmp_path: Path, replies: list[str], assists: str = "unseen_answer") -> tuple[str | None, ScriptedClient, list]:
    client = ScriptedClient(replies)
    trace = tmp_path / f"t{uuid.uuid4().hex[:8]}.jsonl"
    with Session(client, contexts=[kilns(tmp_path)], limits=fast(assists=assists), trace=trace) as s:
        result = s.ask(QUESTION)
    return result.answer, client, read_trace(trace)


def test_an_answer_no_output_showed_is_questioned_once_with_the_last_output(tmp_path: Path) -> None:
    """It questions "celadon" (printed nowhere) with what the code printed last, traces the
    check, and takes the next answer, even one it would question again."""
    look = code("print(records().find('K-12')[0]['glaze'])")
    answer, client, events = ask(tmp_path, [look, "The glaze is celadon.\nFINAL('celadon')", code("FINAL('shino')")])
    assert answer == "shino"
    said = client.prompts[2][-1]["content"]
    assert "your answer 'celadon' is in no output of your code" in said and "shino" in said
    assert [(e["name"], e["outcome"]) for e in of_type(events, "answer_check")] == [("unseen_answer", "questioned")]
    answer, _, _ = ask(tmp_path, [look, code("FINAL('celadon')"), code("FINAL('raku')")])
    assert answer == "raku"  # asked once a run: the second unseen answer is taken


def test_answers_the_output_showed_computed_or_from_the_question_go_through(tmp_path: Path) -> None:
    """It lets through an answer the output showed (any case, in a sentence), one code
    computed, one made of the question's words, and any answer with the assist off (it is not
    in the small-model set until measured there)."""
    look = code("print(records().find('K-12')[0]['glaze'])")
    for final, want in ((code("FINAL('Shino')"), "Shino"), (code("FINAL('The glaze was shino.')"), "The glaze was shino."),
                        (code("FINAL(str(len(records())))"), "40"), (code("FINAL('kiln K-12')"), "kiln K-12")):
        answer, _, events = ask(tmp_path, [look, final])
        assert answer == want and of_type(events, "answer_check") == []
    for off in ("none", "auto"):
        answer, _, events = ask(tmp_path, [look, code("FINAL('celadon')")], assists=off)
        assert answer == "celadon" and not [e for e in of_type(events, "answer_check") if e["name"] == "unseen_answer"]
    assert "unseen_answer" not in SMALL_MODEL_ASSISTS
