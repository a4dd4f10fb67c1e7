"""The runtime's own surface: reserved names, host functions, the protocol, FINAL values."""

from __future__ import annotations

import os

import pytest
from hostile import Attacker, assert_no_leak

from rlm_runtime.sandbox import CellLimits, Sandbox, protocol


@pytest.mark.parametrize("name", ["FINAL", "FINAL_VAR", "SHOW_VARS"])
def test_rebinding_a_reserved_name(attacker: Attacker, name: str) -> None:
    """It denies rebinding FINAL, FINAL_VAR or SHOW_VARS beyond the cell that did it."""
    r = attacker.run(f"{name} = lambda *a: print('hijacked')")
    assert r.error is None and any(f"'{name}' is a runtime name" in w for w in r.warnings), r
    r = attacker.run("answer = 42\nSHOW_VARS()\nFINAL_VAR('answer')")
    assert r.error is None and "hijacked" not in r.stdout and "answer: int = 42" in r.stdout, r
    assert r.has_final and r.final == 42


def test_deleting_a_reserved_name(attacker: Attacker) -> None:
    """It denies deleting FINAL for more than the current cell."""
    attacker.run("del FINAL")
    r = attacker.run("FINAL('still here')")
    assert r.has_final and r.final == "still here"


def test_rebinding_a_host_function(attacker: Attacker) -> None:
    """It denies rebinding a registered host function beyond the cell that did it."""
    calls: list[str] = []

    def lookup(q: str) -> str:
        calls.append(q)
        return f"host:{q}"

    attacker.sandbox.register("lookup", lookup)
    attacker.run("lookup = lambda q: 'fake:' + q")
    r = attacker.run("print(lookup('x'))")
    assert r.stdout == "host:x\n" and calls == ["x"], r


def test_final_var_of_a_guard(attacker: Attacker) -> None:
    """It denies FINAL_VAR on the namespace's hidden names (guards, __builtins__)."""
    for name in ("_getattr_", "__builtins__", "_rlm_show_", "__name__"):
        r = attacker.refused(f"FINAL_VAR({name!r})", "NameError")
        assert "no variable named" in r.error


def test_final_var_of_a_guard_named_by_a_lying_str(attacker: Attacker) -> None:
    """It denies FINAL_VAR on a hidden name given as a str subclass whose startswith() lies."""
    code = "class S(str):\n    def startswith(self, p):\n        return False\nFINAL_VAR(S('__builtins__'))"
    r = attacker.refused(code, "NameError")
    assert "no variable named" in r.error


@pytest.mark.parametrize(
    "argument",
    ["print", "FINAL", "type(1)", "json", "(x for x in [])", "{1: 'int key'}", "[[object()]]", "b'bytes'", "2 ** 70"],
    ids=["function", "bound-method", "class", "module", "generator", "int-key", "nested-object", "bytes", "big-int"],
)
def test_smuggling_an_object_to_a_host_function(attacker: Attacker, argument: str) -> None:
    """It denies passing anything but plain data to a host function, with a clear error."""
    received: list[object] = []
    attacker.sandbox.register("store", lambda *a, **kw: received.append((a, kw)))
    r = attacker.refused(f"import json\nstore({argument})", "HostCallError")
    assert "arguments of store()" in r.error and received == []
    r = attacker.refused(f"import json\nstore(value={argument})", "HostCallError")
    assert "keyword arguments of store()" in r.error and received == []


@pytest.mark.parametrize(
    "returns",
    [lambda: os.environ, lambda: os.getenv, lambda: type(os.environ), lambda: {"env": os.environ}, lambda: object(), lambda: b"bytes"],
    ids=["environ", "function", "class", "nested-environ", "object", "bytes"],
)
def test_non_plain_value_from_a_host_function(attacker: Attacker, returns: object) -> None:
    """It denies a host function's non-plain return value (here the host's environment) with a clear error."""
    attacker.sandbox.register("leaky", returns)  # type: ignore[arg-type]
    r = attacker.refused("x = leaky()\nprint(x)", "HostCallError")
    assert "value returned by leaky()" in r.error and "only None, bool, int, float, str, list and dict" in r.error


