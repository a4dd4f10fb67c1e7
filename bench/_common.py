"""What the bench scripts share: a percentile and a description of the machine they ran on.

The scripts run as ``python bench/NAME.py``, so this folder is on ``sys.path``.
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import sys
from collections.abc import Sequence
from typing import Any


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0 < q < 1), interpolating linearly between order statistics."""
    if not values:
        return math.nan
    if len(values) == 1:
        return float(values[0])
    cuts = statistics.quantiles(values, n=1000, method="inclusive")  # cuts[k-1] is the k/1000 quantile
    return cuts[min(max(round(q * 1000), 1), 999) - 1]


def machine() -> dict[str, Any]:
    """Python, platform, CPUs and the 1-minute load when the run started."""
    try:
        load: float | None = os.getloadavg()[0]
    except OSError:
        load = None
    return {"python": sys.version.split()[0], "executable": sys.executable, "platform": platform.platform(),
            "cpus": os.cpu_count(), "load_1min": load}
