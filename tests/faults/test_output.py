"""Output floods: the cell's printed text is capped with a marker; the host's memory is not."""

from __future__ import annotations

import re
import tracemalloc
from collections.abc import Callable

import pytest

from rlm_runtime.sandbox import CellResult, Sandbox

from ._support import SLACK_S, assert_kept, assert_works, plant, run

CAP = 1000
MARKER = re.compile(r"\n\.\.\. \[output truncated: (\d+) of (\d+) characters cut\] \.\.\.\n")
#: The host may hold a frame of the capped output, never the flood itself.
HOST_PEAK_BYTES = 8 * 1024 * 1024


def _check_truncated(result: CellResult, total: int | None = None, cap: int = CAP) -> None:
    assert result.truncated is True, result
    assert len(result.stdout) <= cap + 200, len(result.stdout)
    found = MARKER.search(result.stdout)
    assert found, result.stdout[:300]
    cut, seen = int(found.group(1)), int(found.group(2))
    assert cut == seen - (len(result.stdout) - len(found.group(0))), (cut, seen)
    if total is not None:
        assert seen == total


def _run_watched(sandbox: Sandbox, code: str) -> tuple[CellResult, float, int]:
    tracemalloc.start()
    try:
        result, took = run(sandbox, code)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return result, took, peak


@pytest.mark.slow
def test_a_million_printed_lines_are_cut_with_a_marker(make_sandbox: Callable[..., Sandbox]) -> None:
    """It keeps the head and tail of 10**6 printed lines, says how much was cut, and stays small."""
    sandbox = make_sandbox(output_chars=CAP, cell_timeout_s=30)
    plant(sandbox)
    result, took, peak = _run_watched(sandbox, "for i in range(10**6):\n    print(i)")
    assert result.error is None, result
    _check_truncated(result, total=sum(len(str(i)) + 1 for i in range(10**6)))
    assert result.stdout.startswith("0\n1\n2\n")
    assert result.stdout.endswith("999998\n999999\n")
    assert peak < HOST_PEAK_BYTES, peak
    assert took < 30 + SLACK_S
    assert_kept(sandbox)
    assert_works(sandbox)


def test_one_fifty_megabyte_print_is_cut_with_a_marker(make_sandbox: Callable[..., Sandbox]) -> None:
    """It cuts a single 50 MB print to the policy's output_chars, with a marker."""
    sandbox = make_sandbox(output_chars=CAP, cell_timeout_s=20)
    plant(sandbox)
    result, took, peak = _run_watched(sandbox, "print('y' * 50_000_000)")
    assert result.error is None, result
    _check_truncated(result, total=50_000_001)
    assert peak < HOST_PEAK_BYTES, peak
    assert took < 20 + SLACK_S
    assert_kept(sandbox)
    assert_works(sandbox)


@pytest.mark.slow
def test_infinite_print_loop_times_out_with_its_output_cut(make_sandbox: Callable[..., Sandbox]) -> None:
    """It stops an endless print loop at the timeout and returns the capped output with the error."""
    sandbox = make_sandbox(output_chars=CAP)
    plant(sandbox)
    result, took, peak = _run_watched(sandbox, "i = 0\nwhile True:\n    i += 1\n    print('spam', i)")
    assert result.error_type == "TimeoutError", result
    _check_truncated(result)
    assert result.stdout.startswith("spam 1\nspam 2\n")
    assert peak < HOST_PEAK_BYTES, peak
    assert took < 2 + 0.5 + SLACK_S
    assert_kept(sandbox)
    assert_works(sandbox)


def test_default_cap_is_the_policy_output_chars(sb: Sandbox) -> None:
    """It uses the policy's output_chars (20000 by default) as the cap."""
    assert sb.limits.output_chars == 20_000
    result = sb.execute("print('z' * 100_000)")
    _check_truncated(result, total=100_001, cap=20_000)
    assert len(result.stdout) >= 20_000
    assert "80001 of 100001 characters cut" in result.stdout


def test_long_last_expression_is_cut_too(sb: Sandbox) -> None:
    """It caps the echo of a huge last expression like printed output."""
    result = sb.execute("'q' * 10**7")
    _check_truncated(result, total=10**7 + 3, cap=20_000)
    assert_works(sb)
