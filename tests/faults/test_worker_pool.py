"""The process-wide worker pool: sized from memory, held for real by every Sandbox.

The pool's own rules first (no workers: slots, call trees, waiting, timeouts, interrupts),
then real sandboxes: a slot is taken before the fork and comes back on every way a worker
can go (close, Ctrl-C, a failed start, close from another thread, a dropped sandbox), a
restart keeps its slot, and threads never have more workers alive than the pool allows
(counted with psutil, on a zygote of the test's own).
"""

from __future__ import annotations

import _thread
import collections
import functools
import gc
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from rlm_runtime.budget import Governor
from rlm_runtime.errors import ProtocolError, SandboxError, WorkersBusy
from rlm_runtime.sandbox import CellLimits, Sandbox, cleanup, frames, load_policy
from rlm_runtime.sandbox.pool import WorkerPool, default_pool, set_default_pool
from rlm_runtime.sandbox.zygote import Zygote

from ._support import SLACK_S

FAST = CellLimits(cell_timeout_s=2, kill_grace_s=0.3, memory_mb=128)
ROOT = Path(__file__).resolve().parents[2]
GB = 1 << 30


@pytest.fixture
def zygote() -> Iterator[Zygote]:
    """A zygote for this test alone, so its workers can be counted exactly."""
    z = Zygote(list(load_policy("default").allowed_imports))
    yield z
    z.close()


def in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    """Run ``fn`` in a thread; the dict gets its ``value`` or ``error``."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # reported to the test
            box["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, box


def wait_for(condition: Callable[[], bool], timeout: float = SLACK_S) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


# ------------------------------------------------------------------ sizing


@pytest.mark.parametrize(("available_gb", "cpus", "expected"), [
    (3, 8, 3),    # an 8 GB M2 Mac mini with 3 GB free: (3072 - 1536) // 512
    (3, 2, 3),    # the same memory on two cores (the CPU cap is 2 per core: 4)
    (2, 8, 1),    # 2 GB free: one 512 MB worker beside the 1.5 GB headroom
    (1, 8, 1),    # less than the headroom: still one
    (24, 2, 4),   # plenty of memory, two cores: the CPU cap
    (24, 16, 8),  # plenty of both: the ceiling
])
def test_governor_sizes_the_pool_from_memory(available_gb: int, cpus: int, expected: int) -> None:
    """It sizes the pool from free memory, CPUs and the ceiling: 3 workers with 3 GB free on an 8 GB machine."""
    governor = Governor(available_bytes=available_gb * GB, cpu_count=cpus, worker_mb=512)
    assert governor.max_workers == expected, governor.describe()


def test_default_pool_is_sized_lazily_and_replaceable(monkeypatch: pytest.MonkeyPatch) -> None:
    """It sizes the default pool from Governor.from_system() on first use, once, and lets it be replaced."""
    calls: list[int] = []

    def simulated(cls: type[Governor], *args: Any, **kwargs: Any) -> Governor:
        calls.append(1)
        return Governor(available_bytes=3 * GB, cpu_count=8, worker_mb=512)

    monkeypatch.setattr(Governor, "from_system", classmethod(simulated))
    previous = set_default_pool(None)
    try:
        assert calls == []  # nothing sized until asked
        first = default_pool()
        assert first.size == 3 and default_pool() is first and calls == [1]
        mine = WorkerPool(5)
        assert set_default_pool(mine) is first
        assert default_pool() is mine
    finally:
        set_default_pool(previous)


def test_pool_needs_a_slot() -> None:
    """It refuses a pool of no slots."""
    with pytest.raises(ValueError):
        WorkerPool(0)


# ------------------------------------------------------------ pool rules


def test_same_tree_gets_workers_busy_at_once() -> None:
    """It raises WorkersBusy at once when every slot is held by the requester's own call tree."""
    p = WorkerPool(2)
    held = [p.acquire("tree"), p.acquire("tree")]
    began = time.monotonic()
    with pytest.raises(WorkersBusy) as info:
        p.acquire("tree", timeout=60)
    assert time.monotonic() - began < 1.0
    assert info.value.pool_size == 2 and "call tree" in str(info.value)
    for lease in held:
        lease.release()
    assert p.in_use == 0


