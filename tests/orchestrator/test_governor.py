"""The governor: how many workers and concurrent sub-calls a machine can take, from simulated
memory and CPU figures; and the Slots gate that enforces it."""

from __future__ import annotations

import threading
import time

import pytest

from rlm_runtime.budget import Governor, Slots

GB = 1 << 30
MB = 1 << 20


def test_an_8gb_m2_with_3gb_available_leaves_headroom() -> None:
    """It allows only a few 512 MB workers on an 8 GB M2 with ~3 GB available, keeping the headroom free."""
    m2 = Governor(available_bytes=3 * GB, cpu_count=8, worker_mb=512)
    assert 1 <= m2.max_workers <= 3
    assert m2.max_workers * 512 + m2.headroom_mb <= 3 * 1024
    assert 1 <= m2.max_concurrent_calls <= m2.ceiling


def test_a_busy_8gb_m2_gets_one_worker() -> None:
    """It still allows one worker when less than the headroom is available."""
    busy = Governor(available_bytes=1 * GB, cpu_count=8, worker_mb=512)
    assert busy.max_workers == 1
    assert busy.max_concurrent_calls >= 1


def test_a_big_machine_is_capped_by_the_ceiling() -> None:
    """It never allows more than the configured ceiling, however much memory there is."""
    big = Governor(available_bytes=256 * GB, cpu_count=64, worker_mb=512, ceiling=8)
    assert big.max_workers == 8
    assert big.max_concurrent_calls == 8


def test_few_cpus_cap_the_workers() -> None:
    """It allows at most two workers per CPU, even with memory to spare."""
    one_cpu = Governor(available_bytes=64 * GB, cpu_count=1, worker_mb=256, ceiling=32)
    assert one_cpu.max_workers == 2
    assert one_cpu.max_concurrent_calls == 4


@pytest.mark.parametrize("available_gb", [2, 3, 4, 6, 8, 16])
def test_workers_fit_in_memory_beside_the_headroom(available_gb: int) -> None:
    """It keeps max_workers x worker_mb + headroom within the available memory (when more than one worker)."""
    g = Governor(available_bytes=available_gb * GB, cpu_count=8, worker_mb=512, ceiling=64)
    if g.max_workers > 1:
        assert g.max_workers * g.worker_mb + g.headroom_mb <= available_gb * 1024


def test_bigger_workers_mean_fewer_workers() -> None:
    """It allows fewer workers as the per-worker memory cap grows."""
    counts = [Governor(available_bytes=6 * GB, cpu_count=8, worker_mb=w, ceiling=64).max_workers for w in (128, 256, 512, 1024, 2048)]
    assert counts == sorted(counts, reverse=True)
    assert counts[0] > counts[-1]


def test_more_memory_never_means_fewer_workers() -> None:
    """It is monotonic in available memory."""
    counts = [Governor(available_bytes=mb * MB, cpu_count=4, worker_mb=512).max_workers for mb in range(0, 16 * 1024, 256)]
    assert counts == sorted(counts)


def test_concurrent_calls_follow_cpus_and_memory() -> None:
    """It allows more sub-calls than workers (they mostly wait on the network) but within 4 per CPU."""
    g = Governor(available_bytes=3 * GB, cpu_count=2, worker_mb=512, ceiling=64)
    assert g.max_concurrent_calls <= 4 * g.cpu_count
    assert g.max_concurrent_calls >= g.max_workers


def test_a_zero_worker_cap_does_not_divide_by_zero() -> None:
    """It treats worker_mb=0 as one MB."""
    assert Governor(available_bytes=4 * GB, cpu_count=2, worker_mb=0).max_workers >= 1


def test_describe_names_the_figures() -> None:
    """It describes memory, CPUs, worker size and the resulting caps."""
    text = Governor(available_bytes=3 * GB, cpu_count=8, worker_mb=512).describe()
    assert "3072 MB available" in text and "8 CPUs" in text and "512 MB per worker" in text
    assert "up to 3 workers" in text


def test_from_system_reads_this_machine() -> None:
    """It builds a governor from this machine's memory and CPUs."""
    g = Governor.from_system(worker_mb=256, ceiling=4)
    assert g.available_bytes > 0 and g.cpu_count >= 1
    assert 1 <= g.max_workers <= 4
    assert 1 <= g.max_concurrent_calls <= 4


def test_slots_queue_callers_beyond_their_size() -> None:
    """It lets at most ``size`` holders in at once and queues the rest."""
    slots = Slots(3)
    lock = threading.Lock()
    now = peak = 0

    def work() -> None:
        nonlocal now, peak
        with slots.hold():
            with lock:
                now += 1
                peak = max(peak, now)
            time.sleep(0.02)
            with lock:
                now -= 1

    threads = [threading.Thread(target=work) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak == 3
    assert slots.peak == 3
    assert slots.in_use == 0


def test_slots_are_released_on_error() -> None:
    """It frees a slot when its holder raises."""
    slots = Slots(1)
    with pytest.raises(ValueError), slots.hold():
        raise ValueError
    with slots.hold():
        assert slots.in_use == 1
