"""Hostile shapes of text the chunker must cut in time linear in their size: a long run of one
punctuation character (quadratic in the sentence finder before), runs of blank lines, no
natural boundary at all, very long lines and words, many tiny paragraphs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from _timing import SLACK_S

#: Sizes compared: the time for 4N bytes over the time for N stays near 4 when linear.
N = 100_000
#: Times under this many seconds are noise on a shared machine: the ratio uses this floor.
FLOOR_S = 0.05

# Each shape: (prefix, unit repeated to about the size, suffix).
SHAPES = {
    "a run of full stops": ("", ".", ""),
    "a run of ! and ?": ("", "!?", "x"),
    "a run of full stops then spaces": ("a", ".", " " * 1000 + "b"),
    "sentences of one letter": ("", "A. ", ""),
    "blank lines only": ("", "\n", ""),
    "a word then blank lines": ("a", "\n", "b"),
    "tiny paragraphs": ("", "a\n\n", ""),
    "no whitespace at all": ("", "x", ""),
    "one line of words": ("", "word ", ""),
    "list markers": ("", "\n- ", ""),
    "CJK full stops": ("", "\u3002", ""),
    "closing quotes after a full stop": ("", ".)", " a"),
}

_CHILD = """
import json, sys, time
from rlm_runtime.memory.chunking import ChunkingConfig, chunk_text
prefix, unit, suffix, n = json.loads(sys.argv[1])
took = []
for size in (n, 4 * n):
    text = prefix + unit * (size // len(unit)) + suffix
    t = time.perf_counter()
    pieces = chunk_text(text, config=ChunkingConfig(exact_tokens=False))
    took.append(time.perf_counter() - t)
    assert all(p.text for p in pieces)
print(json.dumps(took))
"""


@pytest.mark.parametrize("shape", list(SHAPES))
def test_hostile_shape_chunks_in_linear_time(shape: str) -> None:
    """It chunks each hostile shape in time about linear in its size (4x the bytes, under 8x the time)."""
    prefix, unit, suffix = SHAPES[shape]
    arg = json.dumps([prefix, unit, suffix, N])
    try:
        done = subprocess.run([sys.executable, "-c", _CHILD, arg], capture_output=True, text=True, timeout=30 + SLACK_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"chunking {shape!r} of {5 * N} bytes did not finish in {30 + SLACK_S:.0f} s")
    assert done.returncode == 0, done.stderr[-2000:]
    small, large = json.loads(done.stdout)
    assert large / max(small, FLOOR_S) < 8, (shape, small, large)
