"""Where the contexts of an ``rlm eval`` task file may come from.

A task file is often someone else's (a benchmark bundle), and a context is pasted into a
prompt sent to a model provider, so the file must not be able to name the user's private
files. The rules (``SourceRules``):

* A context path must resolve (``~``, ``..`` and every symlink followed) to a regular file or
  a folder inside the root: the task file's own folder, or ``--context-root DIR``. Anything
  else (an absolute path elsewhere, ``/proc/self/environ``, a symlink in the folder that
  points out, a FIFO or a device that would block or never end) is refused.
* ``memory:`` (the user's own memory store) and ``memory:STORE`` are refused unless
  ``--allow-memory``; a ``STORE`` path is then confined as any other path.
* ``ctx:ID`` (a context of the user's registry, ``rlm context``) is resolved now and its real
  path confined exactly as a path the file wrote: a registered file or folder is allowed only
  when it lies inside the root. A registered text is refused (it has no path to confine: it
  is the user's own text), and a registered memory store is a ``memory:STORE`` (refused
  unless ``--allow-memory``, then confined). An unknown id is refused like a missing file.

The paths handed on are the resolved ones, so what was checked is what is read. Files inside
a folder context are read without following symlinks (``context.corpus`` for ``rlm`` and
``rag``, ``methods.context_text`` for ``direct``).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from rlm_runtime.errors import RLMError, SourceRefused

#: The flag that widens the root (named in every refusal).
ROOT_FLAG = "--context-root"
#: The flag that allows ``memory:`` contexts.
MEMORY_FLAG = "--allow-memory"


@dataclass(frozen=True)
class SourceRules:
    """What a task file's contexts may name.

    Args:
        root: the folder every context must resolve into (None: the task file's folder).
        allow_memory: ``memory:`` contexts (the user's store, or a store file under the root).
        registry: the registry ``ctx:ID`` contexts are looked up in (None: ``$RLM_HOME``'s).
    """

    root: Path | None = None
    allow_memory: bool = False
    registry: Path | None = None

    def root_for(self, base: Path) -> Path:
        """The resolved root for a task file whose folder is ``base``."""
        return (self.root if self.root is not None else base).expanduser().resolve()


def _shown(text: object, limit: int = 300) -> str:
    """A path for a message: a task file's path can be megabytes long."""
    text = str(text)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text):,} characters)"


def confine(path: str, base: Path, rules: SourceRules) -> Path:
    """``path`` (as the task file wrote it) resolved against ``base``, checked by ``rules``.

    Raises:
        SourceRefused: it does not exist, resolves outside the root, or is not a regular file
            or a folder.
    """
    if "\x00" in path:
        raise SourceRefused(f"a path with a NUL character: {_shown(repr(path))}")
    try:
        p = Path(path).expanduser()
    except RuntimeError as e:  # ~nosuchuser/...
        raise SourceRefused(f"cannot expand {_shown(repr(path))}: {e}") from e
    joined = p if p.is_absolute() else base / p
    try:
        real = joined.resolve(strict=True)
        mode = real.stat().st_mode
    except FileNotFoundError as e:
        raise SourceRefused(f"no such file or folder: {_shown(joined)}") from e
    except (OSError, RuntimeError, ValueError) as e:  # a symlink loop, a path too long, no permission
        raise SourceRefused(f"cannot read {_shown(joined)}: {getattr(e, 'strerror', None) or _shown(e)}") from e
    root = rules.root_for(base)
    if not real.is_relative_to(root):
        shown = _shown(path) if str(real) == path else f"{_shown(path)} (resolves to {_shown(real)})"
        raise SourceRefused(f"outside {root}: {shown}; pass {ROOT_FLAG} DIR to allow contexts under DIR")
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise SourceRefused(f"not a regular file or a folder: {_shown(path)}")
    return real


def confine_ref(ref: str, base: Path, rules: SourceRules) -> tuple[Path, str]:
    """The real path of the registered context ``ref`` (``ctx:ID``) and its kind, confined by
    ``rules`` as a path the task file wrote would be (see the module docstring).

    Raises:
        SourceRefused: an unknown id, a registered text, a path outside the root, or not a
            regular file or a folder.
    """
    from rlm_runtime.registry import Registry

    root = rules.root_for(base)
    try:
        with Registry.open(rules.registry) as registry:
            resolved = registry.resolve(ref, roots=[root])
    except SourceRefused as e:
        raise SourceRefused(f"{_shown(ref, 80)} is registered outside {root}; pass {ROOT_FLAG} DIR to allow "
                            "contexts under DIR") from e
    except RLMError as e:
        raise SourceRefused(f"{_shown(ref, 80)}: {_shown(e)}") from e
    if resolved.path is None:
        raise SourceRefused(f"{_shown(ref, 80)} is a text held in your registry of contexts, not a file under {root}: "
                            "a task file may not read it")
    return confine(str(resolved.path), base, rules), resolved.entry.kind


def refuse_memory(store: str, rules: SourceRules) -> None:
    """Raise unless ``rules`` allow a ``memory:`` context (``store``: what follows the colon)."""
    if not rules.allow_memory:
        which = "your own memory store" if not store else f"the memory store {_shown(repr(store))}"
        raise SourceRefused(f"memory:{_shown(store, 80)} reads {which}; refused unless {MEMORY_FLAG}")


def open_regular(path: Path, *, follow: bool = False) -> int:
    """A read-only descriptor of ``path`` that is a regular file reached without following a
    symlink at its last component (a folder's entry may be swapped after it was listed;
    ``follow``: a symlink is followed, and what it leads to must be a regular file). A FIFO is
    never waited on, nor a device read.

    Raises:
        SourceRefused: it is no regular file. OSError: it cannot be opened."""
    fd = os.open(path, os.O_RDONLY | (0 if follow else getattr(os, "O_NOFOLLOW", 0)) | getattr(os, "O_NONBLOCK", 0)
                 | getattr(os, "O_CLOEXEC", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise SourceRefused(f"not a regular file: {path}")
    return fd
