"""The one contract every context handle keeps, the values it hands out, and the shared defaults.

``ContextHandle`` is a ``typing.Protocol``: ``BufferHandle`` (one text: ``TextHandle``,
``FileHandle``, ``LazyHandle``) and ``CorpusHandle`` (many documents) satisfy it without
inheriting from it, and so will any handle to come (the memory store's). Code that only
reads a context (the prompt builder, ``describe``, the CLI) types against it.

This module imports no other handle module, so every one of them can import it: the graph
is protocol <- probe <- handles <- corpus.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from rlm_runtime.context.grep import GrepResult
from rlm_runtime.context.tokens import TokenCount
from rlm_runtime.errors import ContextError

if TYPE_CHECKING:  # an annotation only: settings imports this module for DEFAULT_EXCLUDES
    from rlm_runtime.context.settings import ProbeConfig

# ------------------------------------------------------------------ shared defaults

#: How a handle pages: by lines, characters or (approximately) tokens.
CHUNK_UNITS = ("lines", "chars", "tokens")
#: The chunk size when none is given, per unit.
DEFAULT_CHUNK_SIZE = MappingProxyType({"lines": 200, "chars": 8000, "tokens": 2000})
DEFAULT_PEEK_CHARS = 2000
DEFAULT_MAX_MATCHES = 100
#: get_full() warns above this many bytes: prefer peek, grep and chunk.
LARGE_FULL_LOAD = 1_000_000
#: Entries kept in a handle's access log.
ACCESS_LOG_SIZE = 256
#: How much of a file's start is read to tell text from binary content.
BINARY_SNIFF_BYTES = 8192
#: Folder and file names (globs) left out of folder corpora and probes.
DEFAULT_EXCLUDES = (
    ".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".tox", ".mypy_cache",
    ".pytest_cache", ".ruff_cache", "build", "dist", "target", ".idea", ".vscode", "*.egg-info",
)
#: Extensions never taken as text documents (no file is opened to find out).
BINARY_EXTENSIONS = frozenset(
    ".png .jpg .jpeg .gif .bmp .ico .webp .pdf .zip .gz .bz2 .xz .zst .tar .7z .rar .so .dll .dylib .exe .bin "
    ".o .a .class .jar .pyc .pyo .whl .mp3 .mp4 .wav .ogg .flac .mov .avi .ttf .otf .woff .woff2 .sqlite .db "
    ".gguf .npy .npz .pt .onnx .parquet".split()
)


def chunk_size(unit: str, size: int | None = None) -> int:
    """``size``, or the default of ``unit``; ContextError for an unknown unit or a size below 1."""
    if unit not in CHUNK_UNITS:
        raise ContextError(f"unit must be one of {', '.join(CHUNK_UNITS)}")
    size = DEFAULT_CHUNK_SIZE[unit] if size is None else int(size)
    if size < 1:
        raise ContextError("chunk size must be at least 1")
    return size


# -------------------------------------------------------------- what handles hand out


@dataclass
class AccessStats:
    """How a handle was read: counts per operation and characters handed out."""

    peeks: int = 0
    greps: int = 0
    chunks: int = 0
    slices: int = 0
    lines: int = 0
    full_loads: int = 0
    records: int = 0
    chars_returned: int = 0
    log: deque[tuple[float, str, str]] = field(default_factory=lambda: deque(maxlen=ACCESS_LOG_SIZE))

    def record(self, op: str, detail: str, chars: int) -> None:
        setattr(self, op, getattr(self, op) + 1)
        self.chars_returned += chars
        self.log.append((time.time(), op, detail))

    @property
    def load_to_peek_ratio(self) -> float:
        """Full loads per probing access (peek, grep, chunk, slice, lines); 0 is ideal."""
        probes = self.peeks + self.greps + self.chunks + self.slices + self.lines
        return self.full_loads / probes if probes else float(self.full_loads)

    def to_dict(self) -> dict[str, Any]:
        return {
            "peeks": self.peeks, "greps": self.greps, "chunks": self.chunks, "slices": self.slices,
            "lines": self.lines, "full_loads": self.full_loads, "records": self.records, "chars_returned": self.chars_returned,
            "load_to_peek_ratio": self.load_to_peek_ratio,
            "log": [{"t": t, "op": op, "detail": d} for t, op, d in self.log],
        }


class Chunk(str):
    """A chunk's text (it is a str) plus where it sits: ``index``, ``total``, ``prev``, ``next``."""

    index: int  # type: ignore[assignment]  # shadows str.index on purpose: the chunk number
    total: int
    unit: str
    size: int
    prev: int | None
    next: int | None

    def __new__(cls, text: str, index: int, total: int, unit: str, size: int) -> Chunk:
        self = super().__new__(cls, text)
        self.index, self.total, self.unit, self.size = index, total, unit, size
        self.prev = index - 1 if index > 0 else None
        self.next = index + 1 if index + 1 < total else None
        return self

    @property
    def nav(self) -> str:
        return f"[chunk {self.index} of {self.total} (0-based), {self.size} {self.unit} each; prev={self.prev} next={self.next}]"

    def __repr__(self) -> str:
        # Echoed at the REPL, a chunk reads as text under its navigation line, not as an
        # escaped one-line literal a small model struggles with.
        return f"{self.nav}\n{str.__str__(self)}"


