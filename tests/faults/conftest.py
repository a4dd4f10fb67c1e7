"""Fixtures of the fault tests: sandboxes with small, fast limits."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from rlm_runtime.sandbox import CellLimits, Sandbox

#: Short enough to keep the suite fast, long enough for a loaded two-core machine.
TIMEOUT_S = 2.0
GRACE_S = 0.5
MEMORY_MB = 128


@pytest.fixture
def make_sandbox() -> Iterator[Callable[..., Sandbox]]:
    """Open sandboxes with the given policy and limits; all are closed after the test."""
    opened: list[Sandbox] = []

    def make(policy: Any = "default", host_functions: dict[str, Any] | None = None, **limits: Any) -> Sandbox:
        settings: dict[str, Any] = {"cell_timeout_s": TIMEOUT_S, "kill_grace_s": GRACE_S, "memory_mb": MEMORY_MB, **limits}
        sandbox = Sandbox(policy, CellLimits(**settings), host_functions=host_functions)
        opened.append(sandbox)
        sandbox.start()
        return sandbox

    yield make
    for sandbox in opened:
        sandbox.close()


@pytest.fixture
def sb(make_sandbox: Callable[..., Sandbox]) -> Sandbox:
    """A default-policy sandbox: 2 s cells, 0.5 s grace, 128 MB."""
    return make_sandbox()
