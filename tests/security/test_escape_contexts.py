"""Context handles: the one thing the worker may read, used as a way to read something else."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hostile import Attacker

from rlm_runtime.sandbox import CellLimits, Sandbox

CONTEXT_TEXT = "the only text this worker may read\n"


@pytest.fixture
def with_context(secret: dict[str, str]) -> Iterator[Attacker]:
    with Sandbox("default", CellLimits(cell_timeout_s=5, kill_grace_s=0.5, memory_mb=256), contexts=[CONTEXT_TEXT]) as sb:
        yield Attacker(sb, secret)


@pytest.mark.parametrize("target", ["secret", "host-environ", "etc-passwd"])
def test_handle_class_opening_a_path(with_context: Attacker, target: str) -> None:
    """It denies opening another file through the context handle's own class, type(context)(path)."""
    path = {"secret": with_context.secret["path"], "host-environ": f"/proc/{os.getpid()}/environ", "etc-passwd": "/etc/passwd"}[target]
    r = with_context.refused(f"h = type(context)({path!r})\nprint(h.get_full())", "ContextError")
    assert "Permission denied" in r.error


def test_handle_class_on_every_descriptor(with_context: Attacker) -> None:
    """It denies any inherited descriptor but the context's: type(context)(fd=n) for every n reads nothing else."""
    code = (
        "seen = []\n"
        "for fd in range(64):\n"
        "    try:\n"
        "        seen.append((fd, type(context)(fd=fd).get_full()))\n"
        "    except Exception as e:\n"
        "        pass\n"
        "print([text for fd, text in seen if text])"
    )
    r = with_context.run(code)
    assert r.error is None, r
    assert r.stdout.replace(repr(CONTEXT_TEXT), "").strip("[], \n") == "", r.stdout


def test_probe_functions_with_a_path(with_context: Attacker) -> None:
    """It denies peek/chunk a path in place of a handle; grep searches the path's own text (a
    string the code holds), never the file it names."""
    path = with_context.secret["path"]
    with_context.refused(f"print(peek(handle={path!r}))", "AttributeError")
    with_context.refused(f"print(chunk(0, handle={path!r}))", "AttributeError")
    for call in (f"grep('.', handle={path!r})", f"grep('.', {path!r})", f"grep('.', [{path!r}])"):
        r = with_context.run(f"print({call})")  # the secret the file holds never shows: run() checks
        assert r.error is None and r.stdout.strip() == f"1: {path}", r
    for held in ("print", "b'bytes'", "{'a': 1}", "[1, 2]", "context.get_full"):
        with_context.refused(f"print(grep('.', {held}))", "ContextError")
    # a str subclass's own methods are not called by grep: it searches the text
    r = with_context.run(f"class S(str):\n    def rstrip(self, *a):\n        return 'x' + {path!r}\n"
                         f"    def encode(self, *a):\n        return b'x'\nprint(grep('^x', [S('y')]).count(), grep('y', [S('y')]).count())")
    assert r.error is None and r.stdout.strip() == "0 1", r


def test_grep_over_held_text_stays_bounded_and_says_what_is_wrong(with_context: Attacker) -> None:
    """It keeps only max_matches matches of a held list (the rest are counted), refuses
    arguments of the wrong type and an unencodable pattern with a ContextError, and never
    calls the methods of a str subclass inside a forged match, tallying included (each found
    by attacking grep's held-text argument)."""
    r = with_context.run("big = 'a' * 2000000\nr = grep('a', [big] * 300, max_matches=1)\nprint(len(r), r.count())")
    assert r.error is None and r.stdout.strip() == "1 300", r
    for call in ("grep('a', ['abc'], max_matches='x')", "grep('a', ['abc'], max_matches=None)",
                 "grep('a', ['abc', 'abd'], max_matches=1.5)", "grep('a', 'abc', 'x')", "grep('a', 'abc', context_lines=1e9)",
                 "grep('\\udcff(', 'x')", "grep('a\\udcff', ['a'])"):
        with_context.refused(f"print({call})", "ContextError")
    r = with_context.run("class S(str):\n    def encode(self, *a):\n        print('ENCODE RAN')\n        return b'zzz'\n"
                         "G = type(grep('.')[0])\nr = grep('.', [G(1, S('alpha'), [], [])])\nprint(r.tally(), len(r))")
    assert r.error is None and "ENCODE RAN" not in r.stdout and "1" in r.stdout, r


def test_retargeting_the_handle(with_context: Attacker) -> None:
    """It denies setting a context handle's attributes (path, name) to point it elsewhere."""
    with_context.refused(f"context.path = {with_context.secret['path']!r}", "SandboxPermissionError")
    with_context.refused("setattr(context, 'name', 'x')", "SandboxPermissionError")
    r = with_context.run("print(context.get_full(), end='')")
    assert r.stdout == CONTEXT_TEXT
