"""A file larger than 2 GiB is searched and sliced through the mmap, never read into the heap."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from _timing import SLACK_S

from rlm_runtime.context import FileHandle

LINE = "the quick brown fox jumps over the lazy dog — café naïve 😀 0123456789\n"
BLOCK_LINES = (4 * 1024 * 1024) // len(LINE.encode("utf-8"))
BLOCKS = 513  # 513 blocks of ~4 MiB: past 2**31 bytes, so offsets overflow any int32
NEEDLE = "UNIQUE-NEEDLE-4242 is here\n"


def _rss_anon() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no RssAnon in /proc/self/status")


@pytest.mark.slow
def test_file_over_2_gib_is_grepped_and_sliced_without_heap(tmp_path: Path) -> None:
    """It greps a needle past the 2 GiB mark with its right line number, slices near the end, and stays out of the heap."""
    if not Path("/proc/self/status").exists():
        pytest.skip("needs /proc (Linux) to measure anonymous memory")
    if shutil.disk_usage(tmp_path).free < 6 * 10**9:
        pytest.skip("needs 6 GB of free disk")
    block = (LINE * BLOCK_LINES).encode("utf-8")
    path = tmp_path / "big.txt"
    tail = LINE * 10
    started = time.perf_counter()
    try:
        with open(path, "wb") as f:
            for _ in range(BLOCKS):
                f.write(block)
            f.write(NEEDLE.encode("utf-8"))
            f.write(tail.encode("utf-8"))
        size = path.stat().st_size
        assert size > 2 * 1024**3
        wrote = time.perf_counter() - started
        del block

        rss_before = _rss_anon()
        t0 = time.perf_counter()
        h = FileHandle(path)
        matches = h.grep(r"UNIQUE-NEEDLE-\d+")
        grep_s = time.perf_counter() - t0
        needle_line = BLOCKS * BLOCK_LINES + 1
        assert [(m.line_no, m.line) for m in matches] == [(needle_line, NEEDLE.rstrip("\n"))]
        assert matches.complete

        n_chars = BLOCKS * BLOCK_LINES * len(LINE) + len(NEEDLE) + len(tail)
        assert len(h) == n_chars
        assert h.n_lines == needle_line + 10
        assert h[n_chars - len(tail) - len(NEEDLE) : n_chars - len(tail)] == NEEDLE
        assert h[-len(LINE) :] == LINE
        assert h[-5:] == "6789\n"
        assert h.lines(needle_line - 1, needle_line + 1) == [LINE.rstrip("\n"), NEEDLE.rstrip("\n"), LINE.rstrip("\n")]
        last = h.chunk(h.n_chunks(200) - 1, 200)
        assert last.next is None and last.endswith(LINE.rstrip("\n"))
        assert h.count("NEEDLE") == 1
        growth = _rss_anon() - rss_before
        total_s = time.perf_counter() - started
        print(f"\nbig file: {size / 1024**3:.2f} GiB written in {wrote:.1f}s; grep (with index build) {grep_s:.1f}s; "
              f"anonymous RSS growth {growth / 1e6:.1f} MB; total {total_s:.1f}s")
        assert growth < 200 * 10**6
        assert total_s < 90 + SLACK_S
        h.close()
    finally:
        path.unlink(missing_ok=True)
