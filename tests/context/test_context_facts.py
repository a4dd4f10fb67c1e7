"""Facts: prose whose sentences each state one fact about a named thing, read into fields."""

from __future__ import annotations

import time

import pytest

from rlm_runtime.context import facts, probe_path, records

# Three wordings, none of them the eval suites' (those are tested in tests/eval with their
# own parsers): a name then pronouns; the value first and clauses joined by ", and"; a
# possessive with a sentence the forms do not read.
DEPOTS = [("Harbour Seven", "north", "Ines Roy", "1998", "Lyon basin"),
          ("Quay Mill", "south", "Paul Ek", "2004", "Porto coast"),
          ("Old Forge", "east", "Ana Lind", "1975", "Lyon basin"),
          ("Salt Gate", "west", "Ines Roy", "2011", "Oslo fjord"),
          ("Iron Yard", "north", "Tom Berg", "1990", "Porto coast"),
          ("Copper Row", "east", "Quay Mill", "2001", "Lyon basin")]


def pronoun_prose() -> str:
    return "".join(f"{n} is a depot in the {side}. Its manager is {m}. It opened in {y}. Its region is {r}.\n\n"
                   for n, side, m, y, r in DEPOTS)


def value_first_lines() -> str:
    return "".join(f"{m} manages {n}, and the depot holds {len(n)} trucks. {n} sits in {r.split()[0]}.\n"
                   for n, _, m, _, r in DEPOTS)


def possessive_prose() -> str:
    out = []
    for k, (n, _, m, y, _) in enumerate(DEPOTS):
        extra = " Nobody remembers why the gate was painted green." if k == 2 else ""
        out.append(f"{n}'s supervisor is {m}. {n}'s opening year was {y}.{extra}\n\n")
    return "".join(out)


def mined(text: str) -> facts.Facts | None:
    return facts.mine(text.split("\n"))


def test_it_reads_a_name_and_pronouns_into_fields():
    """It reads each paragraph of "X is a ... Its manager is Y" into a record, the name first."""
    recs = records.parse_text(pronoun_prose())
    assert recs.shape == "facts"
    assert len(recs) == len(DEPOTS)
    first = recs[0]
    assert list(first)[0] == "name" and first["name"] == "Harbour Seven"
    assert (first["manager"], first["opened"], first["region"]) == ("Ines Roy", "1998", "Lyon basin")
    assert recs.count("region", "lyon basin") == 3
    assert recs.tally("manager")["Ines Roy"] == 2


def test_it_reads_values_written_before_the_name_and_clauses():
    """It reads "Y manages X, and the depot holds N trucks" lines: a form that ends with the name, and a clause each."""
    recs = records.parse_text(value_first_lines())
    assert recs.shape == "facts"
    salt = recs.find("Salt Gate")[0]
    assert salt["manages"] == "Ines Roy"
    assert salt["depot holds"] == "9 trucks"
    assert salt["sits"] == "Oslo"
    assert [r.line for r in recs] == list(range(1, len(DEPOTS) + 1))


def test_it_follows_a_link_between_records():
    """It lets code follow a value that names another record (Copper Row's manager is a depot)."""
    recs = records.parse_text(pronoun_prose())
    boss = recs.find("Copper Row")[0]["manager"]
    assert recs.find(boss)[0]["region"] == "Porto coast"


def test_it_keeps_the_sentences_no_form_reads():
    """It keeps a sentence no form reads in the record's text field, not dropping it."""
    recs = records.parse_text(possessive_prose())
    assert recs.shape == "facts"
    forge = recs.find("Old Forge")[0]
    assert forge["supervisor"] == "Ana Lind"
    assert forge["opening year"] == "1975"
    assert "painted green" in forge["text"]
    assert "text" not in recs.find("Quay Mill")[0]


def test_a_value_may_begin_with_the_name():
    """It reads a value that starts with the record's own name ("Its annex is Quay Mill Annex")."""
    text = pronoun_prose().replace("Its region is Porto coast.", "Its region is Quay Mill Annex.", 1)
    quay = records.parse_text(text).find("Quay Mill")[0]
    assert quay["name"] == "Quay Mill"
    assert quay["region"] == "Quay Mill Annex"


def test_ordinary_prose_is_not_read_as_facts():
    """It leaves prose that does not repeat sentence forms as paragraphs (Python's own topic help)."""
    topics = pytest.importorskip("pydoc_data.topics").topics
    text = "\n\n".join(list(topics.values())[:80])
    assert records.sniff(text.split("\n")).kind != "facts"
    story = ("The rain had not stopped for three days. Mara counted the boats again.\n\n"
             "Her brother said the harbour would flood by morning. Nobody believed him.\n\n"
             "By noon the water reached the steps of the chapel. The bells rang twice.\n\n"
             "They carried the nets up the hill, one by one, until dark.\n\n") * 3
    assert mined(story) is None


def test_the_probe_names_the_shape_and_fields(tmp_path):
    """It says in the probe brief that the text is facts, with the fields found."""
    path = tmp_path / "depots.txt"
    path.write_text(pronoun_prose() * 4)
    brief = probe_path(path)
    assert brief.shape == "facts"
    assert "manager" in brief.structure["shape"] and "sentences of facts" in brief.structure["shape"]
    assert "facts" in records.FIELDED_SHAPES


def test_a_hostile_paragraph_stays_linear():
    """It parses a paragraph of a hundred thousand sentences, and one sentence of a million words, in bounded time."""
    forms = mined(pronoun_prose())
    assert forms is not None
    many = "Harbour Seven is a depot in the north. " + "Its manager is Ines Roy. " * 100_000
    long = "Its region is " + "very " * 1_000_000 + "far."
    started = time.perf_counter()
    out = list(facts.parse([many, "", long], forms))
    elapsed = time.perf_counter() - started
    assert len(out) == 2
    assert len([k for k, _ in out[0][1] if k == "manager"]) == 100_000
    assert out[1][1][-1][0] == "text" and out[1][1][-1][1].endswith("far")  # too long to read: kept whole
    assert elapsed < 30


def test_mining_needs_a_few_paragraphs():
    """It reads nothing as facts from fewer paragraphs than it needs to see a form repeat."""
    two = "".join(pronoun_prose().split("\n\n")[:2])
    assert mined(two) is None
    assert records.parse_text(two).shape == "paragraphs"


def test_a_field_name_from_the_text_is_cut_in_the_description():
    """It cuts each field name the shape's description shows (the text's own words) to 40 characters."""
    long_word = "x" * 5000
    text = "".join(f"{n} is a depot. Its {long_word} is {m}. Its region is {r}.\n\n" for n, _, m, _, r in DEPOTS)
    shape = records.sniff(text.split("\n"))
    assert shape.kind == "facts" and any(len(f) > 1000 for f in shape.fields)
    assert len(shape.describe()) < 400
