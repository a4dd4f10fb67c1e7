"""Find, then follow: what the loop shows a model that stops one fact short of the answer,
or that greps the kind of value asked for instead of the name the question gives.

The facts are a chain spread over filler: a project's lead, then that person's badge. The
scripted model plays the small model's mistakes; the test checks what the runtime shows it."""

from __future__ import annotations

from pathlib import Path

from rlm_runtime import Session
from rlm_runtime.llm import ScriptedClient

from .support import FEEDBACK, code, fast, of_type, read_trace

QUESTION = "What is the badge number of the person who leads project Belpex?"
LEAD = "The lead of project Belpex is Junsen Monnovbel."
BADGE = "Badge 24472 belongs to Junsen Monnovbel."
FILLER = "Filler line {i}: the archive notes nothing of interest here."
SHORT_FILLER = "Filler line {i}: nothing here."


def planted(tmp_path: Path, name: str, n: int, at: dict[int, str], filler: str = FILLER) -> Path:
    """A text file of ``n`` filler lines (``filler`` formatted with the row index) with the
    rows of ``at`` put in place."""
    rows = [filler.format(i=i) for i in range(n)]
    for i, line in at.items():
        rows[i] = line
    path = tmp_path / name
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def chain(tmp_path: Path, badges: int = 40) -> Path:
    """Filler, many other badges (so that grepping 'badge' floods), the two facts far apart."""
    at = {10 + k * 12: f"Badge {10000 + k * 37} belongs to Person{k} Example." for k in range(badges)}
    return planted(tmp_path, "chain.txt", 600, {**at, 123: LEAD, 481: BADGE})


def ask(tmp_path: Path, replies: list[str], question: str = QUESTION, **limits: object) -> tuple[str | None, ScriptedClient, list]:
    client = ScriptedClient(replies)
    trace = tmp_path / "t.jsonl"
    with Session(client, contexts=[chain(tmp_path)], limits=fast(**limits), trace=trace) as s:
        result = s.ask(question)
    return result.answer, client, read_trace(trace)


def test_a_found_link_is_followed_for_the_model(tmp_path: Path) -> None:
    """It shows, after the line that ties the question's name to a new name, the lines about that new name."""
    answer, client, events = ask(tmp_path, [code("print(grep('Belpex'))"), code("FINAL('24472')")])
    assert answer == "24472"
    shown = client.prompts[1][-1]["content"]
    assert LEAD in shown and BADGE in shown and 'the text says about "Junsen Monnovbel"' in shown
    assert any("Junsen" in looked for e in of_type(events, "assist") for looked in e["lookups"])
    assert of_type(events, "tool_call") == []  # the runtime's lookups are not the model's tool calls


#: A question that names nothing (no capitalised name): the runtime cannot tell which line is a link.
UNNAMED = "What is the badge number of the person who leads the project?"


def test_an_answer_that_is_the_middle_of_a_chain_is_shown_the_lines_that_follow(tmp_path: Path) -> None:
    """It does not take the bridge name at once: it shows the lines about it not yet seen, and takes the next answer."""
    answer, client, events = ask(tmp_path, [code("print(grep('lead of project'))"), code("FINAL('Junsen Monnovbel')"),
                                            code("FINAL('24472')")], question=UNNAMED)
    assert answer == "24472"
    assert BADGE not in client.prompts[1][-1]["content"]
    shown = client.prompts[2][-1]["content"]
    assert BADGE in shown and UNNAMED in shown and 'FINAL("Junsen Monnovbel") again' in shown


def test_the_same_answer_given_again_is_taken(tmp_path: Path) -> None:
    """It asks once per answer: a model sure of the bridge name (the question asked for it) keeps it."""
    answer, client, _ = ask(tmp_path, [code("print(grep('lead of project'))"), code("FINAL('Junsen Monnovbel')"),
                                       code("FINAL('Junsen Monnovbel')")], question="Who leads the project?")
    assert answer == "Junsen Monnovbel" and len(client.prompts) == 3


