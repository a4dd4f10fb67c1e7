"""Probe settings: ``ProbeConfig`` and where it comes from (``[probe]`` in rlm.toml, or
``[tool.rlm.probe]`` in pyproject.toml), for ``rlm probe`` and for ``rlm ask`` / ``RLM`` alike.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rlm_runtime.config import load_probe_settings
from rlm_runtime.context.protocol import DEFAULT_EXCLUDES
from rlm_runtime.errors import ConfigError


class ProbeConfig(BaseModel):
    """How probes judge relevance and decide what to load.

    Args:
        keywords: words that make a context relevant (case-insensitive). Set explicitly, they
            also gate: a context or a corpus document scoring below ``min_relevance`` is
            skipped. Keywords taken from a question only rank documents (``describe``).
        load_max_tokens: load whole contexts up to this size.
        excerpt_max_tokens: above ``load_max_tokens`` and up to this, hand out excerpts;
            beyond it, still excerpt (never load) but say the context is huge.
        min_relevance: with keywords set, skip contexts scoring below this (0..1).
        excludes: folder and file names (globs) left out of folder inventories.
        extensions: when set, only files with these extensions are inventoried.
        max_depth: folder depth limit (None: no limit).
        earlier_answers: say, in the brief of a registered context (``ctx:ID``), which probes
            found the lines earlier questions' answers came from (``registry/leads.py``).
        lazy_cache_mb: the memory the texts of lazy contexts (a callable's) may hold at once,
            least recently read first out (``LazyCache``); a session sets the process's cache.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    keywords: tuple[str, ...] = ()
    load_max_tokens: int = Field(20_000, ge=0)
    excerpt_max_tokens: int = Field(2_000_000, ge=0)
    min_relevance: float = Field(0.05, ge=0, le=1)
    excludes: tuple[str, ...] = DEFAULT_EXCLUDES
    extensions: tuple[str, ...] | None = None
    max_depth: int | None = Field(None, ge=0)
    earlier_answers: bool = False
    lazy_cache_mb: int = Field(256, ge=1, le=1 << 20)


def load_probe_config(start: Path | None = None) -> ProbeConfig:
    """The ``ProbeConfig`` of the settings file found from ``start`` (default: the working
    directory) upwards; the defaults when no file has probe settings.

    Raises:
        ConfigError: the file is not valid TOML, or its settings are not valid probe
            settings (the message names the file and each bad setting).
    """
    settings, source = load_probe_settings(start)
    try:
        return ProbeConfig(**settings)  # type: ignore[arg-type]
    except ValidationError as e:
        detail = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'probe'}: {err['msg']}" for err in e.errors())
        raise ConfigError(f"invalid probe settings in {source or 'the defaults'}: {detail}") from e
