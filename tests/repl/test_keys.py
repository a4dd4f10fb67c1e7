"""Keys: Ctrl-C at the prompt clears the line, Ctrl-C during a run cancels it, Ctrl-D exits."""

from __future__ import annotations

from pathlib import Path

from .conftest import CTRL_C, CTRL_D, ENTER, Until, code


def test_ctrl_c_at_the_prompt_clears_the_line(drive, write_script) -> None:
    """It drops what was typed and prompts again."""
    run = drive(write_script("unused"), ">>> print('dropped')" + CTRL_C, ">>> print('kept')" + ENTER)
    assert "dropped" not in run.out
    assert "kept" in run.out


def test_ctrl_d_exits_and_closes_the_session(drive, write_script, tmp_path: Path) -> None:
    """It exits with status 0 and ends the trajectory (the session was closed)."""
    run = drive(write_script("unused"), ">>> print(1)" + ENTER, CTRL_D, ">>> print('after')" + ENTER)
    assert run.status == 0
    assert "after" not in run.out
    assert '"session_end"' in (tmp_path / "trace.jsonl").read_text()


def test_ctrl_c_during_a_run_cancels_it_and_the_session_goes_on(drive, write_script) -> None:
    """It cancels a question stuck in a busy cell, shows what it had, and keeps the namespace."""
    script = write_script(code("progress = 'looked at half'\nprint(progress)\nwhile True:\n    pass"), code("FINAL('never')"))
    run = drive(script, "a question that hangs" + ENTER, 1.5, CTRL_C, ">>> print(progress, 'still')" + ENTER)
    assert "cancelled" in run.err
    assert "looked at half still" in run.out
    assert "never" not in run.out


def test_ctrl_c_during_a_cell_interrupts_it(drive, write_script) -> None:
    """It interrupts a person's endless cell; the variables stay."""
    # The endless cell is typed once the first has run: a Ctrl-C sent while the session was
    # still starting would reach the first cell's run instead (it did on a loaded CI machine).
    run = drive(write_script("unused"), ">>> before = 3; print('first cell ran')" + ENTER, Until("first cell ran"),
                ">>> while True: pass" + ENTER, 1.0, CTRL_C, ">>> print(before + 1)" + ENTER)
    assert "KeyboardInterrupt" in run.err
    assert "4" in run.out


def test_keys_typed_during_a_run_reach_the_next_prompt(drive, write_script) -> None:
    """It keeps what is typed while a run is in flight for the next prompt."""
    script = write_script(code("n = 0\nfor i in range(3_000_000):\n    n += 1\nFINAL(str(n))"))
    run = drive(script, "count?" + ENTER + ">>> print('typed ahead')" + ENTER)
    assert "3000000" in run.out
    assert "typed ahead" in run.out


def test_a_session_that_cannot_start_ends_the_prompt_with_the_reason(drive, write_script) -> None:
    """It stops at once, with the reason, when the session cannot be made (the prompt was already up)."""
    import pytest

    from rlm_runtime.errors import ConfigError

    with pytest.raises(ConfigError, match="no policy named 'nosuchpolicy'"):
        drive(write_script("unused"), 1.0, policy="nosuchpolicy")


def test_a_question_typed_before_the_session_is_ready_waits_for_it(drive, write_script) -> None:
    """It answers a question sent the moment the prompt is up (the session still starting)."""
    from .conftest import ENTER, code

    run = drive(write_script(code("FINAL('ready')")), "q?" + ENTER)
    assert "ready" in run.out