def test_answers_taken_at_once(tmp_path: Path) -> None:
    """It takes at once a number, a name whose lines the model has all seen, a name the question
    gives, and a name too common to be a lead."""
    cases = [
        ([code("print(grep('Belpex'))"), code("FINAL('24472')")], QUESTION),
        ([code("print(grep('Junsen'))"), code("FINAL('Junsen Monnovbel')")], "Who has badge 24472?"),
        ([code("print(grep('Monnovbel'))"), code("FINAL('Junsen Monnovbel')")], "Is Junsen Monnovbel the lead of Belpex?"),
        ([code("print(grep('Belpex'))"), code("FINAL('Example')")], QUESTION),
    ]
    for replies, question in cases:
        answer, client, _ = ask(tmp_path, replies, question=question)
        assert answer is not None and len(client.prompts) == 2, (question, answer)


def test_a_follow_up_on_the_last_turn_is_not_asked(tmp_path: Path) -> None:
    """It takes the answer of the last turn as it is (no turn is left to follow it)."""
    answer, client, _ = ask(tmp_path, [code("print(grep('lead of project'))"), code("FINAL('Junsen Monnovbel')")],
                            question=UNNAMED, max_iterations=2)
    assert answer == "Junsen Monnovbel" and len(client.prompts) == 2


def test_a_grep_too_broad_to_read_is_shown_the_lines_of_the_name_the_question_gives(tmp_path: Path) -> None:
    """After a grep of the kind of value asked for (every badge line), it shows the lines that hold the
    question's name, once."""
    answer, client, _ = ask(tmp_path, [code("print(grep('badge', ignore_case=True))"),
                                       code("print(grep('Badge', max_matches=20))"),
                                       code("FINAL('gave up')")], question=QUESTION)
    first = client.prompts[1][-1]["content"]
    assert first.startswith(FEEDBACK) and '"Belpex"' in first and LEAD in first
    second = client.prompts[2][-1]["content"]
    assert LEAD not in second  # the same name is shown once per run


def test_a_broad_grep_that_already_names_the_question_name_gets_no_note(tmp_path: Path) -> None:
    """It adds nothing when the code searched for the question's name itself, or the question names nothing."""
    _, client, _ = ask(tmp_path, [code("print(grep('Belpex|Badge'))"), code("FINAL('x')")])
    assert "only these lines hold it" not in client.prompts[1][-1]["content"]
    _, client, _ = ask(tmp_path, [code("print(grep('badge', ignore_case=True))"), code("FINAL('x')")],
                       question="how many badges are listed?")
    assert "only these lines hold it" not in client.prompts[1][-1]["content"]


def test_a_grep_match_works_as_the_text_it_prints(tmp_path: Path) -> None:
    """It lets a model split, search and compare a match as a string, as small models do."""
    answer, _, _ = ask(tmp_path, [code(
        "hit = grep('Belpex')[0]\n"
        "number, text = hit.split(': ', 1)\n"
        "import re\n"
        "who = re.search(r'is (.+)\\.$', hit).group(1)\n"
        "FINAL(f'{number}|{text == hit.line}|{\"Belpex\" in hit}|{who}|{hit.line_no}')")])
    assert answer == "124|True|True|Junsen Monnovbel|124"


def test_a_grep_match_answers_to_the_names_small_models_give_its_fields(tmp_path: Path) -> None:
    """It takes ``hit.line_number`` and ``hit.lineno`` for the line number and ``hit.text`` for
    the line (results print as "line_number: line"), in the sandbox, and an attribute a match
    lacks gets an error naming the ones it has."""
    answer, _, _ = ask(tmp_path, [code(
        "hit = grep('Belpex')[0]\n"
        "print(context.lines(hit.line_number - 1, hit.lineno + 1))\n"
        "FINAL(f'{hit.line_number}|{hit.lineno}|{hit.text == hit.line}')")])
    assert answer == "124|124|True"
    _, _, events = ask(tmp_path, [code("print(grep('Belpex')[0].number)"), code("FINAL('x')")])
    error = next(o["error"] for e in of_type(events, "iteration") for o in e["outputs"] if o["error"])
    assert "no attribute 'number'" in error and ".line_no (its line number)" in error


