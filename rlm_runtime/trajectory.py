"""Trajectories: one JSONL event per step of a run, and two ways to read them back.

Events (each has ``type``, ``run_id``, ``parent_id``, ``depth``, ``t``): ``run_start``
(model, limits, contexts), ``iteration`` (prompt size, response, code blocks, outputs,
durations, usage), ``sub_call`` (llm_query and friends, nested under their run),
``run_end`` (answer, error, usage). ``render_tree`` prints a readable tree;
``render_html`` writes one self-contained page that opens offline.

Both readers show model and cell text with its control characters escaped (``termsafe``):
a trace replays what a model wrote, so it must not drive the terminal, or hide or reorder
text on the page, when it is read.
"""

from __future__ import annotations

import html
import json
import re
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from rlm_runtime.errors import ConfigError
from rlm_runtime.termsafe import printable

#: What json.dumps(ensure_ascii=False) leaves raw but a trace must not hold: DEL and C1
#: controls and bidi overrides act on a terminal that cats the file; U+2028, U+2029 and NEL
#: end a line for ``str.splitlines``; a lone surrogate (a cell can print one) cannot be
#: encoded as UTF-8 at all. Each is only ever inside a JSON string, where a ``\uXXXX``
#: escape means the same character.
_RAW_IN_JSON = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _json_line(event: dict[str, Any]) -> str:
    line = json.dumps(event, default=str, ensure_ascii=False)
    return _RAW_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", line)


