"""Two views of a trace: a text tree (``rlm trace show``) and one self-contained HTML page
(``rlm trace html``: no scripts, no network, opens offline).

Both take a ``Trace`` (``read_trace``), or event dicts (``read_events``, or events collected
from ``on_event``), which they read through the same reader. Both show model and cell text
with its control characters escaped (``termsafe``): a trace replays what a model wrote, so
it must not drive the terminal, forge lines of the tree, or hide or reorder text on the
page. Events of types this version does not know are skipped, and the views say so. What they
show is redacted like what the writer writes: the file may be older than that.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable
from typing import Any

from rlm_runtime.redact import Redactor
from rlm_runtime.termsafe import printable
from rlm_runtime.trajectory.events import (
    AnswerCheck,
    AssistShown,
    Cell,
    CellOutput,
    ContextInfo,
    ContextStats,
    InvalidEvent,
    Iteration,
    Models,
    Record,
    RunStart,
    SessionEnd,
    SubCall,
    SystemPrompt,
    ToolCall,
    TraceStart,
    Usage,
    WorkerWait,
)
from rlm_runtime.trajectory.reader import Run, Trace
from rlm_runtime.trajectory.timeline import Timeline, questions, timeline, tokens

#: Child runs nested deeper than this are not drawn (a crafted file could nest thousands).
_MAX_NESTING = 100


def _as_trace(events: Trace | Iterable[dict[str, Any]]) -> Trace:
    """The trace to show, redacted (``redact``): a file written before the writer redacted
    its lines, or by another program, can hold keys, and a view is printed or shared."""
    if not isinstance(events, Trace):
        found = getattr(events, "trace", None)  # read_events' list carries the Trace it read
        events = found if isinstance(found, Trace) else Trace.from_dicts(list(events))
    redactor = Redactor()
    clean = Trace.from_dicts([redactor.value(e, shapes=True) for e in events.to_dicts()], events.path)
    clean.notes = list(events.notes)
    return clean


def _clip(text: Any, n: int) -> str:
    s = "" if text is None else str(text)
    return s if len(s) <= n else s[: n - 3] + "..."


def _flat(text: Any) -> str:
    """On one line: a newline in a field must not start a forged line of the tree."""
    return ("" if text is None else str(text)).replace("\n", " | ")


def _secs(value: float | None, digits: int = 2) -> str:
    return "?s" if value is None else f"{value:.{digits}f}s"


def _usage_text(usage: dict[str, Usage] | None) -> str:
    """Usage by model as a person reads it: ``m: 2 calls, 2,190 in / 36 out tokens, $0.0012``."""
    if not usage:
        return "none"
    return "; ".join(f"{_flat(m)}: {u.calls:,} call{'' if u.calls == 1 else 's'}, {u.input_tokens:,} in / "
                     f"{u.output_tokens:,} out tokens, ${u.cost_usd:.4f}" for m, u in usage.items())


#: How a turn that did not finish is marked, by what stopped it.
_STOPPED = {"KeyboardInterrupt": "interrupted by Ctrl-C", "Cancelled": "cancelled", "BudgetExceeded": "stopped by a limit"}


def _stopped(e: Iteration) -> str:
    if not e.stopped:
        return ""
    return f" ({_STOPPED.get(e.stopped, 'stopped: ' + _flat(_clip(e.stopped, 40)))}, before its cells ended)"


def _questions(n: int) -> str:
    return f"{n} question" + ("" if n == 1 else "s")


def _counters(counts: dict[str, int | float]) -> str:
    return " ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in counts.items())


def _context_line(c: ContextInfo) -> str:
    parts = []
    if c.decision is not None:
        parts.append(c.decision + (f" ({c.reason})" if c.reason else ""))
    if c.inline_chars is not None:
        parts.append(f"{c.inline_chars} chars inline")
    if c.skipped_documents:
        parts.append(f"{len(c.skipped_documents)} documents skipped: " + ", ".join(c.skipped_documents[:5])
                     + (", ..." if len(c.skipped_documents) > 5 else ""))
    return _flat(f"context {c.name}" + (": " + "; ".join(parts) if parts else ""))


def _footer(trace: Trace) -> list[str]:
    """What the file is (schema, writer, session), and what was skipped reading it."""
    lines = []
    head = trace.header
    if head is None and trace.events:
        lines.append("(trace schema 1: written before traces had a schema; fewer fields were recorded)")
    elif head is not None:
        about = [f"trace schema {trace.schema}", f"written by rlm_runtime {head.version or '?'}"]
        if head.session_id:
            about.append(f"session {head.session_id}")
        if head.model:
            about.append(f"model {head.model}" + (f", sub-model {head.sub_model}" if head.sub_model else ""))
        lines.append("(" + "; ".join(_flat(a) for a in about) + ")")
    lines += [f"(note: {_flat(n)})" for n in trace.notes]
    unknown = sorted({e.type for e in trace.unknown})
    if unknown:
        lines.append(f"(skipped {len(trace.unknown)} events of types this version does not know: {_flat(', '.join(unknown))})")
    return lines


# ------------------------------------------------------------------------- text tree


def render_tree(events: Trace | Iterable[dict[str, Any]], width: int = 100) -> str:
    """A readable tree: runs, their contexts, iterations, sub-calls and tools, nested by parent."""
    trace = _as_trace(events)
    out: list[str] = []

    def output(k: int, res: CellOutput, indent: str) -> None:
        text = (res.error or res.stdout or "").rstrip("\n") or "(no output)"
        extra = " [worker restarted]" if res.worker_restarted else ""
        out.append(f"{indent}out[{k}]: {_clip(_flat(text), width)}{extra}")
        for warning in res.warnings:
            out.append(f"{indent}  note: {_clip(_flat(warning), width)}")

    def event(e: Record, indent: str) -> None:
        if isinstance(e, SystemPrompt):
            out.append(f"{indent}system prompt: {len(e.text)} chars: {_clip(_flat(e.text), 60)!r}")
        elif isinstance(e, Iteration):
            tag = f"iteration {e.iteration}" + (" (forced answer)" if e.forced else "") + _stopped(e)
            model = f" (model {_secs(e.model_s)})" if e.model_s is not None else ""
            out.append(f"{indent}{tag}: {_secs(e.duration_s)}{model}, "
                       f"{e.usage.input_tokens} in / {e.usage.output_tokens} out tokens")
            for k, code in enumerate(e.code_blocks):
                out.append(f"{indent}  code[{k}]: {_clip(_flat(code), width)}")
            for k, res in enumerate(e.outputs):
                output(k, res, indent + "  ")
            if not e.code_blocks:
                out.append(f"{indent}  reply (no code): {_clip(_flat(e.response), width)}")
        elif isinstance(e, SubCall):
            out.append(f"{indent}{_flat(e.kind)} -> {_flat(e.model)}: {_clip(e.prompt, 50)!r} => "
                       f"{_clip(e.response if e.response is not None else e.error, 50)!r} ({_secs(e.duration_s)})")
        elif isinstance(e, ToolCall):
            result = f"error {_clip(e.error, 50)!r}" if e.error else repr(_clip(e.result, 50))
            out.append(f"{indent}tool {_flat(e.name)}({_clip(_flat(e.args), 60)}) => {result} ({_secs(e.duration_s)})")
        elif isinstance(e, AssistShown):
            out.append(f"{indent}assist {_flat(e.name)} after {_flat(e.trigger)}: {e.chars} chars shown"
                       + (f"; looked up {_clip(_flat('; '.join(e.lookups)), 120)}" if e.lookups else ""))
        elif isinstance(e, AnswerCheck):
            out.append(f"{indent}answer check {_flat(e.name)}: {_clip(_flat(e.answer), 60)!r} {_flat(e.outcome)}")
        elif isinstance(e, ContextStats):
            for c in e.contexts:
                out.append(f"{indent}access {_flat(c.name)}: {_flat(_counters(c.counters()))}")
        elif isinstance(e, Cell):
            out.append(f"{indent}cell typed by a person (turn {e.turn}): {_clip(_flat(e.code), width)}")
            output(0, e.output, indent + "  ")
        elif isinstance(e, WorkerWait):
            pool = f" (pool of {e.pool_size})" if e.pool_size is not None else ""
            out.append(f"{indent}waited {_secs(e.waited_s)} for a worker{pool}" + (f": {_flat(e.detail)}" if e.detail else ""))
        elif isinstance(e, Models):
            out.append(f"{indent}models switched: root {_flat(e.model)}, sub {_flat(e.sub_model)}")
        elif isinstance(e, SessionEnd):
            out.append(f"{indent}session end: {_questions(e.questions)}; usage: {_usage_text(e.usage)}")
        elif isinstance(e, InvalidEvent):
            out.append(f"{indent}warning: a {_flat(e.of_type or 'typeless')} event was invalid when written: "
                       f"{_clip(_flat('; '.join(e.errors)), width)}")
        elif isinstance(e, TraceStart) and e is not trace.header:
            out.append(f"{indent}trace part: session {_flat(e.session_id)}, model {_flat(e.model)}, "
                       f"rlm_runtime {_flat(e.version)}")

    def run(r: Run, indent: str, level: int) -> None:
        start = r.start or RunStart(run_id=r.run_id)
        depth = r.depth if r.start is not None else "?"
        turn = f" turn={start.turn}" if start.turn else ""
        out.append(f"{indent}run {_flat(r.run_id)} depth={depth}{turn} model={_flat(start.model)} "
                   f"query={_clip(start.query, 60)!r}")
        for c in start.contexts:
            out.append(f"{indent}  {_context_line(c)}")
            # Split on newlines only: splitlines() would also split on (and so hide) \r, \x1c...
            for line in (c.summary or "").rstrip("\n").split("\n")[:4] if c.summary else []:
                out.append(f"{indent}    {_clip(line, width)}")
        for item in r.items():
            # What happened during a turn is shown under it, one step in.
            inner = indent + ("    " if r.turn_of(item) is not None else "  ")
            if isinstance(item, Run):
                if level >= _MAX_NESTING:
                    out.append(f"{inner}(child run {_flat(item.run_id)} not shown: nested too deep)")
                else:
                    run(item, inner, level + 1)
            else:
                event(item, inner)
        end = r.end
        if end is not None:
            what = (f"answer={_clip(end.answer, 80)!r}" if end.answer is not None
                    else f"error={_flat(_clip(end.error, 200))}")
            own = f"; this run's own: {_usage_text(end.run_usage)}" if end.run_usage is not None else ""
            turns = f"{end.iterations} iteration{'' if end.iterations == 1 else 's'}"
            out.append(f"{indent}  end: {what}, {turns}; usage: {_usage_text(end.usage)}{own}")

    for item in trace.top_level():
        if isinstance(item, Run):
            run(item, "", 0)
        else:
            event(item, "")
    body = out or ["(no runs in this trace)"]
    # Most fields are shown with repr (escaped already), but code, outputs and errors are not.
    return printable("\n".join(body + _footer(trace)))


# ------------------------------------------------------------------------- HTML page

_CSS = """body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}details{margin:.3em 0 .3em 1em}
summary{cursor:pointer}pre{background:#f6f6f6;padding:.5em;overflow:auto;max-height:30em;white-space:pre-wrap}
.err{color:#b00}.meta{color:#666;font-size:12px}.answer{background:#e8f6e8;padding:.4em}.warn{background:#fff4d6;padding:.3em}
.cell{border-left:3px solid #58a;padding-left:.5em}table{border-collapse:collapse;margin:.3em 0 .3em 1em;font-size:13px}
td,th{border:1px solid #ddd;padding:.15em .5em;text-align:left;vertical-align:top}.inturn{margin-left:2em}
.question{border:1px solid #ddd;padding:.5em;margin:.4em 0}svg.timeline{font:11px system-ui,sans-serif}
.tick{stroke:#ddd}.axis{fill:#666;text-anchor:middle}.lane{fill:#333}.bar{stroke:#fff;stroke-width:.5}
.model,.k-model{fill:#4a7fb5;background:#4a7fb5}.cells,.k-cells{fill:#8bc34a;background:#8bc34a}
.sub_call,.k-sub_call{fill:#e0884a;background:#e0884a}.tool,.k-tool{fill:#a77cc9;background:#a77cc9}
[class^=k-]{color:#fff;padding:0 .3em;border-radius:3px}"""


def _code(text: str) -> str:
    """Python highlighted for the page (inline styles: the page has no stylesheet to load),
    its controls escaped first (the lexer only ever sees safe text)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers.python import PythonLexer

    return highlight(printable(text), PythonLexer(), HtmlFormatter(noclasses=True, nowrap=True, style="friendly"))


_LANE_H, _LABEL_W, _WIDTH = 20, 280, 1100


def _tick(seconds: float, span: float) -> str:
    """A time axis label with as many digits as the axis's span needs to tell ticks apart:
    milliseconds under 5 s (``0 ms 120 ms 240 ms``; tenths of one under 5 ms), tenths of a second
    under a minute, whole seconds above."""
    if span < 5:
        step_ms = span * 1000 / 5
        digits = 0 if step_ms >= 1 else min(3, math.ceil(-math.log10(max(step_ms, 1e-6))))
        return f"{seconds * 1000:.{digits}f} ms"
    return f"{seconds:.1f}s" if span < 60 else f"{seconds:.0f}s"


def _timeline_svg(tl: Timeline) -> str:
    """The timeline as inline SVG: a lane a row, a bar per stretch of time; hovering a bar
    shows its label (an SVG ``title``: no script)."""
    span = max(tl.end - tl.start, 1e-9)
    scale = (_WIDTH - _LABEL_W - 10) / span
    top = 24
    parts = []
    for k in range(6):  # the time axis: six ticks
        x = _LABEL_W + k * (_WIDTH - _LABEL_W - 10) / 5
        parts.append(f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{top + len(tl.lanes) * _LANE_H}" class=tick />'
                     f'<text x="{x:.1f}" y="{top - 8}" class=axis>{_tick(span * k / 5, span)}</text>')
    for i, lane in enumerate(tl.lanes):
        y = top + i * _LANE_H
        parts.append(f'<text x="4" y="{y + 14}" class=lane>{_e(_clip(lane.name, 44))}</text>')
        for b in lane.bars:
            x = _LABEL_W + (b.start - tl.start) * scale
            w = max(1.0, (b.end - b.start) * scale)
            parts.append(f'<rect x="{x:.1f}" y="{y + 3}" width="{w:.1f}" height="{_LANE_H - 6}" class="bar {b.kind}">'
                         f"<title>{_e(b.label)}</title></rect>")
    height = top + len(tl.lanes) * _LANE_H + 8
    legend = ("<div class=meta>bars: <span class=k-model>the model</span> <span class=k-cells>cells</span> "
              "<span class=k-sub_call>sub-calls</span> <span class=k-tool>tools</span>; hover a bar for its tokens and time"
              + (f"; {tl.left_out} bars not drawn" if tl.left_out else "")
              + (f"; the {_secs(tl.idle_s, 0 if tl.idle_s >= 10 else 1)} between questions (nothing running) "
                 "left out of the axis" if tl.idle_s >= 0.05 else "") + "</div>")
    return (f'<svg class=timeline width="{_WIDTH}" height="{height}" viewBox="0 0 {_WIDTH} {height}" '
            f'xmlns="http://www.w3.org/2000/svg" role="img" aria-label="timeline">{"".join(parts)}</svg>{legend}')


def _summary(trace: Trace) -> str:
    """Each question first: its answer (or why there is none) and what it took."""
    rows = []
    for q in questions(trace):
        outcome = (f"<div class=answer>{_e(q.answer)}</div>" if q.answer is not None
                   else f"<div class=err>no answer: {_e(q.error)}</div>")
        cost = f"${q.cost_usd:.4f}" if q.cost_usd else "$0"
        rows.append(f"<div class=question><div><b>{_e(_clip(q.query, 300))}</b></div>{outcome}"
                    f"<div class=meta>{_e(q.model)} &middot; {q.iterations} iteration{'' if q.iterations == 1 else 's'} "
                    f"&middot; {q.sub_calls} sub-call{'' if q.sub_calls == 1 else 's'} "
                    f"&middot; {tokens(q.input_tokens)} tokens in / {tokens(q.output_tokens)} out &middot; {cost} "
                    f"&middot; {_secs(q.seconds, 1)}</div></div>")
    return "".join(rows)


def _e(text: Any) -> str:
    # Controls are invisible on a page and bidi overrides reorder it: show them escaped too.
    return html.escape(printable("" if text is None else str(text)))


def render_html(events: Trace | Iterable[dict[str, Any]], title: str = "rlm trajectory") -> str:
    """One self-contained HTML page (no scripts, no network): call tree, code, outputs, usage."""
    trace = _as_trace(events)

    def output(res: CellOutput) -> list[str]:
        parts = []
        if res.stdout:
            parts.append(f"<div class=meta>output ({_secs(res.duration_s, 3)})</div><pre>{_e(res.stdout)}</pre>")
        if res.error:
            parts.append(f"<pre class=err>{_e(res.error)}</pre>")
        if res.worker_restarted:
            parts.append("<div class=meta>the worker was restarted</div>")
        parts += [f"<div class=meta>note: {_e(w)}</div>" for w in res.warnings]
        return parts

    def contexts(items: list[ContextInfo]) -> str:
        if not items:
            return ""
        rows = ["<table><tr><th>context</th><th>decision</th><th>reason</th><th>inline chars</th><th>skipped documents</th>"
                "<th>summary</th></tr>"]
        for c in items:
            skipped = ", ".join(c.skipped_documents)
            summary = f"<pre>{_e(c.summary)}</pre>" if c.summary else ""
            inline = "" if c.inline_chars is None else str(c.inline_chars)
            rows.append(f"<tr><td>{_e(c.name)}</td><td>{_e(c.decision or '')}</td><td>{_e(c.reason or '')}</td>"
                        f"<td>{inline}</td><td>{_e(skipped)}</td><td>{summary}</td></tr>")
        return "".join(rows) + "</table>"

    def event(e: Record) -> str:
        if isinstance(e, SystemPrompt):
            return (f"<details><summary>system prompt <span class=meta>{len(e.text)} chars</span></summary>"
                    f"<pre>{_e(e.text)}</pre></details>")
        if isinstance(e, Iteration):
            u = e.usage
            tag = f"iteration {e.iteration}" + (" (forced answer)" if e.forced else "") + _e(_stopped(e))
            model = f" (model {_secs(e.model_s)})" if e.model_s is not None else ""
            finish = f" &middot; finish: {_e(e.finish_reason)}" if e.finish_reason else ""
            # The root run's turns open (their code and output readable at once); a child run's closed.
            parts = [f"<details{'' if e.depth else ' open'}><summary>{tag} <span class=meta>{_secs(e.duration_s)}{model} "
                     f"&middot; {u.input_tokens} in / "
                     f"{u.output_tokens} out tokens &middot; ${u.cost_usd}{finish}</span></summary>",
                     f"<div class=meta>response</div><pre>{_e(e.response)}</pre>"]
            for k, code in enumerate(e.code_blocks):
                parts.append(f"<div class=meta>code</div><pre>{_code(code)}</pre>")
                if k < len(e.outputs):
                    parts += output(e.outputs[k])
            parts.append("</details>")
            return "\n".join(parts)
        if isinstance(e, SubCall):
            reply = e.response if e.response is not None else e.error
            return (f"<details><summary>{_e(e.kind)} &rarr; {_e(e.model)} <span class=meta>{_secs(e.duration_s)}</span></summary>"
                    f"<pre>{_e(e.prompt)}</pre><pre{' class=err' if e.error else ''}>{_e(reply)}</pre></details>")
        if isinstance(e, ToolCall):
            result = f"<pre class=err>{_e(e.error)}</pre>" if e.error else f"<pre>{_e(e.result)}</pre>"
            return (f"<details><summary>tool {_e(e.name)} <span class=meta>{_secs(e.duration_s)}</span></summary>"
                    f"<div class=meta>arguments</div><pre>{_e(e.args)}</pre><div class=meta>result</div>{result}</details>")
        if isinstance(e, AssistShown):
            looked = f"; looked up {_e('; '.join(e.lookups))}" if e.lookups else ""
            return f"<div class=meta>assist {_e(e.name)} after {_e(e.trigger)}: {e.chars} chars shown{looked}</div>"
        if isinstance(e, AnswerCheck):
            return f"<div class=meta>answer check {_e(e.name)}: {_e(e.answer)} &rarr; {_e(e.outcome)}</div>"
        if isinstance(e, ContextStats):
            rows = ["<table><tr><th>context</th><th>how it was read</th></tr>"]
            rows += [f"<tr><td>{_e(c.name)}</td><td>{_e(_counters(c.counters()))}</td></tr>" for c in e.contexts]
            return "<div class=meta>context access</div>" + "".join(rows) + "</table>"
        if isinstance(e, Cell):
            return "\n".join([f"<div class=cell><div class=meta>cell typed by a person &middot; turn {e.turn}</div>"
                              f"<pre>{_e(e.code)}</pre>", *output(e.output), "</div>"])
        if isinstance(e, WorkerWait):
            pool = f" (pool of {e.pool_size})" if e.pool_size is not None else ""
            detail = f": {_e(e.detail)}" if e.detail else ""
            return f"<div class=meta>waited {_secs(e.waited_s)} for a worker{pool}{detail}</div>"
        if isinstance(e, Models):
            return f"<div class=meta>models switched &middot; root {_e(e.model)} &middot; sub {_e(e.sub_model)}</div>"
        if isinstance(e, SessionEnd):
            return (f"<div class=meta>session end &middot; {_questions(e.questions)} &middot; "
                    f"usage: {_e(_usage_text(e.usage))}</div>")
        if isinstance(e, InvalidEvent):
            return (f"<div class=warn>a {_e(e.of_type or 'typeless')} event was invalid when written: "
                    f"{_e('; '.join(e.errors))}</div>")
        if isinstance(e, TraceStart) and e is not trace.header:
            return (f"<div class=meta>trace part &middot; session {_e(e.session_id)} &middot; model {_e(e.model)} "
                    f"&middot; rlm_runtime {_e(e.version)}</div>")
        return ""

    def run(r: Run, level: int) -> str:
        start = r.start or RunStart(run_id=r.run_id)
        depth = r.depth if r.start is not None else "?"
        turn = f" &middot; turn {start.turn}" if start.turn else ""
        parts = [f"<details open><summary><b>run {_e(r.run_id)}</b> depth {depth}{turn} &middot; "
                 f"{_e(start.model)} &middot; {_e(_clip(start.query, 120))}</summary>", contexts(start.contexts)]
        for item in r.items():
            if isinstance(item, Run):
                shown = (run(item, level + 1) if level < _MAX_NESTING else
                         f"<div class=warn>child run {_e(item.run_id)} not shown: nested too deep</div>")
            else:
                shown = event(item)
            # What happened during a turn is shown under it, one step in.
            parts.append(f"<div class=inturn>{shown}</div>" if shown and r.turn_of(item) is not None else shown)
        end = r.end
        if end is not None:
            if end.answer is not None:
                parts.append(f"<div class=answer>answer: {_e(end.answer)}</div>")
            if end.error:
                parts.append(f"<div class=err>error: {_e(end.error)}</div>")
            own = f" &middot; this run's own: {_e(_usage_text(end.run_usage))}" if end.run_usage is not None else ""
            turns = f"{end.iterations} iteration{'' if end.iterations == 1 else 's'}"
            parts.append(f"<div class=meta>{turns} &middot; usage: {_e(_usage_text(end.usage))}{own} "
                         f"&middot; {_secs(end.duration_s)}</div>")
        parts.append("</details>")
        return "\n".join(p for p in parts if p)

    body = "\n".join(run(x, 0) if isinstance(x, Run) else event(x) for x in trace.top_level()).strip()
    footer = "".join(f"<p class={'warn' if line.startswith('(note') else 'meta'}>{_e(line)}</p>" for line in _footer(trace))
    summary = _summary(trace)
    tl = timeline(trace)
    head = ((f"<h2>Summary</h2>{summary}" if summary else "")
            + (f"<h2>Timeline</h2>{_timeline_svg(tl)}" if tl is not None else "")
            + ("<h2>Runs</h2>" if body else ""))
    return (f"<!doctype html><html><head><meta charset=utf-8><title>{_e(title)}</title><style>{_CSS}</style></head>"
            f"<body><h1>{_e(title)}</h1>{head}{body or '<p>(no runs in this trace)</p>'}{footer}</body></html>\n")
