"""Red team of the host callables a cell reaches besides the context functions: a program's
tools, llm_query / llm_query_batched and rlm_query through sessions. Each test is an attack;
passing means it failed. Secrets are planted on the host and must not come back."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from rlm_runtime import Session
from rlm_runtime.budget import RunLimits
from rlm_runtime.llm import ScriptedClient

SECRET = "sk-planted-secret-4f1c9a"


def code(src: str) -> str:
    return f"```python\n{src}\n```"


def limits(**changes: Any) -> RunLimits:
    return RunLimits(**{"max_iterations": 4, "max_wall_s": 60.0, **changes})


class Vault:
    """A host object whose repr holds a secret."""

    def __repr__(self) -> str:
        return f"Vault({SECRET})"


def test_a_tool_returning_a_host_object_does_not_hand_it_over(monkeypatch: pytest.MonkeyPatch) -> None:
    """It refuses a tool's non-plain result at the boundary: the cell gets an error, not the object or its repr."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)

    def fetch() -> Any:
        """Fetch something."""
        return Vault()

    with Session(ScriptedClient([]), tools=[fetch], trace=False) as s:
        result = s.execute("x = fetch()\nprint(type(x), x)")
    assert result.error is not None
    assert SECRET not in (result.stdout + result.error)


def test_a_tool_error_shows_no_host_traceback(tmp_path: Path) -> None:
    """It passes a failing tool's message to the cell, without host file paths or frames."""
    def explode(n: int) -> int:
        """Fail."""
        raise ValueError(f"bad n {n}")

    with Session(ScriptedClient([]), tools=[explode], trace=tmp_path / "t.jsonl") as s:
        result = s.execute("explode(3)")
    assert result.error is not None and "bad n 3" in result.error
    assert "rlm_runtime/" not in result.error and "Traceback (most recent call last)" not in result.error.split("(your code)")[-1]


def test_a_tool_cannot_be_called_past_its_budget_by_rebinding_or_threads() -> None:
    """It counts calls=1 per use however the name is reached (an alias, many calls in a loop)."""
    from rlm_runtime.tools import tool

    calls: list[int] = []

    def ping() -> str:
        """Ping."""
        calls.append(1)
        return "pong"

    lim = limits(max_llm_calls=3)
    with Session(ScriptedClient([]), tools=[tool(ping, calls=1)], limits=lim, trace=False) as s:
        result = s.execute("p = ping\nout = []\nfor i in range(10):\n    try:\n        out.append(p())\n"
                           "    except Exception as e:\n        out.append('refused')\nprint(out)")
    assert len(calls) <= 3
    assert "refused" in result.stdout


def test_llm_query_batched_is_bounded_by_the_budget_not_by_the_list() -> None:
    """It makes no more model calls than max_llm_calls for a list of 300 prompts, and answers every slot."""
    sub = ScriptedClient(lambda messages: "ok", model="scripted:sub")
    with Session(ScriptedClient([]), sub, limits=limits(max_llm_calls=5), trace=False) as s:
        result = s.execute("r = llm_query_batched(['q'] * 300)\nprint(len(r), sum(1 for x in r if x == 'ok'))")
    assert result.ok, result.error
    total, ok = map(int, result.stdout.split())
    assert total == 300 and ok <= 5
    assert len(sub.prompts) <= 5


@pytest.mark.parametrize("arg", ["'one string'", "[1, 2]", "[['nested']]", "(p for p in ['a'])", "{'a': 1}"])
def test_llm_query_batched_refuses_what_is_not_a_list_of_str(arg: str) -> None:
    """It refuses anything but a list of str, before any model call."""
    sub = ScriptedClient(lambda messages: "ok", model="scripted:sub")
    with Session(ScriptedClient([]), sub, limits=limits(), trace=False) as s:
        result = s.execute(f"llm_query_batched({arg})")
    assert result.error is not None
    assert sub.prompts == []


