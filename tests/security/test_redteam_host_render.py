"""Red-team pass on the trajectory views (after issue 22): a trace written before the host
redacted its lines (or by another tool) still holds keys; ``rlm trace html`` writes them into
a page made to be shared, and ``rlm trace show`` prints them. Both views redact what they show."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ENV_KEY = "legacy-planted-token-5a6b7c8d9e"
SHAPED = "sk-legacyShapedKey0123456789"


def _old_trace(path: Path) -> None:
    events = [
        {"type": "trace_start", "t": 1.0, "schema": 2, "version": "0.0.9", "session_id": "s", "model": "m", "sub_model": "m"},
        {"type": "run_start", "t": 1.0, "run_id": "r0", "parent_id": None, "depth": 0, "model": "m", "sub_model": "m",
         "query": f"why does {ENV_KEY} fail?", "limits": {}, "turn": 0, "contexts": []},
        {"type": "sub_call", "t": 1.1, "run_id": "r0", "parent_id": None, "depth": 0, "kind": "llm_query", "model": "m",
         "prompt": "hi", "response": None, "error": f"401: Authorization: Bearer {SHAPED} for http://u:pw12345678@h/v1",
         "usage": {}, "duration_s": 0.1},
        {"type": "run_end", "t": 1.2, "run_id": "r0", "parent_id": None, "depth": 0, "answer": f"the key is {ENV_KEY}",
         "error": None, "error_type": None, "iterations": 1, "usage": {}, "duration_s": 0.2},
    ]
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")


def _rlm(*args: str, env_key: str, home: Path) -> subprocess.CompletedProcess[str]:
    import os

    env = {**os.environ, "MY_SERVICE_TOKEN": env_key, "RLM_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "rlm_runtime.cli", *args], capture_output=True, text=True, env=env,
                          timeout=120, check=False)


@pytest.mark.parametrize("view", ["html", "show"])
def test_a_trace_holding_keys_is_shown_redacted(tmp_path: Path, view: str) -> None:
    """It masks a known key, a Bearer value and URL userinfo of an older trace in rlm trace html's page and rlm trace show."""
    trace = tmp_path / "old.jsonl"
    _old_trace(trace)
    out = tmp_path / "page.html"
    args = ["trace", "html", str(trace), "-o", str(out)] if view == "html" else ["trace", "show", str(trace)]
    done = _rlm(*args, env_key=ENV_KEY, home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    shown = out.read_text(encoding="utf-8") if view == "html" else done.stdout
    assert "why does" in shown and "llm_query" in shown
    for secret in (ENV_KEY, SHAPED, "pw12345678"):
        assert secret not in shown
