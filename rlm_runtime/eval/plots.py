"""The report's plots as PNG files, with matplotlib (the ``eval`` extra), imported only here.

matplotlib is driven through ``Figure`` and the Agg canvas, never ``pyplot``: no global state,
no display needed, safe in a program that has its own matplotlib set-up. Labels come from
results files (method, model and family names): each is cut short and its ``$`` escaped, so
matplotlib never parses one as mathtext.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from rlm_runtime.termsafe import one_line

Out = TypeVar("Out", Path, BinaryIO)


def _label(text: Any) -> str:
    return one_line(str(text)[:200])[:60].replace("$", r"\$")


def available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _figure(width: float = 6.4, height: float = 4.0) -> tuple[Any, Any]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot(1, 1, 1)


def _count(value: float, _pos: Any = None) -> str:
    """An axis tick as a person writes it: 500, 3.5k, 100k, 1M."""
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 1_000:
        return f"{value / 1_000:g}k"
    return f"{value:g}"


def _log_axis(ax: Any, values: Sequence[float]) -> None:
    """A log x axis when the values span more than tenfold (else linear), its ticks written
    as counts, and on a log axis only the major ticks labelled (the minor ones collided)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    low, high = min(values), max(values)
    if low > 0 and high / low > 10:
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.xaxis.set_major_formatter(FuncFormatter(_count))


def _place_labels(ax: Any, fig: Any, items: list[tuple[str, float, float]]) -> None:
    """Each label beside its point where it stays inside the plot and overlaps no label placed
    before it (a fixed order of offsets is tried; the first that fits wins, else the last):
    labels of points that sit close together no longer print over each other."""
    fig.canvas.draw()
    taken: list[Any] = []
    offsets = [(4, 4), (4, -11), (-4, 4), (-4, -11), (4, 14), (4, -21), (-4, 14), (-4, -21)]
    renderer = fig.canvas.get_renderer()
    area = ax.get_window_extent(renderer)
    for text, x, y in items:
        placed = None
        for dx, dy in offsets:
            placed = ax.annotate(text, (x, y), fontsize=7, xytext=(dx, dy), textcoords="offset points",
                                 ha="left" if dx > 0 else "right")
            box = placed.get_window_extent(renderer).expanded(1.05, 1.1)
            inside = area.x0 <= box.x0 and box.x1 <= area.x1 and area.y0 <= box.y0 and box.y1 <= area.y1
            if inside and not any(box.overlaps(other) for other in taken):
                break
            if (dx, dy) != offsets[-1]:
                placed.remove()
        if placed is not None:
            taken.append(placed.get_window_extent(renderer))


def accuracy_by_length(series: dict[str, dict[int, float]], path: Out, *, window_chars: int | None = None,
                       window_tokens: int | None = None, title: str = "Accuracy against context length") -> Out:
    """One line per method: mean score at each context length (log scale), the window marked."""
    fig, ax = _figure()
    for label, points in sorted(series.items()):
        xs = sorted(points)
        ax.plot(xs, [points[x] for x in xs], marker="o", label=_label(label))
    if window_chars:
        ax.axvline(window_chars, color="grey", linestyle="--", linewidth=1)
        ax.text(window_chars, 1.04, f"model window: ~{window_chars:,} characters (~{window_tokens:,} tokens) "
                if window_tokens else f"model window: ~{window_chars:,} characters ",
                fontsize=8, color="grey", va="bottom", ha="right")
    lengths = sorted({x for points in series.values() for x in points})
    if lengths:
        _log_axis(ax, lengths)
        if len(lengths) <= 8:
            ax.set_xticks(lengths)  # the lengths measured, not the axis's round numbers
    ax.set_ylim(-0.03, 1.1)
    ax.set_xlabel("context length (characters)")
    ax.set_ylabel("accuracy (mean score)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, format="png")
    return path


def tokens_vs_accuracy(points: list[tuple[str, str, float, float]], path: Out) -> Out:
    """A point per (method, family): mean tokens per task against accuracy."""
    fig, ax = _figure()
    markers = "osD^v<>P*X"
    methods = sorted({p[0] for p in points})
    for i, method in enumerate(methods):
        mine = [p for p in points if p[0] == method]
        ax.scatter([p[2] for p in mine], [p[3] for p in mine], marker=markers[i % len(markers)], label=_label(method), s=40)
    if points:
        _log_axis(ax, [p[2] for p in points])
    ax.set_ylim(-0.03, 1.1)
    ax.set_xlabel("tokens per task (input + output, mean)")
    ax.set_ylabel("accuracy (mean score)")
    ax.set_title("Tokens against accuracy, per method and family", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    _place_labels(ax, fig, [(_label(family), x, y) for _, family, x, y in points])
    fig.savefig(path, format="png")
    return path
