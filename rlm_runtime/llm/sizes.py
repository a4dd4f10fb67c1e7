"""What a model name says about the model's size: ``is_small_model``.

Small models (a few billion parameters) write poorer code and need tighter loop defaults.
A name is small when it is served on this machine (``local:``, ``ollama/``,
``ollama_chat/``) or states a parameter count of at most ``SMALL_MODEL_MAX_BILLIONS``:
``openai/qwen2.5-coder-1.5b``, ``lm_studio/llama-3.2-3b-instruct``, ``hosted_vllm/Qwen2.5-7B``.

A size is a ``<number>b`` token standing on its own between separators (``-``, ``_``, ``.``,
``/``, ``:``, ``@``, space), so ``o3``, ``claude-3-5-sonnet``, ``gpt-4o`` or a fine-tune id
like ``ft:...:8b3f`` state none; nor does ``mixtral-8x7b`` (47B in all, not 7B), and
``Qwen3-30B-A3B`` states 30B (``A3B`` is its active part, not its size). A number straight
after a family whose numbers are versions (``gpt-4b``: GPT-4, not a 4B model; likewise
``claude-``, ``gemini-``) is not a size; ``gemini-1.5-flash-8b`` is 8B. When a name states
several sizes, the largest counts. A name that states no size is not small.
"""

from __future__ import annotations

import re

#: Names served on this machine: small whatever they say.
LOCAL_PREFIXES = ("local:", "ollama/", "ollama_chat/")
#: The largest parameter count, in billions, a small model may state.
SMALL_MODEL_MAX_BILLIONS = 8.0

# A number then "b", with neither a letter, digit nor dot before it nor a letter or digit after.
_SIZE = re.compile(r"(?<![a-z0-9.])(\d+(?:\.\d+)?)b(?![a-z0-9])")
# A family whose next number is its version, right before the size-looking token.
_VERSIONED_FAMILY = re.compile(r"(?:^|[^a-z0-9])(?:chatgpt|gpt|claude|gemini)-$")


def stated_size_billions(name: str) -> float | None:
    """The largest parameter count ``name`` states, in billions (None when it states none)."""
    text = name.strip().lower()
    sizes = [float(m.group(1)) for m in _SIZE.finditer(text) if not _VERSIONED_FAMILY.search(text, 0, m.start())]
    return max(sizes) if sizes else None


def is_small_model(name: str) -> bool:
    """True when ``name`` is served on this machine or states a size of at most ~8B parameters.

    Args:
        name: a model name as ``make_client`` takes it (``local:qwen2.5-coder-1.5b``,
            ``openai/gpt-4o-mini``, ``hosted_vllm/Qwen2.5-7B``...).
    """
    text = name.strip().lower()
    if text.startswith(LOCAL_PREFIXES):
        return True
    size = stated_size_billions(text)
    return size is not None and 0 < size <= SMALL_MODEL_MAX_BILLIONS
