"""``context/hops.py``: the rules the answer checks read the records by (a count told from a
misread value), over records of shapes no eval suite writes."""

from __future__ import annotations

from rlm_runtime.context.hops import counted


def test_a_count_is_a_number_standing_alone_where_the_value_asked_has_no_digit() -> None:
    """``counted`` takes "3" and "1,204 records" for counts, never the digits of a name
    ("north-3"), and nothing when the value asked holds digits itself (a made-up serial)."""
    assert counted("There are 3.", "sand") and counted("1,204 records", "sand")
    assert not counted("the companion of north-3", "sand") and not counted("bed DW-1645", "sand")
    assert not counted("1000", "82199") and not counted("none", "sand")
