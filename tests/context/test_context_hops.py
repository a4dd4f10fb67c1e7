"""``context/hops.py``: the rules the answer checks read the records by (a count told from a
misread value), over records of shapes no eval suite writes."""

from __future__ import annotations

import json

from rlm_runtime.context import about
from rlm_runtime.context.hops import asked_count, counted, misread
from rlm_runtime.context.records import parse_text, value_index_of


def test_a_count_is_a_number_standing_alone_where_the_value_asked_has_no_digit() -> None:
    """``counted`` takes "3" and "1,204 records" for counts, never the digits of a name
    ("north-3"), and nothing when the value asked holds digits itself (a made-up serial)."""
    assert counted("There are 3.", "sand") and counted("1,204 records", "sand")
    assert not counted("the companion of north-3", "sand") and not counted("bed DW-1645", "sand")
    assert not counted("1000", "82199") and not counted("none", "sand")


# A kitchen's stock list: "item" is also an item's name, and "shelf" both a field and a kind.
STOCK = parse_text("name,kind,shelf\nPAN,cookware,top\nitem,label,low\npot,cookware,middle\nrack,shelf,low\n"
                   "hook,shelf,top\nlid,cookware,top\ntray,shelf,middle\n")


def test_a_quoted_value_is_the_one_a_question_asks_about() -> None:
    """A value the question puts in quotes is the one it asks about: another word of the
    question that happens to be a record's name gives way to it, so the read it asks is found."""
    question = "What is the shelf of the item 'PAN'?"
    assert about.within(question, STOCK.fields, value_index_of(STOCK)) == (["shelf"], ["PAN"])
    hop = misread(STOCK, question, "It is on the low shelf.")
    assert hop is not None and (hop.start, hop.field, hop.target) == ("PAN", "shelf", "top")
    # Unquoted, both words are names: no one read is asked.
    assert misread(STOCK, "What is the shelf of the item PAN?", "It is on the low shelf.") is None


def test_a_quoted_value_that_is_also_a_field_name_is_a_value() -> None:
    """A quoted word the records hold as a value is a value even where a field has that name:
    the count of the records of that value is found."""
    count = asked_count(STOCK, "How many items have the kind 'shelf'?")
    assert count is not None and (count.field, count.value, count.n, count.children) == ("kind", "shelf", 3, False)
    assert asked_count(STOCK, "How many items have the kind shelf?") is None  # unquoted: the field, no value
    # A quote the records do not hold changes nothing; an apostrophe opens no quote.
    assert about.within("the shelf of 'spoon' and PAN's kind", STOCK.fields, value_index_of(STOCK)) == (
        ["kind", "shelf"], ["PAN"])


def test_a_count_of_what_one_record_holds_names_it_by_any_value_it_alone_holds() -> None:
    """A question counting what a record holds may name it by a value of another field than
    its name, when no other record holds that value: the count is of its children, not the
    one record holding the value; a value several records hold is counted as before."""
    pantry = parse_text(json.dumps({"shelves": [
        {"code": "S1", "label": "spices", "jars": [{"jar": "cumin"}, {"jar": "clove"}, {"jar": "mace"}]},
        {"code": "S2", "label": "grains", "jars": [{"jar": "rice"}]},
        {"code": "S3", "label": "grains", "jars": [{"jar": "oats"}, {"jar": "rye"}]}]}, indent=1))
    count = asked_count(pantry, "How many jars does the shelf labelled 'spices' hold?")
    assert count is not None and (count.value, count.n, count.children) == ("spices", 3, True)
    assert len(pantry.children_of("spices")) == 3  # the code the assist's note gives counts the same
    count = asked_count(pantry, "How many shelves have the label 'grains'?")
    assert count is not None and (count.field, count.n, count.children) == ("label", 2, False)


def test_a_lookup_in_a_field_no_record_has_says_which_field_holds_the_value() -> None:
    """``where`` and ``count`` of a field the records lack say which field holds the value
    whole, and how many records, beside the fields there are."""
    said = repr(STOCK.where("category", "shelf"))
    assert "no record has a field 'category'" in said and "'shelf' is the 'kind' of 3 records" in said
