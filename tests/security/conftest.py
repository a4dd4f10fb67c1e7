"""Fixtures of the security suite (helpers in hostile.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostile import ESCAPED_POLICY, Attacker

from rlm_runtime.sandbox import CellLimits, Sandbox


@pytest.fixture
def umask_022() -> Iterator[None]:
    """A umask that leaves files group- and world-readable, as many users' is."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
def attacker(sandbox: Sandbox, secret: dict[str, str]) -> Attacker:
    """Hostile cells under the default policy."""
    return Attacker(sandbox, secret)


@pytest.fixture
def escaped_policy(tmp_path: Path) -> Path:
    path = tmp_path / "escaped.toml"
    path.write_text(ESCAPED_POLICY)
    return path


@pytest.fixture
def escaped(escaped_policy: Path, secret: dict[str, str]) -> Iterator[Attacker]:
    """Hostile cells that may import os, socket, ctypes...: only the OS layers stand."""
    with Sandbox(escaped_policy, CellLimits(cell_timeout_s=5, kill_grace_s=0.5, memory_mb=256)) as sb:
        yield Attacker(sb, secret)
