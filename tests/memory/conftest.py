"""Fixtures of the memory store tests: a store in a temp folder, a clock the test moves, and
a helper writing files."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from rlm_runtime.memory import MemorySettings, MemoryStore


class Clock:
    """A settable clock: ``clock()`` is the time, ``clock.advance(seconds)`` moves it on."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.t = start

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "store" / "memory.db"


@pytest.fixture
def open_store(store_path: Path, clock: Clock) -> Iterator[Callable[..., MemoryStore]]:
    """open_store(settings=None, **kw): a MemoryStore at store_path with the fake clock; closed after the test."""
    opened: list[MemoryStore] = []

    def make(settings: MemorySettings | None = None, **kw: object) -> MemoryStore:
        kw.setdefault("clock", clock)
        st = MemoryStore(kw.pop("path", store_path), settings=settings, **kw)  # type: ignore[arg-type]
        opened.append(st)
        return st

    yield make
    for st in opened:
        st.close()


@pytest.fixture
def store(open_store: Callable[..., MemoryStore]) -> MemoryStore:
    return open_store()


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str, str | bytes], Path]:
    """write(relative name, str or bytes) -> the path, under tmp_path/"docs"."""

    def put(name: str, content: str | bytes) -> Path:
        path = tmp_path / "docs" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_bytes(content.encode("utf-8"))
        return path

    return put


def paragraphs(topic: str, n: int, words: int = 60) -> str:
    """``n`` prose paragraphs of ``words`` words each about ``topic`` (distinct per paragraph)."""
    out = []
    for i in range(n):
        body = " ".join(f"{topic}{i}word{j % 7}" if j % 5 == 0 else f"filler{j % 11}" for j in range(words))
        out.append(f"Paragraph {i} about {topic}: {body}.")
    return "\n\n".join(out) + "\n"


def small_chunks(**links: object) -> MemorySettings:
    """Settings whose chunks are 5-60 tokens, so a few paragraphs make several chunks."""
    from rlm_runtime.memory import IngestConfig, LinkConfig

    return MemorySettings(ingest=IngestConfig(min_tokens=5, max_tokens=60), links=LinkConfig(**links))  # type: ignore[arg-type]


#: Words the tiny embedder reads as one concept (its "meaning"): each group shares a vector.
CONCEPTS = (
    ("refund", "refunds", "money", "back", "repayment", "reimbursement"),
    ("feline", "cat", "cats", "kitten", "tabby"),
    ("automobile", "car", "cars", "vehicle", "motorcar"),
    ("password", "passwords", "passphrase", "credentials", "secret"),
)


class TinyEmbedder:
    """A deterministic embedding model for tests: each word a fixed pseudo-random vector (from
    its hash), the words of a ``CONCEPTS`` group one vector; a text the normalised sum. 64
    dimensions; ``calls`` counts the texts embedded."""

    def __init__(self, name: str = "tiny-64", dim: int = 64) -> None:
        self.name = name
        self.dim = dim
        self.calls = 0
        self.concept = {w: group[0] for group in CONCEPTS for w in group}

    def _word(self, word: str) -> Any:
        import hashlib

        import numpy as np

        seed = int.from_bytes(hashlib.blake2b(self.concept.get(word, word).encode(), digest_size=8).digest(), "little")
        return np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)

    def embed(self, texts: Sequence[str]) -> Any:
        import re

        import numpy as np

        self.calls += len(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for w in re.findall(r"[a-z0-9]+", text.lower()):
                if w not in {"the", "a", "of", "is", "are", "my", "i", "when", "may", "get", "can", "in", "on"}:
                    out[i] += self._word(w)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.divide(out, norms, out=out, where=norms > 0)


@pytest.fixture
def tiny() -> TinyEmbedder:
    return TinyEmbedder()
