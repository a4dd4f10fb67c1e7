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


def test_the_same_short_prose_after_a_reprompt_is_the_answer() -> None:
    """It accepts prose repeated after a re-prompt, short only."""
    assert harness.insisted_answer(" Paris ", {"Paris"}) == "Paris"
    assert harness.insisted_answer("Paris", {"Lyon"}) is None
    assert harness.insisted_answer("Paris", set()) is None
    assert harness.insisted_answer("x" * 600, {"x" * 600}) is None


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


def test_a_sentence_in_a_code_block_is_prose() -> None:
    """It tells a sentence written as a code block from Python, short ones only."""
    assert harness.prose_block("The meeting is held in Ljubljana, by the river.\n") == \
        "The meeting is held in Ljubljana, by the river."
    assert harness.prose_block("print('x')") is None
    assert harness.prose_block("answer") is None  # a name: valid Python
    assert harness.prose_block("!!! ???") is None
    assert harness.prose_block("word " * 200 + "!") is None


def test_a_block_pasting_the_feedback_it_answers_runs_without_the_pasted_lines() -> None:
    """It drops the lines a block copies from the message before it when the block is not
    Python with them and is without them; a block that parses is left alone."""
    shown = ("Output of your code (turn 1 of 8):\nTraceback (your code):\n  line 2: x = hits[0]\n"
             "IndexError: grep found no lines\nnote: keep them with hits = grep('otter', ignore_case=True)")
    pasted = "# Output of your code (turn 1 of 8):\nTraceback (your code):\nIndexError: grep found no lines\nprint(grep('otter'))"
    assert harness.without_echo(pasted, shown) == "print(grep('otter'))"
    assert harness.without_echo("Traceback (your code):\nIndexError: grep found no lines", shown) == ""
    copied = "hits = grep('otter', ignore_case=True)\nprint(hits)"
    assert harness.without_echo(copied, shown) == copied  # Python as it is
    broken = "print(grep('otter')"
    assert harness.without_echo(broken, shown) == broken  # nothing pasted: its own error stands


def test_final_spelled_otherwise_in_code_is_final() -> None:
    """It writes Final(...)/final(...) calls as FINAL(...), leaving strings, attributes and a
    name the code defines itself alone."""
    assert harness.final_spelled("Final(36)") == "FINAL(36)"
    assert harness.final_spelled('s = "Final(3)"\nfinal(s)\nobj.final(2)') == 's = "Final(3)"\nFINAL(s)\nobj.final(2)'
    own = "def final(x):\n    return x\nfinal(3)"
    assert harness.final_spelled(own) == own
    assert harness.final_spelled('print("é"); Final("é")') == 'print("é"); FINAL("é")'
    assert harness.final_spelled("Final(") == "Final("  # not Python: left to the parser's message


def test_prose_that_is_still_looking_is_no_insisted_answer() -> None:
    """It does not take a repeated reply that says it will search again for an answer."""
    still = "The output does not show the answer. Let's try searching again."
    assert harness.insisted_answer(still, {still}) is None
    assert harness.insisted_answer("It is in Oslo.", {"It is in Oslo."}) == "It is in Oslo."


def test_an_answer_of_the_questions_words_is_an_echo_only_when_long() -> None:
    """It takes the question, or a long piece of it, as no answer; a short answer made of the
    question's words (a choice it offers) is one."""
    asked = "Which shelf holds the tin that is the twin of copper kettle?"
    assert harness.echoes_question("which shelf holds the tin that is the twin of copper kettle", asked)
    assert harness.echoes_question("shelf holds the tin that is the twin of copper kettle", asked)
    assert not harness.echoes_question("copper kettle", asked)
    assert harness.echoes_question("the twin of copper kettle", asked)
    assert not harness.echoes_question("New York City", "New York City or Boston?")
    assert not harness.echoes_question("TAG-1-1-2", "what is TAG-1-1-2?")  # a name of the question is one word
    assert not harness.echoes_question("the red one", "Is it the red one or the blue one?")
    assert harness.echoes_question("Copper kettle has a twin.", "In this log, copper kettle has a twin. Which is it?")
    assert not harness.echoes_question("of copper kettle", asked)  # under a third of the question
    assert not harness.echoes_question("the north hall", "Is it in the north hall or the south hall of the old mill?")
    assert not harness.echoes_question("shelf S-4 holds the tin", asked)  # a word of its own
    assert not harness.echoes_question("Bergen", "Is the fair in Oslo or in Bergen?")
    assert not harness.echoes_question("anything", "?!")


def test_digits_joined_by_dashes_are_a_value_when_the_output_showed_them() -> None:
    """It reads FINAL(2015-12) as the text 2015-12 when the output holds it whole, and not
    when it holds only a longer value, or nothing like it, or for a sum of other shapes."""
    assert harness.joined_digits("2015-12", "release=2015-12 | x") == "2015-12"
    assert harness.joined_digits(" 12/31/2020 ", "due 12/31/2020.") == "12/31/2020"
    assert harness.joined_digits("2015-12", "release=2015-12-01") is None
    assert harness.joined_digits("2015-12", "x2015-12") is None
    assert harness.joined_digits("2015-12", "nothing") is None
    assert harness.joined_digits("a-12", "a-12") is None and harness.joined_digits("12", "12") is None
    assert harness.final_argument("x = 1\nFINAL(2015-12)") == "2015-12"
    assert harness.final_argument("FINAL(a)\nFINAL(b)") is None and harness.final_argument("FINAL(") is None


def test_a_piece_of_the_question_is_two_or_more_of_its_words() -> None:
    """It calls ``loader of kiln 4`` a piece of "Which loader does kiln 4 have?" (case,
    punctuation and joining words aside), and not one word of it, nor words of the answer's own."""
    question = "Which loader does kiln 4 have?"
    assert harness.question_piece("loader of kiln 4", question) is True  # "of" joins, it is found nowhere
    assert harness.question_piece("Loader, kiln 4!", question) is True
    assert harness.question_piece("kiln", question) is False and harness.question_piece("the kiln", question) is False
    assert harness.question_piece("platform team", question) is False
