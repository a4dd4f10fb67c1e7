"""Source limits: size, encoding, NUL bytes and nesting are refused before parsing; then
syntax-node count and depth. Hostile input must be turned away fast."""

from __future__ import annotations

import ast
import time
import uuid

import pytest
from _timing import SLACK_S

from rlm_runtime.sandbox.policy import Policy, check, parse_policy


def _fresh(source: str) -> str:
    """The source with a unique trailing comment, so the compile cache cannot answer."""
    return f"{source}\n# {uuid.uuid4().hex}"


def _nested_ifs(levels: int, unit: str) -> str:
    return "".join(unit * i + "if x:\n" for i in range(levels)) + unit * levels + "pass\n"


@pytest.fixture
def no_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the parser fail the test if anything calls it."""

    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("the parser ran")

    monkeypatch.setattr(ast, "parse", boom)


# ---------------------------------------------------------------------------- size


def test_allows_source_at_the_byte_limit(default: Policy) -> None:
    """It allows a source of exactly max_source_bytes."""
    source = "#" + "x" * (65536 - 1)
    assert len(source.encode()) == default.code.max_source_bytes
    assert check(source, default).ok


def test_denies_source_over_the_byte_limit(default: Policy, strict: Policy, no_parser: None) -> None:
    """It denies a source one byte over max_source_bytes, before parsing, with both numbers."""
    report = check("#" + "x" * 65536, default)
    assert [(f.message, f.line) for f in report.errors] == [("source is 65537 bytes; the limit is 65536", None)]
    assert check("#" + "x" * 16384, strict).errors[0].message == "source is 16385 bytes; the limit is 16384"


def test_denies_source_over_the_limit_in_utf8_bytes_not_characters(default: Policy) -> None:
    """It denies by UTF-8 bytes: 32,769 characters of 'é' are 65,537 bytes."""
    source = "#" + "é" * 32768
    assert len(source) < default.code.max_source_bytes
    assert "65537 bytes" in check(source, default).errors[0].message


# ------------------------------------------------------------------------ encoding


def test_denies_invalid_utf8_with_its_line(default: Policy, no_parser: None) -> None:
    """It denies bytes that are not UTF-8, naming the byte offset and the line."""
    report = check(b"x = 1\ny = 2\nz = '\xff'\n", default)
    assert [(f.message, f.line) for f in report.errors] == [("source is not valid UTF-8 (byte offset 17)", 3)]


def test_denies_a_lone_surrogate_with_its_line(default: Policy) -> None:
    """It denies a str holding a lone surrogate (not encodable as UTF-8), with its line."""
    report = check("x = 1\ny = '\ud800'\n", default)
    assert report.errors[0].line == 2
    assert "not valid UTF-8" in report.errors[0].message


@pytest.mark.parametrize(("source", "line"), [("x = 1\ny = '\x00'\n", 2), (b"x = 1\n\n\n\x00", 4), ("\x00", 1)])
def test_denies_a_nul_byte_with_its_line(default: Policy, no_parser: None, source: str | bytes, line: int) -> None:
    """It denies a NUL byte before parsing, with its line."""
    assert [(f.message, f.line) for f in check(source, default).errors] == [("source contains a NUL byte", line)]


def test_allows_a_utf8_byte_order_mark(default: Policy) -> None:
    """It allows a source file that starts with a UTF-8 byte order mark, as Python does."""
    assert check(b"\xef\xbb\xbfx = 1\n", default).ok


# ------------------------------------------------------------------ bracket nesting


@pytest.mark.parametrize(("name", "limit"), [("default", 60), ("strict", 30)])
def test_allows_brackets_at_the_nesting_limit(name: str, limit: int, default: Policy, strict: Policy) -> None:
    """It allows brackets nested exactly max_nesting deep."""
    policy = default if name == "default" else strict
    source = "x = " + "(" * limit + "1" + ")" * limit
    assert check(source, policy).ok


@pytest.mark.parametrize("opener", ["(", "[", "{"])
def test_denies_brackets_beyond_the_nesting_limit(default: Policy, no_parser: None, opener: str) -> None:
    """It denies any bracket kind nested one deeper than max_nesting, before parsing, with the line."""
    closer = {"(": ")", "[": "]", "{": "}"}[opener]
    source = "x = 1\ny = 2\nz = " + opener * 61 + "1" + closer * 61
    assert [(f.message, f.line) for f in check(source, default).errors] == [("brackets nested deeper than 60 levels", 3)]


def test_denies_mixed_brackets_beyond_the_strict_limit(strict: Policy, no_parser: None) -> None:
    """It denies mixed brackets nested 31 deep under strict (limit 30)."""
    assert check("x = " + "([{" * 11, strict).errors[0].message == "brackets nested deeper than 30 levels"


@pytest.mark.parametrize("source", ["x = '" + "(" * 61 + "'", "# " + "[" * 61, "pattern = r'" + "(a" * 61 + "'"])
def test_allows_brackets_inside_strings_and_comments(default: Policy, source: str) -> None:
    """It allows bracket characters inside string literals and comments: they are not nesting."""
    assert check(source, default).ok


# -------------------------------------------------------------- indentation nesting


@pytest.mark.parametrize(("name", "limit"), [("default", 60), ("strict", 30)])
def test_denies_indentation_beyond_the_nesting_limit(name: str, limit: int, default: Policy, strict: Policy, no_parser: None) -> None:
    """It denies four-space indentation one level deeper than max_nesting, before parsing, with the line."""
    policy = default if name == "default" else strict
    report = check(_nested_ifs(limit + 1, "    "), policy)
    assert [(f.message, f.line) for f in report.errors] == [(f"indentation deeper than {limit} levels", limit + 2)]


def test_allows_indentation_at_the_nesting_limit(strict: Policy) -> None:
    """It allows blocks nested as deep as max_nesting (strict: 30, within its AST depth)."""
    assert check(_nested_ifs(20, "    "), strict).ok


@pytest.mark.parametrize("unit", [" ", "  ", "\t"])
def test_denies_narrow_indentation_beyond_the_nesting_limit(strict: Policy, unit: str) -> None:
    """It denies 31 levels of blocks under strict (limit 30) whatever the indentation width."""
    report = check(_nested_ifs(31, unit), strict)
    assert not report.ok
    assert "indentation deeper than 30 levels" in report.errors[0].message


# ----------------------------------------------------------------------- speed


@pytest.mark.parametrize("adversary", [
    "(" * 60_000,
    "[" * 30_000 + "]" * 30_000,
    "{" * 60_000,
    "x = " + "([{" * 19_998,
    "".join(" " * (4 * i) + "if x:\n" for i in range(155)),
])
def test_denies_60kb_of_adversarial_nesting_fast(default: Policy, adversary: str) -> None:
    """It denies 60 KB of adversarial nesting in well under half a second."""
    source = _fresh(adversary)
    assert 40_000 < len(source.encode()) <= default.code.max_source_bytes
    start = time.perf_counter()
    report = check(source, default)
    elapsed = time.perf_counter() - start
    assert not report.ok
    assert "nested deeper" in report.errors[0].message or "indentation deeper" in report.errors[0].message
    # A scan that went quadratic on 60 KB would take minutes, far past the slack.
    assert elapsed < 0.5 + SLACK_S, f"took {elapsed:.3f}s"


@pytest.mark.parametrize("adversary", ["-" * 59_999 + "1", "not " * 14_999 + "x", "1" + "+1" * 29_999, "a" + ".b" * 29_999,
                                       "f" + "()" * 29_999, "lambda:" * 8_500])
def test_denies_60kb_of_deep_expressions_fast(default: Policy, adversary: str) -> None:
    """It denies 60 KB of deeply nested expressions without brackets in well under half a second."""
    source = _fresh(adversary)
    start = time.perf_counter()
    report = check(source, default)
    elapsed = time.perf_counter() - start
    assert not report.ok
    assert "nested" in report.errors[0].message
    assert elapsed < 0.5 + SLACK_S, f"took {elapsed:.3f}s"


# ----------------------------------------------------------------- AST size, depth


def test_denies_more_syntax_nodes_than_max_ast_nodes(strict: Policy) -> None:
    """It denies a cell with more syntax nodes than max_ast_nodes (strict: 5000)."""
    report = check("x = 1\n" * 1300, strict)
    assert [(f.message, f.line) for f in report.errors] == [("code has more than 5000 syntax nodes", None)]


def test_allows_syntax_nodes_up_to_max_ast_nodes() -> None:
    """It allows a cell at the node limit and denies one a node beyond."""
    policy = parse_policy({"code": {"max_ast_nodes": 13}}, "tiny.toml")
    assert check("a = 1\nb = 2\nc = 3", policy).ok  # Module + 3 x (Assign, Name, Store, Constant)
    assert not check("a = 1\nb = 2\nc = 3\nd", policy).ok


@pytest.mark.parametrize(("name", "limit"), [("default", 100), ("strict", 50)])
def test_denies_expressions_deeper_than_max_ast_depth(name: str, limit: int, default: Policy, strict: Policy) -> None:
    """It denies an expression nested deeper than max_ast_depth, with its line."""
    policy = default if name == "default" else strict
    report = check("x = 1\ny = " + "-" * (limit + 5) + "1", policy)
    assert [(f.message, f.line) for f in report.errors] == [(f"code is nested deeper than {limit} levels", 2)]


def test_allows_expressions_within_max_ast_depth(strict: Policy) -> None:
    """It allows an expression nested well within max_ast_depth."""
    assert check("y = " + "-" * 40 + "1", strict).ok


def test_denies_nested_calls_deeper_than_a_small_max_ast_depth() -> None:
    """It denies nested calls beyond a custom max_ast_depth of 5."""
    policy = parse_policy({"code": {"max_ast_depth": 5}}, "shallow.toml")
    assert check("x = f(1)", policy).ok
    assert check("x = f(g(h(i(j(1)))))", policy).errors[0].message == "code is nested deeper than 5 levels"
