"""A worker that dies (killed from outside, crashed by a reply it cannot send), a closed sandbox."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable

import pytest

from rlm_runtime.errors import RLMError, SandboxError
from rlm_runtime.sandbox import Sandbox, zygote

from ._support import SLACK_S, assert_restarted, assert_works, plant, run


def _worker_pid(sandbox: Sandbox) -> int:
    assert sandbox._worker is not None
    return sandbox._worker.pid


def _assert_survived(sandbox: Sandbox, code: str) -> None:
    """The cell returns its output or an error, and the worker keeps the variables."""
    plant(sandbox)
    result, took = run(sandbox, code)
    assert took < SLACK_S
    assert result.worker_restarted is False, result
    assert sandbox.execute("keep").stdout == "'still here'\n"
    assert_works(sandbox)


def test_worker_killed_between_cells(sb: Sandbox) -> None:
    """It reports a worker killed between cells as WorkerCrashed, restarted, variables lost."""
    plant(sb)
    os.killpg(_worker_pid(sb), signal.SIGKILL)
    time.sleep(0.1)
    result, took = run(sb, "keep")
    assert took < SLACK_S
    if result.error is None:  # a transparent restart would also do, if it says so
        assert result.worker_restarted is True
    else:
        assert result.error_type == "WorkerCrashed", result
        assert "SIGKILL" in result.error
        assert_restarted(result)
    assert sb.execute("keep").error_type == "NameError"
    assert_works(sb)


def test_worker_killed_twice_in_a_row(sb: Sandbox) -> None:
    """It recovers each time the worker is killed, with a new process."""
    pids = set()
    for _ in range(2):
        pid = _worker_pid(sb)
        pids.add(pid)
        os.killpg(pid, signal.SIGKILL)
        time.sleep(0.1)
        assert sb.execute("1").worker_restarted is True
    assert _worker_pid(sb) not in pids
    assert_works(sb)


@pytest.mark.slow
def test_zygote_killed_between_cells(sb: Sandbox) -> None:
    """It starts a new zygote and worker when the zygote (and with it the worker) was killed."""
    plant(sb)
    shared = zygote._shared
    assert shared is not None
    os.killpg(shared.process.pid, signal.SIGKILL)
    shared.process.wait(timeout=5)
    time.sleep(0.2)
    result, took = run(sb, "keep")
    assert took < SLACK_S
    assert result.error_type == "WorkerCrashed", result
    assert_restarted(result)
    assert_works(sb)


def test_zygote_killed_message_says_what_happened(sb: Sandbox) -> None:
    """It says how the worker ended when its zygote was killed, not 'the worker process unknown'."""
    shared = zygote._shared
    assert shared is not None
    os.killpg(shared.process.pid, signal.SIGKILL)
    shared.process.wait(timeout=5)
    time.sleep(0.2)
    result = sb.execute("1")
    assert result.error is not None and "process unknown" not in result.error, result


def test_worker_killed_during_a_cell(sb: Sandbox) -> None:
    """It reports a worker killed while a cell runs as WorkerCrashed, restarted, variables lost."""
    plant(sb)
    pid = _worker_pid(sb)
    threading.Timer(0.5, os.killpg, (pid, signal.SIGKILL)).start()
    result, took = run(sb, "while True: pass")
    assert result.error_type == "WorkerCrashed", result
    assert_restarted(result)
    assert took < SLACK_S
    assert_works(sb)


@pytest.mark.parametrize("code", ["print(chr(0xd800))", "raise ValueError(chr(0xd800))"], ids=["print", "error-message"])
def test_lone_surrogate_in_output(sb: Sandbox, code: str) -> None:
    """It returns output holding a lone surrogate (escaped or as an error), and the worker survives."""
    _assert_survived(sb, code)


def test_lone_surrogate_in_an_echoed_value(sb: Sandbox) -> None:
    """It echoes a string holding a lone surrogate escaped, as repr() does."""
    _assert_survived(sb, "chr(0xdfff)")
    assert sb.execute("chr(0xdfff)").stdout == "'\\udfff'\n"


def test_huge_exception_message(make_sandbox: Callable[..., Sandbox]) -> None:
    """It cuts a 70 MB exception message instead of losing the worker."""
    _assert_survived(make_sandbox(memory_mb=512), "raise ValueError('x' * 70_000_000)")


def test_huge_final_is_a_clear_error(make_sandbox: Callable[..., Sandbox]) -> None:
    """It refuses a FINAL answer over the frame limit with an error naming the limit; the worker lives."""
    sandbox = make_sandbox(memory_mb=512)
    plant(sandbox)
    result, took = run(sandbox, "FINAL('x' * 70_000_000)")
    assert result.error is not None and "frame limit" in result.error, result
    assert result.worker_restarted is False
    assert took < SLACK_S
    assert sandbox.execute("keep").stdout == "'still here'\n"
    assert_works(sandbox)


@pytest.mark.slow
def test_interrupt_in_the_host_keeps_cells_in_step(sb: Sandbox) -> None:
    """It gives the next cell its own result after the host was interrupted (Ctrl-C) mid-cell."""
    plant(sb)

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        try:
            sb.execute("while True: pass")
        except KeyboardInterrupt:
            pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    result, took = run(sb, "keep")
    assert took < SLACK_S
    if result.stdout != "'still here'\n":
        assert result.worker_restarted is True, result
        assert "lost" in (result.error or "") + " ".join(result.warnings), result
    assert_works(sb)


def test_closed_sandbox_raises_sandbox_error() -> None:
    """It raises SandboxError (an RLMError) when a closed sandbox is used, and close() is idempotent."""
    sandbox = Sandbox("default")
    sandbox.start()
    assert sandbox.execute("1+1").stdout == "2\n"
    sandbox.close()
    sandbox.close()
    with pytest.raises(SandboxError, match="closed") as caught:
        sandbox.execute("1+1")
    assert isinstance(caught.value, RLMError)
    with pytest.raises(SandboxError):
        sandbox.start()


def test_closed_sandbox_after_a_with_block() -> None:
    """It raises SandboxError after the with block that owned it ended."""
    with Sandbox("default") as sandbox:
        pid = _worker_pid(sandbox)
    with pytest.raises(SandboxError):
        sandbox.execute("1+1")
    time.sleep(0.1)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return
    # Still listed until the zygote reaps it; it must at least be dead (a zombie).
    with open(f"/proc/{pid}/stat") as f:
        assert f.read().split()[2] == "Z"


def test_closed_sandbox_raises_even_for_refused_code() -> None:
    """It raises SandboxError on a closed sandbox whatever the code."""
    sandbox = Sandbox("default")
    sandbox.close()
    with pytest.raises(SandboxError):
        sandbox.execute("import os")
