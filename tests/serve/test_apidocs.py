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


def test_schema_text_is_escaped() -> None:
    """It escapes what the schema says (a summary or parameter holding markup)."""
    schema = {"info": {"title": "<b>t</b>"}, "paths": {"/x/<img src=y>": {"get": {
        "summary": "<script>alert(1)</script>", "parameters": [{"name": "q\"><svg>", "in": "query", "schema": {}}]}}}}
    page = render_api_page(schema)
    assert "<script>alert" not in page and "<img src=y>" not in page and "<svg>" not in page and "<b>t</b>" not in page