class TraceWriter:
    """Appends events to a JSONL file; thread-safe; every event is flushed."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path else None
        self._lock = threading.Lock()
        self._file = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", encoding="utf-8")

    def emit(self, event: dict[str, Any]) -> None:
        if self._file is None:
            return
        event.setdefault("t", time.time())
        line = _json_line(event)
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def read_events(path: str | Path) -> list[dict[str, Any]]:
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError as e:
        raise ConfigError(f"trace file not found: {p}") from e
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read trace {p}: {e}") from e
    events = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{p}:{n}: not a trace event ({e.msg})") from e
        if isinstance(event, dict) and "type" in event:
            events.append(event)
    return events


def _runs(events: list[dict[str, Any]]) -> tuple[list[str], dict[str, list[dict[str, Any]]], dict[str, list[str]]]:
    by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
    children: dict[str, list[str]] = defaultdict(list)
    roots = []
    for e in events:
        rid = str(e.get("run_id"))
        by_run[rid].append(e)
        if e["type"] == "run_start":
            parent = e.get("parent_id")
            if parent:
                children[str(parent)].append(rid)
            else:
                roots.append(rid)
    return roots, by_run, children


def _clip(text: Any, n: int) -> str:
    s = "" if text is None else str(text)
    return s if len(s) <= n else s[: n - 3] + "..."


def render_tree(events: list[dict[str, Any]], width: int = 100) -> str:
    """A readable tree: runs, their iterations and sub-calls, nested by parent."""
    roots, by_run, children = _runs(events)
    out: list[str] = []

    def run(rid: str, indent: str) -> None:
        evs = by_run[rid]
        start = next((e for e in evs if e["type"] == "run_start"), {})
        end = next((e for e in evs if e["type"] == "run_end"), {})
        out.append(f"{indent}run {rid} depth={start.get('depth', '?')} model={start.get('model')} "
                   f"query={_clip(start.get('query'), 60)!r}")
        for e in evs:
            if e["type"] == "iteration":
                usage = e.get("usage", {})
                out.append(f"{indent}  iteration {e.get('iteration')}: {e.get('duration_s', 0):.2f}s, "
                           f"{usage.get('input_tokens', 0)} in / {usage.get('output_tokens', 0)} out tokens")
                for k, code in enumerate(e.get("code_blocks", [])):
                    out.append(f"{indent}    code[{k}]: {_clip(code.replace(chr(10), ' | '), width)}")
                for k, res in enumerate(e.get("outputs", [])):
                    text = res.get("error") or res.get("stdout") or ""
                    out.append(f"{indent}    out[{k}]: {_clip(str(text).replace(chr(10), ' | '), width)}")
            elif e["type"] == "sub_call":
                out.append(f"{indent}  {e.get('kind')} -> {e.get('model')}: {_clip(e.get('prompt'), 50)!r} => "
                           f"{_clip(e.get('response') or e.get('error'), 50)!r} ({e.get('duration_s', 0):.2f}s)")
        for child in children.get(rid, []):
            run(child, indent + "  ")
        if end:
            what = (f"answer={_clip(end.get('answer'), 80)!r}" if end.get("answer") is not None
                    else f"error={_clip(str(end.get('error')), 200).replace(chr(10), ' | ')}")
            out.append(f"{indent}  end: {what}, {end.get('iterations')} iterations, usage={json.dumps(end.get('usage', {}))}")

    for rid in roots:
        run(rid, "")
    # Most fields are shown with repr (escaped already), but code, outputs and errors are not.
    return printable("\n".join(out)) if out else "(no runs in this trace)"


_CSS = """body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}details{margin:.3em 0 .3em 1em}
summary{cursor:pointer}pre{background:#f6f6f6;padding:.5em;overflow:auto;max-height:30em;white-space:pre-wrap}
.err{color:#b00}.meta{color:#666;font-size:12px}.answer{background:#e8f6e8;padding:.4em}"""


def render_html(events: list[dict[str, Any]], title: str = "rlm trajectory") -> str:
    """One self-contained HTML page (no scripts, no network): call tree, code, outputs, usage."""
    roots, by_run, children = _runs(events)

    def e_(text: str) -> str:
        # Controls are invisible on a page and bidi overrides reorder it: show them escaped too.
        return html.escape(printable(text))

    def run(rid: str) -> str:
        evs = by_run[rid]
        start = next((e for e in evs if e["type"] == "run_start"), {})
        end = next((e for e in evs if e["type"] == "run_end"), {})
        parts = [f"<details open><summary><b>run {e_(rid)}</b> depth {start.get('depth')} &middot; "
                 f"{e_(str(start.get('model')))} &middot; {e_(_clip(start.get('query'), 120))}</summary>"]
        for e in evs:
            if e["type"] == "iteration":
                u = e.get("usage", {})
                parts.append(f"<details><summary>iteration {e.get('iteration')} <span class=meta>"
                             f"{e.get('duration_s', 0):.2f}s &middot; {u.get('input_tokens', 0)} in / "
                             f"{u.get('output_tokens', 0)} out tokens &middot; ${u.get('cost_usd', 0)}</span></summary>")
                parts.append(f"<div class=meta>response</div><pre>{e_(str(e.get('response', '')))}</pre>")
                for code, res in zip(e.get("code_blocks", []), e.get("outputs", []), strict=False):
                    parts.append(f"<div class=meta>code</div><pre>{e_(code)}</pre>")
                    if res.get("stdout"):
                        parts.append(f"<div class=meta>output ({res.get('duration_s', 0):.3f}s)</div><pre>{e_(res['stdout'])}</pre>")
                    if res.get("error"):
                        parts.append(f"<pre class=err>{e_(res['error'])}</pre>")
                parts.append("</details>")
            elif e["type"] == "sub_call":
                parts.append(f"<details><summary>{e_(str(e.get('kind')))} &rarr; {e_(str(e.get('model')))} "
                             f"<span class=meta>{e.get('duration_s', 0):.2f}s</span></summary>"
                             f"<pre>{e_(str(e.get('prompt', '')))}</pre><pre>{e_(str(e.get('response') or e.get('error') or ''))}"
                             "</pre></details>")
        parts += [run(c) for c in children.get(rid, [])]
        if end:
            if end.get("answer") is not None:
                parts.append(f"<div class=answer>answer: {e_(str(end.get('answer')))}</div>")
            if end.get("error"):
                parts.append(f"<div class=err>error: {e_(str(end.get('error')))}</div>")
            parts.append(f"<div class=meta>{end.get('iterations')} iterations &middot; "
                         f"{e_(json.dumps(end.get('usage', {})))} &middot; {end.get('duration_s', 0):.2f}s</div>")
        parts.append("</details>")
        return "\n".join(parts)

    body = "\n".join(run(r) for r in roots) or "<p>(no runs in this trace)</p>"
    return (f"<!doctype html><html><head><meta charset=utf-8><title>{e_(title)}</title><style>{_CSS}</style></head>"
            f"<body><h1>{e_(title)}</h1>{body}</body></html>\n")
