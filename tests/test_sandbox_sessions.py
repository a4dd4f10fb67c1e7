"""Sessions that outlive one question: contexts added to a live worker, and access statistics.

Each test runs real workers (fork from the zygote, lock-down, seccomp): a context added
after lock-down reaches the worker as descriptors over its channel, and the counters of
every handle come back from the worker as checked plain data.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlm_runtime.errors import ContextError, SandboxError
from rlm_runtime.sandbox import CellLimits, Sandbox
from rlm_runtime.sandbox.frames import ATTACH_FDS_PER_FRAME, STAT_COUNTERS

LIMITS = CellLimits(cell_timeout_s=5, kill_grace_s=0.5, memory_mb=128)


@pytest.fixture
def sb() -> Iterator[Sandbox]:
    with Sandbox("default", LIMITS) as sandbox:
        yield sandbox


def crash(sandbox: Sandbox) -> None:
    """Kill the sandbox's worker from the host (the next cell finds it gone)."""
    assert sandbox._worker is not None
    os.killpg(sandbox._worker.pid, signal.SIGKILL)


def out(sandbox: Sandbox, code: str) -> str:
    result = sandbox.execute(code)
    assert result.error is None, result
    assert not result.worker_restarted, result
    return result.stdout


# ------------------------------------------------------------------ add_context


def test_add_context_before_start_is_mapped_at_start() -> None:
    """It appends a context added before the worker starts, and the worker maps it at start."""
    sandbox = Sandbox("default", LIMITS)
    try:
        assert sandbox.add_context("alpha\nbeta needle\n") == 0
        assert sandbox.add_context("second") == 1
        assert sandbox._worker is None
        assert out(sandbox, "print(len(contexts), grep('needle'))") == "2 2: beta needle\n"
    finally:
        sandbox.close()


def test_add_context_to_a_live_worker_keeps_variables(sb: Sandbox) -> None:
    """It maps a context into the running worker, binds context/peek/grep, and keeps every variable."""
    out(sb, "x = 41\nseen = []")
    pid = sb._worker.pid if sb._worker else 0
    assert sb.add_context("first line\nthe needle line\n") == 0
    assert out(sb, "print(x + 1, len(contexts), context is contexts[0])") == "42 1 True\n"
    assert out(sb, "print(grep('needle'))") == "2: the needle line\n"
    assert sb.add_context("another text") == 1
    assert out(sb, "print(len(contexts), contexts[1][:7], x)") == "2 another 41\n"
    assert out(sb, "print(grep('needle'))") == "2: the needle line\n"  # context is still the first
    assert sb._worker is not None and sb._worker.pid == pid  # the same worker all along


def test_add_file_and_corpus_over_several_descriptor_frames(sb: Sandbox, tmp_path: Path) -> None:
    """It attaches a file and a corpus of more documents than one descriptor frame carries."""
    path = tmp_path / "log.txt"
    path.write_text("".join(f"line {i}\n" for i in range(1000)) + "ERROR disk full\n")
    n_docs = 3 * ATTACH_FDS_PER_FRAME + 1
    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(n_docs):
        (folder / f"doc{i:02d}.md").write_text(f"# doc {i}\nbody {i}\n" + ("secret word\n" if i == n_docs - 1 else ""))
    out(sb, "keep = 'kept'")
    assert sb.add_context(path) == 0
    assert sb.add_context(folder) == 1
    assert out(sb, "print(grep('ERROR'))") == "1001: ERROR disk full\n"
    text = out(sb, "c = contexts[1]\nprint(len(c), keep)\nprint(grep('secret', handle=c))")
    assert text.splitlines()[0] == f"{n_docs} kept"
    assert f"doc{n_docs - 1:02d}.md" in text and "secret word" in text


def test_handles_appended_directly_reach_the_worker_with_the_next_add(sb: Sandbox) -> None:
    """It sends a live worker the handles appended to sandbox.contexts by hand, with the next add_context."""
    from rlm_runtime.context import open_context

    out(sb, "keep = 1")
    sb.contexts.append(open_context("by hand"))
    assert sb.add_context("by add_context") == 1
    assert out(sb, "print(len(contexts), contexts[0][:7], contexts[1][:6], keep)") == "2 by hand by add 1\n"
    assert [row["name"] for row in sb.context_stats()] == ["text", "text"]


def test_add_context_that_cannot_be_opened_changes_nothing(sb: Sandbox, tmp_path: Path) -> None:
    """It raises ContextError for a missing or binary source and leaves the worker and contexts alone."""
    out(sb, "keep = 1")
    with pytest.raises(ContextError):
        sb.add_context(tmp_path / "missing.txt")
    binary = tmp_path / "blob.bin"
    binary.write_bytes(b"\x00\x01\x02" * 100)
    with pytest.raises(ContextError):
        sb.add_context(binary)
    assert sb.contexts == []
    assert out(sb, "print(keep)") == "1\n"


def test_add_context_too_big_for_the_worker_is_refused_and_keeps_the_worker(tmp_path: Path) -> None:
    """It raises ContextError when the live worker cannot map a context within its memory cap, and keeps its variables."""
    big = tmp_path / "big.txt"
    line = b"x" * 1023 + b"\n"
    with open(big, "wb") as f:
        for _ in range(160):
            f.write(line * 1024)  # 160 MB, over the 64 MB cap
    with Sandbox("default", CellLimits(cell_timeout_s=5, kill_grace_s=0.5, memory_mb=64)) as sandbox:
        if not sandbox.layers.get("rlimits", {}).get("active"):
            pytest.skip("no rlimits here")
        out(sandbox, "keep = 'kept'")
        pid = sandbox._worker.pid if sandbox._worker else 0
        with pytest.raises(ContextError, match="could not map"):
            sandbox.add_context(big)
        assert sandbox.contexts == []
        assert out(sandbox, "print(keep)") == "kept\n"
        assert sandbox._worker is not None and sandbox._worker.pid == pid
        assert sandbox.add_context("small one") == 0  # the channel is still in step
        assert out(sandbox, "print(contexts[0][:5], keep)") == "small kept\n"


