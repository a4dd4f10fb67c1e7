"""The ``records_count`` assist: an answer to a question that counts, which the records
contradict, is questioned once with the code that counts (records holding a value in one
field, or records one record holds); a count given again is taken.

The texts are a boatyard's register (``Key: value`` stanzas) and a ferry timetable (routes at
the margin, their stops indented under them). No eval suite writes these shapes or words."""

from __future__ import annotations

import uuid
from pathlib import Path

from .support import ask_once, code, of_type

HARBOURS = ("Skerry", "Loch Ard", "Ness")


def register(tmp_path: Path) -> Path:
    """Forty-five boats; the harbour Skerry holds 15 of them."""
    stanzas = [f"Boat: yawl-{i}\nHarbour: {HARBOURS[i % 3]}\nHull: {('oak', 'larch')[i % 2]}" for i in range(45)]
    path = tmp_path / f"register-{uuid.uuid4().hex[:6]}.txt"
    path.write_text("\n\n".join(stanzas) + "\n", encoding="utf-8")
    return path


def timetable(tmp_path: Path) -> Path:
    """Six routes, each a line at the margin with its stops indented under it; route r3 has 7 stops."""
    lines = []
    for r in range(6):
        lines.append(f"route r{r} | {('dawn', 'noon', 'dusk')[r % 3]}")
        lines += [f"\tstop s{r}-{k} | {('pier', 'slip', 'quay')[k % 3]}" for k in range(4 + r)]
    path = tmp_path / f"timetable-{uuid.uuid4().hex[:6]}.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


READ = "recs = records()\n"


def test_a_count_the_records_contradict_is_questioned_once_with_the_code(tmp_path: Path) -> None:
    """A wrong count of the boats in one harbour is questioned once, with the code that counts
    them and its figure; the right count after it is taken; the trace names the assist."""
    answer, client, events = ask_once(tmp_path, [code(READ + "FINAL('3')"), code("FINAL('15')")],
                                      "How many boats have the harbour 'Skerry'?", register(tmp_path), "records_count")
    assert answer == "15"
    note = client.prompts[1][-1]["content"]
    assert note.rstrip().endswith("Next, run print(records().count('harbour', 'Skerry')) : your answer '3' is not the count "
                                  "of the records the question asks about. That code counts them (15).")
    assert [(e["name"], e["outcome"]) for e in of_type(events, "answer_check")] == [("records_count", "questioned")]


def test_the_right_count_or_one_given_again_is_taken(tmp_path: Path) -> None:
    """It takes the right count at once (in a sentence too), and a wrong one given a second time."""
    for given in ("15", "There are 15 boats in Skerry."):
        answer, client, _ = ask_once(tmp_path, [code(READ + f"FINAL({given!r})")], "How many boats have the harbour 'Skerry'?",
                                     register(tmp_path), "records_count")
        assert answer == given and len(client.prompts) == 1
    answer, client, _ = ask_once(tmp_path, [code("FINAL('3')"), code("FINAL('4')")], "How many boats have the harbour 'Skerry'?",
                                 register(tmp_path), "records_count")
    assert answer == "4" and len(client.prompts) == 2


def test_a_value_in_the_field_the_question_names_is_the_one_counted(tmp_path: Path) -> None:
    """A question whose other words are values too ("oak" is a hull) counts the value held in
    the field it names (the harbour Skerry); one naming two values of no named field asks no
    count the assist can check."""
    answer, client, _ = ask_once(tmp_path, [code(READ + "FINAL('3')"), code("FINAL('15')")],
                                 "In the oak boats' register, how many boats have the harbour 'Skerry'?",
                                 register(tmp_path), "records_count")
    assert answer == "15"
    assert "print(records().count('harbour', 'Skerry'))" in client.prompts[1][-1]["content"]
    answer, client, _ = ask_once(tmp_path, [code(READ + "FINAL('3')")], "How many boats are oak or Skerry?",
                                 register(tmp_path), "records_count")
    assert answer == "3" and len(client.prompts) == 1


def test_the_records_one_record_holds_are_counted(tmp_path: Path) -> None:
    """A count of the stops a route holds is checked against that route's children, even when
    the model's code never read the records (the check parses a small text itself)."""
    answer, client, _ = ask_once(tmp_path, [code("print(grep('r3'))\nFINAL('6')"), code("FINAL('7')")],
                                 "How many stops does the route 'r3' hold?", timetable(tmp_path), "records_count")
    assert answer == "7"
    assert "print(len(records().children_of('r3')))" in client.prompts[1][-1]["content"]


def test_no_count_is_checked_where_none_is_asked_or_the_assist_is_off(tmp_path: Path) -> None:
    """It questions no answer of a question that does not count, nor any with the assists off."""
    answer, client, _ = ask_once(tmp_path, [code("FINAL('3')")], "Which harbour holds yawl-4?", register(tmp_path), "records_count")
    assert answer == "3" and len(client.prompts) == 1
    answer, client, events = ask_once(tmp_path, [code("FINAL('3')")], "How many boats have the harbour 'Skerry'?",
                                      register(tmp_path), "none")
    assert answer == "3" and len(client.prompts) == 1 and of_type(events, "answer_check") == []