def test_recursive_rlm_query_stops_at_max_depth() -> None:
    """It ends a model that calls rlm_query from every depth at max_depth (a plain call below it)."""
    def reply(messages: list[dict[str, Any]]) -> str:
        if messages[0]["role"] == "system":
            return code("FINAL(rlm_query('go deeper', 'some text'))")
        return "leaf"

    client = ScriptedClient(reply)
    with Session(client, limits=limits(max_depth=2, max_llm_calls=40), trace=False) as s:
        result = s.ask("start")
    assert result.answer == "leaf", result.error
    assert result.max_depth_reached == 2


def test_a_child_run_does_not_see_the_parents_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """It runs a child RLM in its own worker: a variable holding a secret in the parent is not there."""
    def reply(messages: list[dict[str, Any]]) -> str:
        if "child question" in messages[1]["content"]:
            return code("try:\n    FINAL(token)\nexcept NameError:\n    FINAL('no token here')")
        return code(f"token = '{SECRET}'\nFINAL(rlm_query('child question', 'text'))")

    with Session(ScriptedClient(reply), limits=limits(max_depth=1), trace=False) as s:
        result = s.ask("parent")
    assert result.answer == "no token here", result.error


def test_a_child_cannot_spend_beyond_the_parents_budget() -> None:
    """It charges a child's calls to the one tree budget: a fan-out of children stops at max_llm_calls."""
    def reply(messages: list[dict[str, Any]]) -> str:
        if messages[0]["role"] == "system" and "child" not in messages[1]["content"]:
            return code("out = []\nfor i in range(20):\n    try:\n        out.append(rlm_query('child ' + str(i), 'x'))\n"
                        "    except Exception as e:\n        out.append('stopped')\nFINAL(str(out.count('stopped')))")
        return code("FINAL('c')")

    client = ScriptedClient(reply)
    with Session(client, limits=limits(max_depth=1, max_llm_calls=6), trace=False) as s:
        result = s.ask("fan out")
    assert len(client.prompts) <= 6
    assert result.usage and sum(u["calls"] for u in result.usage.values()) <= 6


def test_a_session_used_from_a_tool_is_refused_not_deadlocked() -> None:
    """It refuses a tool that calls back into its own session (SessionBusy), at once."""
    holder: dict[str, Session] = {}

    def reenter() -> str:
        """Call the session again."""
        try:
            holder["s"].execute("1")
        except Exception as e:
            return type(e).__name__
        return "entered"

    with Session(ScriptedClient([]), tools=[reenter], trace=False) as s:
        holder["s"] = s
        done = threading.Event()
        out: list[Any] = []

        def go() -> None:
            out.append(s.execute("print(reenter())"))
            done.set()

        threading.Thread(target=go, daemon=True).start()
        assert done.wait(30), "the session deadlocked"
    assert out[0].stdout.strip() == "SessionBusy"


def test_a_huge_tool_result_is_refused_and_the_worker_goes_on() -> None:
    """It refuses a tool result over the frame limit with an error; the session keeps its variables."""
    def flood() -> str:
        """Return a lot."""
        return "x" * (80 * 1024 * 1024)

    with Session(ScriptedClient([]), tools=[flood], trace=False) as s:
        assert s.execute("kept = 1").ok
        result = s.execute("y = flood()\nprint(len(y))")
        assert result.error is not None
        assert s.execute("print(kept)").stdout.strip() == "1"


def test_a_huge_argument_to_a_tool_is_refused() -> None:
    """It refuses a 200 MB argument from the cell (the worker's memory cap or the frame limit), the host unharmed."""
    seen: list[int] = []

    def size(text: str) -> int:
        """Measure."""
        seen.append(len(text))
        return len(text)

    with Session(ScriptedClient([]), tools=[size], trace=False) as s:
        result = s.execute("print(size('y' * (200 * 1024 * 1024)))")
        assert result.error is not None
        assert s.execute("print('alive')").stdout.strip() == "alive"
    assert seen == []
