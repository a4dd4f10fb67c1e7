"""Red team of what this round added to the cell's reach: a grep match that is a str, the
rewrite of ``x[k] += v`` / ``a.b += v``, and the notes the worker adds for empty greps. Each
test is an attack; passing means it failed. A secret is planted in the host's environment
and in the worker's own module globals, and must not come back."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from rlm_runtime.context import open_context
from rlm_runtime.sandbox import CellLimits, Sandbox

SECRET = "sk-planted-secret-7e2b10"


@pytest.fixture
def box(monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    text = "alpha {0.__class__} line\nbeta " + SECRET[:3] + "\n" + "filler words here\n" * 2000
    with Sandbox(contexts=[open_context(text, as_text=True)], limits=CellLimits(cell_timeout_s=5, kill_grace_s=1)) as sb:
        yield sb


def _said(result) -> str:  # type: ignore[no-untyped-def]
    return (result.stdout or "") + (result.error or "") + "".join(result.warnings)


@pytest.mark.parametrize("attack", [
    # str.format on a match walks attributes to globals in plain Python
    "h = grep('alpha')[0]\nprint(h.format(h))",
    "h = grep('alpha')[0]\nprint(h.format_map({'0': h}))",
    "h = grep('alpha')[0]\nf = type(h).format\nprint(f('{0.__init__.__globals__}', h))",
    "h = grep('alpha')[0]\nprint(str.format(h, h))",
    "h = grep('alpha')[0]\nprint(super(type(h), h).format(h))",
    # the match's class, its dict and its constructor
    "h = grep('alpha')[0]\nprint(h.__class__.__mro__)",
    "h = grep('alpha')[0]\nprint(vars(h))",
    "h = grep('alpha')[0]\nprint(type(h).__new__(type(h), 1, 'x', [], [], None).__reduce_ex__(2))",
    "h = grep('alpha')[0]\nh.line = 'forged'\nprint(h.line)",
    "h = grep('alpha')[0]\nsetattr(h, 'line', 'x')",
    "import pickle\nprint(pickle.dumps(grep('alpha')[0]))",
])
def test_a_grep_match_as_a_str_opens_nothing(box: Sandbox, attack: str) -> None:
    """It refuses format, dunder walks, vars, forging and pickling on a match; nothing of the host leaks."""
    r = box.execute(attack)
    assert r.error is not None, r.stdout
    assert SECRET not in _said(r) and "__globals__" not in (r.stdout or "")


@pytest.mark.parametrize("attack", [
    "x = grep('alpha')[0]\nx.__class__ += 1",
    "class K:\n    pass\nk = K()\nk._secret = 1",
    "class K:\n    pass\nk = K()\nk._n += 1",
    "d = {}\nd[__import__('os').environ['OPENAI_API_KEY']] += 1",
    "l = [1]\nl[(n := 0)] += 1",
    "l = [[1]]\nl[0][[print(x) for x in [1]][0]] += 1",
    "FINAL.__doc__ += 'x'",
    "grep.__defaults__ += (1,)",
    "context.__dict__['x'] += 1",
    "contexts[0] += 'x'",
    "import os\nos.environ['OPENAI_API_KEY'] += 'x'",
])
def test_augmented_assignment_reaches_nothing_new(box: Sandbox, attack: str) -> None:
    """It refuses, as a plain assignment would be refused, every item or attribute target that is
    private, runtime-owned, or has effects; the secret does not come back."""
    r = box.execute(attack)
    assert r.error is not None, r.stdout
    assert SECRET not in _said(r)


def test_empty_grep_notes_are_few_short_and_cannot_buy_time(box: Sandbox) -> None:
    """It notes at most three empty greps per cell, each cut to the note limit, computed within
    their own short timer (a cell cannot extend its run with hint scans), and the cell's own
    variables and the worker survive."""
    began = time.monotonic()
    r = box.execute("n = 0\nfor i in range(500):\n    if not grep('nothing ' + 'zq' * 900 + str(i)):\n        n += 1\nprint(n)")
    assert r.stdout == "500\n" and r.error is None
    empties = [w for w in r.warnings if w.startswith("a grep in this code found nothing")]
    assert len(empties) == 3 and all(len(w) <= 500 for w in empties)
    assert time.monotonic() - began < 5 + 2 + 5  # the cell's timeout, the notes' limit, slack
    assert box.execute("print(n)").stdout == "500\n"
    assert SECRET not in _said(r)


@pytest.mark.parametrize("attack", [
    # the string methods a grep result answers as its text: none formats, none is a dunder
    "print(grep('alpha').format(grep('alpha')))",
    "print(grep('alpha').format_map({}))",
    "print(getattr(grep('alpha'), 'format')('{0.__class__}', 1))",
    "print(grep('alpha').__getattr__('split'))",
    "print(grep('alpha')._tallier)",
    "r = grep('alpha')\nr._tallier = print\nprint(r.tally())",
    "print(grep('alpha').split.__self__.__class__.__mro__)",
])
def test_a_grep_result_as_text_and_its_tally_open_nothing(box: Sandbox, attack: str) -> None:
    """It refuses format on a grep result, its private tallier, and dunder walks from the
    string methods it answers; nothing of the host leaks."""
    r = box.execute(attack)
    assert r.error is not None, r.stdout
    assert SECRET not in _said(r)


def test_a_tally_of_every_line_is_bounded_by_the_cell(box: Sandbox) -> None:
    """It tallies a pattern that captures every line in linear time, and a hostile pattern
    RE2 refuses gets a clear error; the worker keeps its variables."""
    box.execute("kept = 41")
    began = time.monotonic()
    r = box.execute("t = grep('(.*)', max_matches=1).tally()\nprint(len(t), t['filler words here'])")
    assert r.ok and r.stdout.split() == ["3", "2000"] and time.monotonic() - began < 5
    r = box.execute("grep(r'(a+)+\\1').tally()")
    assert r.error_type == "ContextError" and "backreferences" in r.error
    assert box.execute("print(kept + 1)").stdout == "42\n"


def test_an_empty_lookup_note_is_fixed_when_the_lookup_returns(box: Sandbox) -> None:
    """It writes an empty find's note when find returns: code that then fills the list, even
    with a generator that swallows every exception, runs nothing after the cell, and the
    worker keeps the cell's variables."""
    r = box.execute("def g():\n    while True:\n        try:\n            yield 1\n        except BaseException:\n            pass\n"
                    "f = records().find('zzz qq')\nf.append(g())\nkept = 7\nprint('done')")
    assert r.error is None and r.stdout == "done\n"
    assert any(w.startswith("a records lookup in this code found nothing: 0 records: no record has 'zzz qq'") for w in r.warnings)
    assert box.execute("print(kept)").stdout == "7\n"
    assert SECRET not in _said(r)


def test_show_vars_of_a_huge_nested_value_is_short_and_quick(box: Sandbox) -> None:
    """It shows a value of millions of items by its first few, without building its whole repr."""
    box.execute("x = [list(range(2000))] * 200000")
    began = time.monotonic()
    r = box.execute("SHOW_VARS()")
    assert r.error is None and time.monotonic() - began < 3
    line = next(row for row in r.stdout.splitlines() if row.startswith("x: list = "))
    assert len(line) < 120 and "..." in line
