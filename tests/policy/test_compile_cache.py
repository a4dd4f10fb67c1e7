"""The compile cache: a report is keyed by content, policy cache key and file name."""

from __future__ import annotations

from rlm_runtime.sandbox.policy import Policy, check


def test_allows_the_same_source_twice_to_share_one_report(default: Policy) -> None:
    """It allows the second check of the same source to return the very same report object."""
    first = check("cached = 1\ncached", default)
    assert check("cached = 1\ncached", default) is first


def test_allows_str_and_bytes_of_the_same_source_to_share_a_report(default: Policy) -> None:
    """It allows str and its UTF-8 bytes to hit the same cache entry."""
    assert check("same = 'é'", default) is check("same = 'é'".encode(), default)


def test_allows_refusals_to_be_cached_too(default: Policy) -> None:
    """It allows a refused report to be returned again from the cache."""
    first = check("import os  # cache", default)
    assert not first.ok
    assert check("import os  # cache", default) is first


def test_denies_sharing_a_report_between_policies(default: Policy, strict: Policy) -> None:
    """It denies a cache hit across policies: each report names its own policy."""
    a = check("import functools", default)
    b = check("import functools", strict)
    assert a is not b
    assert (a.ok, a.policy, b.ok, b.policy) == (True, "default", False, "strict")


def test_allows_an_equal_policy_loaded_twice_to_share_a_report(default: Policy) -> None:
    """It allows two loads of the same policy (same cache key) to share a report."""
    again = Policy(**default.model_dump())
    assert again is not default and again.cache_key() == default.cache_key()
    assert check("shared_fp = 1", again) is check("shared_fp = 1", default)


def test_allows_sharing_a_report_across_different_limits(default: Policy) -> None:
    """It allows a cache hit when only the limits differ: limits never change the compiled code."""
    tighter = default.with_limits(cell_timeout_s=3)
    assert tighter.limits.cell_timeout_s == 3 and tighter.cache_key() == default.cache_key()
    assert check("limits_key = 1", default) is check("limits_key = 1", tighter)


def test_denies_a_stale_cache_key_after_a_rules_change(default: Policy) -> None:
    """It denies a copy with other rules the cache key computed before the rules changed."""
    before = default.cache_key()
    assert default.model_copy(update={"allowed_imports": ("re",)}).cache_key() != before


def test_denies_a_cached_verdict_for_a_copy_with_other_rules(default: Policy) -> None:
    """It denies an import the copied policy no longer allows, though the original allowed it."""
    assert check("import json  # stale", default).ok
    narrower = default.model_copy(update={"allowed_imports": ("re",)})
    assert not check("import json  # stale", narrower).ok


def test_denies_sharing_a_report_across_file_names(default: Policy) -> None:
    """It denies a cache hit across file names (the compiled code carries the name)."""
    a = check("fname = 1", default, filename="<cell-1>")
    b = check("fname = 1", default, filename="<cell-2>")
    assert a is not b
    assert (a.code.co_filename, b.code.co_filename) == ("<cell-1>", "<cell-2>")  # type: ignore[union-attr]


def test_denies_unbounded_growth(default: Policy) -> None:
    """It denies keeping every report: old entries are evicted after a few hundred checks."""
    first = check("evicted = 0", default)
    for i in range(300):
        check(f"filler_{i} = {i}", default)
    assert check("evicted = 0", default) is not first
