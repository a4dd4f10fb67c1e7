"""Completion: slash commands, their arguments, paths after /context add, names in a cell."""

from __future__ import annotations

from pathlib import Path

from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document

from rlm_runtime.repl.completion import ReplCompleter


def _complete(text: str, *, python: bool = False, names: list[str] | None = None,
              types: dict[str, str] | None = None) -> list[str]:
    completer = ReplCompleter(lambda: python, lambda: names or [], lambda: ["max_depth", "max_iterations"],
                              lambda: ["local:qwen2.5-coder-0.5b"], types=lambda: types or {})
    return [c.text for c in completer.get_completions(Document(text, len(text)), CompleteEvent(completion_requested=True))]


def test_slash_commands() -> None:
    """It completes command names."""
    assert _complete("/con") == ["/context"]
    assert "/reset" in _complete("/re") and "/remember" in _complete("/re")


def test_command_arguments() -> None:
    """It completes the words each command takes."""
    assert _complete("/context ") == ["add", "rm", "refresh", "list"]
    assert _complete("/remember o") == ["on", "off"]
    assert _complete("/limits max_i") == ["max_iterations="]
    assert _complete("/limits max_depth=1 max_") == ["max_depth=", "max_iterations="]
    assert _complete("/model loc") == ["local:qwen2.5-coder-0.5b"]


def test_paths_after_context_add(tmp_path: Path, monkeypatch) -> None:
    """It completes file names after /context add."""
    (tmp_path / "notes_one.md").write_text("x")
    (tmp_path / "notes_two.md").write_text("x")
    monkeypatch.chdir(tmp_path)
    assert sorted(_complete("/context add notes_")) == ["one.md", "two.md"]


def test_names_in_a_cell() -> None:
    """It completes variables, the context functions and builtins after '>>>' or in python mode."""
    assert _complete(">>> gr") == ["grep"]
    assert _complete(">>> hay", names=["haystack_hits"]) == ["haystack_hits"]
    assert "search_chunks" in _complete("sea", python=True)
    assert "llm_query_batched" in _complete(">>> llm_q")
    assert _complete("gr") == []  # a question is not code


def test_arguments_of_a_context_function() -> None:
    """It completes keyword arguments inside a call of grep, peek, chunk..."""
    assert _complete(">>> grep('x', max")[0] == "max_matches="
    assert "context_lines=" in _complete(">>> grep('x', ")
    assert _complete(">>> peek(") == ["n=", "handle="]
    assert _complete(">>> search_chunks('q', k") == ["k="]


def test_attributes_of_a_variable_whose_type_is_known() -> None:
    """After ``hits.`` it completes the attributes of grep's result type (SHOW_VARS named it),
    of a built-in type, and nothing for a type it does not know or a chained attribute."""
    types = {"hits": "GrepResult", "words": "list", "thing": "Widget", "recs": "Records"}
    assert "tally" in _complete(">>> hits.", types=types) and "count" in _complete(">>> hits.", types=types)
    assert _complete(">>> hits.ta", types=types) == ["tally"]
    assert _complete(">>> words.app", types=types) == ["append"]
    assert "where" in _complete(">>> recs.", types=types)
    assert _complete(">>> thing.", types=types) == [] and _complete(">>> a.hits.", types=types) == []
    assert not [c for c in _complete(">>> hits.", types=types) if c.startswith("_")]


def test_the_session_names_each_variables_type() -> None:
    """``Session.variables()`` gives each worker variable with its type's name (what attribute
    completion looks up)."""
    from rlm_runtime import Session
    from rlm_runtime.llm import ScriptedClient

    with Session(ScriptedClient(["unused"]), contexts=["alpha\nbeta alpha\n"], trace=False) as s:
        assert s.execute("hits = grep('alpha')\nn = 3\nwords = ['a']").ok
        found = s.variables()
    assert found == {"hits": "GrepResult", "n": "int", "words": "list"}
    assert "tally" in _complete(">>> hits.", types=found)
