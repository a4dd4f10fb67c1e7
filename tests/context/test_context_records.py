"""records(): the structure of a text as data, for every common shape, in and out of the sandbox.

The fixtures are shapes and wordings of their own (a library's loans, a bug tracker, a
recipe box, a weather log), not the evaluation suites' templates.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlm_runtime.context import open_context
from rlm_runtime.context.records import MAX_PARSE_BYTES, Record, Records, parse, parse_text, sniff
from rlm_runtime.errors import ContextError
from rlm_runtime.sandbox import CellLimits, Sandbox

TICKETS = [
    {"ticket": "T-1", "state": "Open", "owner": "mara lind", "blocks": "T-3"},
    {"ticket": "T-2", "state": "closed", "owner": "otto berg", "blocks": ""},
    {"ticket": "T-3", "state": "open", "owner": "ines vo", "blocks": "T-2"},
    {"ticket": "T-4", "state": "wontfix", "owner": "mara lind", "blocks": "T-1"},
]

SHAPES = {
    "jsonl": "\n".join(json.dumps(t) for t in TICKETS) + "\n",
    "table-tab": "ticket\tstate\towner\tblocks\n" + "".join("\t".join(t.values()) + "\n" for t in TICKETS),
    "table-comma": 'Ticket,State,Owner,Blocks\n' + "".join(",".join(t.values()) + "\n" for t in TICKETS),
    "blocks": "\n".join("".join(f"{k.title()}: {v}\n" for k, v in t.items()) for t in TICKETS),
    "blocks-no-blank": "".join(f"* {k} = {v}\n" for t in TICKETS for k, v in t.items()),
    "ini": "".join(f"[{t['ticket']}]\n" + "".join(f"{k} = {v}\n" for k, v in t.items() if k != "ticket") + "\n"
                   for t in TICKETS),
    "yaml-list": "".join(f"- ticket: {t['ticket']}\n" + "".join(f"  {k}: {v}\n" for k, v in t.items() if k != "ticket")
                         for t in TICKETS),
    "yaml-nested": "tickets:\n" + "".join(f"  - ticket: {t['ticket']}\n" + "".join(
        f"    {k}: {v}\n" for k, v in t.items() if k != "ticket") for t in TICKETS),
    "table-markdown": "| Ticket | State | Owner | Blocks |\n|---|:---:|---|---|\n" + "".join(
        f"| {' | '.join(t.values())} |\n" for t in TICKETS),
    "table-psql": "+--------+-------+\n| ticket | state | owner | blocks |\n+--------+-------+\n" + "".join(
        f"| {' | '.join(t.values())} |\n" for t in TICKETS) + "+--------+-------+\n",
    "table-fixed": f"{'TICKET':<8}{'STATE':<10}{'OWNER':<12}BLOCKS\n" + "".join(
        f"{t['ticket']:<8}{t['state']:<10}{t['owner']:<12}{t['blocks']}\n" for t in TICKETS),
    "xml": '<?xml version="1.0"?>\n<tickets>\n' + "".join(
        f'  <ticket id="{t["ticket"]}">\n' + "".join(f"    <{k}>{v}</{k}>\n" for k, v in t.items() if k != "ticket")
        + "  </ticket>\n" for t in TICKETS) + "</tickets>\n",
    "xml-attributes": "<tickets>\n" + "".join(
        "  <ticket " + " ".join(f'{k}="{v}"' for k, v in t.items()) + "/>\n" for t in TICKETS) + "</tickets>\n",
    "markdown": "# Tracker export\n\n" + "".join(
        f"### ticket: {t['ticket']}\n\n" + "".join(f"- {k}: {v}\n" for k, v in t.items() if k != "ticket") + "\n"
        for t in TICKETS),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_every_shape_gives_the_same_records(name: str) -> None:
    """It reads the same four tickets from JSON lines, tables, blocks and markdown sections."""
    recs = parse_text(SHAPES[name])
    assert len(recs) == 4, (name, recs)
    key = {"ini": "title", "xml": "id"}.get(name, "ticket")  # a section's name is its title; an element's, its attribute
    assert [r[key] for r in recs] == ["T-1", "T-2", "T-3", "T-4"]
    assert len(recs.where("state", "open")) == 2
    assert recs.tally("owner") == {"mara lind": 2, "otto berg": 1, "ines vo": 1}
    # a chain: what does the ticket that T-4 blocks block in turn?
    first = recs.find("T-4")[0]
    assert first[key] == "T-4"
    assert recs.find(first["blocks"])[0]["blocks"] == "T-3"


def test_shape_names_and_fields_come_from_the_head() -> None:
    """It names the shape and the fields a text's first lines show."""
    assert parse_text(SHAPES["jsonl"]).shape == "json"  # JSON lines are read as JSON, by parsing
    table = sniff(SHAPES["table-comma"].splitlines())
    assert (table.kind, table.fields, table.structure.header) == ("structure", ("ticket", "state", "owner", "blocks"),
                                                                  ("ticket", "state", "owner", "blocks"))
    assert table.describe().startswith("a table with a header row; fields: 'ticket'")
    assert sniff(SHAPES["blocks"].splitlines()).fields == ("ticket", "state", "owner", "blocks")
    assert "fields: 'ticket', 'state', 'owner', 'blocks'" in sniff(SHAPES["markdown"].splitlines()).describe()
    prose = "It rained in the morning, and later, towards noon, it cleared.\nThe wind stayed low.\n" * 5
    assert sniff(prose.splitlines()).kind == "paragraphs"
    assert sniff([]).kind == "paragraphs"