def test_grep_takes_max_matches_second_and_searches_text_the_code_holds(tmp_path: Path) -> None:
    """It reads grep's second argument as the prompt writes it (max_matches), or as what to
    search: a string (its own line numbers) or an earlier result (the context's line numbers)."""
    answer, _, events = ask(tmp_path, [code(
        "a = len(grep('Badge', 3))\n"
        "b = grep('Belpex', grep('lead of project|Badge', max_matches=500))\n"
        "c = grep('bel', 'first line\\nBelpex is here\\nlast', ignore_case=True)\n"
        "d = grep('Badge', ['one', 'Badge two', 'Badge three'], max_matches=1)\n"
        "FINAL(f'{a}|{b[0].line_no}|{len(b)}|{c[0]}|{d[0]}|{d.count()}')")])
    assert answer == "3|124|1|2: Belpex is here|2: Badge two|2", events
    _, _, events = ask(tmp_path, [code("print(grep('x', {'a': 1}))"), code("FINAL('x')")])
    error = next(o["error"] for e in of_type(events, "iteration") for o in e["outputs"] if o["error"])
    assert "a context handle, a string, or a list of strings" in error and "not dict" in error


def test_a_final_of_bare_words_in_a_code_block_is_an_answer(tmp_path: Path) -> None:
    """It reads ``FINAL(Junsen Monnovbel)`` (not Python) as the answer instead of a syntax error to
    loop on, and follows it like any other."""
    answer, client, events = ask(tmp_path, [code("print(grep('lead of project'))"), code("FINAL(Junsen Monnovbel)"),
                                            code("FINAL(24472)")], question=UNNAMED)
    assert answer == "24472" and BADGE in client.prompts[2][-1]["content"]
    outputs = [o for e in of_type(events, "iteration") for o in e["outputs"]]
    assert not any(o["error"] for o in outputs)
    answer, _, _ = ask(tmp_path, [code("FINAL(badge 24472, see line 482)")])
    assert answer == "badge 24472, see line 482"


def test_an_empty_grep_the_code_only_tested_is_reported_with_its_lead(tmp_path: Path) -> None:
    """It tells a model whose code hid an empty grep behind ``if hits:`` why nothing matched, and
    shows the lines of the word the hint names."""
    _, client, _ = ask(tmp_path, [code("hits = grep('Belpex leader')\nif hits:\n    print(hits)\nelse:\n    print('not found')"),
                                  code("FINAL('x')")])
    shown = client.prompts[1][-1]["content"]
    assert "not found" in shown and "a grep in this code found nothing (no lines match /Belpex leader/" in shown
    assert LEAD in shown  # the runtime ran grep('Belpex', ignore_case=True), as the hint suggests


def test_a_chain_of_three_is_followed_two_links_and_no_further(tmp_path: Path) -> None:
    """It follows two links past the printed line (person -> manager -> office), not a third, and
    not from a line that ties no name of the question."""
    rows = {20: "Drafen Sulzel reports to Garmir Venven.", 140: "Gartal Dormontor is the manager of Garmir Venven.",
            260: "Gartal Dormontor works in the Sapporo office.", 270: "The Sapporo office was opened by Lina Ferro.",
            280: "Ola Nordmann reports to Kari Hansen."}
    path = planted(tmp_path, "people.txt", 300, rows, SHORT_FILLER)
    client = ScriptedClient([code("print(grep('Drafen|Ola'))"), code("FINAL('Sapporo')")])
    with Session(client, contexts=[path], limits=fast()) as s:
        result = s.ask("Drafen Sulzel reports to someone, who reports to someone else. Where is that second person based?")
    assert result.answer == "Sapporo"
    shown = client.prompts[1][-1]["content"]
    assert rows[140] in shown and rows[260] in shown
    assert "Lina Ferro" not in shown  # a third link
    assert 'about "Kari Hansen"' not in shown  # printed, but not tied to a name of the question