def test_corpus_over_the_open_files_limit_is_refused_cleanly(sb: Sandbox, tmp_path: Path) -> None:
    """It raises ContextError for a corpus with more documents than the live worker's open_files, and keeps working."""
    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(LIMITS.open_files + 10):
        (folder / f"d{i:03d}.txt").write_text(f"doc {i}\n")
    out(sb, "keep = 'kept'")
    pid = sb._worker.pid if sb._worker else 0
    with pytest.raises(ContextError, match="open_files"):
        sb.add_context(folder)
    assert sb.contexts == []
    assert sb._worker is not None and sb._worker.pid == pid
    for i in range(3):  # the maps of the refused corpus were closed: room again
        sb.add_context(f"text {i}")
    assert out(sb, "print(keep, len(contexts), contexts[2][:6])") == "kept 3 text 2\n"


def test_worker_restart_maps_every_added_context(sb: Sandbox) -> None:
    """It gives a worker restarted after a crash every context added so far."""
    sb.add_context("one needle")
    sb.add_context("two needles")
    sb.register("crash", lambda: crash(sb))
    result = sb.execute("crash()")
    assert result.worker_restarted and result.error_type in ("WorkerCrashed", "ProtocolError"), result
    assert out(sb, "print(len(contexts), grep('needle', handle=contexts[1]))") == "2 1: two needles\n"


def test_add_context_waits_for_the_running_cell(sb: Sandbox) -> None:
    """It adds a context from another thread only once the running cell has ended."""
    began = threading.Event()

    def started() -> None:
        began.set()

    sb.register("started", started)
    result: dict[str, object] = {}

    def run() -> None:
        result["cell"] = sb.execute("started()\nn = 0\nfor i in range(3000000):\n    n += i\nprint('done')")

    thread = threading.Thread(target=run)
    thread.start()
    assert began.wait(5)
    index = sb.add_context("added while a cell ran")
    thread.join(10)
    assert index == 0
    cell = result["cell"]
    assert getattr(cell, "stdout", None) == "done\n", cell
    assert out(sb, "print(contexts[0][:5])") == "added\n"


def test_add_context_from_a_host_function_is_refused(sb: Sandbox) -> None:
    """It refuses add_context and context_stats called from the sandbox's own host function, and keeps working."""
    sb.register("add", lambda: sb.add_context("nested"))
    sb.register("stats", lambda: sb.context_stats())
    for name in ("add", "stats"):
        result = sb.execute(f"{name}()")
        assert result.error is not None and "between cells" in result.error, result
    assert sb.contexts == []
    assert out(sb, "print('fine')") == "fine\n"


def test_add_context_after_close_raises() -> None:
    """It raises SandboxError from add_context on a closed sandbox, and context_stats gives []."""
    sandbox = Sandbox("default", LIMITS)
    sandbox.start()
    sandbox.close()
    with pytest.raises(SandboxError, match="closed"):
        sandbox.add_context("late")
    assert sandbox.context_stats() == []


# ---------------------------------------------------------------- context_stats


def test_context_stats_without_a_worker_is_empty() -> None:
    """It returns [] before any worker starts, even with contexts."""
    sandbox = Sandbox("default", LIMITS, contexts=["text"])
    try:
        assert sandbox.context_stats() == []
    finally:
        sandbox.close()


def test_context_stats_counts_accesses_in_the_worker(sb: Sandbox) -> None:
    """It reports each context's counters from the worker, by name, as plain data that accumulate."""
    sb.add_context("a\nb needle\nc\n" * 10)
    sb.add_context(["doc one", "doc two"])
    assert [row["peeks"] for row in sb.context_stats()] == [0, 0]
    out(sb, "peek(5)\npeek(3)\ngrep('needle')\nchunk(0, 2)\ncontext[2:4]\ncontext.lines(1, 2)\n"
            "grep('doc', handle=contexts[1])")
    first, second = sb.context_stats()
    assert set(first) == {"name", "load_to_peek_ratio", *STAT_COUNTERS}
    assert first["name"] == sb.contexts[0].name and second["name"] == sb.contexts[1].name
    assert (first["peeks"], first["greps"], first["chunks"], first["slices"], first["lines"]) == (2, 1, 1, 1, 1)
    assert first["full_loads"] == 0 and first["load_to_peek_ratio"] == 0.0 and first["chars_returned"] > 0
    assert second["greps"] == 1 and second["peeks"] == 0
    out(sb, "peek(1)")
    assert sb.context_stats()[0]["peeks"] == 3  # counts accumulate over the worker's life
    assert all(type(v) in (str, int, float) for row in sb.context_stats() for v in row.values())


def test_context_stats_reset_when_the_worker_restarts(sb: Sandbox) -> None:
    """It starts the counts again at zero in a worker restarted after a crash."""
    sb.add_context("text needle")
    out(sb, "grep('needle')")
    assert sb.context_stats()[0]["greps"] == 1
    sb.register("crash", lambda: crash(sb))
    assert sb.execute("crash()").worker_restarted
    assert sb.context_stats()[0]["greps"] == 0


def test_context_stats_is_cheap(sb: Sandbox) -> None:
    """It answers context_stats in well under 50 ms for a few contexts."""
    for i in range(5):
        sb.add_context(f"text {i}")
    sb.context_stats()
    began = time.perf_counter()
    for _ in range(20):
        assert len(sb.context_stats()) == 5
    assert (time.perf_counter() - began) / 20 < 0.05
