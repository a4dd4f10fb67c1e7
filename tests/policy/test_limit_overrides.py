"""Policy.with_limits: per-session overrides of a policy's limits, validated like the file."""

from __future__ import annotations

import pytest

from rlm_runtime.errors import ConfigError
from rlm_runtime.sandbox.policy import Policy


def test_allows_overriding_some_limits(default: Policy) -> None:
    """It allows replacing some limits, keeping the others and the rules."""
    tighter = default.with_limits(cell_timeout_s=3, memory_mb=128)
    assert (tighter.limits.cell_timeout_s, tighter.limits.memory_mb) == (3.0, 128)
    assert tighter.limits.output_chars == default.limits.output_chars
    assert (tighter.name, tighter.allowed_imports, tighter.code) == (default.name, default.allowed_imports, default.code)


def test_denies_changes_to_the_original(default: Policy) -> None:
    """It denies with_limits any effect on the policy it was called on."""
    default.with_limits(cell_timeout_s=3)
    assert default.limits.cell_timeout_s == 30.0


def test_allows_none_to_mean_unchanged(default: Policy) -> None:
    """It allows None values (unset CLI options): with nothing to change, the same policy comes back."""
    assert default.with_limits() is default
    assert default.with_limits(cell_timeout_s=None, memory_mb=None) is default
    assert default.with_limits(cell_timeout_s=None, memory_mb=300).limits.memory_mb == 300


@pytest.mark.parametrize(("overrides", "match"), [
    ({"cell_timeout_s": -1}, "cell_timeout_s: Input should be greater than 0"),
    ({"cell_timeout_s": 0}, "cell_timeout_s: Input should be greater than 0"),
    ({"memory_mb": 1}, "memory_mb: Input should be greater than or equal to 32"),
    ({"memory_mb": "lots"}, "memory_mb: Input should be a valid integer"),
    ({"output_chars": 10**9}, "output_chars: Input should be less than or equal to 10000000"),
    ({"timeout": 3}, "timeout: Extra inputs are not permitted"),
])
def test_denies_invalid_overrides(default: Policy, overrides: dict[str, object], match: str) -> None:
    """It denies invalid or unknown limits with a ConfigError naming the field."""
    with pytest.raises(ConfigError, match=f"^invalid limits: {match}"):
        default.with_limits(**overrides)
