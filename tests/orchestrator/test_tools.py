"""Tools: a program's own functions, called by the model from the sandbox."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlm_runtime import RLM, Session, Tool, tool
from rlm_runtime.config import paths_from_env
from rlm_runtime.context import open_context
from rlm_runtime.errors import ConfigError
from rlm_runtime.llm import ScriptedClient
from rlm_runtime.prompts import WORKER_FUNCTIONS, Prompts
from rlm_runtime.sandbox.contexts import namespace

from .support import code, fast, of_type, read_trace

PRICES = {"A-1": 2.5, "B-2": 4.0}


def test_a_five_line_tool_is_called_by_the_model(tmp_path: Path) -> None:
    """It binds a plain function in the sandbox, lists it in the prompt, and records each call."""
    def price(sku: str) -> float:
        """The current price of a product, by its SKU."""
        return PRICES[sku]

    client = ScriptedClient([code("FINAL(price('A-1') + price('B-2'))")])
    trace = tmp_path / "t.jsonl"
    with RLM(client, limits=fast(), tools=[price], trace=trace) as rlm:
        result = rlm.run("What do A-1 and B-2 cost together?")
    assert result.answer == "6.5", result.error
    system = client.prompts[0][0]["content"]
    assert "- price(sku): The current price of a product, by its SKU." in system
    calls = of_type(read_trace(trace), "tool_call")
    assert [c["name"] for c in calls] == ["price", "price"] and calls[0]["result"] == "2.5"


def test_a_tool_error_reaches_the_model_as_an_error() -> None:
    """It turns a tool's exception into an error the model's code sees, and the run goes on."""
    def price(sku: str) -> float:
        """Price by SKU."""
        return PRICES[sku]

    client = ScriptedClient([code("try:\n    price('nope')\nexcept Exception as e:\n    FINAL(str(e))")])
    with Session(client, limits=fast(), tools=[price], trace=False) as s:
        answer = s.ask("price of nope?").answer
    assert answer is not None and "KeyError" in answer


def test_a_tool_gets_only_plain_data() -> None:
    """It refuses to pass a non-plain argument (a function) from the sandbox to a tool."""
    seen: list[object] = []

    def keep(value: object) -> str:
        """Keep a value."""
        seen.append(value)
        return "kept"

    with Session(ScriptedClient([]), tools=[keep], trace=False) as s:
        s.ask  # noqa: B018  (the tool is bound when the session opens its sandbox)
        result = s.execute("keep(lambda: 1)")
    assert result.error is not None and seen == []


def test_a_tool_that_costs_budget_is_counted_and_refused_when_spent() -> None:
    """It counts a budgeted tool's calls and dollars, and refuses it once the run's calls are spent."""
    @tool(calls=1, cost_usd=0.25)
    def search(q: str) -> str:
        """Search the web (paid)."""
        return f"results for {q}"

    client = ScriptedClient([code("a = search('x')\nb = search('y')\nFINAL(a)")])
    with Session(client, limits=fast(max_llm_calls=2), tools=[search], trace=False) as s:
        result = s.ask("search twice")
        usage = s.usage()
    assert result.answer is None and result.error_type == "BudgetExceeded"
    assert usage["by_model"]["tool:search"]["calls"] == 1 and usage["by_model"]["tool:search"]["cost_usd"] == 0.25


@pytest.mark.parametrize("name", ["grep", "llm_query", "FINAL", "_private", "not an identifier"])
def test_a_tool_cannot_take_a_runtime_name(name: str) -> None:
    """It refuses a tool named like a runtime function, or not a public identifier."""
    with pytest.raises(ConfigError):
        Session(ScriptedClient([]), tools=[Tool(name=name, fn=len)], trace=False)


def test_two_tools_with_one_name_are_refused() -> None:
    """It refuses two tools with the same name."""
    def f() -> int:
        return 1

    with pytest.raises(ConfigError):
        Session(ScriptedClient([]), tools=[f, Tool(name="f", fn=len)], trace=False)


def test_the_prompt_names_only_worker_functions_that_exist() -> None:
    """It lists each worker-side function with parameters the real function has, with the same defaults."""
    import inspect
    import re

    real = namespace([open_context("x", as_text=True)])
    methods = {"context_lines": open_context("x", as_text=True).lines, "context_count": open_context("x", as_text=True).count}
    prompts = Prompts(paths_from_env().brain_dirs)
    for name in WORKER_FUNCTIONS:
        entry = prompts.function_entry(name)
        shown = re.match(r"- ([\w.]+)\((.*?)\):", entry)
        assert shown, entry
        fn = methods.get(name) or real[shown.group(1)]
        params = inspect.signature(fn).parameters
        for part in filter(None, (p.strip() for p in shown.group(2).split(","))):
            pname, _, default = part.partition("=")
            assert pname in params, (name, pname)
            if default and params[pname].default not in (inspect.Parameter.empty, None):  # None: a documented default
                assert repr(params[pname].default) == default or str(params[pname].default) == default, (name, pname)
