"""Reports of ``rlm eval`` runs: ``DIR/report.md``, a self-contained ``DIR/report.html`` and
PNG plots (``plots.py``, when matplotlib is installed), and ``compare_runs`` for two runs.

What a report holds: a table per method and family (tasks, accuracy, tokens, cost, median
seconds, errors); accuracy against context length per method, with the model's window
marked; tokens against accuracy; the token reduction of ``rlm`` against ``direct`` (over the
tasks both ran, and over those both answered correctly: "at equal accuracy"); one row per
task with a link to its trajectory (rendered to HTML beside the JSONL). Everything shown
that a model or a task file wrote is escaped (HTML) or flattened to one line (Markdown).

The run folder may have been tampered with (a results file from someone else): a record's
``trajectory`` is linked only when it resolves (symlinks followed) to a ``.jsonl`` file inside
the folder, as a relative, percent-encoded ``./`` link (no scheme can start it); every file the
report writes is written inside the folder, replacing (never following) a symlink there; bad
results lines are skipped and listed (``Built.skipped``).
"""

from __future__ import annotations

import base64
import html
import io
import os
import re
import stat
import statistics
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from rlm_runtime.eval.assist_stats import HEAD as ASSIST_HEAD
from rlm_runtime.eval.assist_stats import AssistRow, assist_rows
from rlm_runtime.eval.assist_stats import cells as assist_cells
from rlm_runtime.eval.jsonlines import parse_line, read_lines
from rlm_runtime.eval.results import latest, load_results
from rlm_runtime.termsafe import one_line

#: Trajectories rendered to HTML per report, at most (the JSONL is linked beyond that).
MAX_TRACE_PAGES = 300
#: Characters per token assumed to place the window on a characters axis, when no direct
#: call measured it.
CHARS_PER_TOKEN = 4


@dataclass
class Built:
    markdown: Path
    html: Path
    plots: list[Path] = field(default_factory=list)
    #: The results lines skipped as invalid (``line N: field: why``).
    skipped: list[str] = field(default_factory=list)
    #: ``load_all_savings``: tokens used against loading everything, by method and family.
    load_all: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"markdown": str(self.markdown), "html": str(self.html), "plots": [str(p) for p in self.plots],
                "skipped": self.skipped, "load_all": self.load_all}


@dataclass
class Row:
    """One (method, family) cell of the table."""

    method: str
    family: str
    n: int
    accuracy: float  # the mean score (a scorer may give partial credit)
    input_tokens: float
    output_tokens: float
    cost_usd: float
    median_s: float
    errors: int
    correct: int = 0  # tasks judged correct (``_right``)


def load(folder: Path, skipped: list[str] | None = None) -> list[dict[str, Any]]:
    """The run's records, one per (task, method, configuration), with a ``label`` added:
    the method, or the method and model when the folder holds several models (bad lines
    are appended to ``skipped``)."""
    valid, bad = load_results(folder / "results.jsonl")
    if skipped is not None:
        skipped += bad
    records = latest(valid)
    models = {r.get("model") for r in records}
    for r in records:
        r["label"] = r["method"] if len(models) <= 1 else f"{r['method']} ({r.get('model')})"
    return records


def table(records: list[dict[str, Any]]) -> list[Row]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        groups[(r["label"], str(r.get("family") or "custom"))].append(r)
        groups[(r["label"], "(all)")].append(r)
    rows = []
    for (label, family), rs in sorted(groups.items()):
        rows.append(Row(label, family, len(rs), _mean(r.get("score") for r in rs), _mean(r.get("input_tokens") for r in rs),
                        _mean(r.get("output_tokens") for r in rs), sum(float(r.get("cost_usd") or 0) for r in rs),
                        statistics.median(float(r.get("wall_s") or 0) for r in rs), sum(1 for r in rs if r.get("error")),
                        sum(1 for r in rs if _right(r))))
    return rows


