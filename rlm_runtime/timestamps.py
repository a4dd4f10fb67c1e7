"""Times read back from files someone else may have written (a memory store, the registry of
contexts): what counts as a time, and how one is shown to a person.

Every timestamp this code writes is seconds since the epoch from the clock: finite, within
the years 1 to 9999. SQLite checks no range, so a store or registry file from elsewhere can
hold 1e300, an infinity or 2**63 where a time goes; ``time.localtime`` raises on those
(``OverflowError``, ``OSError``: "rlm: internal error"), and an age computed from one is
infinite or negative. ``valid`` says whether a value is a time at all; ``when`` shows one as a
date, and anything else as ``invalid time``. Callers treat an invalid time as unknown (no
recency, no expiry), never as a date.
"""

from __future__ import annotations

import time

#: 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z: the times a date can show.
EARLIEST = -62_135_596_800.0
LATEST = 253_402_300_799.0
#: How a value that is not a time is shown.
INVALID = "invalid time"


def valid(value: object) -> float | None:
    """``value`` as seconds since the epoch when it is a number between ``EARLIEST`` and
    ``LATEST``, else None (not a number, a bool, an infinity, NaN, out of range)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        t = float(value)
    except OverflowError:  # an int beyond any float
        return None
    return t if EARLIEST <= t <= LATEST else None  # NaN fails both comparisons


def when(value: object, missing: str = "never") -> str:
    """A stored time as a local date (``2026-12-06 14:30:00``); ``missing`` for None;
    ``INVALID`` for a value that is no time, or one this platform cannot show."""
    if value is None:
        return missing
    t = valid(value)
    if t is None:
        return INVALID
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
    except (OverflowError, OSError, ValueError):  # a platform whose time_t or localtime is narrower
        return INVALID


__all__ = ["EARLIEST", "INVALID", "LATEST", "valid", "when"]
