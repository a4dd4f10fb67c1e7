"""Old public names kept for one release, each warning once where it is used."""

from __future__ import annotations

import warnings
from typing import TypeVar

T = TypeVar("T")


def renamed(old: str, new: str, value: T) -> T:
    """``value`` under its old name ``old``, with a DeprecationWarning naming ``new``."""
    warnings.warn(f"{old} is deprecated and will be removed in the next release: use {new}",
                  DeprecationWarning, stacklevel=3)
    return value