def test_other_tree_waits_and_gets_the_freed_slot() -> None:
    """It makes another tree wait, calls on_wait once with plain data, and hands over the slot when freed."""
    p = WorkerPool(1)
    lease = p.acquire("a")
    seen: list[dict[str, Any]] = []
    thread, box = in_thread(lambda: p.acquire("b", timeout=30, on_wait=seen.append))
    assert wait_for(lambda: bool(seen))
    time.sleep(0.3)
    assert "value" not in box and thread.is_alive()
    assert len(seen) == 1
    info = seen[0]
    assert {k: info[k] for k in ("pool_size", "in_use", "held_by_this_tree", "waiting", "timeout_s")} == \
        {"pool_size": 1, "in_use": 1, "held_by_this_tree": 0, "waiting": 1, "timeout_s": 30.0}
    assert 0.0 <= info["waited_s"] < 1.0 and "all 1 sandbox worker slots are in use" in info["detail"]
    assert all(type(v) in (int, float, str) for v in info.values())
    lease.release()
    thread.join(SLACK_S)
    assert box["value"].key == "b" and p.held_by("b") == 1 and p.held_by("a") == 0
    box["value"].release()
    assert p.in_use == 0 and p.peak == 1


def test_wait_times_out() -> None:
    """It raises WorkersBusy after the timeout when no slot comes free."""
    p = WorkerPool(1)
    lease = p.acquire("a")
    began = time.monotonic()
    with pytest.raises(WorkersBusy, match="within 0.3s"):
        p.acquire("b", timeout=0.3)
    assert 0.3 <= time.monotonic() - began < 0.3 + SLACK_S
    lease.release()


def test_on_wait_failure_is_ignored() -> None:
    """It keeps waiting when the on_wait callback raises."""
    p = WorkerPool(1)
    lease = p.acquire("a")

    def broken(info: dict[str, Any]) -> None:
        raise RuntimeError("display broke")

    thread, box = in_thread(lambda: p.acquire("b", timeout=30, on_wait=broken))
    time.sleep(0.3)
    lease.release()
    thread.join(SLACK_S)
    assert "value" in box, box


def test_waiters_are_served_in_order() -> None:
    """It serves waiting trees first come, first served."""
    p = WorkerPool(1)
    lease = p.acquire("a")
    order: list[str] = []

    def wait(key: str) -> None:
        got = p.acquire(key, timeout=30)
        order.append(key)
        time.sleep(0.05)
        got.release()

    first, _ = in_thread(lambda: wait("b"))
    assert wait_for(lambda: len(p._queue) == 1)
    second, _ = in_thread(lambda: wait("c"))
    assert wait_for(lambda: len(p._queue) == 2)
    lease.release()
    first.join(SLACK_S)
    second.join(SLACK_S)
    assert order == ["b", "c"]


def test_waiter_raises_once_its_own_tree_holds_every_slot() -> None:
    """It ends a wait with WorkersBusy when the slots it waited for all went to its own tree."""
    p = WorkerPool(2)
    mine, theirs = p.acquire("t"), p.acquire("other")
    thread_a, box_a = in_thread(lambda: p.acquire("t", timeout=30))
    assert wait_for(lambda: len(p._queue) == 1)
    thread_b, box_b = in_thread(lambda: p.acquire("t", timeout=30))
    assert wait_for(lambda: len(p._queue) == 2)
    theirs.release()  # goes to the first waiter: now "t" holds both
    thread_a.join(SLACK_S)
    thread_b.join(SLACK_S)
    assert box_a["value"].key == "t"
    assert isinstance(box_b.get("error"), WorkersBusy), box_b
    box_a["value"].release()
    mine.release()
    assert p.in_use == 0 and not p._queue


def test_cancelled_wait_raises_sandbox_error() -> None:
    """It ends a wait with SandboxError soon after its cancelled() turns True."""
    p = WorkerPool(1)
    lease = p.acquire("a")
    stop = threading.Event()
    thread, box = in_thread(lambda: p.acquire("b", timeout=60, cancelled=stop.is_set))
    time.sleep(0.2)
    stop.set()
    p.wake()
    thread.join(SLACK_S)
    assert type(box.get("error")) is SandboxError, box
    lease.release()
    assert p.in_use == 0 and not p._queue


def test_dropped_lease_gives_the_slot_back() -> None:
    """It gives a slot back when its lease is dropped without release, and release twice is harmless."""
    p = WorkerPool(1)
    lease = p.acquire("a")
    assert lease.held
    del lease
    gc.collect()
    assert p.in_use == 0
    again = p.acquire("b")
    again.release()
    again.release()
    assert p.in_use == 0 and not again.held


