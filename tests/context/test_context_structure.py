"""Structure discovered from the text: line templates, indentation and blocks, each with
its coverage, refused under the gate; stated templates and patterns.

Every fixture is a format written here (a stock room, a recipe box, a glossary, a service log,
a parts list); none is a format of the benchmark.
"""

from __future__ import annotations

import random

import pytest

from rlm_runtime.context import forms, open_context, structure, templates
from rlm_runtime.context.records import GATE, parse, parse_text, sniff, stated
from rlm_runtime.errors import ContextError
from rlm_runtime.sandbox import CellLimits, Sandbox

ROOMS = {"Kitchen": ["kettle", "toaster", "pan", "ladle"], "Garage": ["drill", "saw"],
         "Attic": ["trunk", "lamp", "fan", "rug", "crate"], "Cellar": ["rack", "barrel", "press"]}


def stock_room() -> str:
    """Rooms at column 0, their items one tab in (name, count, material), parts two tabs in."""
    rng = random.Random(5)
    out = ["# stock room, counted by hand", "# items are room<TAB>name<TAB>count<TAB>material"]
    for room, items in ROOMS.items():
        out.append(room)
        for item in items:
            out.append(f"\t{item}\t{rng.randint(1, 40)}\t{rng.choice(['steel', 'oak', 'glass'])}")
            out += [f"\t\t{item} part {j}" for j in range(2)]
    return "\n".join(out) + "\n"


def recipe_box() -> str:
    return "\n".join(f"Dish: {d}\nServes: {n}\nOven: {t} C\nSteps: mix well,\n  then rest an hour.\n"
                     for d, n, t in [("flatbread", 4, 220), ("barley soup", 6, 0), ("plum cake", 8, 180),
                                     ("fish pie", 5, 200), ("rice pudding", 4, 150)])


TERMS = [("anvil", "tool", "an iron block for shaping hot metal"), ("bellows", "tool", "a bag that blows air"),
         ("quench", "process", "cooling hot steel fast in water or oil"), ("temper", "process", "reheating to ease hardness"),
         ("billet", "stock", "a short bar of metal"), ("flux", "stock", "a powder keeping welds clean"),
         ("tongs", "tool", "grips for hot work"), ("scale", "waste", "flakes of oxide off hot iron")]


def glossary() -> str:
    return "".join(f"{t} | {c} | {m}\n" for t, c, m in TERMS)


def service_log(n: int = 60) -> str:
    rng = random.Random(11)
    messages = ["queue drained", "retry 2 of 5, backing off", "lease renewed for worker 7", "disk at 91%"]
    return "".join(f"[03:{k % 60:02d}:{k % 7:02d}] {rng.choice(['INFO', 'WARN'])} {rng.choice(['relay', 'store', 'gate'])}: "
                   f"{rng.choice(messages)}\n" for k in range(n))


PROSE = """The ferry left before dawn, and nobody on the quay said a word about the weather.
By noon the wind had turned; the gulls stayed low over the water.
My aunt kept a ledger of every crossing she ever made.
She wrote in pencil, because ink, she said, was for people who never changed their minds.
When the engine failed off the point, the crew rowed the last mile.
Years later I found the ledger in a drawer, its pages soft as cloth.
Nothing in it mentioned the storm!
Why would it?
"""


def test_it_reads_an_indented_inventory_with_parents_and_children() -> None:
    """It reads a hierarchy carried by indentation alone: each record knows its parent and its children."""
    recs = parse_text(stock_room())
    assert recs.shape == "structure" and recs.coverage == 1.0
    assert sniff(stock_room().split("\n")).structure.layout == "indent"
    assert len(recs.children_of("Attic")) == 5
    assert recs.parent_of("barrel")[0]["field 1"] == "Cellar"
    assert [r["field 1"] for r in recs.parent_of("saw")] == ["Garage"]  # not the saw, whose parts repeat its name
    assert [(c["field 1"], c["part"]) for c in recs.children_of("drill")] == [("drill", "0"), ("drill", "1")]
    kettle = recs.find("kettle")[0]
    assert kettle.parent is not None and kettle.parent["field 1"] == "Kitchen" and len(kettle.children) == 2
    assert not any(r.get("field 1", "").startswith("#") for r in recs)  # the comments are set aside


