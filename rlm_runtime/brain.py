"""Prompt files from ``brain/``: the user's copy under ``$RLM_HOME/brain`` first."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from string import Template

from rlm_runtime.errors import ConfigError


@lru_cache(maxsize=64)
def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def prompt(name: str, dirs: tuple[Path, ...], **values: object) -> str:
    """Fill ``prompts/<name>.md`` with ``values`` (``$name`` placeholders)."""
    for folder in dirs:
        path = folder / "prompts" / f"{name}.md"
        if path.is_file():
            try:
                return Template(_read(path)).substitute({k: str(v) for k, v in values.items()}).strip()
            except (KeyError, ValueError) as e:
                raise ConfigError(f"{path}: placeholder {e} has no value") from e
    raise ConfigError(f"prompt file prompts/{name}.md not found in {', '.join(map(str, dirs))}")
