"""Attempts to fork, start threads or run programs: refused by the policy, then by the OS."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from rlm_runtime.sandbox import Sandbox

from ._support import SLACK_S, assert_kept, assert_works, plant, run

OS_POLICY = """
name = "os-reachable"
description = "Test-only: lets user code import os, threading and subprocess to probe the OS layers."
[imports]
unreviewed = ["os", "threading", "subprocess"]
"""


@pytest.mark.parametrize("code, module", [
    ("import os\nos.fork()", "os"),
    ("import threading\nthreading.Thread(target=print).start()", "threading"),
    ("import subprocess\nsubprocess.run(['/bin/true'])", "subprocess"),
    ("from multiprocessing import Process", "multiprocessing"),
    ("import _thread", "_thread"),
    ("import pty", "pty"),
])
def test_default_policy_refuses_process_modules(sb: Sandbox, code: str, module: str) -> None:
    """It refuses to import os, threading, subprocess and friends, naming the module."""
    plant(sb)
    result, took = run(sb, code)
    assert result.error_type == "PolicyViolation", result
    assert result.error is not None and f"import of '{module}' is not allowed" in result.error
    assert took < SLACK_S
    assert_kept(sb)


@pytest.fixture
def os_sandbox(make_sandbox: Callable[..., Sandbox], tmp_path: Path) -> Sandbox:
    path = tmp_path / "os-reachable.toml"
    path.write_text(OS_POLICY)
    return make_sandbox(str(path))


@pytest.mark.parametrize("code, error_type, message", [
    ("import os\nos.fork()", "PermissionError", "Operation not permitted"),
    ("import threading\nthreading.Thread(target=print).start()", "RuntimeError", "can't start new thread"),
    ("import subprocess\nsubprocess.run(['/bin/true'])", "PermissionError", "Operation not permitted"),
    ("import subprocess\nsubprocess.run(['/bin/sh', '-c', 'true'], capture_output=True)", "PermissionError", "Operation not permitted"),
    ("import os\nos.posix_spawn('/bin/true', ['true'], {})", "PermissionError", "Operation not permitted"),
    ("import os\nos.kill(1, 9)", "PermissionError", "Operation not permitted"),
], ids=["fork", "thread", "subprocess", "subprocess-shell", "posix_spawn", "kill-init"])
def test_os_layer_refuses_processes(os_sandbox: Sandbox, code: str, error_type: str, message: str) -> None:
    """It lets the OS refuse new processes and threads with a clear exception; the worker survives."""
    plant(os_sandbox)
    result, took = run(os_sandbox, code)
    assert result.error_type == error_type, result
    assert result.error is not None and message in result.error
    assert result.worker_restarted is False
    assert took < SLACK_S
    assert_kept(os_sandbox)
    assert_works(os_sandbox)


def test_os_system_cannot_run_a_shell(os_sandbox: Sandbox) -> None:
    """It leaves os.system() unable to start a shell (exit status 127, nothing written)."""
    plant(os_sandbox)
    result = os_sandbox.execute("import os\nos.system('echo hacked > pwned')\nos.listdir('.')")
    assert result.error is None, result
    assert result.stdout == "[]\n"
    assert_kept(os_sandbox)


def test_worker_runs_as_nobody_in_its_temp_dir(os_sandbox: Sandbox) -> None:
    """It shows the worker's uid is not root and its cwd is the private temp dir."""
    # The temp dir lives in the zygote's scratch dir: /tmp/rlm-<host pid>-<random>/rlm-worker-<random>
    result = os_sandbox.execute("import os\nos.getuid() != 0, os.getcwd().startswith('/tmp/rlm-') and '/rlm-worker-' in os.getcwd()")
    assert result.stdout == "(True, True)\n", result