def test_a_broad_grep_that_printed_the_question_names_line_is_shown_its_chain(tmp_path: Path) -> None:
    """After a grep of every row of a kind (every "reports to" line) that printed the question's
    name among them, it follows the chain from that name's row, as from a narrow grep."""
    rows = {5 + k * 9: f"Person{k} Example reports to Boss{k} Example." for k in range(30)}
    question = "Drator Tisyar reports to someone, who reports to someone else. Where is that second person based?"
    # The second link far from the first (not printed), then near it (printed by the grep too).
    for second in (250, 151):
        rows.update({41: "Drator Tisyar reports to Jungar Torfendra.", second: "Jungar Torfendra reports to Vela Maron.",
                     280: "Vela Maron is based in Bergen."})
        path = planted(tmp_path, "people.txt", 300, rows, SHORT_FILLER)
        client = ScriptedClient([code("print(grep('reports', max_matches=20))"), code("FINAL('Bergen')")])
        with Session(client, contexts=[path], limits=fast()) as s:
            assert s.ask(question).answer == "Bergen"
        shown = client.prompts[1][-1]["content"]
        assert rows[second] in shown and rows[280] in shown, second
        assert 'about "Boss' not in shown  # rows the grep printed that tie no name of the question
        del rows[second]


def test_a_link_printed_only_in_a_long_listing_is_shown_and_its_name_as_an_answer_followed(tmp_path: Path) -> None:
    """It shows the next link's line even though a grep too broad to read printed it (every
    badge line), and questions once an answer that is the middle of the chain it followed."""
    answer, client, _ = ask(tmp_path, [code("print(grep('Badge', max_matches=50))"), code("FINAL('Junsen Monnovbel')"),
                                       code("FINAL('24472')")])
    assert answer == "24472"
    first = client.prompts[1][-1]["content"]
    assert first.count(BADGE) == 2 and first.index(LEAD) < first.rindex(BADGE)  # printed, then shown as the link
    second = client.prompts[2][-1]["content"]
    assert 'Before "Junsen Monnovbel" is taken' in second and BADGE in second


def test_a_cell_that_printed_nothing_is_shown_the_question_names_lines(tmp_path: Path) -> None:
    """It shows the question's name's lines and their chain after a cell that printed nothing,
    though its code names it (a loop testing each badge line for the project's name)."""
    loop = "for hit in grep('Badge'):\n    if 'Belpex' in hit:\n        print(hit)"
    answer, client, _ = ask(tmp_path, [code(loop), code("FINAL('24472')")])
    assert answer == "24472"
    shown = client.prompts[1][-1]["content"]
    assert LEAD in shown and BADGE in shown


def test_the_last_turn_after_a_chain_is_one_short_call_with_its_lines(tmp_path: Path) -> None:
    """It asks for the answer, after turns that repeated themselves, in one call holding only
    the lines the runtime followed the chain through (the last link last) and the question;
    with no chain, the conversation's forced turn repeats the question."""
    grep_belpex = code("print(grep('Belpex'))")
    answer, client, events = ask(tmp_path, [grep_belpex, grep_belpex, grep_belpex, "Answer: 24472."])
    assert answer == "24472"
    last = client.prompts[-1]
    assert len(last) == 1 and last[0]["role"] == "user"
    assert last[0]["content"].index(LEAD) < last[0]["content"].index(BADGE) < last[0]["content"].index("Question: " + QUESTION)
    assert of_type(events, "iteration")[-1]["from"] == "the chain's lines"
    looking = code("print('looking')")
    answer, client, _ = ask(tmp_path, [looking, looking, looking, "FINAL(x)"], question=UNNAMED)
    forced = client.prompts[-1][-1]["content"]
    assert answer == "x" and forced.startswith("You have no turns left.") and forced.endswith("The question: " + UNNAMED)
    assert "followed" not in forced


def test_a_middle_link_given_again_is_settled_by_one_short_call_with_the_chain(tmp_path: Path) -> None:
    """It answers, when the model gives again a name in the middle of the chain it was shown
    the lines of, with one short call on the chain's lines and the question; an answer past
    the chain is taken as it is."""
    replies = [code("print(grep('Belpex'))"), code("FINAL('Junsen Monnovbel')"), code("FINAL('Junsen Monnovbel')"), "24472"]
    answer, client, _ = ask(tmp_path, replies)
    assert answer == "24472" and len(client.prompts) == 4
    assert 'Before "Junsen Monnovbel" is taken' in client.prompts[2][-1]["content"]
    assert len(client.prompts[3]) == 1 and BADGE in client.prompts[3][0]["content"]
    answer, client, _ = ask(tmp_path, [code("print(grep('Belpex'))"), code("FINAL('24472')")])
    assert answer == "24472" and len(client.prompts) == 2


