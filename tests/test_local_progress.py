"""The real local server (0.5B, xllamacpp) reports its prefill before the first token.

Live: skipped where the engine or the model is not installed. About 45 s on 2 busy cores
(the rest is importing litellm and starting the server): a 670-token prompt, read in steps of
``engines.PREFILL_BATCH`` tokens (one report part-way), and a 2-token reply.
"""

from __future__ import annotations

import importlib.util

import pytest

from rlm_runtime.config import paths_from_env

# Read at import, before the autouse fixture points RLM_HOME at a temp dir.
REAL_MODELS_DIR = paths_from_env().models
MODEL = "qwen2.5-coder-0.5b"


@pytest.mark.live
@pytest.mark.slow
def test_the_local_server_reports_its_reading_before_the_first_token() -> None:
    """It hears a report of a prompt part-read (processed < total) before the reply's first text."""
    from rlm_runtime.llm import local
    from rlm_runtime.llm.base import Prefill, listening
    from rlm_runtime.llm.models import spec

    if importlib.util.find_spec("xllamacpp") is None or not (REAL_MODELS_DIR / spec(MODEL).filename).is_file():
        pytest.skip(f"needs xllamacpp and {MODEL} (rlm model install {MODEL})")
    client = local.LocalModelClient(MODEL, models_dir=REAL_MODELS_DIR, slots=1)
    heard: list[object] = []
    prompt = " ".join(f"row {i}: value {i * 7 % 13}." for i in range(70)) + "\nWhat is the value of row 5?"
    try:
        with listening(heard.append, heard.append):
            reply = client.complete([{"role": "user", "content": prompt}], max_tokens=2, stop_after_code_block=True)
    finally:
        local.stop_all()
    reports = [h for h in heard if isinstance(h, Prefill)]
    first_text = next(i for i, h in enumerate(heard) if isinstance(h, str))
    assert reply.text and reports, heard
    part_read = [r for r in reports if 0 < r.processed < r.total]
    assert part_read and heard.index(part_read[0]) < first_text, reports
    assert reports[-1].done and reports[-1].total > 512 and reports[-1].rate, reports[-1]