def test_interrupt_during_a_wait_leaves_the_pool_as_it_was() -> None:
    """It leaves no slot taken and no waiter queued when Ctrl-C lands during a wait."""
    p = WorkerPool(1)
    lease = p.acquire("a")
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        p.acquire("b", timeout=30)
    timer.join()
    assert p.in_use == 1 and not p._queue
    lease.release()
    p.acquire("b", timeout=1).release()
    assert p.in_use == 0


def test_an_interrupt_right_after_queueing_leaves_no_ticket_behind() -> None:
    """It takes its ticket out of the queue when Ctrl-C lands just after queueing it (a
    ticket left at the head would make every later acquire wait for ever)."""

    class InterruptedQueue(collections.deque):  # type: ignore[type-arg]
        def append(self, item: object) -> None:
            super().append(item)
            raise KeyboardInterrupt

    p = WorkerPool(1)
    lease = p.acquire("a")
    p._queue = InterruptedQueue()
    with pytest.raises(KeyboardInterrupt):
        p.acquire("b", timeout=5)
    assert not p._queue
    lease.release()
    p._queue = collections.deque()
    p.acquire("b", timeout=1).release()
    assert p.in_use == 0


# ---------------------------------------------------------- real sandboxes


def test_second_sandbox_waits_until_the_first_closes(zygote: Zygote) -> None:
    """It makes a sandbox of another tree wait for the only slot, tells on_wait, and runs once the first closes."""
    p = WorkerPool(1)
    first = Sandbox("default", FAST, zygote=zygote, pool=p, pool_key="first")
    first.start()
    assert p.in_use == 1 and p.held_by("first") == 1
    waits: list[dict[str, Any]] = []
    second = Sandbox("default", FAST, zygote=zygote, pool=p, pool_key="second", on_wait=waits.append)
    try:
        thread, box = in_thread(lambda: second.execute("print('second ran')"))
        assert wait_for(lambda: bool(waits))
        time.sleep(0.3)
        assert thread.is_alive() and second._worker is None
        assert first.execute("print('first still runs')").stdout == "first still runs\n"
        began = time.monotonic()
        first.close()
        thread.join(SLACK_S)
        assert time.monotonic() - began < SLACK_S
        assert box["value"].stdout == "second ran\n", box
        assert waits[0]["pool_size"] == 1 and waits[0]["held_by_this_tree"] == 0
        assert p.held_by("second") == 1 and p.held_by("first") == 0
    finally:
        second.close()
    assert p.in_use == 0


def test_same_tree_sandbox_raises_workers_busy_at_once(zygote: Zygote) -> None:
    """It raises WorkersBusy at once (not after pool_timeout_s) for a child of a tree that holds every slot."""
    p = WorkerPool(1)
    with Sandbox("default", FAST, zygote=zygote, pool=p, pool_key="tree") as root:
        child = Sandbox("default", FAST, zygote=zygote, pool=p, pool_key="tree", pool_timeout_s=600)
        began = time.monotonic()
        with pytest.raises(WorkersBusy) as info:
            child.execute("1")
        assert time.monotonic() - began < 2.0
        assert info.value.pool_size == 1 and isinstance(info.value, SandboxError)
        assert child._worker is None and child._owned == set()
        assert root.execute("print('root fine')").stdout == "root fine\n"
        child.close()
    assert p.in_use == 0


def test_nested_child_in_a_host_function_gets_workers_busy(zygote: Zygote) -> None:
    """It answers a child sandbox started from its root's host function with WorkersBusy, not a hang, when the tree holds every slot."""
    p = WorkerPool(1)

    def child_query() -> str:
        with Sandbox("default", FAST, zygote=zygote, pool=p, pool_key="tree") as child:
            return child.execute("print('child')").stdout

    with Sandbox("default", FAST, zygote=zygote, pool=p, pool_key="tree", host_functions={"child": child_query}) as root:
        began = time.monotonic()
        result = root.execute("child()")
        assert time.monotonic() - began < 3.0
        assert result.error is not None and "WorkersBusy" in result.error, result
    assert p.in_use == 0


def test_slot_comes_back_after_close(zygote: Zygote) -> None:
    """It gives the slot back on close, after the worker process is gone."""
    p = WorkerPool(1)
    sb = Sandbox("default", FAST, zygote=zygote, pool=p)
    sb.start()
    assert sb._worker is not None
    pid = sb._worker.pid
    sb.close()
    assert p.in_use == 0
    assert cleanup.wait_gone(pid, 0.01)  # gone before the slot came back