def test_the_end_of_the_chain_as_the_answer_is_taken_at_once(tmp_path: Path) -> None:
    """It takes at once a name at the end of the chain it followed (its only line is the one
    that tied it in), and questions the middle one (its lines go further)."""
    rows = {96: "Package Venmirven depends on the library Garzelmon.", 444: "Maintainer of Garzelmon: Loqua Junvello."}
    path = planted(tmp_path, "deps.txt", 600, rows, SHORT_FILLER)
    question = "Package Venmirven has a dependency. Who is that dependency's maintainer?"
    for answer, prompts in (("Loqua Junvello", 2), ("Garzelmon", 3)):
        client = ScriptedClient([code("print(grep('Venmirven'))"), code(f"FINAL({answer!r})"), code("FINAL('Loqua Junvello')")])
        with Session(client, contexts=[path], limits=fast()) as s:
            assert s.ask(question).answer == "Loqua Junvello"
        assert len(client.prompts) == prompts, answer


def test_an_empty_grep_with_no_hint_is_shown_the_question_names_lines(tmp_path: Path) -> None:
    """It shows, after a grep that found nothing and names no word to try (an empty tally),
    the lines of the name the question gives and their chain, before anything else."""
    answer, client, _ = ask(tmp_path, [code("print(grep(r'lead project (\\w+)').tally())"), code("FINAL('24472')")])
    assert answer == "24472"
    shown = client.prompts[1][-1]["content"]
    assert shown.index(LEAD) < shown.index(BADGE)


def test_a_last_turn_from_the_chain_with_no_answer_falls_back_to_the_conversation(tmp_path: Path) -> None:
    """It asks the conversation for the answer, with the chain's lines, when the short call
    gives none (an empty reply)."""
    grep_belpex = code("print(grep('Belpex'))")
    answer, client, _ = ask(tmp_path, [grep_belpex, grep_belpex, grep_belpex, "", "FINAL(24472)"])
    assert answer == "24472"
    forced = client.prompts[-1][-1]["content"]
    assert forced.startswith("You have no turns left.") and BADGE in forced and forced.endswith("The question: " + QUESTION)


def test_a_count_no_output_showed_is_asked_for_once(tmp_path: Path) -> None:
    """It asks once for a count to be made in code when the answer's number is in no output
    (a line number does not count), and takes the next answer."""
    answer, client, _ = ask(tmp_path, [code("print(grep('Badge', max_matches=3))"), code("FINAL('There are 11 badges')"),
                                       code("print(grep('Badge').count())"), code("FINAL(41)")],
                            question="How many badges are there?")
    assert answer == "41"
    challenge = client.prompts[2][-1]["content"]
    assert challenge.startswith("Before 11 is taken as the answer") and "How many badges are there?" in challenge
    # a number the output showed is taken at once; so is a second unbacked one (asked once only)
    answer, client, _ = ask(tmp_path, [code("print(grep('Badge').count())"), code("FINAL(41)")], question="How many badges?")
    assert answer == "41" and len(client.prompts) == 2
    answer, client, _ = ask(tmp_path, [code("FINAL(7)"), code("FINAL(8)")], question="What is the number of badges?")
    assert answer == "8" and len(client.prompts) == 2


def test_an_answer_quoting_a_value_the_text_never_holds_is_questioned_once(tmp_path: Path) -> None:
    """It asks once for the line behind an answer whose code or number occurs nowhere in the text."""
    answer, client, _ = ask(tmp_path, [code("FINAL('The badge is 1234')"), code("print(grep('Junsen'))"), code("FINAL('24472')")])
    assert answer == "24472"
    challenge = client.prompts[1][-1]["content"]
    assert challenge.startswith('Before this answer is taken: "1234" does not occur anywhere in the text') and QUESTION in challenge
    answer, client, _ = ask(tmp_path, [code("FINAL('99999')"), code("FINAL('99998')")])
    assert answer == "99998" and len(client.prompts) == 2  # asked once only
    answer, client, _ = ask(tmp_path, [code("FINAL(123000 + 456)")], question="How many badges are listed?")
    assert answer == "123456"  # a computed count need not occur in the text