def test_lines_of_pairs_are_read_by_their_labels_and_yaml_headers() -> None:
    """It reads lines of ``key=value`` pairs (after a timestamp, or between bars) by the text's own labels, a value
    of several words running to the next key; one such line alone is too little to tell labels from values, and is
    read as no fields, not as one field holding the others; a YAML-like name over indented fields is that record's
    title."""
    levels = ["error", "info", "warn", "info", "info", "error"]
    logs = parse_text("".join(f'2026-01-02T10:0{i}Z level={lv} svc=web{i % 2} msg="took {i} s"\n' for i, lv in enumerate(levels)))
    assert logs.shape == "structure" and logs.tally("level") == {"info": 3, "error": 2, "warn": 1}
    assert logs[2]["svc"] == "web0" and logs[2]["msg"] == "took 2 s" and logs[0]["field 1"] == "2026-01-02T10:00Z"
    people = [("Ada Park", "Oslo"), ("Bo", "Rome Italy"), ("Cy Lo", "Lima"), ("Di", "Kyiv"), ("Ed Fu", "Bonn")]
    recs = parse_text("".join(f"name={n} city={c}\n" for n, c in people))
    assert [(r["name"], r["city"]) for r in recs] == people
    bars = parse_text("".join(f"crate=C{i} | harbour=Port {i % 3} | seal=S{i * 3}\n" for i in range(8)))
    assert bars[4] == {"crate": "C4", "harbour": "Port 1", "seal": "S12"} and bars.fields == ["crate", "harbour", "seal"]
    one = parse_text("crate=C1 | harbour=Port 1 | seal=S3\n")
    assert one.shape == "paragraphs" and one[0] == {"text": "crate=C1 | harbour=Port 1 | seal=S3"}
    hosts = parse_text("alpha:\n  port: 8080\n  owner: ops\nbeta:\n  port: 9090\n  owner: dev\n")
    assert [(r["title"], r["port"], r.line) for r in hosts] == [("alpha", "8080", 1), ("beta", "9090", 4)]


def test_records_know_their_line() -> None:
    """It gives each record the 1-based line it starts on, as grep numbers lines."""
    recs = parse_text(SHAPES["blocks"])
    assert [r.line for r in recs] == [1, 6, 11, 16]
    lines = SHAPES["blocks"].split("\n")
    assert all(lines[r.line - 1].startswith("Ticket: ") for r in recs)
    assert [r.line for r in parse_text(SHAPES["table-tab"])] == [2, 3, 4, 5]