def test_restart_keeps_the_slot_from_a_waiter(zygote: Zygote) -> None:
    """It replaces a worker killed at the timeout, or crashed, with the same slot, while another tree waits."""
    p = WorkerPool(1)
    a = Sandbox("default", FAST, zygote=zygote, pool=p, pool_key="a")
    b = Sandbox("default", FAST, zygote=zygote, pool=p, pool_key="b")
    try:
        a.start()
        thread, box = in_thread(lambda: b.execute("print('b ran')"))
        assert wait_for(lambda: len(p._queue) == 1)
        killed = a.execute("sum(range(10**12))")  # one C call: a kill at timeout + grace
        assert killed.worker_restarted, killed
        a.register("crash", lambda: os.killpg(a._worker.pid, signal.SIGKILL) if a._worker else None)
        crashed = a.execute("crash()")
        assert crashed.worker_restarted, crashed
        assert p.held_by("a") == 1 and p.in_use == 1 and p.peak == 1
        assert thread.is_alive() and "value" not in box
        assert a.execute("print('a again')").stdout == "a again\n"
        a.close()
        thread.join(SLACK_S)
        assert box["value"].stdout == "b ran\n", box
    finally:
        a.close()
        b.close()
    assert p.in_use == 0


def test_interrupted_cell_gives_the_slot_back(zygote: Zygote) -> None:
    """It gives the slot back when a cell is interrupted (KeyboardInterrupt from a host function), and takes one again for the next cell."""

    def ctrl_c() -> None:
        raise KeyboardInterrupt

    p = WorkerPool(1)
    with Sandbox("default", FAST, zygote=zygote, pool=p, host_functions={"ctrl_c": ctrl_c}) as sb:
        assert sb._worker is not None
        pid = sb._worker.pid
        with pytest.raises(KeyboardInterrupt):
            sb.execute("ctrl_c()")
        assert p.in_use == 0 and cleanup.wait_gone(pid, 0.01)
        result = sb.execute("print('next')")
        assert result.stdout == "next\n" and result.worker_restarted
        assert p.in_use == 1
    assert p.in_use == 0


def test_sigint_during_a_cell_gives_the_slot_back(zygote: Zygote) -> None:
    """It gives the slot back when a real SIGINT interrupts execute() in the main thread."""
    p = WorkerPool(1)
    with Sandbox("default", CellLimits(cell_timeout_s=30, kill_grace_s=0.5, memory_mb=128), zygote=zygote, pool=p) as sb:
        assert sb._worker is not None
        pid = sb._worker.pid
        main = threading.main_thread().ident
        assert main is not None
        timer = threading.Timer(0.5, signal.pthread_kill, (main, signal.SIGINT))
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            sb.execute("while True: pass")
        timer.join()
        assert p.in_use == 0 and cleanup.wait_gone(pid, 0.01)
    assert p.in_use == 0


def test_failed_start_gives_the_slot_back(zygote: Zygote, monkeypatch: pytest.MonkeyPatch) -> None:
    """It gives the slot back when the worker does not start, and leaves no worker."""

    def refuse(msg: dict[str, Any]) -> Any:
        raise ProtocolError("simulated bad ready frame")

    p = WorkerPool(1)
    monkeypatch.setattr(frames, "ready_frame", refuse)
    sb = Sandbox("default", FAST, zygote=zygote, pool=p)
    with pytest.raises(SandboxError, match="did not start"):
        sb.start()
    assert p.in_use == 0 and sb._owned == set()
    monkeypatch.undo()
    sb.start()
    assert p.in_use == 1
    sb.close()
    assert p.in_use == 0


def test_close_from_another_thread_ends_a_wait_for_a_slot(zygote: Zygote) -> None:
    """It makes a start waiting for a slot raise SandboxError soon after another thread closes the sandbox."""
    p = WorkerPool(1)
    with Sandbox("default", FAST, zygote=zygote, pool=p, pool_key="holder"):
        waiting = Sandbox("default", FAST, zygote=zygote, pool=p, pool_key="waiter")
        thread, box = in_thread(waiting.start)
        assert wait_for(lambda: len(p._queue) == 1)
        began = time.monotonic()
        waiting.close()
        thread.join(SLACK_S)
        assert time.monotonic() - began < 1.0
        assert isinstance(box.get("error"), SandboxError) and not isinstance(box["error"], WorkersBusy), box
        assert p.in_use == 1 and not p._queue
    assert p.in_use == 0


