"""Frames forged by code that escaped the Python guards and writes on the worker's channel.

Under the ESCAPED policy a cell has the real ``os`` module: it finds the channel (the only
socket among its descriptors) and writes frames of its own, encoded here on the host. The
host must check every frame: a bad one is a ProtocolError for that cell, the worker is
replaced, nothing escapes ``execute()``, and later cells still get their own results.

The attacker is assumed to know the sequence number of its cell (it sits in the worker's
memory), so the forged frames carry the right one unless the case is about the number.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import msgpack
import pytest
from hostile import Attacker

from rlm_runtime.sandbox import Sandbox

ROOT = Path(__file__).resolve().parents[2]

#: Cell that writes the frame bytes HEX on its channel, then goes on as a cell would.
FORGE = """\
import os
def find_channel():
    for n in range(3, 65):
        try:
            if os.fstat(n).st_mode & 0o170000 == 0o140000:
                return n
        except OSError:
            pass
os.write(find_channel(), bytes.fromhex({hex!r}))
print('forger carried on')
"""


def framed(body: bytes) -> bytes:
    """A frame as the protocol sends it: 4-byte big-endian length, then the msgpack body."""
    return struct.pack(">I", len(body)) + body


def done(seq: int, **changes: object) -> bytes:
    """A well-formed ``done`` frame, but for ``changes``."""
    fields: dict[str, object] = {"op": "done", "seq": seq, "stdout": "forged\n", "truncated": False, "error": None,
                                 "error_type": None, "duration_s": 0.001, "notes": [], "empty_greps": []}
    fields.update(changes)
    return framed(msgpack.packb(fields, use_bin_type=True))


def final(seq: int, value: object) -> bytes:
    return framed(msgpack.packb({"op": "final", "seq": seq, "value": value}, use_bin_type=True))


def deep_final(seq: int, depth: int) -> bytes:
    """A FINAL answer nested ``depth`` lists deep (msgpack's packer refuses that much)."""
    head = msgpack.packb({"op": "final", "seq": seq, "value": None})
    assert head.endswith(b"\xc0")  # the None, replaced by the nested lists
    return framed(head[:-1] + b"\x91" * (depth - 1) + b"\x90")


#: name -> frame bytes for the cell with sequence number ``seq`` (output cap ``cap``).
CASES: dict[str, Callable[[int, int], bytes]] = {
    "non-numeric-duration": lambda seq, cap: done(seq, duration_s="soon"),
    "nan-duration": lambda seq, cap: done(seq, duration_s=float("nan")),
    "deep-final": lambda seq, cap: deep_final(seq, 1000),
    "bytes-final": lambda seq, cap: final(seq, b"\x00raw bytes"),
    "ext-final": lambda seq, cap: final(seq, msgpack.ExtType(5, b"payload")),
    "timestamp-final": lambda seq, cap: final(seq, msgpack.Timestamp(1, 0)),
    "wrong-seq": lambda seq, cap: done(seq + 1000),
    "huge-stdout": lambda seq, cap: done(seq, stdout="x" * (cap + 10_000)),
    "bytes-stdout": lambda seq, cap: done(seq, stdout=b"bytes"),
    "extra-field": lambda seq, cap: done(seq, secret_channel=1),
    "too-many-empty-greps": lambda seq, cap: done(seq, empty_greps=[{"pattern": "a", "ignore_case": False, "hint": ""}] * 4),
    "huge-empty-grep": lambda seq, cap: done(seq, empty_greps=[{"pattern": "a" * 5000, "ignore_case": False, "hint": ""}]),
    "empty-grep-extra-key": lambda seq, cap: done(seq, empty_greps=[{"pattern": "a", "ignore_case": 0, "hint": ""}]),
    "unknown-op": lambda seq, cap: framed(msgpack.packb({"op": "hello", "seq": seq})),
    "non-dict-frame": lambda seq, cap: framed(msgpack.packb([1, 2, 3])),
    "call-with-bytes": lambda seq, cap: framed(msgpack.packb(
        {"op": "call", "seq": seq, "name": "echo", "args": [b"x"], "kwargs": {}}, use_bin_type=True)),
}


def forge(frame: bytes) -> str:
    return FORGE.format(hex=frame.hex())


def assert_replaced_and_in_step(sandbox: Sandbox, result: object, old_pid: int) -> None:
    """The cell was a ProtocolError, the worker is a new process, and the next cells are their own."""
    assert getattr(result, "error_type", None) == "ProtocolError", result
    assert getattr(result, "worker_restarted", None) is True, result
    assert sandbox._worker is not None and sandbox._worker.pid != old_pid
    for word in ("one", "two"):
        after = sandbox.execute(f"print({word!r})")
        assert after.error is None and after.stdout == f"{word}\n", after


def worker_pid(sandbox: Sandbox) -> int:
    sandbox.start()
    assert sandbox._worker is not None
    return sandbox._worker.pid


@pytest.mark.parametrize("case", list(CASES))
def test_forged_frame_is_a_protocol_error(escaped: Attacker, case: str) -> None:
    """It denies a forged frame any effect: one ProtocolError, a new worker, later cells in step."""
    sandbox = escaped.sandbox
    pid = worker_pid(sandbox)
    frame = CASES[case](sandbox._seq + 1, sandbox.limits.output_chars)
    result = escaped.run(forge(frame))
    assert result.error is not None and len(result.error) < 2000, result
    assert_replaced_and_in_step(sandbox, result, pid)


def test_extra_done_between_cells_does_not_shift_results(escaped: Attacker) -> None:
    """It denies an extra ``done`` (right sequence number) shifting later results: the next cell reports it."""
    sandbox = escaped.sandbox
    pid = worker_pid(sandbox)
    forged = escaped.run(forge(done(sandbox._seq + 1)))
    # The host took the first done of that cell (the forger's own output, which it controls
    # anyway); the worker's real done is now one frame too many.
    assert forged.error is None, forged
    result = escaped.run("print('innocent')")
    assert "innocent" not in result.stdout, result
    # Caught before the next exec is sent, or (if it came late) by its sequence number.
    assert result.error is not None and ("between cells" in result.error or "sequence number" in result.error), result
    assert_replaced_and_in_step(sandbox, result, pid)


def test_forged_call_to_an_unknown_function_is_refused(escaped: Attacker) -> None:
    """It answers a well-formed forged call to an unregistered name with an error, not a crash."""
    sandbox = escaped.sandbox
    frame = framed(msgpack.packb({"op": "call", "seq": sandbox._seq + 1, "name": "system", "args": ["id"], "kwargs": {}}))
    code = forge(frame) + "import os\nprint(os.read(find_channel(), 200))\n"
    result = escaped.run(code)
    assert "no host function named 'system'" in result.stdout, result
    escaped.still_works()


def test_forged_frames_through_the_cli(escaped_policy: Path, tmp_path: Path) -> None:
    """It prints exactly one JSON object and no traceback from `rlm sandbox run --json` for forged frames."""
    for name in ("non-numeric-duration", "deep-final", "ext-final"):
        cell = tmp_path / f"{name}.py"
        # A fresh sandbox: the first cell is number 1.
        cell.write_text(forge(CASES[name](1, 20_000)))
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        done_ = subprocess.run([sys.executable, "-m", "rlm_runtime.cli", "sandbox", "run", str(cell), "--policy",
                                str(escaped_policy), "--json"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
        assert "Traceback" not in done_.stderr + done_.stdout, done_
        lines = done_.stdout.splitlines()
        assert len(lines) == 1, done_
        result = json.loads(lines[0])
        assert result["error_type"] == "ProtocolError", result
        assert result["worker_restarted"] is True
        assert done_.returncode == 1, done_