def test_field_lookup_forgives_case_spaces_and_underscores() -> None:
    """It finds a field written in another case or with underscores, and names the fields when one is missing."""
    recs = parse_text("Home Port: Kiel\nCrew Size: 4\n")
    r = recs[0]
    assert r["home port"] == r["Home_Port"] == r["HOME PORT"] == "Kiel"
    assert "crew_size" in r and r.get("crew size") == "4" and r.get("captain") is None
    with pytest.raises(KeyError, match="'home port', 'crew size'"):
        r["captain"]


def test_continuations_repeats_and_loose_text() -> None:
    """It joins indented continuation lines, keeps a repeated field as a list, and keeps loose lines as text."""
    text = ("Recipe: lentil soup\nStep: rinse the lentils\n  twice, in cold water\nStep: simmer\n"
            "Serves: 4\nA family favourite.\n\nRecipe: flatbread\nServes: 2\n")
    recs = parse_text(text)
    assert len(recs) == 2
    soup = recs[0]
    assert soup["step"] == ["rinse the lentils twice, in cold water", "simmer"]
    assert soup["text"] == "A family favourite."
    assert len(recs.where("step", "simmer")) == 1
    assert recs.tally("step") == {"rinse the lentils twice, in cold water": 1, "simmer": 1}


def test_empty_results_say_why() -> None:
    """It explains an empty filter (the values there are) and an empty lookup, and refuses [0] of nothing with the reason."""
    recs = parse_text(SHAPES["table-tab"])
    none = recs.where("state", "pending")
    assert "0 records" in repr(none) and "'Open' (2), 'closed' (1), 'wontfix' (1)" in repr(none)
    assert "no record has a field 'colour'" in repr(recs.where("colour", "red"))
    with pytest.raises(IndexError, match="no record has 'T-9'"):
        recs.find("T-9")[0]


def test_printing_a_long_list_shows_a_count_fields_and_a_few() -> None:
    """It prints how many records, their fields and the first five, not thousands of rows."""
    text = "day,temp,sky\n" + "".join(f"d{i},{i % 30},{'clear' if i % 3 else 'rain'}\n" for i in range(5000))
    shown = repr(parse_text(text))
    assert shown.startswith("5000 records (records found in the text's own layout, reading 100% of the lines); "
                            "fields: 'day', 'temp', 'sky'")
    assert shown.count("\n") == 6 and "4995 more" in shown


def test_changing_a_result_leaves_the_handle_records_alone() -> None:
    """It hands out a fresh copy each call: code that edits records does not change the next call's."""
    handle = open_context(SHAPES["jsonl"])
    first = handle.records()
    first[0]["state"] = "edited"
    first.clear()
    again = handle.records()
    assert len(again) == 4 and again[0]["state"] == "Open"
    assert handle.stats.records == 2


def test_a_corpus_names_each_records_document(tmp_path: Path) -> None:
    """It reads every document of a folder, each record naming its document, whatever each one's shape."""
    (tmp_path / "a.jsonl").write_text(SHAPES["jsonl"])
    (tmp_path / "b.txt").write_text(SHAPES["blocks"])
    recs = open_context(tmp_path).records()
    assert len(recs) == 8
    assert {r.doc for r in recs} == {"a.jsonl", "b.txt"}
    assert len(recs.where("owner", "mara lind")) == 4


def test_too_much_text_is_refused_with_a_way_forward() -> None:
    """It refuses a text over the parse cap with a ContextError saying how to narrow it."""
    with pytest.raises(ContextError, match="narrow it first"):
        parse_text("x" * (MAX_PARSE_BYTES + 1))


def test_parsing_stays_linear_on_hostile_lines() -> None:
    """It parses long lines of separators, colons and spaces in time linear in their size."""

    def seconds(n: int) -> float:
        lines = [("a" * 40 + " " * 40 + ":" + " |" * n), (" " * n + "x"), ("k=" * n), ("#" * 6 + " " + ":" * n),
                 ("<a " + 'b="c" ' * n + ">"), ("<a>" + "<" * n + "</a>"), ("<a" + " " * n + ">" + "x" * n + "</b>"),
                 ("The x of y is z. " * n), ("host h status s " * n)]
        start = time.perf_counter()
        for line in lines:
            parse([line] * 20)
        return time.perf_counter() - start

    small, big = seconds(2_000), seconds(20_000)
    assert big < 30 * max(small, 1e-3), (small, big)


