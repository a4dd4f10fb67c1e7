"""The REST API fuzzed from its own OpenAPI schema with Schemathesis, against a real server on
loopback (a root of odd files, a scripted model with odd answers: ``_fuzz.py``).

Every operation gets requests the schema allows, requests it does not, and allowed ones over
the contexts and the trajectory the server holds. Each answer must be one the schema documents
(status, content type, body), never a 5xx, a traceback or a hang; every error is JSON
``{"error", "status", "type"}`` with the answer's status. Without the token (none, a wrong one,
another scheme) every request is 401, except ``/docs`` and ``/openapi.json``.

Bounded and repeatable (``_fuzz.SETTINGS``): ``MAX_EXAMPLES`` requests a kind, derandomized,
no shrinking (a failure shows the request with a curl line to replay it), ``CALL_S`` a
request. Schemathesis's own pytest integration (``schemathesis.pytest.from_fixture``) is not
used: under pytest 9.2 it fails before the first request (``'Function' object has no
attribute '_nodeid'``); its strategies and checks are.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")
pytest.importorskip("fastapi")

import _fuzz  # noqa: E402
import requests  # noqa: E402
from _serve import TOKEN, Served, serve  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402

AUTH = {"Authorization": f"Bearer {TOKEN}"}
#: What a request the schema allows may be refused with: what the schema cannot say (400: a
#: pattern that is not RE2, a path that is not there; 413: this server's limits) and what a
#: request over real contexts may meet (403, 404, 409, 503).
ALLOWED_REFUSALS = ["2xx", "400", "403", "404", "409", "413", "503"]
#: What a request the schema does not allow may be refused with: Schemathesis's default, and
#: 413 (a body over the server's limit is refused before it is read).
REFUSALS = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429"]
#: Authorization headers that are not the token.
WRONG_AUTH = [{}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Bearer {TOKEN}x"},
              {"Authorization": f"Basic {TOKEN}"}, {"Authorization": f"Bearer{TOKEN}"}, {"Authorization": "Bearer "}]


@dataclass(frozen=True)
class Known:
    """What the server holds, for requests that reach past the lookups."""

    ids: list[str]  # registered contexts, as a path segment names them
    refs: list[str]  # contexts as a question or a search names them: ids and paths under the root
    paths: list[str]  # files and folders under the root, to register
    trace: str  # a trajectory

#: latin1.txt is meant: the runtime says so once per read.
pytestmark = pytest.mark.filterwarnings("ignore:.*invalid UTF-8 was decoded:UserWarning")


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[Served, Known]]:
    root = _fuzz.make_root(tmp_path / "root")
    with serve(_fuzz.answer, [root]) as served:
        served.register(root / "notes.txt", "notes")
        served.register(root / "docs", "docs")
        served.register(root / "data.jsonl", "data")
        asked = served.post("/api/ask", json={"question": "q", "contexts": ["ctx:notes"]})
        assert asked.status_code == 200, asked.text
        known = Known(ids=["notes", "ctx:notes", "docs", "ctx:docs", "data"],
                      refs=["ctx:notes", "docs", str(root / "docs" / "a.md"), *_fuzz.ROOT_PATHS],
                      paths=[*_fuzz.ROOT_PATHS, str(root / "wide.txt")],
                      trace=asked.json()["trajectory"])
        yield served, known


def test_every_operation_answers_generated_requests_as_documented(api: tuple[Served, Known]) -> None:
    """It answers every request generated from its schema, allowed or not, with a documented
    status and body, within CALL_S, with no 5xx and no traceback; every error is its JSON."""
    served, known = api
    config = schemathesis.Config.from_dict({
        "generation": {"with-security-parameters": False},
        "checks": {"positive_data_acceptance": {"expected-statuses": ALLOWED_REFUSALS},
                   "negative_data_rejection": {"expected-statuses": REFUSALS}},
    })
    schema = schemathesis.openapi.from_url(f"{served.url}/openapi.json", config=config)
    failures: list[str] = []
    with requests.Session() as http:
        def send(case: Any) -> None:
            response = case.call(session=http, headers=AUTH, timeout=_fuzz.CALL_S)
            case.validate_response(response, headers=AUTH)
            _no_traceback_and_errors_as_json(case, response)

        for operation in _operations(schema):
            for kind, strategy in _strategies(operation, known).items():
                _run(f"{operation.label} ({kind})", strategy, send, failures)
    assert not failures, "\n\n".join(failures)


def test_without_the_token_every_operation_is_401(api: tuple[Served, Known]) -> None:
    """It answers 401 with the JSON error and WWW-Authenticate to every generated request that
    lacks the token or carries another, and serves /docs and /openapi.json to anyone (and
    /api/hello, a server's proof of its record, which holds no data)."""
    from rlm_runtime.serve.auth import OPEN_PATHS

    served, _ = api
    schema = schemathesis.openapi.from_url(f"{served.url}/openapi.json",
                                           config=schemathesis.Config.from_dict({"generation": {"with-security-parameters": False}}))
    failures: list[str] = []
    with requests.Session() as http:
        for operation in _operations(schema):
            if operation.path in OPEN_PATHS:
                continue
            cases = operation.as_strategy(GenerationMode.POSITIVE)
            if _has_inputs(operation):
                cases = cases | operation.as_strategy(GenerationMode.NEGATIVE)

            def send(args: tuple[Any, dict[str, str]]) -> None:
                case, headers = args
                response = case.call(session=http, headers=headers, timeout=_fuzz.CALL_S)
                assert response.status_code == 401, _shown(case, response)
                assert _header(response, "www-authenticate") == "Bearer", _shown(case, response)
                _no_traceback_and_errors_as_json(case, response)

            _run(operation.label, st.tuples(cases, st.sampled_from(WRONG_AUTH)), send, failures, examples=10)
        for path in ("/mcp", "/api", "/api/nothing", "/"):
            response = http.get(served.url + path, timeout=_fuzz.CALL_S)
            if response.status_code != 401:
                failures.append(f"GET {path}: {response.status_code}")
        for path in ("/docs", "/openapi.json"):
            if http.get(served.url + path, timeout=_fuzz.CALL_S).status_code != 200:
                failures.append(f"GET {path} without the token is not served")
    assert not failures, "\n\n".join(failures)


def _operations(schema: Any) -> list[Any]:
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 15
    return operations


def _has_inputs(operation: Any) -> bool:
    return bool(len(operation.path_parameters) or len(operation.query) or len(operation.body))


def _strategies(operation: Any, known: Known) -> dict[str, Any]:
    """The kinds of request made for ``operation``: allowed, not allowed (when it takes
    anything), and allowed over what the server holds (a context, a trajectory, a path)."""
    found = {"allowed": operation.as_strategy(GenerationMode.POSITIVE)}
    if _has_inputs(operation):
        found["not allowed"] = operation.as_strategy(GenerationMode.NEGATIVE)
    path = operation.path
    if "{context_id}" in path:
        found["over a context"] = st.sampled_from(known.ids).flatmap(
            lambda cid: operation.as_strategy(GenerationMode.POSITIVE, path_parameters={"context_id": cid}))
    elif "{trace_id}" in path:
        found["over a trajectory"] = st.sampled_from([known.trace, "run-20000101-000000-000000"]).flatmap(
            lambda tid: operation.as_strategy(GenerationMode.POSITIVE, path_parameters={"trace_id": tid}))
    elif path == "/api/context/search/all":
        found["over contexts"] = st.lists(st.sampled_from(known.refs), min_size=1, max_size=3).flatmap(
            lambda refs: operation.as_strategy(GenerationMode.POSITIVE, query={"context": refs}))
    elif path == "/api/ask":
        found["over contexts"] = _with_body(operation, "contexts", st.lists(st.sampled_from(known.refs), max_size=3))
    elif path == "/api/context/register":
        found["over paths"] = _with_body(operation, "path", st.sampled_from(known.paths))
    return found


def _with_body(operation: Any, field: str, values: Any) -> Any:
    def put(pair: tuple[Any, Any]) -> Any:
        case, value = pair
        case.body = {**case.body, field: value}
        return case

    return st.tuples(operation.as_strategy(GenerationMode.POSITIVE), values).map(put)


def _run(label: str, strategy: Any, send: Callable[[Any], None], failures: list[str],
         examples: int = _fuzz.MAX_EXAMPLES) -> None:
    """Send ``examples`` requests drawn from ``strategy``; the first failure is kept in ``failures``."""
    @settings(_fuzz.SETTINGS, max_examples=examples)
    @given(strategy)
    def fuzz(drawn: Any) -> None:
        send(drawn)

    try:
        fuzz()
    except Exception as e:  # noqa: BLE001 - every operation runs; the failures are told together
        notes = "\n".join(getattr(e, "__notes__", []))
        failures.append(f"{label}: {type(e).__name__}: {str(e)[:3000]}\n{notes[:2000]}")


def _no_traceback_and_errors_as_json(case: Any, response: Any) -> None:
    assert "Traceback" not in response.text, _shown(case, response)
    if response.status_code < 400:
        return
    assert _header(response, "content-type") == "application/json", _shown(case, response)
    body = json.loads(response.text)
    assert isinstance(body, dict) and body.get("status") == response.status_code, _shown(case, response)
    assert isinstance(body.get("error"), str) and body["error"], _shown(case, response)
    assert isinstance(body.get("type"), str) and body["type"], _shown(case, response)


def _header(response: Any, name: str) -> str | None:
    values = response.headers.get(name) or [None]  # Schemathesis keeps every value of a header
    return values[0]


def _shown(case: Any, response: Any) -> str:
    body = "" if case.body is None or type(case.body).__name__ == "NotSet" else f" body={case.body!r:.300}"
    return (f"{case.method} {case.formatted_path} query={case.query!r:.300}{body} -> {response.status_code} "
            f"{_header(response, 'content-type')}: {response.text[:300]}")
