"""``context/hops.py``: the next hop of a question's chain that an output reached, over
records of shapes no eval suite writes (a choir's seating, a tool library's loans)."""

from __future__ import annotations

from rlm_runtime.context.hops import counted, next_hop
from rlm_runtime.context.records import parse_text

SEATING = "".join(f"singer: {name}\nvoice: {voice}\nneighbour: {near}\nrow: {row}\n\n" for name, voice, near, row in [
    ("Ilse Varga", "alto", "Tom Reyes", "2"), ("Tom Reyes", "tenor", "Ilse Varga", "3"),
    ("Maud Quint", "alto", "Ilse Varga", "1"), ("Maud Quint", "bass", "Tom Reyes", "4")])


def hop_of(text: str, question: str, shown: str):  # type: ignore[no-untyped-def]
    recs = parse_text(text)
    return next_hop(recs, question, shown)


def test_a_printed_link_names_the_record_and_the_field_asked() -> None:
    """It finds, in the output, the neighbour of the singer the question names, and says the
    row the question asks of that singer's own record (matching case-blind, plural or not)."""
    hop = hop_of(SEATING, "Which row does the neighbour of ilse varga sit in?", "neighbour: Tom Reyes")
    assert hop is not None
    assert (hop.start, hop.link, hop.value, hop.name_field, hop.field) == ("ilse varga", "neighbour", "Tom Reyes", "singer", "row")
    assert hop.line == 6


def test_no_hop_without_a_whole_printed_link_or_with_the_target_shown() -> None:
    """It says nothing when the output holds the value only inside a longer word, when it also
    shows the target, when the question names one field, or when two records share the start."""
    question = "Which row does the neighbour of Ilse Varga sit in?"
    assert hop_of(SEATING, question, "Tom Reyesson") is None
    assert hop_of(SEATING, question, "Tom Reyes sits in row 3") is None
    assert hop_of(SEATING, "What is the row of Ilse Varga?", "Tom Reyes") is None
    assert hop_of(SEATING, "Which row does the neighbour of Maud Quint sit in?", "Tom Reyes, Ilse Varga") is None


def test_list_and_nested_values_are_no_links() -> None:
    """It follows only plain values: a list or an object in a field is not a link."""
    loans = "".join(f'{{"tool": "t{i}", "borrower": ["t{i + 1}"], "shelf": "s{i}"}}\n' for i in range(6))
    assert hop_of(loans, "Which shelf has the borrower of t1?", "['t2']") is None


def test_a_short_output_of_the_starts_own_field_is_one_hop_short() -> None:
    """It finds the hop when a short output shows the row of Ilse Varga herself (2), where
    the question asks her neighbour's; not when that value is only part of a long listing."""
    question = "Which row does the neighbour of Ilse Varga sit in?"
    hop = hop_of(SEATING, question, "row: 2")
    assert hop is not None and (hop.value, hop.field, hop.target, hop.own) == ("Tom Reyes", "row", "3", "2")
    assert hop_of(SEATING, question, "row: 2 " + "x" * 400) is None


def test_a_count_is_a_number_standing_alone_where_the_value_asked_has_no_digit() -> None:
    """``counted`` takes "3" and "1,204 records" for counts, never the digits of a name
    ("north-3"), and nothing when the value asked holds digits itself (a made-up serial)."""
    assert counted("There are 3.", "sand") and counted("1,204 records", "sand")
    assert not counted("the companion of north-3", "sand") and not counted("bed DW-1645", "sand")
    assert not counted("1000", "82199") and not counted("none", "sand")
