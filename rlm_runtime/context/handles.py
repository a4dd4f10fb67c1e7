"""Context handles: a read-only, string-like view of a context of any size.

Kinds: ``TextHandle`` (a str in memory), ``FileHandle`` (a read-only mmap: a 10 GB file
costs page cache, not heap), ``LazyHandle`` (produced by a loader on first use, cached under
a memory budget) and ``CorpusHandle`` (many documents, each with an id, a name and its own
handle). The same objects serve the host (Python API, CLI) and the sandbox, where they are
opened before lock-down and read nothing else.

Every handle counts its accesses and keeps a bounded log of them, so a run can report how
the model explored its context.
"""

from __future__ import annotations

import abc
import mmap
import os
import stat
import time
import warnings
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlm_runtime.context import grep as _grep
from rlm_runtime.context import tokens as _tokens
from rlm_runtime.context.buffer import TextBuffer
from rlm_runtime.errors import ContextError

LARGE_FULL_LOAD = 1_000_000  # characters; get_full() warns above this
ACCESS_LOG_SIZE = 256
_UNITS = ("lines", "chars", "tokens")
_DEFAULT_CHUNK = {"lines": 200, "chars": 8000, "tokens": 2000}


@dataclass
class AccessStats:
    """How a handle was read: counts per operation and characters handed out."""

    peeks: int = 0
    greps: int = 0
    chunks: int = 0
    slices: int = 0
    lines: int = 0
    full_loads: int = 0
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
            "lines": self.lines, "full_loads": self.full_loads, "chars_returned": self.chars_returned,
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