def test_the_lines_shown_after_an_empty_grep_are_followed_too(tmp_path: Path) -> None:
    """It follows the chain from the lines the runtime ran for an empty grep, not only from printed ones."""
    _, client, _ = ask(tmp_path, [code("print(grep('project Belpex lead'))"), code("FINAL('x')")])
    shown = client.prompts[1][-1]["content"]
    assert LEAD in shown and BADGE in shown


def test_a_cell_that_looked_elsewhere_is_shown_the_question_names_lines_and_their_chain(tmp_path: Path) -> None:
    """It shows the lines of the question's name after a cell that neither searched nor printed it,
    once, and follows the chain from them."""
    _, client, _ = ask(tmp_path, [code("print(len(context.lines(1, 5)))"), code("print(1)"), code("FINAL('24472')")])
    first = client.prompts[1][-1]["content"]
    assert 'the question names "Belpex"' in first and LEAD in first and BADGE in first
    assert 'the question names "Belpex"' not in client.prompts[2][-1]["content"]


def test_a_name_the_text_never_holds_is_questioned(tmp_path: Path) -> None:
    """It questions once an answer naming someone the text never names; a plain word is taken."""
    answer, client, _ = ask(tmp_path, [code("print(grep('Belpex'))"), code("FINAL('The lead is Lotal Tordor.')"),
                                       code("FINAL('24472')")])
    assert answer == "24472" and '"Lotal Tordor" does not occur anywhere in the text' in client.prompts[2][-1]["content"]
    answer, client, _ = ask(tmp_path, [code("FINAL('bird')")], question="What kind of thing is it?")
    assert answer == "bird" and len(client.prompts) == 1  # a plain word may be a label the model chose


def test_a_question_name_with_a_leading_noun_is_found_by_its_last_word(tmp_path: Path) -> None:
    """It looks up "Programme Belpex" as "Belpex" when the text never writes the whole phrase, and follows on."""
    _, client, _ = ask(tmp_path, [code("print(1)"), code("FINAL('24472')")],
                       question="Programme Belpex has a lead. What is that person's badge number?")
    shown = client.prompts[1][-1]["content"]
    assert 'the question names "Belpex"' in shown and LEAD in shown and BADGE in shown


def test_a_cell_that_failed_before_searching_is_shown_the_question_names_lines(tmp_path: Path) -> None:
    """It shows the lines of the question's name after a cell that named it in code but failed
    before any search ran (a small model's first cell often does), and takes the next answer."""
    failing = "first = next(l for l in context.lines(None, None, None) if 'Belpex' in l)\nprint(first)"
    answer, client, _ = ask(tmp_path, [code(failing), code("FINAL('24472')")])
    shown = client.prompts[1][-1]["content"]
    assert answer == "24472" and "TypeError" in shown
    assert 'the question names "Belpex"' in shown and LEAD in shown and BADGE in shown


def _serials(tmp_path: Path) -> Path:
    return planted(tmp_path, "serials.txt", 300, {40: "Bribelpim was assigned the serial number SN430340 last spring.",
                                                   200: "Caiyar was assigned the serial number SN985077 last spring."})


def test_an_answer_read_on_a_line_about_another_name_is_shown_the_question_names_lines(tmp_path: Path) -> None:
    """It questions once an answer the model read on a line that names someone else than the
    question asks about, showing that name's lines; the same answer given again is taken."""
    question = "The text mentions the serial number of Caiyar. What is it?"
    for replies, expected in (([code("print(grep('serial number'))"), code("FINAL('SN430340')"), code("FINAL('SN985077')")], "SN985077"),
                              ([code("print(grep('serial number'))"), code("FINAL('SN430340')"), code("FINAL('SN430340')")], "SN430340")):
        client = ScriptedClient(replies)
        with Session(client, contexts=[_serials(tmp_path)], limits=fast()) as s:
            assert s.ask(question).answer == expected
        note = client.prompts[2][-1]["content"]
        assert '"SN430340" comes from a line that does not mention "Caiyar"' in note and "SN985077 last spring" in note
    # read on the line of the question's name, or on a line tied to it: taken at once
    for answer in ("SN985077", "Caiyar was assigned SN985077"):
        client = ScriptedClient([code("print(grep('serial number'))"), code(f"FINAL({answer!r})")])
        with Session(client, contexts=[_serials(tmp_path)], limits=fast()) as s:
            assert s.ask(question).answer == answer and len(client.prompts) == 2


