"""What the loop makes of a small model's habits with grep and FINAL, over a planted text: a
match used as the string it prints, grep's second argument, FINAL of bare words, an empty
grep hidden behind ``if hits:``, ``Final(...)`` spelled so, prose that says it is still
looking. The scripted model plays the small model's moves; no assist is on."""

from __future__ import annotations

from pathlib import Path

from rlm_runtime import Session
from rlm_runtime.llm import ScriptedClient

from .support import code, fast, of_type, read_trace

QUESTION = "What is the badge number of the person who leads project Belpex?"
#: A question that names nothing (no capitalised name).
UNNAMED = "What is the badge number of the person who leads the project?"
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
    """Filler, many other badges, and the project's lead and that person's badge far apart."""
    at = {10 + k * 12: f"Badge {10000 + k * 37} belongs to Person{k} Example." for k in range(badges)}
    return planted(tmp_path, "chain.txt", 600, {**at, 123: LEAD, 481: BADGE})


def ask(tmp_path: Path, replies: list[str], question: str = QUESTION, **limits: object) -> tuple[str | None, ScriptedClient, list]:
    client = ScriptedClient(replies)
    trace = tmp_path / "t.jsonl"
    with Session(client, contexts=[chain(tmp_path)], limits=fast(**limits), trace=trace) as s:
        result = s.ask(question)
    return result.answer, client, read_trace(trace)


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


def test_an_empty_grep_the_code_only_tested_is_reported(tmp_path: Path) -> None:
    """It tells a model whose code hid an empty grep behind ``if hits:`` why nothing matched
    (the worker's note), and adds no lines of its own."""
    _, client, events = ask(tmp_path, [code("hits = grep('Belpex leader')\nif hits:\n    print(hits)\nelse:\n    print('not found')"),
                                       code("FINAL('x')")])
    shown = client.prompts[1][-1]["content"]
    assert "not found" in shown and "a grep in this code found nothing (no lines match /Belpex leader/" in shown
    assert LEAD not in shown and of_type(events, "assist") == []


def test_prose_that_says_it_is_still_looking_is_no_answer(tmp_path: Path) -> None:
    """It does not take a prose reply said twice as the answer when it says it will search again."""
    path = planted(tmp_path, "ledger.txt", 200, {10: "According to the ledger, Pexwhit holds serial SN351939."}, SHORT_FILLER)
    still = "The output does not show the answer. Let's try searching again with fewer or different words."
    client = ScriptedClient([code("print(grep('Pexwhit'))"), still, still, code("FINAL('SN351939')")])
    with Session(client, contexts=[path], limits=fast()) as s:
        assert s.ask("Which serial number was assigned to Pexwhit?").answer == "SN351939"
    assert len(client.prompts) == 4
