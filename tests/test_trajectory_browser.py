"""The trace page in a real browser: headless Chromium loads it from disk (no network), its
DOM after rendering holds the summary and the timeline's bars, and a screenshot of it is not
blank. Runs where a ``chromium`` binary is on PATH (``apt install chromium``), skipped elsewhere."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from rlm_runtime import Session
from rlm_runtime.llm.scripted import ScriptedClient
from rlm_runtime.trajectory import read_trace
from rlm_runtime.trajectory.render import render_html

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt install chromium)")


def _page(tmp_path: Path) -> Path:
    def reply(messages: list[dict[str, Any]]) -> str:
        if len(messages) == 1:
            return "the kettle is on shelf 3"
        turn = sum(m["role"] == "assistant" for m in messages) + 1
        return {1: "```python\nnote = llm_query('where is the kettle?')\nprint(note)\n```",
                2: "```python\nFINAL('shelf 3')\n```"}[turn]

    trace = tmp_path / "t.jsonl"
    with Session(ScriptedClient(reply), contexts=["kettle: shelf 3\nladle: shelf 7\n"], trace=trace) as s:
        assert s.ask("where is the kettle?").answer == "shelf 3"
    page = tmp_path / "page.html"
    page.write_text(render_html(read_trace(trace)), encoding="utf-8")
    return page


def _chromium(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run([CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           f"--user-data-dir={cwd / 'profile'}", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd, stdin=subprocess.DEVNULL)


def test_chromium_renders_the_summary_and_the_timeline(tmp_path: Path) -> None:
    """It loads the page offline; the rendered DOM has the answer in the summary and a bar for each turn part and the sub-call."""
    page = _page(tmp_path)
    done = _chromium("--dump-dom", page.as_uri(), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-500:]
    dom = done.stdout
    summary = dom[dom.index("<h2>Summary</h2>"):dom.index("<h2>Timeline</h2>")]
    assert "shelf 3" in summary and "2 iterations" in summary
    assert dom.count('class="bar model"') == 2 and dom.count('class="bar sub_call"') == 1


def test_the_screenshot_is_not_blank(tmp_path: Path) -> None:
    """It draws the page: the screenshot holds the timeline's blue bars, not just white."""
    image_module = pytest.importorskip("PIL.Image", reason="Pillow comes with the eval extra (matplotlib)")
    np = pytest.importorskip("numpy")

    page = _page(tmp_path)
    shot = tmp_path / "page.png"
    done = _chromium("--window-size=1200,900", f"--screenshot={shot}", page.as_uri(), cwd=tmp_path)
    assert done.returncode == 0 and shot.is_file(), done.stderr[-500:]
    with image_module.open(shot) as image:
        rgb = np.asarray(image.convert("RGB")).astype(int)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    blue = int(((b > 150) & (r < 100) & (g > 100) & (g < 150)).sum())  # the model's bars, #4a7fb5
    assert blue > 200
