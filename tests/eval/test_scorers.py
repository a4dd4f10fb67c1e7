"""Each scorer, on the answers models write."""

from __future__ import annotations

import pytest

from rlm_runtime.eval.scorers import contains, exact, f1, normalize, numeric, parse_verdict, regex, score, set_f1
from rlm_runtime.eval.tasks import ScorerOptions, Task


def test_normalize_keeps_codes_and_drops_punctuation() -> None:
    """It lowercases, drops articles and edge punctuation, and keeps KX-4821 whole."""
    assert normalize("The code is `KX-4821`.") == "code is kx-4821"
    assert normalize("  parse_args()! ") == "parse_args"


def test_exact_and_contains() -> None:
    """It matches exactly after normalising, and contains only as whole words."""
    assert exact("Lisbon", "lisbon.") == 1.0 and exact("Lisbon", "It is Lisbon") == 0.0
    assert contains("KX-4821", "The access code is KX-4821.") == 1.0
    assert contains("get", "forget it") == 0.0 and contains("get", "call get") == 1.0


def test_numeric_tolerance_and_decay() -> None:
    """It reads the first number (1,234 is one) and scores 0.75^|diff| beyond the tolerance."""
    assert numeric("42", "There are 42 tickets.") == 1.0
    assert numeric("1234", "1,234") == 1.0
    assert numeric("10", "12") == pytest.approx(0.75 ** 2)
    assert numeric("10", "12", ScorerOptions(tolerance=2)) == 1.0
    assert numeric("100", "104", ScorerOptions(rel_tolerance=0.05)) == 1.0
    assert numeric("10", "11", ScorerOptions(decay=0)) == 0.0
    assert numeric("10", "no idea") == 0.0


def test_f1_and_regex() -> None:
    """It gives token F1 and regex search (case-insensitive by default)."""
    assert f1("the quick brown fox", "quick fox") == pytest.approx(2 * 1.0 * (2 / 3) / (1 + 2 / 3))
    assert f1("a", "b") == 0.0
    assert regex(r"kx-\d{4}", "KX-4821") == 1.0
    assert regex(r"kx-\d{4}", "KX-4821", ScorerOptions(ignore_case=False)) == 0.0


def test_set_f1_lists_and_pairs() -> None:
    """It scores list answers by F1: split text, Python lists, patterns, unordered pairs."""
    assert set_f1(["red", "blue", "green"], "red, blue and green") == 1.0
    assert set_f1(["red", "blue"], "['red', 'pink']") == pytest.approx(0.5)
    opts = ScorerOptions(item_pattern=r"U\d{4}", group=2)
    gold = ["U1000 U2000", "U1000 U3000", "U2000 U3000"]
    assert set_f1(gold, "(U2000, U1000), (U3000, U1000), (U2000, U3000)", opts) == 1.0
    assert set_f1(gold, "U1000-U2000", opts) == pytest.approx(2 * 1 * (1 / 3) / (1 + 1 / 3))
    assert set_f1(gold, "none", opts) == 0.0


def test_score_takes_the_best_accepted_answer_and_zero_without_prediction() -> None:
    """It scores the best of several accepted answers, and 0 when the method gave none."""
    task = Task(id="1", question="q", answer=["parse", "Parser.parse"], scorer="contains")
    assert score(task, "It is Parser.parse") == 1.0
    assert score(task, None) == 0.0


def test_judge() -> None:
    """It asks the judge for judge tasks, and parses its verdict."""
    task = Task(id="1", question="q", answer="yes", scorer="judge")
    assert score(task, "sure", judge=lambda q, ref, pred: 1.0) == 1.0
    with pytest.raises(ValueError):
        score(task, "sure")
    assert parse_verdict("The answer is CORRECT") == 1.0
    assert parse_verdict("INCORRECT.") == 0.0
    assert parse_verdict("0.5") == 0.5