def test_records_is_a_list_of_dicts() -> None:
    """It is a plain list of dicts to code: comprehensions, sorting and json work on it."""
    recs = parse_text(SHAPES["jsonl"])
    assert isinstance(recs, list) and all(isinstance(r, dict) for r in recs)
    assert sorted(r["owner"] for r in recs if r["state"].lower() == "open") == ["ines vo", "mara lind"]
    assert json.loads(json.dumps(recs))[1]["ticket"] == "T-2"
    assert isinstance(recs[:2], Records) and isinstance(recs[0], Record)


# ---------------------------------------------------------------- in the sandbox


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Sandbox]:
    (tmp_path / "tickets.txt").write_text(SHAPES["blocks"])
    limits = CellLimits(cell_timeout_s=20, kill_grace_s=0.5, memory_mb=256)
    with Sandbox("default", limits, contexts=[tmp_path / "tickets.txt", SHAPES["markdown"]]) as sb:
        yield sb


def _run(sb: Sandbox, code: str) -> str:
    result = sb.execute(code)
    assert result.ok, (code, result.error)
    return result.stdout


def test_the_sandbox_binds_records(sandbox: Sandbox) -> None:
    """It gives code records() over the context, another handle, a chunk, a string and grep matches."""
    assert _run(sandbox, "len(records())") == "4\n"
    assert _run(sandbox, "records().where('state', 'OPEN').tally('owner')") == "{'mara lind': 1, 'ines vo': 1}\n"
    assert _run(sandbox, "records(contexts[1]).find('T-2')[0]['owner']") == "'otto berg'\n"
    assert _run(sandbox, "[r.line for r in records(chunk(0, 10))]") == "[1, 6]\n"
    assert _run(sandbox, "records('a: 1\\nb: 2')[0]") == "{'a': '1', 'b': '2'}\n"
    assert _run(sandbox, "[(r.line, r['owner']) for r in records(grep('^Owner: mara'))]") == "[(3, 'mara lind'), (18, 'mara lind')]\n"
    assert _run(sandbox, "print(records())").startswith("4 records (records of key: value lines)")
    assert _run(sandbox, "print(records().find('tickets of mara lind'))").startswith("2 records")


def test_records_cannot_reach_the_handle(sandbox: Sandbox) -> None:
    """It keeps the parsed records' cache and the handle out of reach of code."""
    for code in ("records()._note", "records().__class__.__init__", "records()[0].__missing__", "records()._values",
                 "records().tally.__self__._tables"):
        result = sandbox.execute(code)
        assert not result.ok, code
    _run(sandbox, "r = records(); r[0]['state'] = 'x'; r.clear()")
    assert _run(sandbox, "records()[0]['state']") == "'Open'\n"


def test_too_many_records_is_a_clear_error_and_the_worker_lives_on(tmp_path: Path) -> None:
    """It refuses, with a way forward, a text of more records than records() returns, and the next cell runs."""
    from rlm_runtime.context.records import MAX_RECORDS

    big = tmp_path / "meters.txt"
    big.write_text("".join(f"meter={i} | reading={i % 97}\n" for i in range(MAX_RECORDS + 10)))
    limits = CellLimits(cell_timeout_s=60, kill_grace_s=0.5, memory_mb=512)
    with Sandbox("default", limits, contexts=[big]) as sb:
        result = sb.execute("recs = records()")
        assert not result.ok and "records(grep(...))" in (result.error or "")
        assert _run(sb, "len(records(grep('reading=5$', max_matches=5000)))") == f"{sum(1 for i in range(MAX_RECORDS + 10) if i % 97 == 5)}\n"


def test_find_falls_back_to_words_of_a_value() -> None:
    """It finds, when no field equals the value, the records holding it as whole words of a field (not inside a word)."""
    recs = parse_text(SHAPES["jsonl"])
    assert [r["ticket"] for r in recs.find("Lind")] == ["T-1", "T-4"]
    assert list(recs.find("lin")) == []
    assert "grep for part of it" in repr(recs.find("lin"))


