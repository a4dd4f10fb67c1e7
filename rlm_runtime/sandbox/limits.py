"""Resource limits of one sandbox session.

``CellLimits`` is plain configuration: it comes from a policy file and may be overridden per
session. The worker applies it to itself in ``lockdown.py`` (from a plain dict, so the
worker never imports pydantic).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class CellLimits(BaseModel):
    """What one cell and one worker may use.

    Args:
        cell_timeout_s: wall-clock time for one cell, host callbacks excluded. At the limit
            a timeout is raised inside the cell; ``kill_grace_s`` later the host kills the
            worker's process group and starts a fresh one (variables are lost).
        kill_grace_s: how long after the timeout the host waits before killing.
        memory_mb: memory the worker may allocate beyond its start-up footprint.
            Enforced by RLIMIT_AS where the OS honours it (Linux) and by the host's RSS
            watchdog everywhere.
        output_chars: printed output kept per cell; the rest is cut with a marker.
        open_files: RLIMIT_NOFILE of the worker.
        file_size_mb: RLIMIT_FSIZE of the worker (it can only write in its temp dir).
        scratch_mb: the most its temp dir may hold in all, in 64 files per MB (Linux: a
            private tmpfs mounted on it; memory, so it counts towards the machine's use).
        worker_cpu_s: total CPU seconds one worker may use over its life (RLIMIT_CPU hard).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    cell_timeout_s: float = Field(30.0, gt=0, le=24 * 3600)
    kill_grace_s: float = Field(1.0, gt=0, le=60)
    memory_mb: int = Field(512, ge=32, le=1024 * 1024)
    output_chars: int = Field(20_000, ge=100, le=10_000_000)
    open_files: int = Field(64, ge=16, le=4096)
    file_size_mb: int = Field(16, ge=0, le=1024 * 1024)
    scratch_mb: int = Field(16, ge=1, le=64 * 1024)
    worker_cpu_s: int = Field(3600, ge=1)


def __getattr__(name: str) -> object:
    if name == "Limits":
        from rlm_runtime._deprecated import renamed

        return renamed("rlm_runtime.sandbox.limits.Limits", "CellLimits", CellLimits)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
