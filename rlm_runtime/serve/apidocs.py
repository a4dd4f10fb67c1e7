"""The REST API's documentation page (``/docs``): one HTML page rendered from the OpenAPI schema.

FastAPI's own page loads Swagger UI from a CDN, which shows a blank page offline; this one is
rendered on the server, needs no script and nothing from elsewhere, and escapes every text of
the schema. Each endpoint: its method and path, what it does, its parameters (where, type,
required, default, description), its JSON body's fields, the statuses of its errors, and a
``curl`` line to copy.
"""

from __future__ import annotations

import html
import json
from typing import Any

_STYLE = """body{font:14px/1.5 system-ui,sans-serif;max-width:980px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{font-size:1.05em;margin:1.6em 0 .3em;font-family:ui-monospace,monospace}
.m{display:inline-block;min-width:3.6em;padding:0 .4em;border-radius:3px;color:#fff;text-align:center}
.GET{background:#2f6fb3}.POST{background:#3a8a3a}.DELETE{background:#b33}table{border-collapse:collapse;margin:.3em 0}
td,th{border:1px solid #ddd;padding:.2em .5em;text-align:left;vertical-align:top}th{background:#f4f4f4}
pre{background:#f6f6f6;padding:.5em;overflow-x:auto}code{font-family:ui-monospace,monospace}"""


def render_api_page(schema: dict[str, Any], base_url: str = "http://127.0.0.1:8765") -> str:
    """The page for ``schema`` (an OpenAPI document as FastAPI makes it)."""
    info = schema.get("info") or {}
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{_e(info.get('title', 'API'))}</title>",
             f"<style>{_STYLE}</style></head><body>",
             f"<h1>{_e(info.get('title', 'API'))} <small>{_e(info.get('version', ''))}</small></h1>",
             "<p>Every endpoint but this page and <a href='/openapi.json'>/openapi.json</a> wants the header "
             "<code>Authorization: Bearer TOKEN</code> (<code>rlm serve --show-token</code> prints it). Errors are "
             "JSON: <code>{\"error\", \"status\", \"type\"}</code>.</p>"]
    components = (schema.get("components") or {}).get("schemas") or {}
    for path, methods in (schema.get("paths") or {}).items():
        for method, op in methods.items():
            if not isinstance(op, dict):
                continue
            parts.append(_operation(method.upper(), path, op, components, base_url))
    parts.append("</body></html>")
    return "".join(parts)


def _operation(method: str, path: str, op: dict[str, Any], components: dict[str, Any], base_url: str) -> str:
    out = [f"<h2><span class='m {_e(method)}'>{_e(method)}</span> {_e(path)}</h2>",
           f"<p>{_e(op.get('summary') or op.get('description') or '')}</p>"]
    params = [p for p in op.get("parameters") or [] if isinstance(p, dict)]
    if params:
        out.append("<table><tr><th>parameter</th><th>in</th><th>type</th><th>required</th><th>default</th>"
                   "<th>description</th></tr>")
        for p in params:
            sch = p.get("schema") or {}
            out.append(f"<tr><td><code>{_e(p.get('name'))}</code></td><td>{_e(p.get('in'))}</td><td>{_e(_type(sch))}</td>"
                       f"<td>{'yes' if p.get('required') else ''}</td><td>{_e(_default(sch))}</td>"
                       f"<td>{_e(p.get('description') or sch.get('description') or '')}</td></tr>")
        out.append("</table>")
    body = _body_schema(op, components)
    if body:
        out.append("<table><tr><th>body field</th><th>type</th><th>required</th><th>description</th></tr>")
        required = set(body.get("required") or [])
        for name, field in (body.get("properties") or {}).items():
            out.append(f"<tr><td><code>{_e(name)}</code></td><td>{_e(_type(field))}</td>"
                       f"<td>{'yes' if name in required else ''}</td><td>{_e(field.get('description') or '')}</td></tr>")
        out.append("</table>")
    errors = sorted(code for code in op.get("responses") or {} if code[:1] in "45")
    if errors:
        out.append(f"<p>errors: {_e(', '.join(errors))}</p>")
    out.append(f"<pre>{_e(_curl(method, path, params, body, base_url))}</pre>")
    return "".join(out)


def _body_schema(op: dict[str, Any], components: dict[str, Any]) -> dict[str, Any] | None:
    content = ((op.get("requestBody") or {}).get("content") or {}).get("application/json") or {}
    sch = content.get("schema") or {}
    ref = sch.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
        sch = components.get(ref.rsplit("/", 1)[1]) or {}
    return sch if sch.get("properties") else None


def _type(sch: dict[str, Any]) -> str:
    if "anyOf" in sch:
        return " or ".join(_type(s) for s in sch["anyOf"] if isinstance(s, dict))
    if sch.get("type") == "array":
        return f"list of {_type(sch.get('items') or {})}"
    if "enum" in sch:
        return " | ".join(map(str, sch["enum"]))
    return str(sch.get("type") or "any")


def _default(sch: dict[str, Any]) -> str:
    return json.dumps(sch["default"]) if "default" in sch and sch["default"] is not None else ""


def _curl(method: str, path: str, params: list[dict[str, Any]], body: dict[str, Any] | None, base_url: str) -> str:
    query = "&".join(f"{p['name']}=..." for p in params if p.get("in") == "query" and p.get("required"))
    url = base_url + path + (f"?{query}" if query else "")
    line = f"curl -H \"Authorization: Bearer $TOKEN\" \"{url}\""
    if method != "GET":
        fields = {name: "..." for name in (body or {}).get("required") or []}
        line = f"curl -X {method} -H \"Authorization: Bearer $TOKEN\" -H 'content-type: application/json' " \
               f"-d '{json.dumps(fields)}' \"{url}\""
    return line


def _e(text: Any) -> str:
    return html.escape(str(text if text is not None else ""), quote=True)
