"""How many workers and concurrent calls this machine can take: the ``Governor``.

It decides from available memory, the per-worker memory cap and the CPU count, under a
configured ceiling, and sizes a local model server's slots. It reads the machine (psutil)
and nothing of the runtime, so the sandbox's pool, the local model client and the session
all size themselves with it without importing the layers above them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

_MIB = 1024 * 1024
#: Slots of a local llama.cpp server per CPU (see ``Governor.local_model_slots``).
LOCAL_SLOTS_PER_CPU = 2


@dataclass(frozen=True)
class Governor:
    """How many workers and concurrent sub-calls this machine can take.

    Args:
        available_bytes: memory available now (psutil's ``available``).
        cpu_count: logical CPUs.
        worker_mb: the memory cap of one worker.
        headroom_mb: memory left for the host, the OS and a local model.
        ceiling: the configured maximum of either.
    """

    available_bytes: int
    cpu_count: int
    worker_mb: int = 512
    headroom_mb: int = 1536
    ceiling: int = 8

    @classmethod
    def from_system(cls, worker_mb: int = 512, ceiling: int = 8, headroom_mb: int = 1536) -> Governor:
        import psutil

        return cls(int(psutil.virtual_memory().available), os.cpu_count() or 1, worker_mb, headroom_mb, ceiling)

    @property
    def max_workers(self) -> int:
        """Workers that fit in memory beside the headroom; at least one, at most the ceiling."""
        spare_mb = self.available_bytes // _MIB - self.headroom_mb
        return max(1, min(self.ceiling, spare_mb // max(self.worker_mb, 1), 2 * self.cpu_count))

    @property
    def max_concurrent_calls(self) -> int:
        """Sub-calls in flight: mostly waiting on the network, so more than CPUs, but each
        may lead to a child worker, so never more than memory allows for those."""
        return max(1, min(self.ceiling, 4 * self.cpu_count, self.max_workers * 4))

    def local_model_slots(self, *, model_bytes: int, kv_bytes_per_token: int, root_tokens: int, slot_tokens: int) -> int:
        """Slots of a local llama.cpp server: how many requests it decodes together.

        Each slot beyond the first adds ``slot_tokens`` of KV cache, which must fit in the
        memory left beside the headroom, the model and the root conversation's window. CPUs
        cap it too: batched decoding shares each weight read among the slots, so on a CPU
        the throughput grows with slots until the arithmetic saturates the cores
        (``LOCAL_SLOTS_PER_CPU``, measured in bench/LOCAL_ENGINES.md).
        """
        spare = self.available_bytes - self.headroom_mb * _MIB - model_bytes - root_tokens * kv_bytes_per_token
        per_slot = max(1, slot_tokens * kv_bytes_per_token)
        by_memory = 1 + max(0, spare) // per_slot
        by_cpu = LOCAL_SLOTS_PER_CPU * self.cpu_count
        return int(max(1, min(self.ceiling, by_memory, by_cpu)))

    def describe(self) -> str:
        return (f"{self.available_bytes // _MIB} MB available, {self.cpu_count} CPUs, {self.worker_mb} MB per worker: "
                f"up to {self.max_workers} workers and {self.max_concurrent_calls} concurrent sub-calls")
