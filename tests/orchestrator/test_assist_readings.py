"""The answer assists' rules as pure functions (``assist/readings.py``): the question copied
back, its words given as the value, prose said twice, a sentence as code, a value written
as code, ``Final`` spelled so, feedback pasted into code, a date Python reads as a sum."""

from __future__ import annotations

from rlm_runtime.assist import readings


def test_the_same_short_prose_after_a_reprompt_is_the_answer() -> None:
    """It accepts prose repeated after a re-prompt, short only."""
    assert readings.insisted_answer(" Paris ", {"Paris"}) == "Paris"
    assert readings.insisted_answer("Paris", {"Lyon"}) is None
    assert readings.insisted_answer("Paris", set()) is None
    assert readings.insisted_answer("x" * 600, {"x" * 600}) is None


def test_a_sentence_in_a_code_block_is_prose() -> None:
    """It tells a sentence written as a code block from Python, short ones only."""
    assert readings.prose_block("The meeting is held in Ljubljana, by the river.\n") == \
        "The meeting is held in Ljubljana, by the river."
    assert readings.prose_block("print('x')") is None
    assert readings.prose_block("answer") is None  # a name: valid Python
    assert readings.prose_block("!!! ???") is None
    assert readings.prose_block("word " * 200 + "!") is None


def test_a_block_pasting_the_feedback_it_answers_runs_without_the_pasted_lines() -> None:
    """It drops the lines a block copies from the message before it when the block is not
    Python with them and is without them; a block that parses is left alone."""
    shown = ("Output of your code (turn 1 of 8):\nTraceback (your code):\n  line 2: x = hits[0]\n"
             "IndexError: grep found no lines\nnote: keep them with hits = grep('otter', ignore_case=True)")
    pasted = "# Output of your code (turn 1 of 8):\nTraceback (your code):\nIndexError: grep found no lines\nprint(grep('otter'))"
    assert readings.without_echo(pasted, shown) == "print(grep('otter'))"
    assert readings.without_echo("Traceback (your code):\nIndexError: grep found no lines", shown) == ""
    copied = "hits = grep('otter', ignore_case=True)\nprint(hits)"
    assert readings.without_echo(copied, shown) == copied  # Python as it is
    broken = "print(grep('otter')"
    assert readings.without_echo(broken, shown) == broken  # nothing pasted: its own error stands


def test_final_spelled_otherwise_in_code_is_final() -> None:
    """It writes Final(...)/final(...) calls as FINAL(...), leaving strings, attributes and a
    name the code defines itself alone."""
    assert readings.final_spelled("Final(36)") == "FINAL(36)"
    assert readings.final_spelled('s = "Final(3)"\nfinal(s)\nobj.final(2)') == 's = "Final(3)"\nFINAL(s)\nobj.final(2)'
    own = "def final(x):\n    return x\nfinal(3)"
    assert readings.final_spelled(own) == own
    assert readings.final_spelled('print("é"); Final("é")') == 'print("é"); FINAL("é")'
    assert readings.final_spelled("Final(") == "Final("  # not Python: left to the parser's message


def test_prose_that_is_still_looking_is_no_insisted_answer() -> None:
    """It does not take a repeated reply that says it will search again for an answer."""
    still = "The output does not show the answer. Let's try searching again."
    assert readings.insisted_answer(still, {still}) is None
    assert readings.insisted_answer("It is in Oslo.", {"It is in Oslo."}) == "It is in Oslo."


def test_an_answer_of_the_questions_words_is_an_echo_only_when_long() -> None:
    """It takes the question, or a long piece of it, as no answer; a short answer made of the
    question's words (a choice it offers) is one."""
    asked = "Which shelf holds the tin that is the twin of copper kettle?"
    assert readings.echoes_question("which shelf holds the tin that is the twin of copper kettle", asked)
    assert readings.echoes_question("shelf holds the tin that is the twin of copper kettle", asked)
    assert not readings.echoes_question("copper kettle", asked)
    assert readings.echoes_question("the twin of copper kettle", asked)
    assert not readings.echoes_question("New York City", "New York City or Boston?")
    assert not readings.echoes_question("TAG-1-1-2", "what is TAG-1-1-2?")  # a name of the question is one word
    assert not readings.echoes_question("the red one", "Is it the red one or the blue one?")
    assert readings.echoes_question("Copper kettle has a twin.", "In this log, copper kettle has a twin. Which is it?")
    assert not readings.echoes_question("of copper kettle", asked)  # under a third of the question
    assert not readings.echoes_question("the north hall", "Is it in the north hall or the south hall of the old mill?")
    assert not readings.echoes_question("shelf S-4 holds the tin", asked)  # a word of its own
    assert not readings.echoes_question("Bergen", "Is the fair in Oslo or in Bergen?")
    assert not readings.echoes_question("anything", "?!")


def test_digits_joined_by_dashes_are_a_value_when_the_output_showed_them() -> None:
    """It reads FINAL(2015-12) as the text 2015-12 when the output holds it whole, and not
    when it holds only a longer value, or nothing like it, or for a sum of other shapes."""
    assert readings.joined_digits("2015-12", "release=2015-12 | x") == "2015-12"
    assert readings.joined_digits(" 12/31/2020 ", "due 12/31/2020.") == "12/31/2020"
    assert readings.joined_digits("2015-12", "release=2015-12-01") is None
    assert readings.joined_digits("2015-12", "x2015-12") is None
    assert readings.joined_digits("2015-12", "nothing") is None
    assert readings.joined_digits("a-12", "a-12") is None and readings.joined_digits("12", "12") is None
    assert readings.final_argument("x = 1\nFINAL(2015-12)") == "2015-12"
    assert readings.final_argument("FINAL(a)\nFINAL(b)") is None and readings.final_argument("FINAL(") is None


def test_a_piece_of_the_question_is_two_or_more_of_its_words() -> None:
    """It calls ``loader of kiln 4`` a piece of "Which loader does kiln 4 have?" (case,
    punctuation and joining words aside), and not one word of it, nor words of the answer's own."""
    question = "Which loader does kiln 4 have?"
    assert readings.question_piece("loader of kiln 4", question) is True  # "of" joins, it is found nowhere
    assert readings.question_piece("Loader, kiln 4!", question) is True
    assert readings.question_piece("kiln", question) is False and readings.question_piece("the kiln", question) is False
    assert readings.question_piece("platform team", question) is False


def test_a_dashed_name_the_output_showed_written_as_code_is_the_answer() -> None:
    """``FINAL(kiln-room-door)`` fails as a subtraction of names; where the output printed that
    text whole, it is the answer; a first word alone, or text no output showed, is not."""
    printed = "line 7: {'name': 'kiln-room-door', 'note': 'the kiln room is hot'}"
    error = "NameError: name 'kiln' is not defined"
    assert readings.unbound_final("FINAL(kiln-room-door)", error, printed) == "kiln-room-door"
    assert readings.unbound_final("FINAL(kiln-room-wall)", error, printed) is None  # never shown
    assert readings.unbound_final("FINAL(kiln-room-door)", "NameError: name 'door' is not defined", printed) is None
    assert readings.unbound_final("FINAL(kiln)", error, "the kiln-room-door") is None  # shown only inside a longer name
    assert readings.unbound_final("FINAL(kiln - 3)", error, "kiln - 3") is None  # arithmetic, not a dashed name
