"""Token counts for model clients: one function every client's ``count_tokens`` calls.

Counts use tiktoken's ``cl100k_base`` for every model: an estimate for models with another
tokenizer, and consistent across clients, which is what budgets need. tiktoken must work
offline, so ``config.prepare_tiktoken`` points it at the encodings litellm ships; when no
encoding can be loaded, a text costs ``ceil(len / 4)`` tokens.

The loop counts the whole conversation before every model call, and most of it is the same
messages as on the turn before: counts of texts up to ``MEMO_CHARS`` characters are
memoised (a hit costs a dict lookup; a 4 KB miss about 0.4 ms).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

#: The tiktoken encoding every count uses (the one ``context.tokens`` uses too).
ENCODING = "cl100k_base"
#: Texts up to this many characters are memoised, ``MEMO_SIZE`` of them.
MEMO_CHARS = 32_768
MEMO_SIZE = 512


@lru_cache(maxsize=1)
def encoding() -> Any:
    """The tiktoken encoding, loaded once from the offline cache; None when it cannot be."""
    from rlm_runtime.config import prepare_tiktoken

    prepare_tiktoken()
    try:
        import tiktoken

        return tiktoken.get_encoding(ENCODING)
    except Exception:  # no encoding file and no network: counts fall back to len / 4
        return None


def count_tokens(text: str) -> int:
    """Tokens ``text`` costs (an estimate for models with another tokenizer). Thread-safe."""
    if len(text) <= MEMO_CHARS:
        return _memo(text)
    return _count(text)


def _count(text: str) -> int:
    enc = encoding()
    if enc is None:
        return (len(text) + 3) // 4
    return len(enc.encode_ordinary(text))  # special-token text counts as plain text


_memo = lru_cache(maxsize=MEMO_SIZE)(_count)


def cut_to_tokens(text: str, max_tokens: int) -> str:
    """The longest prefix of ``text`` that fits in ``max_tokens`` tokens (as counted above)."""
    enc = encoding()
    if enc is None:
        return text[: max_tokens * 4]
    ids = enc.encode_ordinary(text)
    return text if len(ids) <= max_tokens else enc.decode(ids[:max_tokens])
