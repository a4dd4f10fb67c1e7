"""Where the runtime's memory goes now, beside what the ``Governor`` allows it: for ``rlm
sandbox doctor`` and ``/api/health``.

On the 8 GB machine the design targets, a worker's cap, the local model server's RAM and the
lazy contexts' cache decide whether a question fits. ``report`` puts the governor's figures
(memory available, CPUs, the cap of a worker, the headroom it keeps, the workers and
concurrent calls it allows) beside what is used: this process's resident memory, the lazy
cache's use and budget, the workers the caller names (a server's sessions) and each local
model server this process started. Reading it costs a few ``psutil`` calls.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

from rlm_runtime.governor import Governor

_MB = 1024 * 1024


def _rss(pid: int) -> int | None:
    import psutil

    try:
        return int(psutil.Process(pid).memory_info().rss)
    except (psutil.Error, OSError):
        return None


def report(governor: Governor | None = None, *, worker_rss: Sequence[int | None] = ()) -> dict[str, Any]:
    """The governor's figures and the memory in use (megabytes). ``worker_rss``: the resident
    memory of the workers the caller holds (None: a worker not started)."""
    import psutil

    from rlm_runtime.context.handles import DEFAULT_LAZY_CACHE

    gov = governor or Governor.from_system()
    local = sys.modules.get("rlm_runtime.llm.local")  # not imported: no local model runs here
    servers = [(name, _rss(pid)) for name, pid in (local.running() if local is not None else [])]
    live = [r for r in worker_rss if r is not None]
    return {
        "machine": {"total_mb": int(psutil.virtual_memory().total // _MB), "available_mb": gov.available_bytes // _MB,
                    "cpus": gov.cpu_count},
        "governor": {"worker_mb": gov.worker_mb, "headroom_mb": gov.headroom_mb, "ceiling": gov.ceiling,
                     "max_workers": gov.max_workers, "max_concurrent_calls": gov.max_concurrent_calls},
        "use": {"host_rss_mb": (_rss(os.getpid()) or 0) // _MB,
                "lazy_cache_mb": DEFAULT_LAZY_CACHE.used // _MB, "lazy_cache_budget_mb": DEFAULT_LAZY_CACHE.budget // _MB,
                "workers": len(live), "workers_rss_mb": sum(live) // _MB,
                "local_models": [{"name": name, "rss_mb": None if rss is None else rss // _MB} for name, rss in servers]},
    }


def render(found: dict[str, Any]) -> str:
    """The report as lines for a terminal."""
    m, g, u = found["machine"], found["governor"], found["use"]
    rows = ["Memory:",
            f"  machine   {m['available_mb']:,} MB available of {m['total_mb']:,} MB, {m['cpus']} CPUs",
            f"  governor  {g['worker_mb']:,} MB a worker, {g['headroom_mb']:,} MB kept for the host and a local model: "
            f"up to {g['max_workers']} workers and {g['max_concurrent_calls']} concurrent sub-calls (ceiling {g['ceiling']})",
            f"  in use    this process {u['host_rss_mb']:,} MB; lazy contexts {u['lazy_cache_mb']:,} of "
            f"{u['lazy_cache_budget_mb']:,} MB ([probe] lazy_cache_mb)"]
    if u["workers"]:
        rows.append(f"            {u['workers']} workers {u['workers_rss_mb']:,} MB")
    for model in u["local_models"]:
        rss = "?" if model["rss_mb"] is None else f"{model['rss_mb']:,} MB"
        rows.append(f"            local model {model['name']} {rss}")
    return "\n".join(rows)
