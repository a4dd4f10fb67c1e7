"""Frames: generators, tracebacks and coroutines lead to f_globals, f_back and the worker."""

from __future__ import annotations

from hostile import Attacker

GENERATOR = "def gen():\n    yield 1\ng = gen()\nnext(g)\n"


def test_generator_frame_globals(attacker: Attacker) -> None:
    """It denies gen.gi_frame.f_globals."""
    attacker.refused(GENERATOR + "print(g.gi_frame.f_back.f_globals)", "PolicyViolation")


def test_generator_frame_through_getattr(attacker: Attacker) -> None:
    """It denies getattr(gen, 'gi_frame') at run time."""
    r = attacker.refused(GENERATOR + "f = getattr(g, 'gi_frame')\nprint(getattr(f, 'f_back'))", "SandboxPermissionError")
    assert "generator" in r.error


def test_generator_expression_code(attacker: Attacker) -> None:
    """It denies getattr(generator expression, 'gi_code')."""
    attacker.refused("g = (x for x in [1])\nprint(getattr(g, 'gi_code'))", "SandboxPermissionError")


def test_generator_yieldfrom(attacker: Attacker) -> None:
    """It denies getattr(gen, 'gi_yieldfrom'), the inner generator of a yield from."""
    code = "def inner():\n    yield 1\ndef outer():\n    yield from inner()\ng = outer()\nnext(g)\nprint(getattr(g, 'gi_yieldfrom'))"
    attacker.refused(code, "SandboxPermissionError")


def test_exception_traceback_frame(attacker: Attacker) -> None:
    """It denies exception.__traceback__.tb_frame."""
    code = "try:\n    1 / 0\nexcept Exception as e:\n    print(e.__traceback__.tb_frame.f_back.f_globals)"
    attacker.refused(code, "PolicyViolation")


def test_exception_traceback_through_getattr(attacker: Attacker) -> None:
    """It denies getattr(exception, '__traceback__') at run time."""
    code = "try:\n    1 / 0\nexcept Exception as e:\n    tb = getattr(e, '__traceback__')\nprint(getattr(tb, 'tb_frame'))"
    attacker.refused(code, "AttributeError")


def test_context_of_a_worker_error(attacker: Attacker) -> None:
    """It denies the chained exception (__context__) of an error raised inside the worker's code."""
    code = (
        "try:\n"
        "    FINAL_VAR('no_such_variable')\n"
        "except NameError as e:\n"
        "    err = e\n"
        "print(getattr(getattr(err, '__context__'), '__traceback__'))"
    )
    attacker.refused(code, "AttributeError")


def test_coroutine_frame(attacker: Attacker) -> None:
    """It denies a coroutine's cr_frame (async code is refused outright)."""
    attacker.refused("async def c():\n    return 1\nco = c()\nprint(getattr(co, 'cr_frame'))", "PolicyViolation")


def test_async_generator_frame(attacker: Attacker) -> None:
    """It denies an async generator's ag_frame."""
    attacker.refused("async def a():\n    yield 1\nprint(a().ag_frame)", "PolicyViolation")