def test_it_describes_a_hierarchy_with_examples_and_coverage() -> None:
    """It says the layout, the fields named by place with an example each, and the share of lines read."""
    said = sniff(stock_room().split("\n")).describe()
    assert said.startswith("records nested by indentation") and "children_of" in said
    assert "'field 1' (e.g. 'Kitchen')" in said and "(reads 100% of lines)" in said


def test_it_reads_stanzas_of_labelled_lines() -> None:
    """It reads blank-line stanzas of Label: value lines, a wrapped value continuing its field."""
    recs = parse_text(recipe_box())
    assert len(recs) == 5 and recs.fields[:4] == ["dish", "serves", "oven", "steps"]
    assert recs.find("plum cake")[0]["steps"] == "mix well, then rest an hour."
    assert recs.count("serves", "4") == 2


def test_it_reads_a_glossary_split_by_bars() -> None:
    """It reads one entry a line, fields separated by bars, named by place with an example each."""
    shape = sniff(glossary().split("\n"))
    assert shape.coverage == 1.0 and shape.fields[:2] == ("field 1", "field 2")
    recs = parse(glossary().split("\n"), shape)
    assert recs.find("quench")[0]["field 2"] == "process" and recs.tally("field 2")["tool"] == 3
    assert "(e.g. 'anvil')" in shape.describe()


def test_it_reads_a_log_with_free_text_at_the_end() -> None:
    """It reads log lines whose message varies in punctuation, the message one field to the line's end."""
    found = structure.discover(service_log().split("\n"))
    assert found.ok and found.layout == "lines" and len(found.fields) == 3
    items, coverage = structure.read(service_log().split("\n"), found)
    assert coverage == 1.0 and dict(items[0][1])[found.fields[0]] == "03:00:00"
    assert any(dict(fields)[found.fields[2]] == "retry 2 of 5, backing off" for _, fields, _ in items)


def test_it_names_fields_from_constant_words_and_a_header() -> None:
    """It names a value by the constant word before it, and a fixed-width table's columns by its header row."""
    lines = [f"unit u{k} holds {k * 3} crates bay {k % 4}" for k in range(12)]
    found = structure.discover(lines)
    assert found.ok and found.fields == ("unit", "holds", "crates bay")
    table = ["PART      BIN    QTY"] + [f"{p:<10}{b:<7}{q}" for p, b, q in
                                          [("bolt", "a1", 40), ("nut", "a2", 120), ("washer", "b7", 15), ("rivet", "c3", 9),
                                           ("spring", "c4", 61)]]
    found = structure.discover(table)
    assert found.ok and found.header == ("part", "bin", "qty")
    items, coverage = structure.read(table, found)
    assert coverage == 1.0 and items[0][1] == [("part", "bolt"), ("bin", "a1"), ("qty", "40")]


def test_it_refuses_prose() -> None:
    """It refuses prose: no structure, with the reason, and records() gives text only."""
    found = structure.discover(PROSE.split("\n"))
    assert not found.ok and found.reason
    shape = sniff(PROSE.split("\n"))
    assert shape.kind == "paragraphs" and shape.describe().startswith("no fields it could read")
    assert parse_text(PROSE).fields == ["text"]


def test_it_refuses_random_words_and_reads_two_kinds_of_line_each_by_its_form() -> None:
    """It refuses random words and lines of many forms; lines of two forms, half and half (a
    log's two kinds of event), are each read by their own form, fields by place numbered on."""
    rng = random.Random(2)
    words = "stone river under blue seven lamp quick green".split()
    noise = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 9))) for _ in range(150)]
    assert not structure.discover(noise).ok and sniff(noise).kind == "paragraphs"
    half = [f"{t} | {c} | {m}" for t, c, m in TERMS] * 4 + [f"{w}={k} size={k * 2}kg" for k, w in enumerate(words)] * 4
    both = parse_text("\n".join(half))
    assert both.shape == "structure" and both.coverage == 1.0
    assert both.find("anvil")[0]["field 2"] == "tool" and "size" in both.fields
    mixed = [rng.choice([f"{w}: {k}", f"[{k}] {w}", f"{w} ({k})", f"{k}/{w}/{k}", w]) for k, w in enumerate(words * 20)]
    assert not structure.discover(mixed).ok