def test_sandbox_dropped_without_close_gives_its_slot_back(zygote: Zygote) -> None:
    """It kills the worker and frees the slot of a sandbox collected without close()."""
    p = WorkerPool(1)
    sb = Sandbox("default", FAST, zygote=zygote, pool=p)
    sb.start()
    assert sb._worker is not None
    pid = sb._worker.pid
    del sb
    gc.collect()
    assert p.in_use == 0
    assert cleanup.wait_gone(pid, 2.0)
    with Sandbox("default", FAST, zygote=zygote, pool=p, pool_timeout_s=1) as again:
        assert again.execute("print(1)").stdout == "1\n"


def test_pool_timeout_raises_workers_busy(zygote: Zygote) -> None:
    """It raises WorkersBusy from start() after pool_timeout_s when another tree keeps the only slot."""
    p = WorkerPool(1)
    with Sandbox("default", FAST, zygote=zygote, pool=p, pool_key="holder"):
        late = Sandbox("default", FAST, zygote=zygote, pool=p, pool_key="late", pool_timeout_s=0.3)
        with pytest.raises(WorkersBusy, match="0.3s"):
            late.start()
        late.close()
    assert p.in_use == 0


def test_threads_never_have_more_workers_than_the_pool(zygote: Zygote) -> None:
    """It keeps at most 2 workers alive (counted with psutil) while 5 threads each run sandboxes on a pool of 2."""
    p = WorkerPool(2)
    handed: set[int] = set()
    spawn = zygote.spawn

    def counting_spawn() -> Any:
        pid, sock = spawn()
        handed.add(pid)
        return pid, sock

    zygote.spawn = counting_spawn  # type: ignore[method-assign]
    stop = threading.Event()
    most = [0]

    def alive(pid: int) -> bool:
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    def sample() -> None:
        while not stop.is_set():
            most[0] = max(most[0], sum(alive(pid) for pid in list(handed)))
            time.sleep(0.002)

    def session(i: int) -> list[str]:
        outputs = []
        for round_ in range(2):
            with Sandbox("default", FAST, zygote=zygote, pool=p, pool_key=f"t{i}") as sb:
                for k in range(3):
                    outputs.append(sb.execute(f"print({i * 100 + round_ * 10 + k})").stdout)
        return outputs

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    threads = [in_thread(functools.partial(session, i)) for i in range(5)]
    for thread, _box in threads:
        thread.join(120)
    stop.set()
    sampler.join()
    for i, (thread, box) in enumerate(threads):
        assert not thread.is_alive()
        assert box.get("value") == [f"{i * 100 + r * 10 + k}\n" for r in range(2) for k in range(3)], box
    assert len(handed) == 10
    assert 1 <= most[0] <= 2, most
    assert p.peak == 2 and p.in_use == 0
    assert wait_for(lambda: not any(alive(pid) for pid in handed))


def test_default_pool_is_used_without_one(zygote: Zygote) -> None:
    """It draws a slot from the default pool when the Sandbox is given none."""
    mine = WorkerPool(3)
    previous = set_default_pool(mine)
    try:
        with Sandbox("default", FAST, zygote=zygote) as sb:
            sb.execute("1")
            assert mine.in_use == 1
        assert mine.in_use == 0
    finally:
        assert set_default_pool(previous) is mine


def test_slot_comes_back_at_exit(tmp_path: Path) -> None:
    """It gives the slot of a sandbox left open back when the program exits (atexit), after its worker is gone."""
    script = tmp_path / "left_open.py"
    script.write_text(
        "import atexit\n"
        "box = []\n"
        "# Registered first, so it runs last: after the sandbox module's own exit hook.\n"
        "atexit.register(lambda: print('at exit:', box[0].in_use, box[1]._owned == set(), flush=True))\n"
        "from rlm_runtime.sandbox import CellLimits, Sandbox\n"
        "from rlm_runtime.sandbox.pool import WorkerPool\n"
        "pool = WorkerPool(1)\n"
        "sb = Sandbox('default', CellLimits(cell_timeout_s=2), pool=pool)\n"
        "box[:] = [pool, sb]\n"
        "print('running:', sb.execute('print(1)').stdout.strip(), pool.in_use, flush=True)\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                          cwd=str(ROOT), env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["running: 1 1", "at exit: 0 True"], done
