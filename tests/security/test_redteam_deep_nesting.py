"""Red team of the host's own steps with text nested thousands deep (issue 22, class 9): a
short code block, the same in a FINAL(...) written in prose, a JSON document as a context.
Each raised RecursionError or MemoryError out of ``Session.ask`` (no ``run_end``, the
partial output lost); each must now end as a run (an answer, or a failed ``RunResult``) and
leave the session able to answer the next question."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlm_runtime import Session
from rlm_runtime.budget import RunLimits
from rlm_runtime.errors import RLMError
from rlm_runtime.llm import ScriptedClient


def _code(src: str) -> str:
    return f"```python\n{src}\n```"


#: Replies a model could write (well under the per-call token cap, so they arrive whole).
NESTED = {
    "unary minus in a block": _code("x = " + "-" * 20_000 + "1"),
    "attribute chain in a block": _code("x = a" + ".b" * 3_000),
    "subscripts in a block": _code("x = a" + "[0]" * 3_000),
    "unary minus in prose FINAL": "The answer is FINAL(" + "-" * 20_000 + "1)",
    "attribute chain in prose FINAL": "The answer is FINAL(a" + ".b" * 3_000 + ")",
}


def _ask_twice(tmp_path: Path, first: list[str], contexts: list[object] | None = None) -> tuple[object, object, list[dict]]:
    replies = list(first)

    def reply(messages: list[dict[str, str]]) -> str:
        second = any("And now?" in m["content"] for m in messages if m["role"] == "user")
        return _code("FINAL('second answer')") if second or not replies else replies.pop(0)

    client = ScriptedClient(reply)
    trace = tmp_path / "t.jsonl"
    limits = RunLimits(max_iterations=3, max_wall_s=60, max_output_tokens_per_call=100_000)
    with Session(client, contexts=contexts or [], limits=limits, trace=trace) as s:
        one = s.ask("What is x?")
        two = s.ask("And now?")
    events = [json.loads(line) for line in trace.read_text(encoding="utf-8").split("\n") if line.strip()]
    return one, two, events


@pytest.mark.parametrize("reply", list(NESTED.values()), ids=list(NESTED))
def test_a_deeply_nested_reply_ends_the_turn_not_the_session(tmp_path: Path, reply: str) -> None:
    """It takes a reply nested thousands deep as a refused cell or literal text: no exception, run_end, next question answered."""
    one, two, events = _ask_twice(tmp_path, [reply, _code("FINAL('first answer')")])
    assert one.answer is not None or isinstance(one.exception, RLMError)  # type: ignore[attr-defined]
    assert two.answer == "second answer"  # type: ignore[attr-defined]
    kinds = [e["type"] for e in events]
    assert kinds.count("run_start") == kinds.count("run_end") == 2


def test_a_deeply_nested_json_context_is_described_not_crashed_on(tmp_path: Path) -> None:
    """It describes a JSON document nested 100,000 deep as too deep to parse; both questions of the session are answered."""
    doc = tmp_path / "deep.json"
    doc.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    one, two, events = _ask_twice(tmp_path, [_code("FINAL('first answer')")], contexts=[doc])
    assert one.answer == "first answer" and two.answer == "second answer"  # type: ignore[attr-defined]
    assert [e["type"] for e in events].count("run_end") == 2


def test_an_unexpected_exception_in_a_run_is_a_failed_result_with_run_end(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """It ends a run whose host step raises a non-RLMError as a failed RunResult (RunCrashed, partial output) and run_end."""
    from rlm_runtime import harness
    from rlm_runtime.errors import RunCrashed

    def broken(*args: object, **kwargs: object) -> None:
        raise RecursionError("planted")

    monkeypatch.setattr(harness, "cell_feedback", broken)  # the host's reading of every cell's output
    one, two, events = _ask_twice(tmp_path, [_code("print('partial output 7731')"), _code("FINAL('first answer')")])
    assert one.answer is None and isinstance(one.exception, RunCrashed)  # type: ignore[attr-defined]
    assert "RecursionError" in one.error and "partial output 7731" in (one.partial or "")  # type: ignore[attr-defined]
    assert isinstance(one.exception.__cause__, RecursionError)  # type: ignore[attr-defined]
    assert two.answer is None and isinstance(two.exception, RunCrashed)  # type: ignore[attr-defined]
    ends = [e for e in events if e["type"] == "run_end"]
    assert len(ends) == 2 and ends[0]["error_type"] == "RunCrashed"