@pytest.mark.parametrize(
    "frame",
    [
        {"op": "final", "value": "forged answer"},
        {"op": "done", "stdout": "forged output", "error": None, "error_type": None, "duration_s": 0.0},
        {"op": "call", "name": "lookup", "args": ["forged"], "kwargs": {}},
    ],
    ids=["final", "done", "call"],
)
def test_protocol_frame_printed_to_stdout(attacker: Attacker, frame: dict[str, object]) -> None:
    """It denies a fake length-prefixed msgpack frame printed to stdout being taken for a frame."""
    calls: list[object] = []
    attacker.sandbox.register("lookup", lambda q: calls.append(q))
    raw = protocol.encode(frame)
    code = f"data = {raw!r}\nprint(data.decode('latin-1'), end='')\nprint(data.decode('latin-1'))\nprint('after')"
    r = attacker.run(code)
    assert r.error is None and not r.has_final and calls == [], r
    assert r.stdout.endswith("after\n") and raw.decode("latin-1") * 2 in r.stdout
    r = attacker.run("FINAL('real')")
    assert r.has_final and r.final == "real"


def test_forged_frame_as_a_final_value(attacker: Attacker) -> None:
    """It denies a FINAL value shaped like a frame any meaning beyond being a string."""
    raw = protocol.encode({"op": "done", "stdout": "forged"}).decode("latin-1")
    r = attacker.run(f"FINAL({raw!r})\nprint('after')")
    assert r.has_final and r.final == raw and r.stdout == "after\n", r


@pytest.mark.parametrize("size", [70_000_000, protocol.MAX_FRAME + 1])
def test_huge_final_string(attacker: Attacker, size: int) -> None:
    """It denies a FINAL value larger than a frame may be; the host and the sandbox stay up."""
    r = attacker.refused(f"FINAL('x' * {size})", "MemoryError", "ProtocolError", "WorkerCrashed")
    assert len(r.stdout) < 100_000


def test_huge_final_list(attacker: Attacker) -> None:
    """It denies a FINAL list with too many items as data: it crosses as bounded text."""
    r = attacker.run(f"FINAL(list(range({protocol.PLAIN_MAX_ITEMS + 10})))")
    assert r.has_final and isinstance(r.final, str) and len(r.final) <= protocol.MAX_FRAME


def test_final_nested_too_deep(attacker: Attacker) -> None:
    """It denies a FINAL value nested deeper than the protocol allows, and a self-referencing one, as data."""
    r = attacker.run("a = []\nfor _ in range(100):\n    a = [a]\nFINAL(a)")
    assert r.has_final and isinstance(r.final, str)
    r = attacker.run("a = []\na.append(a)\nFINAL(a)")
    assert r.has_final and r.final == "[[...]]"


def test_final_huge_int(attacker: Attacker) -> None:
    """It denies a FINAL int too large for the protocol or for str()."""
    r = attacker.run("FINAL(2 ** 70)")
    assert r.has_final and r.final == str(2**70)
    attacker.refused("FINAL(10 ** 5000)", "ValueError")


def test_final_of_a_runtime_object(attacker: Attacker) -> None:
    """It denies FINAL an object: a runtime object crosses as its str(), nothing more."""
    r = attacker.run("FINAL(FINAL)")
    assert r.has_final and isinstance(r.final, str) and r.final.startswith("<bound method")
    assert_no_leak(r, attacker.secret["value"])


def test_exception_whose_str_never_returns(secret: dict[str, str]) -> None:
    """It denies an exception whose __str__ never returns crashing the worker and the host's execute()."""
    with Sandbox("default", CellLimits(cell_timeout_s=0.5, kill_grace_s=0.3, memory_mb=256)) as sb:
        attacker = Attacker(sb, secret)
        # Three-argument type() is refused now, and a class statement cannot define __str__:
        # if either ever allowed it, the host must still survive the hanging __str__.
        code = "E = type(type(1))('E', (Exception,), {'__str__': lambda self: next(x for x in iter(int, 1) if x)})\nraise E()"
        attacker.refused(code, "TimeoutError", "WorkerCrashed", "SandboxPermissionError")
