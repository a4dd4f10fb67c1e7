"""The session: persistent namespace, echo of the last expression, FINAL, host functions."""

from __future__ import annotations

from rlm_runtime.sandbox import Sandbox


def test_namespace_persists_across_cells(sandbox: Sandbox) -> None:
    assert sandbox.execute("x = 41").ok
    assert sandbox.execute("x + 1").stdout == "42\n"


def test_final_and_final_var(sandbox: Sandbox) -> None:
    r = sandbox.execute("answer = {'n': 3}\nFINAL_VAR('answer')")
    assert r.has_final and r.final == {"n": 3}
    r = sandbox.execute("FINAL(None)")
    assert r.has_final and r.final is None


def test_host_function_round_trip(sandbox: Sandbox) -> None:
    sandbox.register("shout", lambda s: s.upper())
    r = sandbox.execute("shout('hi') * 2")
    assert r.stdout == "'HIHI'\n", r


def test_user_traceback_shows_only_user_lines(sandbox: Sandbox) -> None:
    r = sandbox.execute("def f(d):\n    return d['missing']\n\nf({})")
    assert r.error_type == "KeyError"
    assert "line 2, in f: return d['missing']" in r.error
    assert "rlm_runtime" not in r.error and ".py" not in r.error
