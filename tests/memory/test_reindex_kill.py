"""kill -9 of ``rlm memory reindex`` half-way: the store stays sound, keeps every committed batch, and the next reindex finishes the rest."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlm_runtime.memory import IngestConfig, MemorySettings, MemoryStore

pytest.importorskip("numpy")
from rlm_runtime.embeddings import installed  # noqa: E402

pytestmark = pytest.mark.skipif(not installed(), reason="the embed extra is not installed")

CHUNKS = 6000


def vectors(path: Path) -> int:
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT count(*) FROM chunk_vectors").fetchone()[0])
    finally:
        conn.close()


def reindex(path: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.Popen([sys.executable, "-m", "rlm_runtime.cli", "memory", "reindex", "--store", str(path), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_reindex_killed_midway_is_finished_by_the_next(tmp_path: Path) -> None:
    """It leaves a sound store after kill -9 with the batches it committed, and a second run embeds only the rest."""
    path = tmp_path / "memory.db"
    settings = MemorySettings(ingest=IngestConfig(min_tokens=3, max_tokens=20))
    with MemoryStore(path, settings=settings, embedder=None) as st:  # a store written without the model
        st.add_text("\n\n".join(f"note {i} about the harbour crane number {i % 97}" for i in range(CHUNKS)), source="notes")
        total = st.stats().chunks
    assert total >= CHUNKS and vectors(path) == 0

    proc = reindex(path, "--batch", "5")
    deadline = time.monotonic() + 60
    while vectors(path) < 200 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "the reindex ended before it could be killed half-way: " + (proc.stderr.read() if proc.stderr else "")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    kept = vectors(path)
    assert 200 <= kept < total

    with MemoryStore(path) as st:
        assert st.integrity_check() == []
    again = reindex(path, "--json")
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    report = json.loads(out)
    assert report["embedded"] == total - kept and report["kept"] == kept and report["vectors"] == total
    assert "vectors" in err  # progress on stderr