def test_an_answer_read_on_another_projects_line_is_shown_the_chain_from_the_question(tmp_path: Path) -> None:
    """It shows, with the question's name's lines, the lines they lead to (the badge of the
    project's lead), whether the chain was followed before the answer or only now."""
    rows = {10: "The lead of project Garsul is Novven Suldorbel.", 30: "The lead of project Rustrho is Garvel Garvenbri.",
            200: "Badge 11111 belongs to Novven Suldorbel.", 123: LEAD, 481: BADGE}
    path = planted(tmp_path, "leads.txt", 600, rows, SHORT_FILLER)
    for first in ("print(grep('lead of project'))", "print(grep('lead of project', max_matches=1))"):
        client = ScriptedClient([code(first), code("FINAL('Novven Suldorbel')"), code("FINAL('24472')")])
        with Session(client, contexts=[path], limits=fast()) as s:
            assert s.ask(QUESTION).answer == "24472"
        note = client.prompts[2][-1]["content"]
        assert '"Novven Suldorbel" comes from a line that does not mention "Belpex"' in note, first
        assert LEAD in note and note.index(LEAD) < note.index(BADGE) < note.index("The question:"), first


def test_an_answer_on_the_second_link_of_a_chain_the_model_followed_is_taken(tmp_path: Path) -> None:
    """It takes at once a value read on a line about the name the question's line led to."""
    answer, client, _ = ask(tmp_path, [code("print(grep('Belpex'))\nprint(grep('Junsen Monnovbel'))"), code("FINAL('24472')")])
    assert answer == "24472" and len(client.prompts) == 2


def test_a_most_common_kind_named_without_counting_is_asked_for_a_tally_once(tmp_path: Path) -> None:
    """It asks once for a count of each kind before taking a "most common" answer no output
    counted, and takes the answer read from a printed tally."""
    # too few records for the runtime to count them itself
    path = planted(tmp_path, "records.txt", 400,
                   {5 + k * 6: f"Record {1000 + k} | colour={'red' if k % 3 else 'blue'} | seen near the gate" for k in range(15)})
    client = ScriptedClient([code("print(grep('colour', max_matches=3))"), code("FINAL('blue')"),
                             code("print(grep(r'colour=(\\w+)').tally())"), code("FINAL('red')")])
    with Session(client, contexts=[path], limits=fast()) as s:
        assert s.ask("Which colour is the most common among the records?").answer == "red"
    assert "records of one form" not in client.prompts[1][-1]["content"]
    assert 'Before "blue" is taken as the answer: no output so far shows how many' in client.prompts[2][-1]["content"]
    assert "{'red': 10, 'blue': 5}" in client.prompts[3][-1]["content"]


def _records(tmp_path: Path) -> Path:
    labels = ("heron", "otter", "heron", "marten", "heron", "otter")
    at = {3 + k * 7: f"[sighting-{4000 + k}] colour: {labels[k % 6]}; note: words {k} here." for k in range(120)}
    return planted(tmp_path, "sightings.txt", 900, at, "Filler line {i}: the archive notes nothing of interest, colour aside.")


