"""A stand-in for the quality tier's model in CLI tests: deterministic, 64 dimensions."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any


class _Tiny:
    name = "tiny-quality-64"
    dim = 64

    def embed(self, texts: Sequence[str]) -> Any:
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                seed = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
                out[i] += np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.divide(out, norms, out=out, where=norms > 0)


def tiny_quality() -> _Tiny:
    return _Tiny()
