"""Smoke test of `rlm ask` end to end with the embedded local model (0.5B).

It checks the plumbing (server start, streaming, the loop, the trajectory), not the answer:
the 0.5B model writes poor code. Skipped where the engine or the model is not installed,
except in CI (CI=true), where the README's test command installs both and a skip would hide
a broken set-up.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlm_runtime.config import paths_from_env

# Read at import, before the autouse fixture points RLM_HOME at a temp dir.
REAL_MODELS_DIR = paths_from_env().models
MODEL = "qwen2.5-coder-0.5b"
GGUF = REAL_MODELS_DIR / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"


def _missing() -> str | None:
    if importlib.util.find_spec("xllamacpp") is None:
        return "the local model engine (xllamacpp) is not installed (pip install 'rlm_runtime[local]')"
    if not GGUF.is_file():
        return f"{MODEL} is not installed (rlm model install {MODEL})"
    return None


@pytest.mark.slow
def test_rlm_ask_with_local_model_runs_end_to_end(tmp_path: Path) -> None:
    """It answers through the local model: server, loop and trajectory all work."""
    missing = _missing()
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the local smoke test: {missing}")
        pytest.skip(missing)
    doc = tmp_path / "doc.txt"
    doc.write_text("Line one.\nThe magic number is 42.\nLine three.\n")
    trace = tmp_path / "trace.jsonl"
    env = {**os.environ, "RLM_MODELS_DIR": str(REAL_MODELS_DIR), "RLM_HOME": str(tmp_path / "home")}
    proc = subprocess.run(
        [sys.executable, "-m", "rlm_runtime.cli", "ask", "What is the magic number?", "-c", str(doc),
         "--model", f"local:{MODEL}", "--max-iterations", "2", "--trace", str(trace), "--json", "-q"],
        capture_output=True, text=True, timeout=900, env=env, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr
    result = json.loads(proc.stdout)
    usage = result["usage"][f"local:{MODEL}"]
    assert usage["calls"] >= 1 and usage["output_tokens"] > 0
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "trace_start" and "run_start" in kinds and "run_end" in kinds and "iteration" in kinds
    assert any(e.get("response") for e in events if e["type"] == "iteration")