def length_table(records: list[dict[str, Any]]) -> list[list[str]]:
    """Rows of (family, length, then per method: correct/tasks and median seconds): the
    table that shows where each method holds up as contexts grow."""
    labels = sorted({r["label"] for r in records})
    groups: dict[tuple[str, int], dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        if r.get("length"):
            groups[(str(r.get("family") or "custom"), int(r["length"]))][r["label"]].append(r)
    rows = []
    for (family, length), by in sorted(groups.items()):
        row = [family, f"{length:,}"]
        for label in labels:
            rs = by.get(label, [])
            right = sum(1 for r in rs if _right(r))
            row += [f"{right}/{len(rs)}" if rs else "-",
                    f"{statistics.median(float(r.get('wall_s') or 0) for r in rs):.1f}" if rs else "-"]
        rows.append(row)
    return rows


def _right(record: dict[str, Any]) -> bool:
    """Whether a task counts as correct: as the run judged it (``correct``), else a full score."""
    if "correct" in record:
        return bool(record["correct"])
    return float(record.get("score") or 0) >= 0.999


def _length_head(records: list[dict[str, Any]]) -> tuple[str, ...]:
    head = ["family", "length (chars)"]
    for label in sorted({r["label"] for r in records}):
        head += [f"{label} correct", f"{label} median s"]
    return tuple(head)


def _mean(values: Any) -> float:
    xs = [float(v or 0) for v in values]
    return sum(xs) / len(xs) if xs else 0.0


def by_length(records: list[dict[str, Any]]) -> dict[str, dict[int, float]]:
    """label -> {length: accuracy} over the records that have a length."""
    groups: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        if r.get("length"):
            groups[r["label"]][int(r["length"])].append(float(r.get("score") or 0))
    return {label: {n: sum(v) / len(v) for n, v in pts.items()} for label, pts in groups.items()}


def token_reduction(records: list[dict[str, Any]], a: str = "rlm", b: str = "direct") -> list[dict[str, Any]]:
    """Per family (and all): tokens of method ``a`` against ``b`` on the tasks both ran, and
    on those both got right; reduction = 1 - tokens_a / tokens_b, in percent."""
    by_task: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for r in records:
        if r["method"] in (a, b):
            by_task[r["task_id"]][r["method"]] = r
    fams: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = defaultdict(list)
    for pair in by_task.values():
        if a in pair and b in pair:
            fams[str(pair[a].get("family") or "custom")].append((pair[a], pair[b]))
            fams["(all)"].append((pair[a], pair[b]))
    out = []
    for family, pairs in sorted(fams.items()):
        def tokens(r: dict[str, Any]) -> int:
            return int(r.get("input_tokens") or 0) + int(r.get("output_tokens") or 0)

        ta, tb = sum(tokens(x) for x, _ in pairs), sum(tokens(y) for _, y in pairs)
        both = [(x, y) for x, y in pairs if _right(x) and _right(y)]
        ea, eb = sum(tokens(x) for x, _ in both), sum(tokens(y) for _, y in both)
        out.append({"family": family, "tasks": len(pairs), f"{a}_accuracy": _mean(x.get("score") for x, _ in pairs),
                    f"{b}_accuracy": _mean(y.get("score") for _, y in pairs), f"{a}_tokens": ta, f"{b}_tokens": tb,
                    "token_reduction_percent": round(100 * (1 - ta / tb), 1) if tb else None,
                    "both_correct": len(both),
                    "token_reduction_percent_at_equal_accuracy": round(100 * (1 - ea / eb), 1) if eb else None})
    return out


def load_all_savings(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per method and family (and all), over the tasks whose record has a load-all figure (the
    ``rlm`` methods count it): the tokens the method used against what pasting every context
    into one prompt would cost (``load_all_tokens``), the reduction in percent (1 - used /
    load-all), and the probes' share of the method's time."""
    out = []
    # Grouped in one pass: linear in the records however many methods and families they name.
    groups: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for r in records:
        whole = r.get("load_all_tokens")
        if isinstance(whole, int) and not isinstance(whole, bool) and whole >= 0:
            families = groups.setdefault(str(r.get("method")), {"(all)": []})
            families["(all)"].append(r)
            family = str(r.get("family") or "-")
            families.setdefault(family if family != "(all)" else "'(all)'", []).append(r)
    for method in sorted(groups):
        families = groups[method]
        for family in ["(all)", *sorted(f for f in families if f != "(all)")]:
            rs = families[family]
            used = sum(int(r.get("input_tokens") or 0) + int(r.get("output_tokens") or 0) for r in rs)
            whole = sum(int(r["load_all_tokens"]) for r in rs)
            wall = sum(float(r.get("wall_s") or 0) for r in rs)
            probe = sum(float(r.get("probe_s") or 0) for r in rs)
            out.append({"method": method, "family": family, "tasks": len(rs), "tokens": used, "load_all_tokens": whole,
                        "reduction_percent": round(100 * (1 - used / whole), 1) if whole else None,
                        "accuracy": _mean(r.get("score") for r in rs),
                        "probe_share_percent": round(100 * probe / wall, 1) if wall else None})
    return out


_SAVE_HEAD = ("method", "family", "tasks", "mean score", "tokens used", "tokens to load everything", "reduction",
              "probe's share of the time")
_SAVE_NOTE = ("What pasting every context of each task into one prompt would have cost (the tokens the runtime counts "
              "for its models: tiktoken, exact to 2 MB and sampled beyond, a memory store's chunks summed), against the "
              "tokens the method used (input and output, every call of the run); reduction = 1 - used / load-all. The "
              "last column is the probes' time (before the first turn) over the tasks' wall time.")


def _save_cells(x: dict[str, Any]) -> list[str]:
    red, share = x["reduction_percent"], x["probe_share_percent"]
    return [x["method"], x["family"], str(x["tasks"]), f"{x['accuracy']:.0%}", f"{x['tokens']:,}", f"{x['load_all_tokens']:,}",
            "-" if red is None else f"{red:.1f}%", "-" if share is None else f"{share:.1f}%"]


def _window(folder: Path, records: list[dict[str, Any]]) -> tuple[int | None, int | None]:
    """(window in tokens, in characters) of the run's model, when known."""
    tokens = next((int(r["window"]) for r in records if r.get("window")), None)
    if tokens is None:
        runs = folder / "runs.jsonl"
        if runs.exists():
            for _, line, _ in read_lines(runs, regular=True):
                try:
                    value = parse_line(line or "")
                except ValueError:
                    continue
                window = value.get("window") if isinstance(value, dict) else None
                if isinstance(window, int) and not isinstance(window, bool) and 0 < window <= 10**9:
                    tokens = window
    if not tokens:
        return None, None
    cut = [int(r["extra"]["pasted_chars"]) for r in records
           if r.get("method") == "direct" and isinstance(r.get("extra"), dict) and r["extra"].get("cut")
           and isinstance(r["extra"].get("pasted_chars"), int) and 0 <= r["extra"]["pasted_chars"] <= 10**15]
    chars = int(statistics.median(cut)) if cut else tokens * CHARS_PER_TOKEN
    return tokens, chars


def write_inside(folder: Path, name: str, data: bytes) -> Path:
    """Write ``folder/name`` whole: a temporary file beside it, then renamed over it, so a
    symlink planted at that name is replaced, not followed."""
    target = folder / name
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def trajectory_inside(root: Path, rel: Any) -> Path | None:
    """The trajectory a record names, resolved, when it is a ``.jsonl`` regular file inside
    ``root`` (itself resolved); None for anything else (absolute, ``..`` out, a symlink
    out, a URL, not a string)."""
    if not isinstance(rel, str) or not rel or len(rel) > 4096 or "\x00" in rel or Path(rel).is_absolute():
        return None
    try:
        src = (root / rel).resolve(strict=True)
        regular = stat.S_ISREG(src.stat().st_mode)
    except (OSError, RuntimeError, ValueError):
        return None
    if not regular or src.suffix != ".jsonl" or not src.is_relative_to(root):
        return None
    return src


def _trace_pages(folder: Path, records: list[dict[str, Any]]) -> dict[str, str]:
    """Trajectory field -> the path, relative to the folder, of its HTML page (rendered when
    missing or older than the JSONL; past ``MAX_TRACE_PAGES``, or when it cannot be rendered,
    the JSONL). Only trajectories inside the folder (``trajectory_inside``) get an entry."""
    from rlm_runtime.trajectory import read_events, render_html

    root = folder.resolve()
    pages: dict[str, str] = {}
    rendered = 0
    for r in records:
        rel = r.get("trajectory")
        if not isinstance(rel, str) or rel in pages:
            continue
        src = trajectory_inside(root, rel)
        if src is None:
            continue
        pages[rel] = src.relative_to(root).as_posix()
        if rendered >= MAX_TRACE_PAGES:
            continue
        rendered += 1
        page = src.with_suffix(".html")
        try:
            current = page.lstat()
            fresh = stat.S_ISREG(current.st_mode) and current.st_mtime >= src.stat().st_mtime
        except OSError:
            fresh = False
        try:
            if not fresh:
                text = render_html(read_events(src), title=f"trajectory: {r['task_id']} ({r['method']})")
                write_inside(root, page.relative_to(root).as_posix(), text.encode("utf-8"))
            pages[rel] = page.relative_to(root).as_posix()
        except Exception:  # a torn or hostile trajectory: link the JSONL instead
            pass
    return pages


def _href(rel: str) -> str:
    """A link to a path inside the folder that no browser reads as a URL with a scheme."""
    return "./" + quote(rel, safe="/")


def build_report(folder: str | Path) -> Built:
    """Write ``report.md``, ``report.html`` and the plots of the run in ``folder``."""
    folder = Path(folder)
    skipped: list[str] = []
    records = load(folder, skipped)
    rows = table(records)
    series = by_length(records)
    reduction = token_reduction(records)
    window_tokens, window_chars = _window(folder, records)
    pages = _trace_pages(folder, records)
    assists = assist_rows(folder, records)
    plots: list[Path] = []
    from rlm_runtime.eval import plots as plotting

    if plotting.available() and records:
        points = [(r.method, r.family, r.input_tokens + r.output_tokens, r.accuracy) for r in rows
                  if r.family != "(all)" and r.input_tokens + r.output_tokens > 0]
        drawings = [("accuracy_by_length.png", lambda out: plotting.accuracy_by_length(
                        series, out, window_chars=window_chars, window_tokens=window_tokens)) if series else None,
                    ("tokens_vs_accuracy.png", lambda out: plotting.tokens_vs_accuracy(points, out)) if points else None]
        for name, draw in filter(None, drawings):
            buffer = io.BytesIO()
            try:
                draw(buffer)
            except Exception:  # a plot is a nicety: a label matplotlib cannot draw leaves it out
                continue
            plots.append(write_inside(folder, name, buffer.getvalue()))
    md = write_inside(folder, "report.md",
                      _markdown(folder, records, rows, reduction, window_tokens, plots, pages, assists).encode("utf-8"))
    page = write_inside(folder, "report.html",
                        _html(folder, records, rows, reduction, window_tokens, plots, pages, assists).encode("utf-8"))
    return Built(md, page, plots, skipped, load_all_savings(records))


# ----------------------------------------------------------------------------- rendering

_ASSISTS_NOTE = ("What each assist did (rlm_runtime.assist): the tasks it spoke in, and of the answers it questioned "
                 "or replaced, how many went from wrong to right and from right to wrong by the task's final answer.")
_HEAD = ("method", "family", "tasks", "correct", "mean score", "input tok / task", "output tok / task", "cost $",
         "median s", "errors")
#: What the first table's columns mean (shown under it).
_HEAD_NOTE = ("correct: the tasks whose answer the scorer accepted; mean score: the scorers' mean over the tasks "
              "(a partly right answer counts in part, so it can differ from correct / tasks); tokens are the mean per "
              "task; errors: tasks that ended without an answer.")


def _cells(r: Row) -> list[str]:
    return [r.method, r.family, str(r.n), f"{r.correct}/{r.n}", f"{r.accuracy:.0%}", f"{r.input_tokens:,.0f}",
            f"{r.output_tokens:,.0f}", f"{r.cost_usd:.4f}", f"{r.median_s:.1f}", str(r.errors)]


def _fewer(v: Any) -> str:
    """A token reduction as words: 40% fewer, 2.5x as many."""
    if v is None:
        return "-"
    if v >= 0:
        return f"{v:.0f}% fewer"
    return f"{1 - v / 100:.1f}x as many"


def _reduction_cells(x: dict[str, Any]) -> list[str]:
    return [x["family"], str(x["tasks"]), f"{x['rlm_accuracy']:.0%}", f"{x['direct_accuracy']:.0%}", f"{x['rlm_tokens']:,}",
            f"{x['direct_tokens']:,}", _fewer(x["token_reduction_percent"]), str(x["both_correct"]),
            _fewer(x["token_reduction_percent_at_equal_accuracy"])]


_RED_HEAD = ("family", "tasks both ran", "rlm mean score", "direct mean score", "rlm tokens", "direct tokens",
             "rlm's tokens against direct's", "tasks both got right", "the same, on those tasks")
#: What the token table says (shown under it).
_RED_NOTE = ("Tokens (input + output) that rlm spent against direct on the same tasks: \"40% fewer\" means rlm used 60% "
             "of direct's tokens, \"2.5x as many\" that it used two and a half times as many. The last column compares "
             "only the tasks both answered right, so that a method is not cheaper merely by giving up.")


#: The characters that start Markdown markup: an image that loads, a link, raw HTML, an entity.
_MD_MARKUP = re.compile(r"[\\`*_\[\]<>!&~|]")


def _md_text(text: Any) -> str:
    """``text`` (from a task or results file, or a model) on one line, shown as itself by a
    Markdown viewer: ``![x](https://...)`` or ``<img src=...>`` in a results file loaded a
    remote image (an answer's way out) when report.md was previewed."""
    return _MD_MARKUP.sub(lambda m: "\\" + m.group(0), one_line(str(text)))


def _md_cell(text: Any) -> str:
    shown = one_line(str(text))[:120]
    return _md_text(shown)


def _md_table(head: tuple[str, ...], rows: list[list[str]], raw_last: bool = False) -> list[str]:
    """A Markdown table; ``raw_last``: the last cell is markup of ours (a trajectory link)."""
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join([*(_md_cell(c) for c in (row[:-1] if raw_last else row)), *(row[-1:] if raw_last else [])])
            + " |" for row in rows]
    return out


def _models(records: list[dict[str, Any]]) -> str:
    return ", ".join(sorted({str(r.get("model")) for r in records})) or "-"


def _task_rows(records: list[dict[str, Any]], pages: dict[str, str]) -> list[dict[str, Any]]:
    rows = []
    for r in sorted(records, key=lambda r: (str(r.get("family")), r.get("length") or 0, r["task_id"], r["label"])):
        rows.append({"task": r["task_id"], "method": r["label"], "length": r.get("length") or "", "score": f"{float(r.get('score') or 0):.2f}",
                     "answer": r.get("answer") if r.get("answer") is not None else f"({r.get('error_type') or 'no answer'})",
                     "gold": r.get("gold"), "tokens": int(r.get("input_tokens") or 0) + int(r.get("output_tokens") or 0),
                     "s": f"{float(r.get('wall_s') or 0):.1f}",
                     "trace": pages.get(r.get("trajectory") or "", "")})
    return rows


def _markdown(folder: Path, records: list[dict[str, Any]], rows: list[Row], reduction: list[dict[str, Any]],
              window: int | None, plots: list[Path], pages: dict[str, str], assists: list[AssistRow]) -> str:
    out = [f"# rlm eval report: {_md_text(folder.name)}", "",
           f"{len(records)} results; model: {_md_text(_models(records))}" + (f"; window {window:,} tokens" if window else ""), "",
           "## Accuracy by method and family", ""]
    out += _md_table(_HEAD, [_cells(r) for r in rows])
    out += ["", _HEAD_NOTE]
    lengths = length_table(records)
    if lengths:
        out += ["", "## By family and context length", ""]
        out += _md_table(_length_head(records), lengths)
    savings = load_all_savings(records)
    if savings:
        out += ["", "## Tokens against loading everything", "", _SAVE_NOTE, ""]
        out += _md_table(_SAVE_HEAD, [_save_cells(x) for x in savings])
    if reduction:
        out += ["", "## Tokens of rlm against direct", "", _RED_NOTE, ""]
        out += _md_table(_RED_HEAD, [_reduction_cells(x) for x in reduction])
    if assists:
        out += ["", "## Assists", "", _ASSISTS_NOTE, ""]
        out += _md_table(ASSIST_HEAD, [assist_cells(a) for a in assists])
    if plots:
        out += ["", "## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots]
    out += ["", "## Tasks", ""]
    task_rows = _task_rows(records, pages)
    out += _md_table(("task", "method", "length", "score", "answer", "gold", "tokens", "s", "trajectory"),
                     [[t["task"], t["method"], str(t["length"]), t["score"], str(t["answer"])[:60], str(t["gold"])[:40],
                       f"{t['tokens']:,}", t["s"], f"[trace](<{_href(t['trace'])}>)" if t["trace"] else ""] for t in task_rows],
                     raw_last=True)
    return "\n".join(out) + "\n"


_CSS = ("body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}table{border-collapse:collapse;"
        "margin:1em 0;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}th{background:#f3f3f3}"
        "td.n{text-align:right}img{max-width:100%;border:1px solid #ddd;margin:0.5em 0}.err{color:#a00}")


def _h_table(head: tuple[str, ...], rows: list[list[str]], raw_last: bool = False) -> str:
    out = ["<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"]
    for row in rows:
        cells = [f"<td>{html.escape(c)}</td>" for c in (row[:-1] if raw_last else row)]
        if raw_last:
            cells.append(f"<td>{row[-1]}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    return "\n".join(out) + "</table>"


def _html(folder: Path, records: list[dict[str, Any]], rows: list[Row], reduction: list[dict[str, Any]], window: int | None,
          plots: list[Path], pages: dict[str, str], assists: list[AssistRow]) -> str:
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>rlm eval: {html.escape(folder.name)}</title>"
             f"<style>{_CSS}</style></head><body>", f"<h1>rlm eval report: {html.escape(folder.name)}</h1>",
             f"<p>{len(records)} results; model: {html.escape(_models(records))}"
             + (f"; window {window:,} tokens" if window else "") + "</p>",
             "<h2>Accuracy by method and family</h2>", _h_table(_HEAD, [_cells(r) for r in rows]),
             f"<p>{html.escape(_HEAD_NOTE)}</p>"]
    lengths = length_table(records)
    if lengths:
        parts += ["<h2>By family and context length</h2>", _h_table(_length_head(records), lengths)]
    savings = load_all_savings(records)
    if savings:
        parts += ["<h2>Tokens against loading everything</h2>", f"<p>{html.escape(_SAVE_NOTE)}</p>",
                  _h_table(_SAVE_HEAD, [_save_cells(x) for x in savings])]
    if reduction:
        parts += ["<h2>Tokens of rlm against direct</h2>", f"<p>{html.escape(_RED_NOTE)}</p>",
                  _h_table(_RED_HEAD, [_reduction_cells(x) for x in reduction])]
    if assists:
        parts += ["<h2>Assists</h2>", f"<p>{html.escape(_ASSISTS_NOTE)}</p>",
                  _h_table(ASSIST_HEAD, [assist_cells(a) for a in assists])]
    if plots:
        parts.append("<h2>Plots</h2>")
        for p in plots:
            data = base64.b64encode(p.read_bytes()).decode("ascii")
            parts.append(f"<p><img alt='{html.escape(p.stem)}' src='data:image/png;base64,{data}'></p>")
    parts.append("<h2>Tasks</h2>")
    task_rows = [[t["task"], t["method"], str(t["length"]), t["score"], str(t["answer"])[:200], str(t["gold"])[:80],
                  f"{t['tokens']:,}", t["s"],
                  f"<a href='{html.escape(_href(t['trace']), quote=True)}'>trace</a>" if t["trace"] else ""]
                 for t in _task_rows(records, pages)]
    parts.append(_h_table(("task", "method", "length", "score", "answer", "gold", "tokens", "s", "trajectory"), task_rows,
                          raw_last=True))
    parts.append("</body></html>")
    return "\n".join(parts)


# ----------------------------------------------------------------------------- compare


@dataclass
class Comparison:
    a: str
    b: str
    rows: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "rows": self.rows}

    def text(self) -> str:
        head = ("method", "family", "n A", "acc A", "n B", "acc B", "diff", "tokens A", "tokens B")
        lines = [f"A = {self.a}", f"B = {self.b}", ""]
        lines += _md_table(head, [[r["method"], r["family"], str(r["n_a"]), _pct(r["accuracy_a"]), str(r["n_b"]),
                                   _pct(r["accuracy_b"]), _signed(r["diff"]), f"{r['tokens_a']:,.0f}" if r["tokens_a"] is not None else "-",
                                   f"{r['tokens_b']:,.0f}" if r["tokens_b"] is not None else "-"] for r in self.rows])
        return "\n".join(lines)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.0%}"


def _signed(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:+.0f} pts"


def compare_runs(a: Path, b: Path) -> Comparison:
    """Per (method, family): accuracy and mean tokens in run A and run B, and B - A."""
    ta = {(r.method, r.family): r for r in table(load(a))}
    tb = {(r.method, r.family): r for r in table(load(b))}
    rows = []
    for key in sorted(set(ta) | set(tb)):
        x, y = ta.get(key), tb.get(key)
        rows.append({"method": key[0], "family": key[1], "n_a": x.n if x else 0, "n_b": y.n if y else 0,
                     "accuracy_a": x.accuracy if x else None, "accuracy_b": y.accuracy if y else None,
                     "diff": (y.accuracy - x.accuracy) if x and y else None,
                     "tokens_a": (x.input_tokens + x.output_tokens) if x else None,
                     "tokens_b": (y.input_tokens + y.output_tokens) if y else None})
    return Comparison(str(a), str(b), rows)