def test_the_calls_small_models_write_are_understood() -> None:
    """It takes count(field, value), find(field, value) and find("field: value") as where(), and a slice says what it was cut from."""
    recs = parse_text(SHAPES["table-tab"])
    assert recs.count("state", "open") == 2 and recs.count(recs[0]) == 1
    assert [r["ticket"] for r in recs.find("owner", "mara lind")] == ["T-1", "T-4"]
    assert [r["ticket"] for r in recs.find("state: closed")] == ["T-2"]
    assert [r["ticket"] for r in recs.find("owner=ines vo")] == ["T-3"]
    assert repr(recs[:2]).startswith("2 of 4 records")
    assert repr(recs.where("state", "open")).startswith("2 records")


def test_count_of_one_value_counts_the_records_holding_it() -> None:
    """It reads count(value) as len(find(value)) (a small model's count of a value, not list.count's 0), count() as len."""
    recs = parse_text(SHAPES["jsonl"])
    assert recs.count("mara lind") == 2 and recs.count("OPEN") == 2 and recs.count("state: closed") == 1
    assert recs.count("nobody") == 0 and recs.count() == 4


def test_an_empty_filter_names_the_field_that_holds_the_value() -> None:
    """It says which field holds a value a filter looked for under another name, and keeps that through a slice."""
    recs = parse_text(SHAPES["jsonl"])
    missed = recs.where("blocks", "mara lind")
    assert "'mara lind' is the 'owner' of 2 records: find('mara lind') gives them" in repr(missed)
    assert "is the 'owner' of 2 records" in repr(recs.find("blocks=mara lind")[:3])
    assert "is the" not in repr(recs.where("state", "pending"))  # held nowhere: no pointer


def test_lines_without_blank_lines_are_a_record_each() -> None:
    """It reads text with no blank lines as a record a line, not one record of everything."""
    text = "".join(f"{t['owner']} opened {t['ticket']} and left it {t['state']}\n" for t in TICKETS)
    recs = parse_text(text)
    assert recs.shape == "paragraphs" and len(recs) == 4
    assert [r.line for r in recs] == [1, 2, 3, 4] and recs[2]["text"] == "ines vo opened T-3 and left it open"
    two = parse_text("First paragraph, line one\nline two\n\nSecond paragraph\n")
    assert len(two) == 2  # blank lines still part paragraphs


def test_a_headerless_line_is_not_a_fixed_width_table() -> None:
    """It takes a fixed-width table only where every row has a space before each column of the header."""
    text = "Notes  from the meeting\n" + "".join(f"{w} went to the market and bought bread\n" for w in ("Ann", "Bo", "Cy"))
    assert sniff(text.split("\n")).kind != "table"


def test_a_table_cell_over_the_csv_limit_is_no_traceback() -> None:
    """It reads a table whose last row has a quoted cell over csv's size limit (that row kept as its text), never a csv traceback."""
    rows = "".join(f"T-{i},open,ann\n" for i in range(300))
    text = "ticket,state,owner\n" + rows + 'T-x,"' + "y" * 200_000 + '",bo\n'
    recs = parse_text(text)
    assert recs.fields[:3] == ["ticket", "state", "owner"] and len(recs) == 301 and recs.count("state", "open") == 300
    assert recs[-1].line == 302 and recs[-1]["text"].startswith('T-x,"yyy')
    quoted_rows = 'ticket,state,owner\n"T-1, old",open,ann\n' + "".join(f'"T-{i}, new",open,bo\n' for i in range(2, 9))
    assert parse_text(quoted_rows + 'T-x,"' + "y" * 200_000 + '",bo\n')[-1]["owner"] == "bo"  # split plainly
    huge_first = "a,b\n" + "1," + "z" * 200_000 + "\n"
    assert sniff(huge_first.split("\n")).kind == "paragraphs"  # sniffing never raises


def test_a_value_no_record_is_named_says_which_field_holds_it() -> None:
    """It says a found value names no record and which field holds it, so a chain's last value is not looked up again."""
    recs = parse_text(SHAPES["jsonl"])
    found = recs.find("mara lind")
    assert len(found) == 2
    assert "note: 'mara lind' is the 'owner' of each of these" in repr(found)
    assert "note:" not in repr(recs.find("T-3"))  # T-3 names a record: no note


