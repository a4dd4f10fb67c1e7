"""``timestamps``: what a time read back from a store or registry file is, and how it is shown."""

from __future__ import annotations

import time

import pytest

from rlm_runtime import timestamps


@pytest.mark.parametrize("value", [0, 1_700_000_000, 1_700_000_000.5, -1.0])
def test_a_time_is_valid_and_shown_as_a_date(value: float) -> None:
    """It takes a number between the years 1 and 9999 as a time and shows it as a local date."""
    assert timestamps.valid(value) == float(value)
    assert timestamps.valid(timestamps.EARLIEST) == timestamps.EARLIEST and timestamps.valid(timestamps.LATEST) == timestamps.LATEST
    shown = timestamps.when(value)
    assert shown != timestamps.INVALID and shown == time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value))


@pytest.mark.parametrize("value", [1e300, -1e300, float("inf"), float("-inf"), float("nan"), 2**63 - 1, -(2**63), 10**400,
                                   timestamps.LATEST + 1, "1700000000", b"\x00", True, [1]])
def test_what_is_no_time_is_invalid(value: object) -> None:
    """It calls a value out of range, not finite, or not a number no time, and shows it as 'invalid time'."""
    assert timestamps.valid(value) is None
    assert timestamps.when(value) == timestamps.INVALID


def test_none_is_missing() -> None:
    """It shows None as the word the caller gives (never, by default)."""
    assert timestamps.when(None) == "never" and timestamps.when(None, missing="-") == "-"


def test_a_platform_that_cannot_show_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """It shows 'invalid time' where this platform's localtime refuses a time in range (a narrow time_t)."""
    def narrow(t: float) -> time.struct_time:
        raise OSError(75, "Value too large for defined data type")

    monkeypatch.setattr(time, "localtime", narrow)
    assert timestamps.when(1_700_000_000) == timestamps.INVALID
