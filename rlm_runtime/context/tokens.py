"""Token counts of a context: exact with tiktoken when small, a sampled estimate when huge.

tiktoken must work offline: ``config.tiktoken_cache_dir`` points it at the encodings that
litellm ships. When no encoding can be loaded, the count is a bytes/4 heuristic and says so.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from rlm_runtime.context.buffer import TextBuffer

ENCODING = "cl100k_base"
EXACT_LIMIT_BYTES = 2 * 1024 * 1024
SAMPLES = 64
SAMPLE_BYTES = 16 * 1024
#: Set by a sandbox worker, whose environment is empty: where the encodings are.
CACHE_DIR: str | None = None


@dataclass(frozen=True)
class TokenCount:
    """``value`` tokens, exact or estimated within ``error_bound`` (95 % interval half-width)."""

    value: int
    exact: bool
    error_bound: int
    method: str

    def __int__(self) -> int:
        return self.value

    def __repr__(self) -> str:
        if self.exact:
            return f"{self.value} tokens (exact, {self.method})"
        return f"~{self.value} tokens (+/- {self.error_bound}, {self.method})"

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "exact": self.exact, "error_bound": self.error_bound, "method": self.method}


@lru_cache(maxsize=2)
def encoding(name: str = ENCODING) -> Any:
    """The tiktoken encoding, or None when it cannot be loaded offline."""
    import os

    from rlm_runtime.config import prepare_tiktoken

    if CACHE_DIR is None:
        prepare_tiktoken()
    else:
        os.environ["TIKTOKEN_CACHE_DIR"] = CACHE_DIR  # only while tiktoken reads it
    try:
        import tiktoken

        return tiktoken.get_encoding(name)
    except Exception:  # no encoding file and no network: the caller falls back
        return None
    finally:
        if CACHE_DIR is not None:
            os.environ.pop("TIKTOKEN_CACHE_DIR", None)


def count_text(text: str) -> int | None:
    """Tokens of ``text``, or None without an encoding. Short texts are cached: the loop
    counts the same conversation messages again on every turn."""
    if len(text) <= 32_768:
        return _count_cached(text)
    enc = encoding()
    return None if enc is None else len(enc.encode(text, disallowed_special=()))


@lru_cache(maxsize=512)
def _count_cached(text: str) -> int | None:
    enc = encoding()
    return None if enc is None else len(enc.encode(text, disallowed_special=()))


def count_buffer(buf: TextBuffer) -> TokenCount:
    enc = encoding()
    if enc is None:
        return TokenCount(math.ceil(buf.nbytes / 4), False, math.ceil(buf.nbytes / 8), "heuristic: bytes/4, tiktoken encoding unavailable")
    if buf.nbytes <= EXACT_LIMIT_BYTES:
        text = buf.decode(0, buf.nbytes)
        return TokenCount(len(enc.encode(text, disallowed_special=())), True, 0, f"tiktoken {ENCODING}")
    # Evenly spaced windows; the spread of their tokens-per-byte ratios bounds the error.
    ratios = []
    step = (buf.nbytes - SAMPLE_BYTES) // (SAMPLES - 1)
    for k in range(SAMPLES):
        start = k * step
        raw = buf.view[start : start + SAMPLE_BYTES].tobytes()
        text = raw.decode("utf-8", "ignore")
        ratios.append(len(enc.encode(text, disallowed_special=())) / max(len(raw), 1))
    mean = statistics.fmean(ratios)
    sd = statistics.stdev(ratios) if len(ratios) > 1 else mean
    value = round(mean * buf.nbytes)
    bound = math.ceil(1.96 * sd / math.sqrt(len(ratios)) * buf.nbytes) + 1
    return TokenCount(value, False, bound, f"tiktoken {ENCODING}, {SAMPLES} sampled windows of {SAMPLE_BYTES} bytes")


def add_counts(counts: Iterable[TokenCount]) -> TokenCount:
    """The count of several texts together (a corpus): exact only when every part is.

    The error bounds add up, which is conservative: the parts' sampling errors are not
    assumed independent.
    """
    parts = list(counts)
    if not parts:
        return TokenCount(0, True, 0, "no text")
    methods = sorted({p.method for p in parts})
    method = methods[0] if len(methods) == 1 else "sum of: " + "; ".join(methods)
    return TokenCount(sum(p.value for p in parts), all(p.exact for p in parts), sum(p.error_bound for p in parts), method)