def test_finding_a_field_name_shows_the_fields_values() -> None:
    """It answers find() of a field's name with the field's tally, not a bare "no record"."""
    recs = parse_text(SHAPES["jsonl"])
    found = recs.find("Owner")
    assert len(found) == 0
    assert "'Owner' is a field of the records, not a value" in repr(found)
    assert "recs.tally('owner')" in repr(found)
    assert not repr(found).startswith("0 records")  # a small model read "0 records" as "nothing found"
    assert "'mara lind': 2" in repr(found)
    # ... even where a record's text holds the field's name as a word
    text = "\n".join([f'{{"crate": "c{i}", "fruit": "{"plum" if i % 3 else "fig"}", "note": "packed"}}' for i in range(30)]
                     + ['{"crate": "c99", "fruit": "plum", "note": "the fruit is bruised"}'])
    fruit = parse_text(text).find("fruit")
    assert "'fruit' is a field of the records, not a value" in repr(fruit) and "'plum': 21" in repr(fruit)
    assert "The most common 'owner' is 'mara lind' (2 records)." in repr(found)
    assert "is a field" not in repr(recs.find("nobody"))


def test_a_field_name_with_tied_values_names_them_all() -> None:
    """It names every value tied for the most common, not the first of them."""
    recs = parse_text("".join(f'{{"id": "r{i}", "color": "{c}"}}\n' for i, c in enumerate(["red", "blue", "red", "blue", "green"])))
    note = repr(recs.find("color"))
    assert "The most common 'color' values are 'red', 'blue' (2 records each)." in note


def test_a_field_name_reads_the_first_record() -> None:
    """It reads find(name)["field"] as the first record's field, and says why when nothing was found."""
    recs = parse_text(SHAPES["jsonl"])
    assert recs.find("T-2")["owner"] == "otto berg"
    with pytest.raises(IndexError, match="no 'owner' to read"):
        recs.find("T-9")["owner"]


def test_red_team_nested_values_heading_spaces_and_big_lists(tmp_path: Path) -> None:
    """It keeps nested values of the cached parse out of reach of edits, parses a '#' and
    200,000 spaces at once, and refuses a list of lines over the parse cap with a ContextError."""
    text = '{"n": 1, "l": [[1]], "at": {"x": 3}}\n{"n": 2, "l": [[2]]}\n'
    handle = open_context(text)
    first = handle.records()
    first[0]["l"][0].append("POISON")
    first[1]["x"] = 999
    assert handle.records()[:2] == [{"n": 1, "l": [[1]]}, {"key": "at", "x": 3}]
    start = time.perf_counter()
    recs = parse_text("name: a\n#" + " " * 200_000 + "\nname: b\n")
    assert time.perf_counter() - start < 2.0 and [r["name"] for r in recs] == ["a", "b"]
    limits = CellLimits(cell_timeout_s=30, kill_grace_s=0.5, memory_mb=512)
    with Sandbox("default", limits, contexts=["x: 1\n"]) as sb:
        result = sb.execute("records(['a: ' + 'x' * 1_000_000] * 20)")
        assert result.error_type == "ContextError" and "more than records() reads at once" in (result.error or "")
        assert _run(sb, "len(records())") == "1\n"


def test_counting_and_finding_a_field_name() -> None:
    """It counts values, by field or anywhere; a field's name is no value (0), and ``find`` of one
    says what the field holds, most common first."""
    recs = parse_text(SHAPES["jsonl"])
    assert recs.count("mara lind") == 2 and recs.count("nobody") == 0 and recs.count("owner") == 0
    assert recs.count("state", "open") == 2 and recs.count("state", "gone") == 0
    rows = "".join(f'{{"kiln": "k{i}", "glaze": "{("ash", "celadon")[i % 2]}"}}\n' for i in range(40))
    note = repr(parse_text(rows).find("glaze"))
    assert note.startswith("'glaze' is a field of the records, not a value. Its values, most common first")
    assert "The most common 'glaze' values are 'ash', 'celadon' (20 records each)." in note


