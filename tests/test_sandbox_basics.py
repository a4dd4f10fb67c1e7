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


def test_a_name_error_suggests_the_name_meant(sandbox: Sandbox) -> None:
    """It says which defined name a NameError most likely meant, as Python 3.12 does (a small
    model wrote Final(0) four times running, told only that Final is not defined); a name near
    nothing gets no suggestion, and a NameError subclass's attributes are never read."""
    r = sandbox.execute("Final(0)")
    assert r.error.endswith("NameError: name 'Final' is not defined. Did you mean: 'FINAL'?"), r.error
    assert sandbox.execute("total_rows = 3").ok
    assert sandbox.execute("print(total_row)").error.endswith("Did you mean: 'total_rows'?")
    assert sandbox.execute("zebraquill").error.endswith("NameError: name 'zebraquill' is not defined")
    r = sandbox.execute("class E(NameError):\n    @property\n    def name(self):\n        print('ran')\n        return 'Final'\n"
                        "raise E('x')")
    assert r.error.endswith("E: x") and "ran" not in r.stdout


def test_the_name_error_suggestion_is_bounded() -> None:
    """It compares no name over 40 characters, and stops looking when its time is up (it runs
    after the cell's own timer: 5,000 crafted names took difflib 5 s)."""
    from rlm_runtime.sandbox import worker

    names = [f"total_rows_{i:04d}" for i in range(3000)] + ["total_rows"]
    assert worker._similar("total_rowz", names) == "total_rows"
    assert worker._similar("a" * 41, ["a" * 41 + "b"]) is None
    real = worker._SUGGEST_S
    try:
        worker._SUGGEST_S = -1.0
        assert worker._similar("total_rowz", names) is None
    finally:
        worker._SUGGEST_S = real