class Text(str):
    """A str that echoes as itself at the REPL (peek's result)."""

    def __repr__(self) -> str:
        return str.__str__(self)


@dataclass
class Decision:
    """A probe's verdict: ``action`` is load | excerpt | skip, with the reason and the thresholds."""

    action: str
    reason: str
    thresholds: dict[str, Any]


# ------------------------------------------------------------------- the protocols


@runtime_checkable
class ProbeReport(Protocol):
    """What ``probe()`` returns (``FileProbe`` for one text, ``FolderProbe`` for a corpus)."""

    name: str
    decision: Decision

    def summary(self, brief: bool = False) -> str:
        """A few lines for a person, or (``brief``) for a model's first prompt."""

    def to_dict(self) -> dict[str, Any]:
        """Plain data that json can dump."""


@runtime_checkable
class ContextHandle(Protocol):
    """A read-only view of a context of any size: explore it without loading it.

    Contract (reads are counted in ``stats``; every method raises ``ContextError``, an
    ``RLMError``, for anything the caller can fix: a bad pattern, an index out of range):

    * ``name`` (display name), ``kind`` ("text", "file", "lazy", "corpus", ...), ``stats``
      (``AccessStats``: counts per operation and a bounded log).
    * ``len(h)``: characters of a text. A corpus is also a sequence of its documents
      (``corpus[i]``, ``for doc in corpus``), so its ``len`` counts documents; ``n_bytes``
      and ``n_tokens`` measure every handle alike.
    * ``peek(n)``: the first ``n`` characters with a size hint (a corpus: its inventory).
    * ``grep(pattern, context_lines=0, max_matches=100, ignore_case=False) -> GrepResult``:
      lines matching an RE2 pattern, with 1-based line numbers (in a corpus each match names
      its document, and documents marked skipped are left out unless asked).
    * ``count(pattern, ignore_case=False) -> int``: how many lines match.
    * ``records() -> Records``: the text as records (dicts of fields; ``context/records.py``),
      in a corpus each document's, naming it.
    * ``lines(first, last=None) -> list[str]``: 1-based inclusive lines. A corpus numbers
      lines per document, as its grep does: it takes the document as ``doc=`` unless it
      searches only one.
    * ``chunk(i, size=None, unit="lines") -> Chunk``: page ``i`` (0-based) of ``size``
      lines, chars or tokens (``DEFAULT_CHUNK_SIZE`` when None), with navigation info;
      ``n_chunks(size=None, unit="lines")`` pages in all; ``chunks(...)`` iterates them.
    * ``n_tokens -> TokenCount`` (a property, cached): exact or a sampled estimate with its
      error bound; a corpus sums its documents'.
    * ``n_bytes`` (a property): the size in bytes.
    * ``get_full() -> str``: the whole text (warns above ``LARGE_FULL_LOAD`` bytes).
    * ``probe(config=None) -> ProbeReport``: shape, structure and a load / excerpt / skip
      decision under ``ProbeConfig``; reads a bounded amount.

    Handles are opened on the host; a sandbox worker rebuilds them from descriptors
    (``rlm_runtime.sandbox.contexts``) and they keep this contract there.
    """

    name: str
    kind: str
    stats: AccessStats

    def __len__(self) -> int: ...

    def peek(self, n: int = DEFAULT_PEEK_CHARS) -> str: ...

    def grep(self, pattern: str, context_lines: int = 0, max_matches: int = DEFAULT_MAX_MATCHES,
             ignore_case: bool = False) -> GrepResult: ...

    def count(self, pattern: str, ignore_case: bool = False) -> int: ...

    def records(self) -> Any: ...

    def lines(self, first: int | None = None, last: int | None = None) -> list[str]: ...

    def chunk(self, i: int, size: int | None = None, unit: str = "lines") -> Chunk: ...

    def n_chunks(self, size: int | None = None, unit: str = "lines") -> int: ...

    def chunks(self, size: int | None = None, unit: str = "lines") -> Iterator[Chunk]: ...

    def get_full(self) -> str: ...

    def probe(self, config: ProbeConfig | None = None) -> ProbeReport: ...

    # Declared for type checkers only: on Python 3.11, isinstance() against a runtime
    # protocol calls hasattr() on every member, which would run these properties (a token
    # count over the whole text, the load of a lazy handle) just to answer isinstance.
    if TYPE_CHECKING:
        @property
        def n_tokens(self) -> TokenCount: ...

        @property
        def n_bytes(self) -> int: ...
