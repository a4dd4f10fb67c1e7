"""A model's context window in tokens: what the ``direct`` and ``rag`` methods may paste.

* ``local:NAME``: the window the embedded server gives a lone conversation on this machine
  (``llm.local.server_settings``: 8K, 16K or 32K from free memory), capped by the model's
  trained window (``llm.models`` specs).
* ``scripted:``: ``SCRIPTED_WINDOW`` (a test double has none of its own).
* other names: litellm's model table (``max_input_tokens``), else ``DEFAULT_WINDOW``.

``--window TOKENS`` overrides all of these.
"""

from __future__ import annotations

import os

SCRIPTED_WINDOW = 8192
DEFAULT_WINDOW = 8192


def context_window(model: str, override: int | None = None) -> int:
    """The tokens ``model`` reads in one call (prompt and reply)."""
    if override:
        return int(override)
    if model.startswith("local:"):
        return _local_window(model.removeprefix("local:"))
    if model.startswith("scripted:"):
        return SCRIPTED_WINDOW
    try:
        from rlm_runtime.config import prepare_litellm

        prepare_litellm()
        import litellm

        info = litellm.get_model_info(model)
        value = info.get("max_input_tokens") or info.get("max_tokens")
        return int(value) if value else DEFAULT_WINDOW
    except Exception:  # an unknown name or no litellm table entry: a conservative default
        return DEFAULT_WINDOW


def _local_window(name: str) -> int:
    import psutil

    from rlm_runtime.llm.local import SLOT_TOKENS, server_settings
    from rlm_runtime.llm.models import spec

    model = spec(name)
    settings = server_settings(int(psutil.virtual_memory().available), os.cpu_count() or 1, model)
    root = settings.n_ctx - (settings.slots - 1) * SLOT_TOKENS
    return min(model.context_window, root)
