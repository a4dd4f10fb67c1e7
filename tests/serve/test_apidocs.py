"""The REST API's /docs page: rendered on the server from the OpenAPI schema, whole offline
(no script, nothing loaded from elsewhere), every endpoint listed, every schema text escaped."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi")

from _serve import serve  # noqa: E402

from rlm_runtime.serve.apidocs import render_api_page  # noqa: E402


def test_the_docs_page_lists_every_endpoint_and_loads_nothing_from_elsewhere(tmp_path: Path) -> None:
    """It serves /docs without the token: every path of the schema with its parameters and a
    curl line, no <script>, no URL of another host, under a policy that forbids both."""
    with serve(["```python\nFINAL('x')\n```"], [tmp_path]) as api:
        page = httpx.get(f"{api.url}/docs", timeout=30)
        schema = httpx.get(f"{api.url}/openapi.json", timeout=30).json()
    assert page.status_code == 200
    assert "default-src 'none'" in page.headers["content-security-policy"]
    text = page.text
    for path in schema["paths"]:
        assert f"> {path}</h2>" in text.replace("&#x27;", "'"), path
    assert "<script" not in text
    assert not [u for u in re.findall(r"(?:src|href)=['\"]([^'\"]+)", text) if not u.startswith("/")]
    assert "an RE2 regular expression" in text and "curl -H" in text
    assert "errors: 400, 401, 403, 404, 409, 413, 422, 500, 502, 503" in text  # POST /api/ask's


def test_the_schema_documents_every_error_as_the_json_the_server_sends(tmp_path: Path) -> None:
    """It documents each operation's error statuses, the 401 of the token included, with the
    body every error has ({"error", "status", "type"}), not FastAPI's {"detail"} of a 422."""
    with serve(["```python\nFINAL('x')\n```"], [tmp_path]) as api:
        schema = httpx.get(f"{api.url}/openapi.json", timeout=30).json()
    body = schema["components"]["schemas"]["ErrorBody"]
    assert set(body["required"]) == {"error", "status", "type"} and "HTTPValidationError" not in schema["components"]["schemas"]
    for path, methods in schema["paths"].items():
        for method, op in methods.items():
            responses = op["responses"]
            assert {"401", "403", "413", "500"} <= set(responses), (method, path)
            assert ("422" in responses) == bool(op.get("parameters") or op.get("requestBody")), (method, path)
            for code, response in responses.items():
                if code != "200":
                    assert response["content"] == {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
    streamed = schema["paths"]["/api/ask"]["post"]["responses"]["200"]["content"]["text/event-stream"]["schema"]
    assert streamed["properties"]["event"]["enum"] == ["model", "cell", "iteration", "result", "error"]


def test_schema_text_is_escaped() -> None:
    """It escapes what the schema says (a summary or parameter holding markup)."""
    schema = {"info": {"title": "<b>t</b>"}, "paths": {"/x/<img src=y>": {"get": {
        "summary": "<script>alert(1)</script>", "parameters": [{"name": "q\"><svg>", "in": "query", "schema": {}}]}}}}
    page = render_api_page(schema)
    assert "<script>alert" not in page and "<img src=y>" not in page and "<svg>" not in page and "<b>t</b>" not in page
