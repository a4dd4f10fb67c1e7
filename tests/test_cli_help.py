"""``rlm --help`` and every subcommand's: the commands in the order of use, a description and
one to three examples each (examples that parse), the exit codes of ``rlm ask``, and ``-m``
for ``--model``."""

from __future__ import annotations

import json
import re
import shlex

import pytest

from rlm_runtime.cli import build_parser, main
from rlm_runtime.cli.eval import SUBCOMMANDS as EVAL_FORMS

#: The order ``rlm --help`` lists the commands in: the order of use.
ORDER = ["ask", "repl", "serve", "eval", "memory", "context", "probe", "peek", "grep", "chunk", "trace", "model", "profile", "policy", "sandbox"]


def _help(capsys: pytest.CaptureFixture[str], *words: str) -> str:
    capsys.readouterr()
    try:
        code = main([*words, "--help"])
    except SystemExit as e:
        code = e.code
    out = capsys.readouterr().out
    assert code in (0, None), out
    return out


def _listed(text: str, title: str) -> list[str]:
    """The names argparse lists under ``title`` (COMMAND, ACTION) in a help text."""
    block = text.split(f"  {title}\n", 1)[1].split("\n\n", 1)[0]
    return [m.group(1) for m in re.finditer(r"^    (\S+)", block, re.M)]


def _every_help_path(capsys: pytest.CaptureFixture[str]) -> list[tuple[str, ...]]:
    paths: list[tuple[str, ...]] = []
    for command in _listed(_help(capsys), "COMMAND"):
        paths.append((command,))
        text = _help(capsys, command)
        if "  ACTION\n" in text:
            paths += [(command, action) for action in _listed(text, "ACTION")]
    return paths + [("eval", form) for form in EVAL_FORMS]


def test_commands_are_listed_in_the_order_of_use(capsys: pytest.CaptureFixture[str]) -> None:
    """It lists ask, repl, eval, memory, the context tools, trace, model, profile, policy, sandbox, in that order."""
    assert _listed(_help(capsys), "COMMAND") == ORDER


def test_every_subcommand_has_a_description_and_examples(capsys: pytest.CaptureFixture[str]) -> None:
    """It gives each subcommand's --help a description and one to three examples that parse."""
    paths = _every_help_path(capsys)
    assert ("memory", "forget") in paths and ("sandbox", "doctor") in paths and ("eval", "compare") in paths
    for path in paths:
        text = _help(capsys, *path)
        description = text.split("\n\n")[1]
        assert description.strip() and not description.startswith(("positional arguments", "options")), path
        assert "\nexamples:\n" in text, path
        examples = text.split("\nexamples:\n", 1)[1].split("\n\n", 1)[0].splitlines()
        assert 1 <= len(examples) <= 3, (path, examples)
        assert any(f"rlm {' '.join(path)}" in line for line in examples), (path, examples)
        for line in examples:
            assert line.startswith("  ") and "rlm " in line, (path, line)
            for words in _commands(line):
                if words[:2] != ["rlm", "eval"]:  # eval's own parsers read its words later
                    build_parser().parse_args(words[1:])  # an example that does not parse exits 2 here


def _commands(line: str) -> list[list[str]]:
    """The ``rlm`` commands of a shell line (split at pipes and ``&&``; redirections dropped)."""
    lex = shlex.shlex(line, posix=True, punctuation_chars="|&<>")
    lex.whitespace_split = True
    commands: list[list[str]] = [[]]
    tokens = iter(lex)
    for token in tokens:
        if token in ("|", "&&"):
            commands.append([])
        elif token in ("<", ">"):
            next(tokens)
        else:
            commands[-1].append(token)
    return [c for c in commands if c[:1] == ["rlm"]]


def test_ask_help_documents_the_question_and_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    """It says what the question is, how standard input is read, and each exit code of rlm ask."""
    text = _help(capsys, "ask")
    assert re.search(r"^  question +the question", text, re.M)
    assert "standard input" in text and "-c -" in text
    codes = text.split("\nexit codes:\n", 1)[1]
    assert re.findall(r"^  (\d+) ", codes, re.M) == ["0", "1", "2", "3", "4", "130"]
    assert "an empty question" in codes and "unknown model" in codes


@pytest.mark.parametrize("words", [["ask", "q"], ["repl"], ["profile", "show", "quick"]])
def test_m_is_short_for_model(words: list[str]) -> None:
    """It takes -m for --model wherever --model is."""
    assert build_parser().parse_args([*words, "-m", "openai/gpt-4o-mini"]).model == "openai/gpt-4o-mini"


def test_grep_keeps_m_for_max_matches() -> None:
    """It leaves grep's -m (it has no --model) meaning --max-matches."""
    assert build_parser().parse_args(["grep", "-m", "5", "x", "file.txt"]).max_matches == 5


def test_profile_show_takes_m(capsys: pytest.CaptureFixture[str]) -> None:
    """It shows a profile for the model given with -m."""
    assert main(["profile", "show", "quick", "-m", "openai/gpt-4o-mini", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"] == "openai/gpt-4o-mini"


def test_eval_takes_m(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    """It parses -m for rlm eval's model (then refuses the missing task file, not the option)."""
    assert main(["eval", str(tmp_path / "none.jsonl"), "-m", "scripted:x.jsonl"]) == 2
    err = capsys.readouterr().err
    assert "no such task file or suite" in err and "unrecognized" not in err


def test_rlm_alone_lists_the_commands_and_exits_2() -> None:
    """``rlm`` with no command (the console script) prints the commands, as git and llm do,
    on stderr, and exits 2: not only "required: COMMAND"."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "rlm_runtime.cli"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert _listed(done.stderr, "COMMAND")[:3] == ORDER[:3] and "required" not in done.stderr


@pytest.mark.parametrize(("words", "usage"), [(("memory", "search", "refunds"), "usage: rlm memory search "),
                                             (("context", "list"), "usage: rlm context list "),
                                             (("ask", "q?"), "usage: rlm ask ")])
def test_an_unknown_flag_is_told_with_its_commands_usage(capsys: pytest.CaptureFixture[str], words: tuple[str, ...],
                                                         usage: str) -> None:
    """A flag a subcommand does not know is an error of that subcommand: its usage line
    (``usage: rlm memory search ...``), not the top level's, and exit 2."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main([*words, "--bogus-flag"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith(usage) and "unrecognized arguments: --bogus-flag" in err
