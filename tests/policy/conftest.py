"""Fixtures of the policy tests: the shipped policies, and a sandbox under ``strict``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rlm_runtime.sandbox import CellLimits, Sandbox
from rlm_runtime.sandbox.policy import Policy, load_policy


@pytest.fixture
def default() -> Policy:
    return load_policy("default")


@pytest.fixture
def strict() -> Policy:
    return load_policy("strict")


@pytest.fixture(params=["default", "strict"])
def any_policy(request: pytest.FixtureRequest) -> Policy:
    """Each shipped policy in turn, for rules that hold under both."""
    return load_policy(request.param)


@pytest.fixture
def strict_sandbox() -> Iterator[Sandbox]:
    with Sandbox("strict", CellLimits(cell_timeout_s=5, kill_grace_s=0.5, memory_mb=256)) as sb:
        yield sb
