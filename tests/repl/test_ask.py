"""Questions in the REPL: live iterations, the answer, follow-ups, and hostile text escaped."""

from __future__ import annotations

from .conftest import CTRL_D, ENTER, code


def test_a_question_shows_its_iterations_and_answer(drive, write_script) -> None:
    """It shows each iteration's code and output as it happens, then the answer."""
    script = write_script(code("x = 41 + 1\nprint('x is', x)"), code("FINAL(f'the answer is {x}')"))
    run = drive(script, "what is x?" + ENTER, CTRL_D)
    assert run.status == 0
    assert "the answer is 42" in run.out
    assert "--- iteration 1" in run.err and "x = 41 + 1" in run.err and "x is 42" in run.err
    assert "2 iterations" in run.err
    # The reply as it streamed (a line at a time, shown once), then what its cell printed.
    assert run.err.count("x = 41 + 1") == 1
    assert run.err.index("--- iteration 1") < run.err.index("  | x = 41 + 1") < run.err.index("x is 42")


def test_a_follow_up_uses_the_variables_an_earlier_question_left(drive, write_script) -> None:
    """It keeps the namespace between questions, and a cell sees the model's variables."""
    script = write_script(code("found = 'TANGERINE'\nFINAL(found)"), code("FINAL(found.lower())"))
    run = drive(script, "first?" + ENTER, ">>> print(found * 2)" + ENTER, "follow up?" + ENTER)
    assert "TANGERINE" in run.out
    assert "TANGERINETANGERINE" in run.out
    assert "tangerine" in run.out


def test_a_question_without_an_answer_says_why_and_the_repl_goes_on(drive, write_script) -> None:
    """It prints why there is no answer (one line, no traceback) and takes the next entry."""
    script = write_script(code("print('only one reply')"))
    run = drive(script, "will fail?" + ENTER, ">>> print('still here')" + ENTER)
    assert "no answer:" in run.err
    assert "Traceback" not in run.out + run.err
    assert "still here" in run.out


def test_a_hostile_answer_is_shown_escaped(drive, write_script) -> None:
    """It escapes ANSI, OSC and bare CR sequences a model writes (answer, code and output)."""
    title = "\x1b]0;pwned\x07"
    clear = "\x1b[2J"
    link = "\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\"
    script = write_script(code("print('out' + chr(27) + '[31mRED')\nFINAL('ok' + chr(27) + ']0;pwned' + chr(7) + chr(27) + '[2J' + "
                               "chr(13) + 'forged')"))
    run = drive(script, "hostile?" + ENTER, ">>> print(chr(27) + ']8;;http://evil.example' + chr(27) + '\\\\click')" + ENTER)
    text = run.out + run.err
    for raw in (title, clear, link, "\x1b", "\x07", "\rforged"):
        assert raw not in text
    assert "\\x1b]0;pwned\\x07" in run.out
    assert "\\x1b[31mRED" in run.err
    assert "\\x1b]8;;http://evil.example" in run.out