def test_records_of_one_form_are_counted_for_a_counting_question_once(tmp_path: Path) -> None:
    """It finds, for a question that counts, the records among the lines of the question's
    words, tallies their label field over the whole text and shows it once; other questions
    get no tally."""
    client = ScriptedClient([code("print(1)"), code("print(2)"), code("FINAL('otter')"), code("FINAL('heron')")])
    with Session(client, contexts=[_records(tmp_path)], limits=fast()) as s:
        assert s.ask("Which label occurs most often among the sightings?").answer == "heron"
    assert ('Before "otter" is taken as the answer: by the records the runtime counted above, the answer is "heron" '
            "(60 records, the most)") in client.prompts[3][-1]["content"]
    note = client.prompts[1][-1]["content"]
    assert "note: 120 lines of the text are records of one form, such as:\n4: [sighting-4000] colour: heron; note:" in note
    assert "{'heron': 60, 'otter': 40, 'marten': 20}" in note and "records of one form" not in client.prompts[2][-1]["content"]
    client = ScriptedClient([code("print(1)"), code("FINAL('x')")])
    with Session(client, contexts=[_records(tmp_path)], limits=fast()) as s:
        s.ask("What is the colour of sighting 4007?")
    assert "records of one form" not in client.prompts[1][-1]["content"]


def test_an_empty_grep_is_shown_how_often_the_questions_words_occur_once(tmp_path: Path) -> None:
    """It answers an empty grep with no hint to run by counting the lines of each word the
    question is about (its singular, any case) and showing a few lines of the rarest, once."""
    path = planted(tmp_path, "log.txt", 400,
                   {7 + k * 11: f"Sighting #{500 + k} [{'heron' if k % 4 else 'otter'}]: near the old mill." for k in range(30)})
    client = ScriptedClient([code("print(grep('species'))"), code("print(grep('genus'))"), code("FINAL('heron')")])
    with Session(client, contexts=[path], limits=fast()) as s:
        s.ask("Which species is the most common among the sightings?")
    note = client.prompts[1][-1]["content"]
    assert "The question's own words in the text (lines that hold each, ignoring case): 'specie' 0, 'sighting' 30." in note
    assert 'Lines with "sighting":\n8: Sighting #500 [otter]: near the old mill.' in note
    assert "The question's own words" not in client.prompts[2][-1]["content"]


def test_a_word_opening_every_printed_row_is_not_followed_as_a_name(tmp_path: Path) -> None:
    """It does not look up the word every printed row opens with ("Remember this: ...") as the
    next link of a chain, and a Final(...) spelled so in code is the answer."""
    path = planted(tmp_path, "codes.txt", 200, {10: "Remember this: Yartor uses EV-8104 as its access code.",
                                                 50: "Remember this: Novzel uses GH-6589 as its access code.",
                                                 90: "Remember to water the plants."}, SHORT_FILLER)
    client = ScriptedClient([code("print(grep('access code'))"), code("Final('GH-6589')")])
    with Session(client, contexts=[path], limits=fast()) as s:
        assert s.ask("What is the access code of Novzel?").answer == "GH-6589"
    assert "water the plants" not in client.prompts[1][-1]["content"]


def test_a_capitalised_word_the_text_also_writes_in_lower_case_is_not_followed(tmp_path: Path) -> None:
    """It does not take "According" (which the text also writes "according") for the next
    link of a chain, and still follows a name; prose saying it will search again is no answer."""
    sorted_line = "Items are sorted according to the key."
    path = planted(tmp_path, "ledger.txt", 200, {5: sorted_line, 150: sorted_line,
                                                  10: "According to the ledger, Pexwhit holds serial SN351939.",
                                                  60: "According to the log, Vormel was seen."}, SHORT_FILLER)
    still = "The output does not show the answer. Let's try searching again with fewer or different words."
    client = ScriptedClient([code("print(grep('Pexwhit'))"), still, still, code("FINAL('SN351939')")])
    with Session(client, contexts=[path], limits=fast()) as s:
        assert s.ask("Which serial number was assigned to Pexwhit?").answer == "SN351939"
    assert "Vormel" not in client.prompts[1][-1]["content"]


def test_the_records_tally_leaves_the_models_names_alone(tmp_path: Path) -> None:
    """It counts the records without binding any name in the model's namespace."""
    client = ScriptedClient([code("r = 'heron (mine)'\nprint(r)"), code("FINAL(r)")])
    with Session(client, contexts=[_records(tmp_path)], limits=fast()) as s:
        assert s.ask("Which label occurs most often among the sightings?").answer == "heron (mine)"
    assert "records of one form" in client.prompts[1][-1]["content"]
