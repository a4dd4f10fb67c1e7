"""Strict reading of the JSONL files ``rlm eval`` is given: task files, results files, runs.

These files may come from someone else (a benchmark bundle, a results folder to report on),
so every line is checked before any field is used, and a bad line is a message for that
line, never an exception that stops the batch:

* a line longer than ``MAX_LINE_BYTES`` is skipped without being held in memory whole;
* the line must be UTF-8, and its strings encodable again (no unpaired surrogate escape:
  it would fail later when a result or a prompt is written);
* numbers must be finite (``NaN``, ``Infinity`` and ``1e999`` are refused) and integers at
  most ``MAX_INT_DIGITS`` digits (Python's int parsing is quadratic in the digits);
* arrays and objects nest at most ``MAX_DEPTH`` deep (deeper ones would hit the recursion
  limit in a later ``json.dumps`` or hash).

Each check is linear in the line's size (``strictjson``, shared with memory imports).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from rlm_runtime import strictjson

#: Bytes of one line, at most (a task's inline context counts).
MAX_LINE_BYTES = 32 << 20
#: Nesting of arrays and objects, at most.
MAX_DEPTH = 32
#: Digits of an integer, at most.
MAX_INT_DIGITS = 20


def read_lines(path: str | Path, max_bytes: int = MAX_LINE_BYTES, *,
               regular: bool = False) -> Iterator[tuple[int, str | None, str | None]]:
    """(line number, text, None) for each line of ``path``, or (number, None, why) for a line
    that is too long or not UTF-8. ``regular``: only a regular file is read (a file the
    runtime wrote, such as a run's results: a FIFO or a device put at its place is refused,
    never waited on or read without end).

    Raises:
        OSError: the file cannot be opened or read.
        SourceRefused: (``regular``) it is no regular file.
    """
    if regular:
        from rlm_runtime.eval.confine import open_regular

        opened: BinaryIO = os.fdopen(open_regular(Path(path), follow=True), "rb")
    else:
        opened = Path(path).open("rb")
    with opened as f:
        number = 0
        while True:
            raw = f.readline(max_bytes + 1)
            if not raw:
                return
            number += 1
            if len(raw) > max_bytes:
                while raw and not raw.endswith(b"\n"):  # the rest of the line, a slice at a time
                    raw = f.readline(1 << 20)
                yield number, None, f"a line over {max_bytes:,} bytes"
                continue
            try:
                yield number, raw.decode("utf-8"), None
            except UnicodeDecodeError as e:
                yield number, None, f"not UTF-8 (byte {e.start + 1} of the line)"


def parse_line(text: str) -> Any:
    """The JSON value of one line, checked as the module docstring says.

    Raises:
        ValueError: the line is not JSON, or breaks a rule; the message says which.
    """
    return strictjson.loads(text, max_depth=MAX_DEPTH, max_int_digits=MAX_INT_DIGITS)
