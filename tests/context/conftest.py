"""Helpers for the context-handle tests: random multi-byte text and files holding it."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

# Pieces of 1, 2, 3 and 4 UTF-8 bytes, spaces and both line endings (no lone "\r":
# handles split lines on "\n" and drop a "\r" before it, as grep does).
PIECES = ("a", "b", "Z", " ", "\n", "\r\n", "é", "ß", "€", "中", "😀", "🦄", "xyz", "0")


def random_text(rng: random.Random, n_pieces: int, pieces: tuple[str, ...] = PIECES) -> str:
    return "".join(rng.choice(pieces) for _ in range(n_pieces))


@pytest.fixture
def write_file(tmp_path: Path) -> Callable[..., Path]:
    """Write str (UTF-8, newlines untouched) or bytes to a file under tmp_path."""

    def write(name: str, content: str | bytes) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_bytes(content.encode("utf-8"))
        return path

    return write


@pytest.fixture
def make_text() -> Callable[..., str]:
    """random_text(rng, n_pieces, pieces=PIECES)."""
    return random_text