def test_it_applies_a_stated_template_with_its_coverage() -> None:
    """It reads the lines of a template stated in a question's words, fields named by its words, and says its coverage."""
    lines = [f"K-{k} - shelf bracket {k} ({rng})" for k, rng in enumerate(["north", "south", "east"] * 6)] + ["(end)"]
    shape = stated(lines, template="ID - TITLE (GROUP)")
    assert shape.fields == ("id", "title", "group") and shape.coverage == pytest.approx(18 / 19)
    recs = parse(lines, shape)
    assert recs[1] == {"id": "K-1", "title": "shelf bracket 1", "group": "south"} and recs[-1] == {"text": "(end)"}
    assert "reading 95% of the lines" in repr(recs)
    braces = stated(lines, template="{code} - {name} ({side})")
    assert braces.fields == ("code", "name", "side")


def test_it_applies_a_pattern_with_named_groups_and_says_a_low_coverage() -> None:
    """It reads lines by a regular expression's named groups with RE2, and says when it reads too few."""
    lines = glossary().split("\n")
    shape = stated(lines, pattern=r"^(?P<term>\w+) \| (?P<kind>tool) \|")
    assert shape.fields == ("term", "kind") and shape.coverage == pytest.approx(3 / 8)
    recs = parse(lines, shape)
    assert "38%" in repr(recs) and "only 'text'" in repr(recs)
    assert shape.coverage is not None and shape.coverage < GATE


def test_it_refuses_bad_templates_and_patterns() -> None:
    """It refuses a template with no field, a pattern without named groups, one RE2 cannot run, and one too long."""
    with pytest.raises(ContextError, match="no field"):
        forms.from_template("just words here")
    with pytest.raises(ContextError, match="named groups"):
        forms.from_pattern(r"\w+ - \w+")
    with pytest.raises(ContextError, match="cannot be used"):
        forms.from_pattern(r"(?P<a>\w+)(?=x)")
    with pytest.raises(ContextError, match="limit"):
        forms.from_pattern("(?P<a>" + "a" * 5000 + ")")


def test_hostile_shapes_stay_bounded() -> None:
    """It cuts a huge line at the miner's cap, keeps a deep staircase of indentation, and many distinct lines, without error."""
    assert len(templates.cut("x " * 1_000_000).spans) <= templates.MAX_SLOTS
    assert not structure.discover(["a"] * 200).ok
    stairs = [" " * k + f"step {k}" for k in range(300)]
    found = structure.discover(stairs[:200])
    items, _ = structure.read(stairs, found) if found.ok else ([], 0.0)
    assert not found.ok or items[-1][2] == len(items) - 2
    distinct = [f"{k}" + "".join(chr(33 + (k >> b) % 14) + "w" for b in range(8)) for k in range(2000)]
    assert not structure.discover(distinct[:200]).ok
    assert parse_text("\n".join(distinct)).shape == "paragraphs"


def test_the_sandbox_reads_children_and_a_stated_form() -> None:
    """It serves children_of, parent_of and records(template=...) in the sandbox, and keeps a form that reads the text."""
    lines = "".join(f"B{k} - hinge {k} (aisle {k % 3})\n" for k in range(12))
    limits = CellLimits(cell_timeout_s=30, kill_grace_s=0.5, memory_mb=512)
    with Sandbox("default", limits, contexts=[stock_room(), lines]) as sb:
        out = sb.execute("print(len(records().children_of('Kitchen')), records().parent_of('saw')[0]['field 1'])")
        assert out.error is None and out.stdout == "4 Garage\n", out.error
        out = sb.execute("r = records(contexts[1], template='CODE - ITEM (PLACE)'); print(r[2]['place'], r.coverage)")
        assert out.error is None and out.stdout == "aisle 2 1.0\n", out.error
        out = sb.execute("print(records(contexts[1]).fields)")
        assert out.stdout == "['code', 'item', 'place']\n", out.error


