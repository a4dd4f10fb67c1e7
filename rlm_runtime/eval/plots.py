"""The report's plots as PNG files, with matplotlib (the ``eval`` extra), imported only here.

matplotlib is driven through ``Figure`` and the Agg canvas, never ``pyplot``: no global state,
no display needed, safe in a program that has its own matplotlib set-up. Labels come from
results files (method, model and family names): each is cut short and its ``$`` escaped, so
matplotlib never parses one as mathtext.
"""

from __future__ import annotations

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


def accuracy_by_length(series: dict[str, dict[int, float]], path: Out, *, window_chars: int | None = None,
                       window_tokens: int | None = None, title: str = "Accuracy against context length") -> Out:
    """One line per method: mean score at each context length (log scale), the window marked."""
    fig, ax = _figure()
    for label, points in sorted(series.items()):
        xs = sorted(points)
        ax.plot(xs, [points[x] for x in xs], marker="o", label=_label(label))
    if window_chars:
        ax.axvline(window_chars, color="grey", linestyle="--", linewidth=1)
        ax.text(window_chars, 1.04, f"model window ~{window_tokens:,} tokens " if window_tokens else "model window ",
                fontsize=8, color="grey", va="bottom", ha="right")
    ax.set_xscale("log")
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
        for _, family, x, y in mine:
            ax.annotate(_label(family), (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_ylim(-0.03, 1.1)
    ax.set_xlabel("tokens per task (input + output, mean)")
    ax.set_ylabel("accuracy (mean score)")
    ax.set_title("Tokens against accuracy, per method and family", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, format="png")
    return path
