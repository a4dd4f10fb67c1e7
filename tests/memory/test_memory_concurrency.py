"""Many readers and one writer at a time, across processes: writers queue on the busy timeout,
readers are never blocked, a writer kept waiting too long gets a clear error."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from _timing import SLACK_S

from rlm_runtime.memory import MemorySettings, MemoryStore, StoreError

WRITER = """
import sys
from rlm_runtime.memory import MemoryStore
st = MemoryStore(sys.argv[1])
for i in range(int(sys.argv[3])):
    st.add_text(f"{sys.argv[2]} writes note {i} about the shared bittern", source=sys.argv[2])
print("done")
"""


def test_two_writer_processes_and_a_reader(open_store: Callable[..., MemoryStore], store_path: Path) -> None:
    """It lets two processes write at once (one commit at a time) while a third searches without errors."""
    reader = open_store()
    reader.add_text("the shared bittern booms")
    n = 60
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(store_path), name, str(n)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for name in ("w1", "w2")]
    searches = 0
    deadline = time.monotonic() + 60 + SLACK_S
    while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        reader.search("bittern", k=5, record=False)
        searches += 1
    outs = [p.communicate(timeout=60 + SLACK_S) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert out.strip() == "done"
    assert searches > 0
    assert reader.stats().chunks == 1 + 2 * n
    assert len(reader.search("bittern", source="w1", k=100, record=False)) == n
    assert reader.integrity_check() == []


def test_writer_kept_waiting_gets_a_clear_error(open_store: Callable[..., MemoryStore], store_path: Path) -> None:
    """It raises StoreError saying the store is busy when another writer holds it past the timeout."""
    st = open_store(MemorySettings(busy_timeout_s=0.2))
    st.add_text("first")
    other = sqlite3.connect(store_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        with pytest.raises(StoreError, match="busy"):
            st.add_text("second")
        assert time.monotonic() - started < 0.2 + SLACK_S
        hits = st.search("first")  # reads go on meanwhile; the recall count waits for a free store
        assert [h.chunk_id for h in hits] == [1] and not hits.recorded
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert st.add_text("third")


def test_one_store_shared_by_threads(store: MemoryStore) -> None:
    """It serves threads writing and searching through one MemoryStore at once."""
    import threading

    errors: list[BaseException] = []

    def work(name: str) -> None:
        try:
            for i in range(30):
                store.add_text(f"{name} logs heron {i}", source=name)
                store.search("heron", k=3)
        except BaseException as e:  # noqa: BLE001 - the test reports any failure
            errors.append(e)

    threads = [threading.Thread(target=work, args=(f"t{n}",)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60 + SLACK_S)
    assert errors == [] and store.stats().chunks == 120 and store.integrity_check() == []