def test_a_handle_keeps_only_a_form_that_reads_the_text() -> None:
    """It keeps a stated form for later records() only when it reads at least the gate's share of lines."""
    handle = open_context(glossary())
    handle.records(pattern=r"^(?P<term>\w+) \| tool")
    assert handle.records().fields[:2] == ["field 1", "field 2"]
    handle.records(template="TERM | KIND | MEANING")
    assert handle.records().fields == ["term", "kind", "meaning"]


def test_it_refuses_a_form_the_rest_of_the_text_does_not_follow() -> None:
    """It refuses a structure found in the first lines when the whole text falls under the gate."""
    text = glossary() * 30 + PROSE * 200
    assert sniff(text.split("\n")).kind == "structure"
    recs = parse_text(text)
    assert recs.shape == "paragraphs" and recs.fields == ["text"]
    assert "the form found in the first lines reads only" in repr(recs)
    probe = open_context(text).probe()  # the brief offers what records() reads: no fields
    assert probe.shape == "paragraphs" and "reads only" in probe.structure["shape"]
    assert open_context(glossary() * 30).probe().shape == "structure"


def test_it_reads_delimited_cells_with_empty_ones_as_fields_by_place() -> None:
    """Cells between one delimiter, some empty, are fields by position on every line, even
    where the first lines happen to share words the rest do not (no constant is assumed)."""
    rng = random.Random(3)
    rows = [f"{i:04X};SPARE BOLT {i};steel;;{rng.choice(['', 'zinc'])};{i % 7}" for i in range(300)]
    rows += [f"{i:04X};{rng.choice(['HINGE', 'LATCH'])} {i};brass;{i % 3};;{i % 5}" for i in range(300, 600)]
    recs = parse_text("\n".join(rows))
    assert recs.shape == "structure" and recs.coverage == 1.0 and len(recs) == 600
    assert recs.fields[:3] == ["field 1", "field 2", "field 3"]
    assert recs.find("0150")[0]["field 3"] == "brass" and "field 5" not in recs.find("0150")[0]
    assert recs.count("field 3", "steel") == 300


def test_a_comment_line_is_set_aside() -> None:
    """It sets aside lines opening with a common comment marker: not records, not counted in the coverage."""
    text = "% parts list\n% checked monthly\n" + glossary()
    recs = parse_text(text)
    assert len(recs) == len(TERMS) and recs.coverage == 1.0 and recs[0].line == 3


def test_blank_lines_between_rows_of_one_form_head_nothing() -> None:
    """It reads groups of rows of one form, blank lines between, as rows: the first of a group is not the others' parent."""
    text = "\n".join(glossary() for _ in range(4))
    found = structure.discover(text.split("\n"))
    assert found.ok and found.layout == "lines"


def test_a_recipe_book_in_blocks_holds_its_lines_under_its_title() -> None:
    """It reads blank-line blocks whose first line differs from the rest as a title holding the others."""
    text = "\n".join(f"{dish}\n" + "".join(f"- {q} g {what}\n" for q, what in items) for dish, items in [
        ("Oat bake", [(200, "oats"), (50, "honey"), (2, "salt")]), ("Pea soup", [(500, "peas"), (10, "mint")]),
        ("Nut loaf", [(300, "nuts"), (100, "flour"), (5, "yeast"), (1, "salt")]), ("Fig jam", [(400, "figs"), (200, "sugar")])])
    recs = parse_text(text)
    assert recs.shape == "structure" and len(recs.children_of("Nut loaf")) == 4
    assert recs.parent_of("yeast")[0]["field 1"] == "Nut loaf"


