"""The harness: pure parsing of replies and shaping of feedback, without a model or a sandbox."""

from __future__ import annotations

from rlm_runtime import harness
from rlm_runtime.harness import CellOutcome, Exchange

NOTES = {"not_python": "NOT PYTHON", "warning": "note: {warning}", "no_output": "(no output)"}


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


def test_the_grep_an_empty_result_suggests_is_found() -> None:
    """It finds the grep(..., ignore_case=True) call an empty grep's report suggests."""
    said = "(no lines match /run the tests/ as written, but 1 line match it ignoring case: use grep('run the tests', ignore_case=True))"
    assert harness.suggested_grep(said) == "grep('run the tests', ignore_case=True)"
    assert harness.suggested_grep("x. Try grep(\"it's\", ignore_case=True))") == "grep(\"it's\", ignore_case=True)"
    assert harness.suggested_grep("Try grep('a'); import os, ignore_case=True)") is None
    assert harness.suggested_grep("(no lines match /q/; try fewer or other words)") is None


def test_the_names_a_question_gives() -> None:
    """It finds runs of capitalised words, less the question words that open a sentence."""
    assert harness.question_names("What is the badge number of the person who leads project Belpex?") == ["Belpex"]
    assert harness.question_names("Drafen Sulzel reports to someone. Where is that person based?") == ["Drafen Sulzel"]
    assert harness.question_names("The Whitlo account has a serial number. What is it?") == ["Whitlo"]
    assert harness.question_names("In which year did Ada King and Charles Babbage meet?") == ["Charles Babbage", "Ada King"]
    assert harness.question_names("how many tickets are about billing?") == []
    assert harness.question_names("Count the sightings. Which species is most common?") == []


def test_an_answer_worth_following() -> None:
    """It follows a short name the question lacks; not a number, a code, a sentence or a name the question gives."""
    q = "What is the badge number of the person who leads project Belpex?"
    assert harness.answer_to_follow("Junsen Monnovbel.", q) == "Junsen Monnovbel"
    assert harness.answer_to_follow('"Sapporo"', q) == "Sapporo"
    # A line copied whole: its one name the question lacks; none when it adds two.
    assert harness.answer_to_follow("The lead of project Belpex is Junsen Monnovbel.", q) == "Junsen Monnovbel"
    assert harness.answer_to_follow("Belpex is led by Ann Lee and Bob Stone.", q) is None
    for taken in ("24472", "SN-985077", "Belpex", "project Belpex", "It is not stated in the text at all, sorry", "x", "a\nb"):
        assert harness.answer_to_follow(taken, q) is None, taken


def test_grep_rows_and_broad_results() -> None:
    """It reads the lines of a printed grep result, and tells a listing too long to read."""
    printed = "12: The lead of project Belpex\nnot a row\nnotes.txt:7: Badge 1 belongs to X\n"
    assert harness.grep_rows(printed) == ["The lead of project Belpex", "Badge 1 belongs to X"]
    assert not harness.shows_many_lines(printed, 3)
    assert harness.shows_many_lines("\n".join(f"{i}: row" for i in range(3)), 3)
    assert harness.shows_many_lines("1: row\n... (stopped after 1 matching lines; raise max_matches)", 3)


def test_a_count_no_output_backs() -> None:
    """It finds the number of a "how many" answer that the model wrote and no output shows; line
    numbers of grep rows do not back it, and a number its code computed is not questioned."""
    shown = "23: Ticket 2445 was filed under billing\n(55 lines match /billing/ in all)"
    said = "FINAL('There are 10 tickets.')"
    assert harness.unbacked_count("There are 10 tickets.", "How many tickets are labelled billing?", shown, said) == "10"
    assert harness.unbacked_count("23", "How many tickets?", shown, "FINAL(23)") == "23"
    assert harness.unbacked_count("55", "How many tickets?", shown, "FINAL(55)") is None
    assert harness.unbacked_count("5", "How many tickets?", "55 tickets", "FINAL(5)") == "5"
    assert harness.unbacked_count("2999", "How many tickets?", shown, "FINAL_VAR('n')") is None
    assert harness.unbacked_count("hardware", "How many kinds?", shown, said) is None
    assert harness.unbacked_count("10", "Which category is the most common?", shown, said) is None
    assert harness.unbacked_count("24472", "What is the badge number of the person?", shown, "FINAL(24472)") is None


def test_the_tokens_of_an_answer_the_text_should_hold() -> None:
    """It picks quoted strings, codes with digits and the names of two words or more an answer adds;
    not a plain word (a label the model chose), nor what the question already says."""
    q = "Drafen Sulzel reports to someone. Where is that person based?"
    assert harness.answer_tokens("The person is Lotal Tordor.", q) == ["Lotal Tordor"]
    assert harness.answer_tokens("The code is 'AB-12'", q) == ["AB-12"]
    assert harness.answer_tokens("bird", q) == [] and harness.answer_tokens("Positive", q) == []
    assert harness.answer_tokens("yes", q) == [] and harness.answer_tokens("Drafen Sulzel", q) == []


def test_the_forms_a_name_takes() -> None:
    """It tries a several-word name whole, then its last word if that is a name of four letters or more."""
    assert harness.name_forms("Package Pexorolo") == ["Package Pexorolo", "Pexorolo"]
    assert harness.name_forms("Belpex") == ["Belpex"]
    assert harness.name_forms("Ada Li") == ["Ada Li"]
