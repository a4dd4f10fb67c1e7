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


def test_the_names_a_question_gives() -> None:
    """It finds runs of capitalised words, less the question words that open a sentence."""
    assert harness.question_names("What is the badge number of the person who leads project Belpex?") == ["Belpex"]
    assert harness.question_names("Drafen Sulzel reports to someone. Where is that person based?") == ["Drafen Sulzel"]
    assert harness.question_names("The Whitlo account has a serial number. What is it?") == ["Whitlo"]
    assert harness.question_names("In which year did Ada King and Charles Babbage meet?") == ["Charles Babbage", "Ada King"]
    assert harness.question_names("how many tickets are about billing?") == []
    assert harness.question_names("Where does the manager of Venbel Mirsenpex's manager work?") == ["Venbel Mirsenpex"]
    assert harness.question_names("What is Ada King\u2019s badge and James' office?") == ["Ada King", "James"]
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


def test_unlinked_answer_is_a_value_read_only_on_lines_about_another_name() -> None:
    """It names the part of an answer that printed rows hold only on lines about someone else,
    and nothing for a value on the question's line, one a line ties to it, or a value not shown."""
    shown = ("4: Bribelpim was assigned SN430340.\n9: Caiyar was assigned SN985077.\n12: Caiyar reports to Mira Tov.\n"
             "15: Mira Tov has code K-2291.")
    question = "What is the serial number of Caiyar?"
    assert harness.unlinked_answer("SN430340", question, shown) == "SN430340"
    assert harness.unlinked_answer("It is SN985077", question, shown) is None
    assert harness.unlinked_answer("K-2291", question, shown) is None  # Caiyar -> Mira Tov -> the code
    assert harness.unlinked_answer("SN111111", question, shown) is None  # not shown: another check's matter
    assert harness.unlinked_answer("SN430340", "What is the serial number?", shown) is None  # no name to tie to
    assert harness.unlinked_answer("SN430340", question, shown, linked=["bribelpim"]) is None
    assert harness.unlinked_answer("SN430340", question, shown, written="FINAL(codes[0])") is None  # computed
    assert harness.unlinked_answer("SN430340", question, shown, written='FINAL("SN430340")') == "SN430340"


def test_untallied_answer_is_a_kind_typed_without_a_count_shown() -> None:
    """It flags a "most common" answer the model typed when no output showed that kind with a
    count, and not one an output counted, one its code computed, or another kind of question."""
    question = "Among all tickets, which category appears the most times?"
    typed = 'FINAL("hardware")'
    assert harness.is_tally_question(question) and harness.is_tally_question("Which colour is least common?")
    assert not harness.is_tally_question("How many tickets?") and not harness.is_tally_question("Which is the most expensive?")
    assert harness.untallied_answer("hardware", question, "12: Record 3421 | category=hardware | x", typed)
    assert harness.untallied_answer("category", question, "", 'FINAL("category")')  # the question's own word
    assert not harness.untallied_answer("hardware", question, "{'hardware': 40, 'billing': 21}", typed)
    assert not harness.untallied_answer("hardware", question, "hardware 40\nbilling 21", typed)
    assert not harness.untallied_answer("hardware", question, "", "FINAL(top)")  # computed in code
    assert not harness.untallied_answer("hardware", "What is the category of ticket 3421?", "", typed)


def test_question_words_are_the_words_it_is_about_in_a_prefix_form() -> None:
    """It keeps the content words of four letters or more, singular by a dropped final s,
    lower case, once each, and none of the words that shape a question."""
    assert harness.question_words("What is the most common species of the sightings?") == ["specie", "sighting"]
    assert harness.question_words("How many Tickets have the status open? How many tickets?") == ["ticket", "status", "open"]
    assert harness.question_words("Which one appears most often?") == []


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


def test_record_pattern_captures_the_label_field_of_records_of_one_form() -> None:
    """It finds the label field of records among other lines, whatever the form, and nothing
    where no field has few kinds (free text, one kind only, too few records)."""
    import re

    labels = ["red", "blue", "red", "green", "red", "blue"] * 3
    forms = {"Item {i} | colour={c} | free {i} text": "red", "Ticket {i} was filed under {c} (free {i} words)": "red",
             "[entry-{i}] colour: {c}; note: free {i}.": "red", "{i},{c},free text {i}": "red"}
    for form in forms:
        rows = [form.format(i=100 + k, c=c) for k, c in enumerate(labels)] + ["Prose line about colour and more."] * 3
        pattern = harness.record_pattern(rows)
        assert pattern is not None, form
        got = [m.group(1) for r in rows if (m := re.search(pattern, r))]
        assert got == labels, form
    free = [f"Item {k} | the text {k * 7} runs on with word{k}" for k in range(18)]
    assert harness.record_pattern(free) is None
    assert harness.record_pattern([f"Item {k} | colour=red | x" for k in range(18)]) is None
    assert harness.record_pattern([f"Item {k} | colour={c} | x" for k, c in enumerate(labels[:3])]) is None


