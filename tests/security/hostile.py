"""Helpers of the security suite: hostile cells run through ``Sandbox.execute``.

Every attempt goes through the real path (policy check, compile, worker, guards, OS
layers) with a secret planted in the host (an environment variable and a 0600 file, see
the ``secret`` fixture of tests/conftest.py). Whatever the attempt does, the secret must
not appear in anything the sandbox hands back, and the sandbox must still work afterwards.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from rlm_runtime.sandbox import Sandbox
from rlm_runtime.sandbox.supervisor import CellResult

# The policy of an attacker who already escaped the Python guards: the modules that reach
# the OS are importable, so what stops the attempt is the worker's OS layers alone.
ESCAPED_POLICY = """\
name = "escaped"
description = "Test only: simulates code that got past the Python guards."
[imports]
unreviewed = ["os", "socket", "subprocess", "ctypes", "signal", "threading", "pathlib", "io"]
"""


def leaked_forms(value: str) -> list[str]:
    """The secret as an attacker might smuggle it out: plain, reversed, hex, base64."""
    return [value, value[::-1], value.encode().hex(), base64.b64encode(value.encode()).decode()]


def assert_no_leak(result: CellResult, secret: str) -> None:
    """Fail if the secret shows up anywhere in what a cell returned."""
    returned = {
        "stdout": result.stdout,
        "error": result.error or "",
        "final": f"{result.final!s} {result.final!r}",
        "warnings": "\n".join(result.warnings),
    }
    for field, text in returned.items():
        for form in leaked_forms(secret):
            assert form not in text, f"the secret leaked through {field}: {text[:500]}"


@dataclass
class Attacker:
    """Runs hostile cells in one sandbox and checks what comes back."""

    sandbox: Sandbox
    secret: dict[str, str]

    def run(self, code: str) -> CellResult:
        """Execute ``code``; the secret must not leak whatever happens."""
        result = self.sandbox.execute(code)
        assert_no_leak(result, self.secret["value"])
        return result

    def refused(self, code: str, *error_types: str) -> CellResult:
        """Execute ``code``; it must fail with one of ``error_types`` and leak nothing."""
        result = self.run(code)
        assert result.error_type in error_types, (
            f"expected {error_types}, got {result.error_type}: {result.error}\nstdout: {result.stdout[:500]}")
        assert not result.has_final, result
        self.still_works()
        return result

    def still_works(self) -> None:
        result = self.sandbox.execute("1+1")
        assert result.error is None and result.stdout == "2\n", result


