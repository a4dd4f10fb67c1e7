"""Shared fixtures: a temp RLM_HOME for every test, sandboxes, and planted secrets."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlm_runtime.sandbox import CellLimits, Sandbox

SECRET_VALUE = "s3cr3t-CANARY-7f3a9c"


@pytest.fixture(autouse=True)
def _rlm_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("rlm_home")
    monkeypatch.setenv("RLM_HOME", str(home))
    return home


@pytest.fixture
def secret(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A secret planted in the host's environment and in a file only the host may read."""
    folder = tmp_path_factory.mktemp("secret")
    path = folder / "secret.txt"
    path.write_text(SECRET_VALUE)
    os.chmod(path, 0o600)
    monkeypatch.setenv("RLM_TEST_SECRET", SECRET_VALUE)
    return {"value": SECRET_VALUE, "path": str(path), "env": "RLM_TEST_SECRET"}


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    with Sandbox("default", CellLimits(cell_timeout_s=5, kill_grace_s=0.5, memory_mb=256)) as sb:
        yield sb

