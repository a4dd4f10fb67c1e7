"""The MCP tools fuzzed with arguments generated from their own input schemas (Hypothesis), and
the resources with generated ids, in-process through the SDK's client session over memory
streams, against a server over a root of odd files with a scripted model of odd answers
(``_fuzz.py``).

Each tool gets arguments its schema allows, the same over the contexts the server holds, and
wrongly typed or shaped ones (any JSON value for any argument, unknown arguments). Each call
must come back within ``CALL_S`` as a result or a tool error: no exception escaping the
client, no traceback, not the SDK's generic ``Error executing tool NAME`` (what it answers
when a tool crashes, the crash in its log), and nothing a JSON encoder would refuse (memory
streams carry objects, not JSON: over stdio or HTTP a lone surrogate breaks the message;
arguments holding one reach a tool in-process only, as the SDK's parsers refuse them).
A resource read comes back as contents or a protocol error with a message, never the SDK's
generic ``Error reading resource``. Bounded and repeatable as ``_fuzz.SETTINGS`` says.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
import pytest

pytest.importorskip("mcp")
pytest.importorskip("hypothesis")

import _fuzz  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from mcp import Client  # noqa: E402

from rlm_runtime.llm.scripted import ScriptedClient  # noqa: E402
from rlm_runtime.serve.limits import ServeLimits  # noqa: E402
from rlm_runtime.serve.mcp import build_server  # noqa: E402
from rlm_runtime.serve.service import Service  # noqa: E402

#: Pieces of strings a schema's "string" is made of besides any text: lone surrogates, NUL,
#: line ends, path syntax, a right-to-left override, regex syntax, a context reference.
_PIECES = ["\ud800", "\udfff", "\x00", "\n", "\t", " ", "/", "..", "~", "ctx:", "notes", "*", "(", "\\", "é", "\u202e", "%2F"]
TEXT = st.text() | st.lists(st.sampled_from(_PIECES), max_size=6).map("".join)
#: Any JSON value (what a wrongly typed argument may be). The keys of a nested object hold no
#: lone surrogate: the client refuses to send one (pydantic serializes the request first).
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | TEXT,
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=6)
#: The SDK's generic answers to a crash (the exception's text stays in the server's log).
_CRASHES = ("Error executing tool", "Error reading resource")

#: latin1.txt is meant: the runtime says so once per read.
pytestmark = pytest.mark.filterwarnings("ignore:.*invalid UTF-8 was decoded:UserWarning")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[Service, list[str]]]:
    """A service over a root of odd files (a file and a folder registered, one trajectory)."""
    root = _fuzz.make_root(tmp_path / "root")
    service = Service(ScriptedClient(_fuzz.answer), roots=[root], limits=ServeLimits(sessions=2, wait_s=5),
                      session_options={"memory": None, "trace": tmp_path / "traces"})
    try:
        service.context_add(str(root / "notes.txt"), name="notes")
        service.context_add(str(root / "docs"), name="docs")
        trace = service.ask("q", ["ctx:notes"])["trajectory"]
        yield service, ["notes", "ctx:notes", "docs", "ctx:docs", str(root / "docs"), *_fuzz.ROOT_PATHS, trace]
    finally:
        service.close()


def test_every_tool_answers_generated_arguments_with_a_result_or_a_tool_error(
        server: tuple[Service, list[str]], caplog: pytest.LogCaptureFixture) -> None:
    """It answers every call with arguments generated from the tool's schema, allowed, over its
    contexts or wrongly typed, with a result or a tool error that says why, in time."""
    service, known = server
    failures: list[str] = []

    def run_all(client: Client, tools: list[Any]) -> None:
        for tool in tools:
            def call(arguments: dict[str, Any], name: str = tool.name) -> None:
                result = anyio.from_thread.run(_call_tool, client, name, arguments)
                _check_tool_result(name, arguments, result)

            for kind, strategy in _argument_strategies(tool.input_schema, known).items():
                _run(f"{tool.name} ({kind})", strategy, call, failures, examples=2 * _fuzz.MAX_EXAMPLES)

    caplog.set_level(logging.ERROR)
    _with_client(service, run_all)
    crashes = [r.getMessage() for r in caplog.records if "unexpected exception" in r.getMessage()]
    assert not failures and not crashes, "\n\n".join(failures + crashes)


def test_every_resource_answers_generated_ids_with_contents_or_an_error(
        server: tuple[Service, list[str]], caplog: pytest.LogCaptureFixture) -> None:
    """It answers a read of a context or trajectory resource with generated ids (unknown,
    malformed, another's syntax) with its contents or an error that says why, in time."""
    service, known = server
    # A URI is text: the client refuses a lone surrogate before anything is sent.
    ids = TEXT.filter(lambda s: "\ud800" not in s and "\udfff" not in s) | st.sampled_from(known)
    uris = st.tuples(st.sampled_from(["rlm://context/{}", "rlm://trajectory/{}.json", "rlm://trajectory/{}.html"]),
                     ids).map(lambda pair: pair[0].format(pair[1]))
    failures: list[str] = []

    def run_all(client: Client, tools: list[Any]) -> None:
        def read(uri: str) -> None:
            anyio.from_thread.run(_read_resource, client, uri)

        _run("resources", uris, read, failures, examples=4 * _fuzz.MAX_EXAMPLES)

    caplog.set_level(logging.ERROR)
    _with_client(service, run_all)
    crashes = [r.getMessage() for r in caplog.records if "unexpected exception" in r.getMessage()]
    assert not failures and not crashes, "\n\n".join(failures + crashes)


def _with_client(service: Service, body: Callable[[Client, list[Any]], None]) -> None:
    """Run ``body`` on a worker thread with a client connected to ``service``'s MCP server and
    its tools (Hypothesis runs synchronously; each call goes back to the event loop)."""
    async def main() -> None:
        async with Client(build_server(service)) as client:
            tools = (await client.list_tools()).tools
            assert len(tools) == 9
            await anyio.to_thread.run_sync(body, client, tools)

    anyio.run(main)


async def _call_tool(client: Client, name: str, arguments: dict[str, Any]) -> Any:
    with anyio.fail_after(_fuzz.CALL_S):
        return await client.call_tool(name, arguments)


async def _read_resource(client: Client, uri: str) -> None:
    from mcp import MCPError

    with anyio.fail_after(_fuzz.CALL_S):
        try:
            result = await client.read_resource(uri)
        except MCPError as e:  # an unknown or malformed id: a protocol error, by the MCP spec
            message = str(e)
            assert message and not message.startswith(_CRASHES) and "Traceback" not in message, (uri, message)
            assert _sendable(message), (uri, message)
            return
    for content in result.contents:
        assert _sendable(content.model_dump(mode="json")), (uri, content)


def _check_tool_result(name: str, arguments: dict[str, Any], result: Any) -> None:
    text = "".join(getattr(c, "text", "") for c in result.content)
    shown = f"{name}({arguments!r:.300}) -> {text[:300]!r}"
    assert "Traceback" not in text, shown
    assert text.strip() != f"Error executing tool {name}", shown  # a crash
    if result.is_error:
        assert text.startswith(f"Error executing tool {name}: ") and len(text) > len(name) + 24, shown
    else:
        assert isinstance(result.structured_content, dict), shown
    if _sendable(arguments):  # (arguments holding a lone surrogate reach a tool in-process only; its error quotes them)
        # What crosses stdio or HTTP is JSON in UTF-8: no lone surrogate of the server's may reach the client.
        assert _sendable(result.model_dump(mode="json")), shown


def _sendable(value: Any) -> bool:
    """Whether ``value`` can be sent as JSON in UTF-8 (the SDK refuses a lone surrogate escape)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _argument_strategies(schema: dict[str, Any], known: list[str]) -> dict[str, Any]:
    """Arguments for a tool of input schema ``schema``: allowed by it, allowed and naming what the
    server holds (a question that runs, in a session or not), and wrong (each argument any JSON
    value; unknown arguments)."""
    names = st.sampled_from(known)
    over = {"context": names, "path": names, "contexts": st.lists(names, max_size=3),
            "session": st.none() | st.sampled_from(["s1", "fuzz-2"]),
            "question": st.text(st.characters(categories=["L", "N", "P"]), min_size=1, max_size=40)}
    props = schema.get("properties") or {}
    found = {"allowed": _from_schema(schema)}
    if {"context", "path", "contexts"} & set(props):
        found["over its contexts"] = _from_schema(schema, over)
    found["wrong"] = (st.fixed_dictionaries({}, optional={k: JSON for k in props})
                      | st.dictionaries(TEXT, JSON, max_size=4))
    return found


def _from_schema(schema: dict[str, Any], fixed: dict[str, Any] | None = None) -> Any:
    """A strategy for values of ``schema`` (the JSON Schema the SDK makes of a tool's
    signature: types, anyOf, minimum, items, properties, required); ``fixed``: strategies
    for some properties."""
    if "anyOf" in schema:
        return st.one_of([_from_schema(s) for s in schema["anyOf"]])
    kind = schema.get("type")
    if kind == "object":
        props, required = schema.get("properties") or {}, set(schema.get("required") or ())
        each = {k: (fixed or {}).get(k, _from_schema(v)) for k, v in props.items()}
        return st.fixed_dictionaries({k: s for k, s in each.items() if k in required},
                                     optional={k: s for k, s in each.items() if k not in required})
    if kind == "string":
        return TEXT
    if kind == "integer":
        return st.integers(min_value=schema.get("minimum"), max_value=schema.get("maximum"))
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        return st.lists(_from_schema(schema.get("items") or {}), max_size=4)
    return JSON


def _run(label: str, strategy: Any, check: Callable[[Any], None], failures: list[str],
         examples: int = _fuzz.MAX_EXAMPLES) -> None:
    """Check ``examples`` values drawn from ``strategy``; the first failure is kept in ``failures``."""
    @settings(_fuzz.SETTINGS, max_examples=examples)
    @given(strategy)
    def fuzz(drawn: Any) -> None:
        check(drawn)

    try:
        fuzz()
    except Exception as e:  # noqa: BLE001 - every tool runs; the failures are told together
        notes = "\n".join(getattr(e, "__notes__", []))
        failures.append(f"{label}: {type(e).__name__}: {str(e)[:2000]}\n{notes[:2000]}")
