"""The trace page (``rlm trace html``): a summary of each question first, a timeline of turns
and sub-calls, highlighted code; one file, no script, hostile text escaped. Checked on the
page's DOM (html.parser)."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from rlm_runtime import Session
from rlm_runtime.llm.scripted import ScriptedClient
from rlm_runtime.trajectory import read_trace
from rlm_runtime.trajectory.reader import Trace
from rlm_runtime.trajectory.render import render_html
from rlm_runtime.trajectory.timeline import MAX_BARS, timeline


class _Dom(HTMLParser):
    """Tags with their attributes and the text inside each (flat)."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.texts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.texts.append(data)


def _dom(page: str) -> _Dom:
    dom = _Dom()
    dom.feed(page)
    return dom


def code(src: str) -> str:
    return f"```python\n{src}\n```"


QUESTION = "which shelf holds rice?\x1b]0;owned\x07 <script>alert(1)</script>"


def _page(tmp_path: Path) -> str:
    def reply(messages: list[dict[str, Any]]) -> str:
        if len(messages) == 1:
            return "rice is on shelf 2"
        turn = sum(m["role"] == "assistant" for m in messages) + 1
        return {1: code("s = llm_query('where is rice?')\nprint(s)"), 2: code("FINAL('shelf 2')")}[turn]

    path = tmp_path / "t.jsonl"
    with Session(ScriptedClient(reply), contexts=["flour: shelf 1\nrice: shelf 2\n"], trace=path) as s:
        assert s.ask(QUESTION).answer == "shelf 2"
    return render_html(read_trace(path))


def test_the_page_opens_with_each_question_its_answer_and_totals(tmp_path: Path) -> None:
    """It puts the question, the answer and iterations / sub-calls / tokens / time before the runs."""
    page = _page(tmp_path)
    summary = page[page.index("<h2>Summary</h2>"):page.index("<h2>Timeline</h2>")]
    assert "<div class=answer>shelf 2</div>" in summary
    assert "2 iterations" in summary and "1 sub-call " in summary and "tokens in" in summary
    assert page.index("<h2>Summary</h2>") < page.index("<h2>Timeline</h2>") < page.index("<h2>Runs</h2>")


def test_the_timeline_has_a_bar_for_each_turn_part_and_sub_call(tmp_path: Path) -> None:
    """It draws the model's and the cells' part of each turn and the sub-call, each with a title saying tokens and time."""
    dom = _dom(_page(tmp_path))
    bars = [a.get("class") or "" for tag, a in dom.tags if tag == "rect"]
    assert sum("model" in c for c in bars) == 2 and sum("sub_call" in c for c in bars) == 1
    assert sum(c.endswith("cells") for c in bars) >= 1  # a turn's cells took measurable time
    assert any(t.startswith("turn 1: the model,") and "tokens in" in t for t in dom.texts)
    assert any(t.startswith("llm_query:") for t in dom.texts)


def test_the_page_is_one_file_with_no_script_and_escapes_what_it_shows(tmp_path: Path) -> None:
    """It holds no script, no link to fetch, and shows the question's controls and markup as text."""
    page = _page(tmp_path)
    dom = _dom(page)
    assert not any(tag in ("script", "link", "img", "iframe") for tag, _ in dom.tags)
    assert not any(v and v.startswith(("http://", "https://")) for _, a in dom.tags for k, v in a.items() if k != "xmlns")
    assert "\x1b" not in page and "\x07" not in page and "<script>alert" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_code_is_highlighted(tmp_path: Path) -> None:
    """It colours the code of a turn (inline styles: nothing to load)."""
    page = _page(tmp_path)
    assert '<span style="' in page and "llm_query" in page


def test_a_huge_trace_draws_a_bounded_timeline() -> None:
    """It makes at most MAX_BARS bars and says how many it left out."""
    events: list[dict[str, Any]] = [{"type": "run_start", "run_id": "r", "depth": 0, "query": "q", "t": 0.0}]
    events += [{"type": "sub_call", "run_id": "r", "depth": 0, "kind": "llm_query", "prompt": "p", "response": "x",
                "duration_s": 0.5, "t": 1.0 + n} for n in range(MAX_BARS + 300)]
    tl = timeline(Trace.from_dicts(events))
    assert tl is not None
    assert sum(len(lane.bars) for lane in tl.lanes) == MAX_BARS and tl.left_out == 300


def test_the_root_turns_open_and_a_short_timeline_ticks_in_milliseconds(tmp_path: Path) -> None:
    """The root run's turns are open on load (their code readable without a click); a timeline
    under five seconds labels its ticks in milliseconds, never 0.0s 0.0s 0.0s."""
    page = _page(tmp_path)
    dom = _dom(page)
    assert page.count("<details open><summary>iteration ") == 2  # the two turns of the question
    ticks = [t for t in dom.texts if t.endswith(" ms")]
    assert len(ticks) == 6 and float(ticks[0].split()[0]) == 0 and len(set(ticks)) == 6
    assert "0.0s" not in " ".join(t for t in dom.texts if t.endswith("s") and len(t) <= 6)


def test_the_summary_counts_a_child_rlm_as_a_sub_call(tmp_path: Path) -> None:
    """A question whose cell runs rlm_query (a child run) counts it among its sub-calls."""
    def reply(messages: list[dict[str, Any]]) -> str:
        asked = messages[1]["content"] if len(messages) > 1 else ""
        if "inner question" in asked:
            return code("FINAL('inner done')")
        return code("r = rlm_query('inner question')\nFINAL(r)")

    path = tmp_path / "t.jsonl"
    with Session(ScriptedClient(reply), contexts=["some text\n"], trace=path) as s:
        assert s.ask("outer?").answer == "inner done"
    page = render_html(read_trace(path))
    summary = page[page.index("<h2>Summary</h2>"):page.index("<h2>Timeline</h2>")]
    assert "1 sub-call " in summary


def test_time_between_questions_is_left_out_of_the_timeline() -> None:
    """Two questions a minute apart (a person typing between them) are drawn end to end, half
    a second apart, and the page says how much idle time was left out."""
    from rlm_runtime.trajectory.timeline import GAP_S

    def run(run_id: str, t0: float) -> list[dict[str, Any]]:
        return [{"type": "run_start", "run_id": run_id, "depth": 0, "query": "q", "t": t0},
                {"type": "iteration", "run_id": run_id, "depth": 0, "iteration": 1, "t": t0 + 2.0, "duration_s": 2.0,
                 "model_s": 1.5, "code_blocks": ["x"], "outputs": [{}]},
                {"type": "run_end", "run_id": run_id, "depth": 0, "answer": "a", "iterations": 1, "t": t0 + 2.0,
                 "duration_s": 2.0}]

    events = [{"type": "trace_start", "schema": 2, "t": 0.0}, *run("r1", 100.0), *run("r2", 160.0)]
    trace = Trace.from_dicts(events)
    tl = timeline(trace)
    assert tl is not None and abs((tl.end - tl.start) - (4.0 + GAP_S)) < 1e-6 and abs(tl.idle_s - (58.0 - GAP_S)) < 1e-6
    assert "between questions (nothing running) left out of the axis" in render_html(trace)