def test_two_forms_give_one_column_one_name_and_groups_of_them_head_nothing() -> None:
    """Lines of two forms (a range of bins with a count, or one bin), groups of them between
    blank lines: one column has one name in both forms (the wood, after the same colon), and
    the first line of a group is a row, not the others' parent."""
    woods = ["oak", "pine", "ash", "elm"]
    groups = []
    for g in range(4):
        rows = [f"B{g}{k}~B{g}{k + 3} @ {('west', 'east')[k % 2]} : {woods[k % 4]} [{k + 2}] planks" for k in range(6)]
        rows += [f"B{g}{k}9 @ {('north', 'south')[k % 2]} : {woods[(k + 1) % 4]}  beam" for k in range(5)]
        groups.append("\n".join(rows))
    recs = parse_text("\n\n".join(groups))
    assert recs.shape == "structure" and recs.coverage == 1.0 and "parent" not in repr(recs)
    wood = next(f for f in recs.fields if {r.get(f) for r in recs} == set(woods))
    store = next(f for f in recs.fields if {r.get(f) for r in recs} == {"west", "east", "north", "south"})
    assert wood != store and all(r.parent is None for r in recs)


# The tables of a seed bank: the same rows drawn six ways. The hand-written table reader these
# replaced was deleted on 2026-12-07; its table shapes are now the structure's.
SEEDS = [("S-101", "runner bean", "vault 2", "40"), ("S-102", "broad bean", "vault 1", ""),
         ("S-103", "kale, curly", "vault 2", "12"), ("S-104", "chard", "vault 3", "7"),
         ("S-105", "leek", "vault 1", "55"), ("S-106", "sorrel", "vault 2", "3")]


def _seed_rows(names: tuple[str, ...] = ("lot", "crop", "store", "packets")) -> list[tuple[str, ...]]:
    return [names, *SEEDS]


def _tables() -> dict[str, str]:
    rows = _seed_rows()
    quoted = "\n".join(",".join(f'"{c}"' if "," in c else c for c in row) for row in rows)
    tabs = "\n".join("\t".join(row) for row in rows)
    bars = "\n".join("| " + " | ".join(row) + " |" for row in rows[:1]) + "\n|---|---|---|---:|\n" + "\n".join(
        "| " + " | ".join(row) + " |" for row in rows[1:])
    fixed = "\n".join(f"{a.upper() if r == 0 else a:<8}{b.upper() if r == 0 else b:<14}{c.upper() if r == 0 else c:<10}"
                      f"{d.upper() if r == 0 else d}".rstrip() for r, (a, b, c, d) in enumerate(rows))
    return {"csv-quoted": quoted, "tsv-empty-last": tabs, "markdown": bars, "fixed-empty-last": fixed}


@pytest.mark.parametrize("name", sorted(_tables()))
def test_a_table_header_names_its_columns_however_it_is_drawn(name: str) -> None:
    """It names a table's columns by its header row (lower case, of another form than the rows
    below or over few repeated values), reads a quoted cell holding the delimiter whole, a row
    whose last cell is empty, and sets a markdown rule line aside."""
    text = _tables()[name]
    shape = sniff(text.split("\n"))
    assert shape.kind == "structure" and [h for h in shape.structure.header if h] == ["lot", "crop", "store", "packets"]
    assert shape.describe().startswith("a table with a header row; fields: 'lot', 'crop', 'store', 'packets'")
    recs = parse_text(text)
    assert len(recs) == 6 and recs.coverage == 1.0, recs
    assert recs.find("S-103")[0]["crop"] == "kale, curly"
    assert recs.find("S-102")[0].get("packets") is None and recs.count("store", "vault 2") == 3


def test_a_first_row_like_the_rows_below_is_no_header() -> None:
    """It reads a first row of the same forms as the rows below as data, fields by place."""
    text = "\n".join(",".join(row) for row in SEEDS)
    found = structure.discover(text.split("\n"))
    assert found.ok and not found.header and found.fields[0] == "field 1"
    assert len(parse_text(text)) == 6


def test_a_small_table_is_read_by_its_header() -> None:
    """It reads two rows under a header row, though two rows are too few to tell constant parts from fields."""
    recs = parse_text("lot;crop;packets\nS-1;leek;4\nS-2;kale;9\n")
    assert recs.shape == "structure" and recs.find("S-2")[0]["crop"] == "kale"
    assert parse_text("a quiet lane\nthe old mill\n").fields == ["text"]

