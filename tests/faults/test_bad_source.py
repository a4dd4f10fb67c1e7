"""Malformed and hostile source: refused before it runs, quickly, with a reason to act on."""

from __future__ import annotations

import pytest

from rlm_runtime.sandbox import Sandbox

from ._support import SLACK_S, assert_kept, assert_works, plant, run


def _nested_ifs(levels: int, indent: str) -> str:
    return "".join(f"{indent * i}if 1:\n" for i in range(levels)) + f"{indent * levels}pass\n"


REFUSED = {
    "syntax error": ("x = 1\nif x\n    pass\n", ["line 2", "SyntaxError"]),
    "unclosed bracket": ("a = 1\nb = 2\nc = (a +\n", ["line 3", "SyntaxError", "never closed"]),
    "oversized source": ("x = 1\n" * 20_000, ["120000 bytes", "limit is 65536"]),
    "deep brackets": ("(" * 200 + "1" + ")" * 200, ["brackets nested deeper than 60"]),
    "deep bracket flood": ("[" * 60_000, ["brackets nested deeper than 60"]),
    "deep indentation": (_nested_ifs(70, "    "), ["indentation deeper than 60"]),
    "deep one-space indentation": (_nested_ifs(150, " "), ["indentation"]),
    "long + chain": ("1" + "+1" * 30_000, ["too deeply nested"]),
    "long unary chain": ("-" * 30_000 + "1", ["too deeply nested"]),
    "long not chain": ("not " * 15_000 + "1", ["too deeply nested"]),
    "long attribute chain": ("x" + ".y" * 20_000, ["too deeply nested"]),
    "long call chain": ("f" + "()" * 20_000, ["too deeply nested"]),
    "invalid UTF-8": (b"x = 1\ny = '\xff\xfe'\n", ["line 2", "not valid UTF-8"]),
    "NUL byte": ("x = 1\ny = 2\x00\n", ["line 2", "NUL byte"]),
    "lone surrogate": ("x = '\ud800'\n", ["not valid UTF-8"]),
}


@pytest.mark.parametrize("code, expected", list(REFUSED.values()), ids=list(REFUSED))
def test_refuses_bad_source_with_a_reason(sb: Sandbox, code: str | bytes, expected: list[str]) -> None:
    """It refuses bad source before it reaches the worker, says why, and keeps the session."""
    plant(sb)
    result, took = run(sb, code)
    assert result.error_type == "PolicyViolation", result
    assert result.error is not None
    for fragment in expected:
        assert fragment in result.error, (fragment, result.error)
    assert not result.worker_restarted
    assert took < SLACK_S, took
    assert_kept(sb)
    assert_works(sb)


def test_a_long_flat_expression_is_refused_with_the_depth_limit(sb: Sandbox) -> None:
    """It refuses a 200-term sum with the AST depth limit, not a parser crash."""
    result, took = run(sb, "x = " + " + ".join(["1"] * 200))
    assert result.error_type == "PolicyViolation", result
    assert result.error is not None and "nested deeper than 100 levels" in result.error
    assert took < SLACK_S
    assert_works(sb)


def test_brackets_inside_a_string_are_not_nesting(sb: Sandbox) -> None:
    """It allows a string literal that holds many opening brackets."""
    result = sb.execute("s = '" + "(" * 61 + "'\nt = \"" + "[" * 61 + "\"  # " + "{" * 61 + "\nlen(s) + len(t)")
    assert result.stdout == "122\n", result
