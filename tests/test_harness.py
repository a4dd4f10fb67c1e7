"""The harness: pure parsing of replies and shaping of feedback, without a model or a sandbox."""

from __future__ import annotations

from rlm_runtime import harness
from rlm_runtime.harness import CellOutcome, Exchange

NOTES = {"not_python": "NOT PYTHON", "warning": "note: {warning}", "no_output": "(no output)", "number_as_text": "AS TEXT"}


def test_blocks_are_parsed_in_order_and_other_languages_skipped() -> None:
    """It returns python/repl blocks in order and skips a bash block."""
    text = "a\n```python\nx = 1\n```\n```bash\nls\n```\n```repl\nprint(x)\n```"
    assert harness.parse_code_blocks(text) == ["x = 1", "print(x)"]


def test_a_trailing_unclosed_block_counts() -> None:
    """It keeps a block whose closing fence never came (generation stopped)."""
    assert harness.parse_code_blocks("```python\nFINAL(1)") == ["FINAL(1)"]


def test_prose_final_ignores_placeholders_and_takes_the_last() -> None:
    """It takes the last FINAL(...) written in prose, but not a copied placeholder."""
    assert harness.prose_final("FINAL(answer)") is None
    assert harness.prose_final("first FINAL(1) then FINAL('two (2)')") == "two (2)"


def test_an_unquoted_prose_final_that_parses_is_an_expression() -> None:
    """It offers FINAL(hits[0]) for evaluation, and not FINAL(the blue door)."""
    assert harness.prose_final_expression("so FINAL(hits[0])") == "hits[0]"
    assert harness.prose_final_expression("FINAL(the blue door)") is None
    assert harness.prose_final_expression("FINAL('quoted')") is None


def test_cell_feedback_adds_the_error_and_the_not_python_hint() -> None:
    """It appends the error, and the hint when the parser refused the block as a SyntaxError."""
    text, failed = harness.cell_feedback(CellOutcome("partial\n", "SyntaxError: bad", "PolicyViolation", ["slow"]), NOTES)
    assert failed and text == "partial\nSyntaxError: bad\nNOT PYTHON\nnote: slow"
    assert harness.cell_feedback(CellOutcome("", None, None, []), NOTES) == ("(no output)", False)


def test_cell_feedback_says_when_a_number_is_still_text() -> None:
    """It adds the line_no hint to arithmetic on a number cut from a printed line, not to other TypeErrors."""
    for error in ("TypeError: unsupported operand type(s) for -: 'str' and 'int'", 'TypeError: can only concatenate str (not "int") to str',
                  "TypeError: a line number must be an int, not str 'x'"):
        assert harness.cell_feedback(CellOutcome("", error, "TypeError", []), NOTES)[0].endswith("AS TEXT"), error
    other = "TypeError: unsupported operand type(s) for -: 'list' and 'int'"
    assert "AS TEXT" not in harness.cell_feedback(CellOutcome("", other, "TypeError", []), NOTES)[0]


def test_cap_keeps_head_and_tail() -> None:
    """It cuts the middle of long feedback and says how much."""
    out = harness.cap("a" * 100 + "b" * 100, 50)
    assert out.startswith("a" * 25) and out.endswith("b" * 25) and "150 characters cut" in out


def test_compact_history_keeps_the_newest_within_the_limit() -> None:
    """It drops the oldest exchanges first and cuts long answers."""
    exchanges = [Exchange(f"question {i}", "answer " * 200 if i == 2 else f"answer {i}") for i in range(5)]
    text = harness.compact_history(exchanges, 200, answer_chars=100)
    assert "question 4" in text and "question 0" not in text and len(text) <= 200
    assert text.index("question 3") < text.index("question 4")


def test_compact_history_shows_a_failed_question() -> None:
    """It says a question found no answer, with the error."""
    text = harness.compact_history([Exchange("q", None, "budget")], 500, no_answer="(none: {error})")
    assert "(none: budget)" in text