class ContextHandle(abc.ABC):
    """Base of every single-text handle. Subclasses provide ``_buffer()``."""

    kind = "context"

    def __init__(self, name: str) -> None:
        self.name = name
        self.stats = AccessStats()
        self._replacement_reported = False

    # ------------------------------------------------------------- subclass hook

    @abc.abstractmethod
    def _buffer(self) -> TextBuffer:
        """The handle's text as a TextBuffer (loaded or mapped on first call)."""

    def _buf(self) -> TextBuffer:
        buf = self._buffer()
        if buf.on_invalid is None:
            buf.on_invalid = self._report_invalid
            if buf.invalid_utf8:
                self._report_invalid()
        return buf

    def _report_invalid(self) -> None:
        if not self._replacement_reported:
            self._replacement_reported = True
            warnings.warn(f"{self.name}: invalid UTF-8 was decoded with replacement characters", stacklevel=4)

    # ----------------------------------------------------------- string-likeness

    def __len__(self) -> int:
        return self._buf().n_chars

    @property
    def n_bytes(self) -> int:
        return self._buf().nbytes

    @property
    def n_lines(self) -> int:
        return self._buf().n_lines

    def __getitem__(self, key: int | slice) -> str:
        buf = self._buf()
        if isinstance(key, slice):
            if key.step not in (None, 1):
                raise ContextError("context slices take no step")
            start, stop, _ = key.indices(buf.n_chars)
            text = buf.slice(start, stop)
            self.stats.record("slices", f"[{start}:{stop}]", len(text))
            return text
        if not isinstance(key, int):
            raise TypeError("context indices must be int or slice")
        n = buf.n_chars
        i = key + n if key < 0 else key
        if not 0 <= i < n:
            raise IndexError("context index out of range")
        return buf.slice(i, i + 1)

    def __iter__(self) -> Iterator[str]:
        return self._buf().iter_lines()

    def __repr__(self) -> str:
        return f"<{self.kind} context {self.name!r}: {self.n_bytes} bytes; use peek(), grep(), chunk()>"

    __str__ = __repr__

    def lines(self, first: int, last: int | None = None) -> list[str]:
        """Lines ``first``..``last`` (1-based, inclusive; one line when ``last`` is None)."""
        last = first if last is None else last
        if last - first > 100_000:
            raise ContextError("lines(): at most 100000 lines at a time; use chunk() to page")
        out = self._buf().lines(first, last)
        self.stats.record("lines", f"{first}-{last}", sum(map(len, out)))
        return out

    # ------------------------------------------------------------------ probing

    def peek(self, n: int = 2000) -> str:
        """The first ``n`` characters, then a line saying how much is left."""
        buf = self._buf()
        n = max(0, int(n))
        text = buf.decode(0, min(buf.nbytes, 4 * n + 4)) if n else ""
        text = text[:n]
        left = max(buf.nbytes - len(text.encode("utf-8")), 0)
        self.stats.record("peeks", str(n), len(text))
        if left:
            return Text(f"{text}\n... [{left} more bytes of {buf.nbytes}, ~{buf.nbytes // 4} tokens in all]")
        return Text(text)

    def grep(self, pattern: str, context_lines: int = 0, max_matches: int = 100, ignore_case: bool = False) -> _grep.GrepResult:
        """Lines matching an RE2 ``pattern``, with 1-based line numbers."""
        result = _grep.grep_buffer(self._buf(), pattern, context_lines=context_lines, max_matches=max_matches,
                                   ignore_case=ignore_case)
        self.stats.record("greps", pattern, sum(len(m.line) for m in result))
        return result

    def count(self, pattern: str, ignore_case: bool = False) -> int:
        """How many lines match ``pattern`` (like ``grep -c``)."""
        n = _grep.count_matching_lines(self._buf(), pattern, ignore_case)
        self.stats.record("greps", f"count {pattern}", 0)
        return n

    def chunk(self, i: int, size: int | None = None, unit: str = "lines") -> Chunk:
        """Chunk ``i`` (0-based) of ``size`` lines, characters or (approximately) tokens."""
        if unit not in _UNITS:
            raise ContextError(f"unit must be one of {', '.join(_UNITS)}")
        size = _DEFAULT_CHUNK[unit] if size is None else int(size)
        if size < 1:
            raise ContextError("chunk size must be at least 1")
        buf = self._buf()
        total = self.n_chunks(size, unit)
        if not 0 <= i < max(total, 1):
            raise ContextError(f"chunk index {i} out of range: there are {total} chunks of {size} {unit}")
        if unit == "lines":
            text = "\n".join(buf.lines(i * size + 1, (i + 1) * size))
        elif unit == "chars":
            text = buf.slice(i * size, (i + 1) * size)
        else:
            per = self._chars_per_chunk(size)
            text = buf.slice(i * per, (i + 1) * per)
        self.stats.record("chunks", f"{i}/{size} {unit}", len(text))
        return Chunk(text, i, max(total, 1), unit, size)

    def n_chunks(self, size: int, unit: str = "lines") -> int:
        buf = self._buf()
        if unit == "lines":
            return -(-buf.n_lines // size)
        if unit == "chars":
            return -(-buf.n_chars // size)
        return -(-buf.n_chars // self._chars_per_chunk(size))

    def chunks(self, size: int | None = None, unit: str = "lines") -> Iterator[Chunk]:
        size = _DEFAULT_CHUNK[unit] if size is None else size
        for i in range(self.n_chunks(size, unit)):
            yield self.chunk(i, size, unit)

    def _chars_per_chunk(self, tokens: int) -> int:
        count = self.n_tokens
        ratio = len(self) / max(count.value, 1)
        return max(int(tokens * ratio), 1)

    @property
    def n_tokens(self) -> _tokens.TokenCount:
        cached = getattr(self, "_token_count", None)
        if cached is None:
            cached = _tokens.count_buffer(self._buf())
            self._token_count = cached
        return cached

    def get_full(self) -> str:
        """The whole text. Warns when large: prefer peek, grep and chunk."""
        buf = self._buf()
        if buf.nbytes > LARGE_FULL_LOAD:
            warnings.warn(f"get_full() on {self.name}: loading {buf.nbytes} bytes; prefer peek(), grep() or chunk()",
                          stacklevel=2)
        text = buf.decode(0, buf.nbytes)
        self.stats.record("full_loads", "", len(text))
        return text

    def probe(self) -> Any:
        from rlm_runtime.context.probe import probe_handle

        return probe_handle(self)


class TextHandle(ContextHandle):
    """A context held in memory as a str (encoded once to UTF-8 for RE2)."""

    kind = "text"

    def __init__(self, text: str, name: str = "text") -> None:
        super().__init__(name)
        self._data = TextBuffer(text.encode("utf-8", "surrogatepass"))

    def _buffer(self) -> TextBuffer:
        return self._data


def _looks_binary(head: bytes) -> bool:
    if b"\x00" in head:
        return True
    if not head:
        return False
    control = sum(1 for b in head if b < 9 or 13 < b < 32)
    return control / len(head) > 0.1


class FileHandle(ContextHandle):
    """A file mapped read-only. Opened from a path or an already-open descriptor."""

    kind = "file"

    def __init__(self, path: str | os.PathLike[str] | None = None, *, fd: int | None = None, name: str | None = None) -> None:
        if (path is None) == (fd is None):
            raise ValueError("give exactly one of path or fd")
        self.path = str(path) if path is not None else None
        super().__init__(name or (Path(self.path).name if self.path else f"fd{fd}"))
        if fd is None:
            assert self.path is not None
            try:
                fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError as e:
                raise ContextError(f"context file not found: {self.path}") from e
            except IsADirectoryError as e:
                raise ContextError(f"{self.path} is a folder; open it as a corpus") from e
            except OSError as e:
                raise ContextError(f"cannot open context file {self.path}: {e.strerror}") from e
            owned = True
        else:
            owned = False
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise ContextError(f"{self.name} is not a regular file" + (" (a folder: open it as a corpus)"
                                                                           if stat.S_ISDIR(st.st_mode) else ""))
            size = st.st_size
            if size:
                self._map: Any = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
                if hasattr(self._map, "madvise") and hasattr(mmap, "MADV_SEQUENTIAL"):
                    self._map.madvise(mmap.MADV_SEQUENTIAL)
            else:
                self._map = b""
        finally:
            if owned:
                os.close(fd)
        self._data = TextBuffer(self._map)
        if _looks_binary(self._data.head_bytes(8192)):
            self.close()
            raise ContextError(f"{self.name} looks like a binary file (NUL or control bytes); only text can be a context")

    def _buffer(self) -> TextBuffer:
        return self._data

    def close(self) -> None:
        self._data.release()
        if isinstance(self._map, mmap.mmap):
            self._map.close()


class LazyHandle(ContextHandle):
    """Text produced by ``loader()`` on first use and cached; the cache is shared and bounded."""

    kind = "lazy"

    def __init__(self, loader: Callable[[], str], name: str = "lazy", cache: LazyCache | None = None) -> None:
        super().__init__(name)
        self._loader = loader
        self._cache = cache or DEFAULT_LAZY_CACHE

    def _buffer(self) -> TextBuffer:
        return self._cache.get(self, self._load)

    def _load(self) -> TextBuffer:
        text = self._loader()
        if not isinstance(text, str):
            raise ContextError(f"loader of {self.name} returned {type(text).__name__}, not str")
        return TextBuffer(text.encode("utf-8", "surrogatepass"))


class LazyCache:
    """LRU cache of loaded lazy contexts under a byte budget."""

    def __init__(self, budget_bytes: int = 256 * 1024 * 1024) -> None:
        self.budget = budget_bytes
        self.used = 0
        self.loads = 0
        self._items: OrderedDict[int, tuple[LazyHandle, TextBuffer]] = OrderedDict()

    def get(self, handle: LazyHandle, load: Callable[[], TextBuffer]) -> TextBuffer:
        key = id(handle)
        hit = self._items.get(key)
        if hit is not None and hit[0] is handle:
            self._items.move_to_end(key)
            return hit[1]
        buf = load()
        self.loads += 1
        self._items[key] = (handle, buf)
        self.used += buf.nbytes
        while self.used > self.budget and len(self._items) > 1:
            _, (_, old) = self._items.popitem(last=False)
            self.used -= old.nbytes
        return buf

    def __contains__(self, handle: LazyHandle) -> bool:
        hit = self._items.get(id(handle))
        return hit is not None and hit[0] is handle


DEFAULT_LAZY_CACHE = LazyCache()