def test_a_wrapped_value_line_that_looks_like_a_field_goes_on_with_the_value() -> None:
    """A line indented under a field with a value goes on with that value even when it reads
    "word: more" (a wrapped notice), so it is neither a field nor one of the fields offered;
    an indented field under a label with no value, and a list item's fields, stay fields."""
    notice = ("Plot: north\nRules: no fires on the plot\n the following apply:\n keep paths clear\n\n"
              "Plot: south\nRules: none\n\nPlot: east\nRules: quiet after dark; note:\n bring a lamp\n\n")
    recs = parse_text(notice * 3)
    assert recs.shape == "blocks" and recs.fields == ["plot", "rules"]
    assert recs.find("north")[0]["rules"] == "no fires on the plot the following apply: keep paths clear"
    assert sniff(notice.splitlines()).fields == ("plot", "rules")
    nested = parse_text("shed:\n  door: red\n  lock: brass\nbarn:\n  door: green\n  lock: iron\n")
    assert nested.find("barn")[0]["door"] == "green"
    listed = parse_text("- tool: rake\n  shed: north\n- tool: hoe\n  shed: south\n- tool: saw\n  shed: north\n")
    assert listed.count("shed", "north") == 2


def _library_xml() -> str:
    """A library's shelves as XML: a shelf named by its <info> child, a list of <tag> values, and
    books with attributes (one holding a path) in a <books> list."""
    shelves = [("north", [("Moby Dick", "1851"), ("Emma", "1815")]), ("south", [("Ulysses", "1922")]),
               ("west", [("Kim", "1901"), ("Dubliners", "1914"), ("Nostromo", "1904")])]
    xml = ['<?xml version="1.0"?>', "<library>"]
    for name, books in shelves:
        xml += ["  <shelf>", "    <info>", f"      <label>{name}</label>", "      <floor>2</floor>", "    </info>",
                "    <tags>", "      <tag>quiet</tag>", f"      <tag>{name}-wing</tag>", "    </tags>", "    <books>"]
        for k, (title, year) in enumerate(books):
            xml += [f'      <book code="{name[0]}{k}" path="/stacks/{name}/">', f"        <title>{title}</title>",
                    f"        <year>{year}</year>", "      </book>"]
        xml += ["    </books>", "  </shelf>"]
    return "\n".join([*xml, "</library>"]) + "\n"


def test_nested_xml_elements_know_the_record_written_around_them() -> None:
    """It makes each element's record a child of the record of the element around it: an
    element without attributes is named by its first child's values, a list of values gives the
    record around it those values, a list of elements of one tag names none of them, and the
    description says records nest where some do (and not for flat XML)."""
    text = _library_xml()
    recs = parse_text(text)
    assert len(recs.children_of("north")) == 2 and len(recs.children_of("west")) == 3
    assert recs.parent_of("Ulysses")[0]["label"] == "south" and recs.parent_of("north").count() == 0
    assert recs.find("west")[0]["tag"] == ["quiet", "west-wing"] and recs.find("Emma")[0]["path"] == "/stacks/north/"
    assert recs.count("floor", "2") == 3 and len(recs) == 9
    said = sniff(text.split("\n")).describe()
    assert "a record written inside another is its child" in said and "children_of" in said
    assert "children_of" not in sniff(SHAPES["xml"].split("\n")).describe()
    assert all(r.parent is None for r in parse_text(SHAPES["xml"]))  # <tickets> around them is a list, no record


def test_the_brief_says_records_nest_when_the_head_nests_nothing(tmp_path: Path) -> None:
    """It looks for nesting over the whole text (runs spread over it), not the head alone: a
    file of flat elements first and nested ones further on is said to nest, in the probe's brief."""
    flat = "".join(f'<card code="c{k}">\n  <owner>ann</owner>\n</card>\n' for k in range(120))
    path = tmp_path / "cards.xml"
    path.write_text("<cards>\n" + flat + _library_xml().split("\n", 1)[1] + "</cards>\n", encoding="utf-8")
    assert "children_of" not in sniff(path.read_text(encoding="utf-8").split("\n")).describe()
    said = open_context(path).probe().structure["shape"]
    assert "a record written inside another is its child" in said
    assert open_context(path).records().parent_of("Kim")[0]["label"] == "west"
