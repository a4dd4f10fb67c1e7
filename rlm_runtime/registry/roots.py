"""The root check: a registered path must lie under one of the roots its caller allows.

``roots`` is ``None`` for a trusted caller (a person on the command line: the path they typed
is the permission) or a list of folders (a server's ``--root`` folders; an empty list allows
nothing). The check runs on the real path (``Path.resolve(strict=True)``: every symlink and
``..`` followed), at registration and again at each use, so a path that has since become a
symlink pointing out of its roots is refused. What was checked is what is opened: callers
open the real path this returns.

A refusal names the path as given, never where it resolves: a remote caller learns nothing
about the folders outside its roots.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from rlm_runtime.errors import ContextError, ContextOutsideRoots
from rlm_runtime.registry.ids import shown

Roots = Sequence[str | os.PathLike[str]] | None


def real_roots(roots: Roots) -> list[Path] | None:
    """The roots resolved (a root that does not exist allows nothing); None stays None."""
    if roots is None:
        return None
    out = []
    for root in roots:
        try:
            out.append(Path(root).expanduser().resolve(strict=True))
        except (OSError, RuntimeError, ValueError):
            continue
    return out


def under(real: Path, roots: Roots) -> bool:
    """True when the real path ``real`` lies under one of ``roots`` (always, for None)."""
    allowed = real_roots(roots)
    return allowed is None or any(real == root or real.is_relative_to(root) for root in allowed)


def within(path: str | os.PathLike[str], roots: Roots) -> Path:
    """The real path of ``path``, which must exist and lie under one of ``roots``.

    Raises:
        ContextError: the path does not exist or cannot be resolved (a loop, a NUL, no permission).
        ContextOutsideRoots: it resolves outside every root.
    """
    try:
        real = Path(path).resolve(strict=True)
    except FileNotFoundError as e:
        raise ContextError(f"no such file or folder: {shown(os.fspath(path), 300)}") from e
    except (OSError, RuntimeError, ValueError) as e:
        raise ContextError(f"cannot resolve {shown(os.fspath(path), 300)}: {getattr(e, 'strerror', None) or e}") from e
    if not under(real, roots):
        raise ContextOutsideRoots(f"{shown(os.fspath(path), 300)} is outside the allowed roots")
    return real