def test_counts_disagree_names_what_the_tally_gives_when_the_answer_differs() -> None:
    """It gives the most (or least) common kind, or the count of the kind a "how many"
    question names, when the answer says otherwise; nothing when it agrees or cannot tell."""
    counts = {"mixed": 911, "negative": 610, "positive": 522}
    most = "What is the most common sentiment of the reviews?"
    assert harness.counts_disagree("negative", most, counts) == ("mixed", "911 records, the most")
    assert harness.counts_disagree("It is Mixed.", most, counts) is None
    assert harness.counts_disagree("mixed", "Which sentiment is least common?", counts) == ("positive", "522 records, the fewest")
    assert harness.counts_disagree("600", "How many reviews are labelled negative?", counts) == ("610", "the records of negative")
    assert harness.counts_disagree("There are 610.", "How many reviews are labelled negative?", counts) is None
    assert harness.counts_disagree("5", "How many reviews are there?", counts) is None  # names no kind
    assert harness.counts_disagree("x", "What is the colour of review 12?", counts) is None


def test_final_spelled_otherwise_in_code_is_final() -> None:
    """It writes Final(...)/final(...) calls as FINAL(...), leaving strings, attributes and a
    name the code defines itself alone."""
    assert harness.final_spelled("Final(36)") == "FINAL(36)"
    assert harness.final_spelled('s = "Final(3)"\nfinal(s)\nobj.final(2)') == 's = "Final(3)"\nFINAL(s)\nobj.final(2)'
    own = "def final(x):\n    return x\nfinal(3)"
    assert harness.final_spelled(own) == own
    assert harness.final_spelled('print("é"); Final("é")') == 'print("é"); FINAL("é")'
    assert harness.final_spelled("Final(") == "Final("  # not Python: left to the parser's message


def test_row_openers_are_words_that_start_several_rows() -> None:
    """It names the capitalised word that opens two or more rows, not a name that opens one."""
    rows = ["Remember this: Novzel uses GH-6589.", "Remember this: Yartor uses EV-8104.", "Junsen Monnovbel leads X."]
    assert harness.row_openers(rows) == {"Remember"}
    assert harness.row_openers(rows[2:]) == set()


def test_prose_that_is_still_looking_is_no_insisted_answer() -> None:
    """It does not take a repeated reply that says it will search again for an answer."""
    still = "The output does not show the answer. Let's try searching again."
    assert harness.insisted_answer(still, {still}) is None
    assert harness.insisted_answer("It is in Oslo.", {"It is in Oslo."}) == "It is in Oslo."


def test_a_name_is_found_as_whole_words() -> None:
    """It finds a name as whole words, ignoring case, not inside a longer name; an edge that
    is not an ASCII letter or digit takes no word boundary (RE2's is ASCII only)."""
    import re2

    rows = ["Toryar cannot be installed without Briqua.", "Fenrho Toryarsen maintains Lux.", "ask toryar's team", "Zoë Ng: C++ lead"]
    assert [harness.names_in(r, ["Toryar"]) for r in rows] == [True, False, True, False]
    assert harness.names_in(rows[3], ["zoë ng"]) and harness.names_in(rows[3], ["C++"])
    for name in ("Toryar", "Zoë", "C++", "GH-6589"):
        assert re2.compile(harness.name_pattern(name)).search(f"x {name} y"), name


def test_a_short_answer_is_read_from_a_reply_of_a_few_words() -> None:
    """It reads the answer of a reply asked for a fact in a few words: a FINAL, else the first
    line less its label, quotes and full stop; nothing from an empty or long reply."""
    for reply, expected in (("Perth", "Perth"), ("Answer: Perth.", "Perth"), ('The answer is "Bergen".', "Bergen"),
                            ('FINAL("Oslo")', "Oslo"), ("```\nPerth\n```", "Perth"), ("\n\n  Sapporo\nbecause...", "Sapporo"),
                            ("", None), ("word " * 100, None)):
        assert harness.short_answer(reply) == expected, reply
