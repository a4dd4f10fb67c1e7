"""Cells in the REPL: '>>>' lines, python mode (F2), multi-line input, errors as messages."""

from __future__ import annotations

import pytest

from rlm_runtime.repl.app import needs_more
from rlm_runtime.repl.controller import cell_code

from .conftest import ENTER, F2, META_ENTER, code


def test_a_cell_runs_in_the_sandbox_namespace(drive, write_script) -> None:
    """It runs '>>> code' in the worker, where the context functions are."""
    notes = write_script("unused")
    run = drive(write_script("unused"), ">>> y = 6 * 7" + ENTER, ">>> print(y, len(context) > 0)" + ENTER, contexts=[notes])
    assert "42 True" in run.out


def test_f2_switches_to_python_mode_and_back(drive, write_script) -> None:
    """It treats every line as a cell in python mode, and as a question again after F2."""
    script = write_script(code("FINAL(str(z + 1))"))
    run = drive(script, F2, "z = 9" + ENTER, "print(z * 2)" + ENTER, F2, "question?" + ENTER)
    assert "18" in run.out
    assert "10" in run.out


def test_a_block_goes_on_until_an_empty_line(drive, write_script) -> None:
    """It continues a cell after a trailing ':' (auto-indented) and runs it at the empty line."""
    run = drive(write_script("unused"), ">>> for i in range(3):" + ENTER, "print('row', i)" + ENTER, ENTER)
    assert "row 0\nrow 1\nrow 2" in run.out


def test_meta_enter_sends_an_incomplete_cell(drive, write_script) -> None:
    """It sends on Meta+Enter even mid-block (the sandbox then reports the syntax error)."""
    run = drive(write_script("unused"), ">>> if True:" + META_ENTER, ">>> print('next')" + ENTER)
    assert "SyntaxError" in run.err or "expected an indented block" in run.err
    assert "next" in run.out


def test_a_failing_cell_prints_its_error_not_a_host_traceback(drive, write_script) -> None:
    """It shows the cell's error and goes on."""
    run = drive(write_script("unused"), ">>> 1 / 0" + ENTER, ">>> print('alive')" + ENTER)
    assert "ZeroDivisionError" in run.err
    assert "alive" in run.out
    assert "rlm_runtime" not in run.err


@pytest.mark.parametrize(("text", "more"), [
    (">>> for i in x:", True), (">>> x = (1,", True), (">>> print(1)", False), (">>> print(1))", False),
    (">>> for i in x:\n    print(i)", True), (">>> for i in x:\n    print(i)\n    ", False), ("", False),
    ("if a:\\", True),
])
def test_needs_more(text: str, more: bool) -> None:
    """It decides like ptpython whether Enter continues a cell."""
    assert needs_more(text) is more


def test_cell_code_removes_the_prompts() -> None:
    """It strips '>>>' and '...' prompts and dedents."""
    assert cell_code(">>> for i in x:\n...     print(i)") == "for i in x:\n    print(i)"
    assert cell_code(">>>   y = 1") == "y = 1"
