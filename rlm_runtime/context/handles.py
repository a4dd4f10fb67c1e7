"""Handles backed by one text: a read-only, string-like view of a context of any size.

Kinds: ``TextHandle`` (a str in memory), ``FileHandle`` (a read-only mmap: a 10 GB file
costs page cache, not heap) and ``LazyHandle`` (produced by a loader on first use, cached
under a memory budget). All three are ``BufferHandle``s: the text is one ``TextBuffer``.
``CorpusHandle`` (corpus.py) holds many of them. Every handle keeps the ``ContextHandle``
protocol (protocol.py). The same objects serve the host (Python API, CLI) and the sandbox,
where they are opened before lock-down and read nothing else.

Every handle counts its accesses and keeps a bounded log of them, so a run can report how
the model explored its context.
"""

from __future__ import annotations

import abc
import codecs
import mmap
import os
import stat
import tempfile
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rlm_runtime.context import grep as _grep
from rlm_runtime.context import records as _records
from rlm_runtime.context import tokens as _tokens
from rlm_runtime.context.buffer import TextBuffer, looks_binary, wide_encoding
from rlm_runtime.context.probe import FileProbe, probe_text
from rlm_runtime.context.protocol import (
    BINARY_SNIFF_BYTES,
    DEFAULT_MAX_MATCHES,
    DEFAULT_PEEK_CHARS,
    LARGE_FULL_LOAD,
    AccessStats,
    Chunk,
    Text,
    chunk_size,
)
from rlm_runtime.context.settings import ProbeConfig
from rlm_runtime.errors import ContextError

#: The most lines one ``lines()`` call returns (a list of them is held in memory at once).
MAX_LINES_AT_ONCE = 100_000


def line_number(value: Any) -> int | None:
    """A line number as small models pass one: an int, a grep match (its line), or the text
    of a number (``hit.split(":")[0]``)."""
    if value is None or isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, _grep.GrepMatch):
        return value.line_no
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    raise TypeError(f"a line number must be an int, not {type(value).__name__} {str(value)[:40]!r}")

__all__ = ["BufferHandle", "FileHandle", "LazyCache", "LazyHandle", "SliceHandle", "TextHandle"]


class BufferHandle(abc.ABC):
    """A handle backed by one TextBuffer. Subclasses provide ``_buffer()``."""

    kind = "context"

    def __init__(self, name: str) -> None:
        self.name = name
        self.stats = AccessStats()
        self._replacement_reported = False
        self._records: _records.Records | None = None  # parsed once; each call hands out a copy

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

    def lines(self, first: int | None = None, last: int | None = None) -> list[str]:
        """Lines ``first``..``last`` (1-based, inclusive; one line when ``last`` is None, every
        line when both are: ``lines()``, as small models write to loop over the text)."""
        first, last = line_number(first), line_number(last)
        if first is None:
            first, last = 1, (self.n_lines if last is None else last)
        last = first if last is None else last
        if last - first > MAX_LINES_AT_ONCE:
            raise ContextError(f"lines(): at most {MAX_LINES_AT_ONCE} lines at a time (the text has {self.n_lines}); "
                               "use chunk() to page, `for line in context:` to loop, or grep() to find")
        out = self._buf().lines(first, last)
        self.stats.record("lines", f"{first}-{last}", sum(map(len, out)))
        return out

    # ------------------------------------------------------------------ probing

    def peek(self, n: int = DEFAULT_PEEK_CHARS) -> str:
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

    def grep(self, pattern: str, context_lines: int = 0, max_matches: int = DEFAULT_MAX_MATCHES,
             ignore_case: bool = False) -> _grep.GrepResult:
        """Lines matching an RE2 ``pattern``, with 1-based line numbers."""
        result = _grep.grep_buffer(self._buf(), pattern, context_lines=context_lines, max_matches=max_matches,
                                   ignore_case=ignore_case)
        self.stats.record("greps", pattern, sum(len(m.line) for m in result))
        return result

    def records(self, template: str | None = None, pattern: str | None = None) -> _records.Records:
        """The text as records (fields as data; see ``context/records.py``), parsed once. With
        a ``template`` (``'ID - TITLE (GROUP)'``) or a ``pattern`` with named groups, the lines
        read by that form; a form reading at least ``records.GATE`` of the lines is kept, and
        later calls without one read the text the same way."""
        if template is not None or pattern is not None:
            lines = self._text_for_records().split("\n")
            parsed = _records.parse(lines, _records.stated(lines, template=template, pattern=pattern))
            if (parsed.coverage or 0.0) >= _records.GATE:
                self._records = parsed
            out = parsed.fresh()
            self.stats.record("records", f"{len(out)} {out.shape}", 0)
            return out
        out = self._parsed().fresh()
        self.stats.record("records", f"{len(out)} {out.shape}", 0)
        return out

    def _parsed(self) -> _records.Records:
        """The records, parsed on first use and kept (not counted as the model's reading)."""
        if self._records is None:
            self._records = _records.parse_text(self._text_for_records())
        return self._records

    def _text_for_records(self) -> str:
        buf = self._buf()
        if buf.nbytes > _records.MAX_PARSE_BYTES:
            raise ContextError(f"records(): {self.name} has {buf.nbytes} bytes, over the {_records.MAX_PARSE_BYTES} "
                               "records() reads at once; narrow it first: records(grep(...)) or records(chunk(i))")
        return buf.decode(0, buf.nbytes)

    def count(self, pattern: str, ignore_case: bool = False) -> int:
        """How many lines match ``pattern`` (like ``grep -c``)."""
        n = _grep.count_matching_lines(self._buf(), pattern, ignore_case)
        self.stats.record("greps", f"count {pattern}", 0)
        return n

    def chunk(self, i: int, size: int | None = None, unit: str = "lines") -> Chunk:
        """Chunk ``i`` (0-based) of ``size`` lines, characters or (approximately) tokens."""
        size = chunk_size(unit, size)
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

    def n_chunks(self, size: int | None = None, unit: str = "lines") -> int:
        """How many chunks of ``size`` ``unit`` the text makes (0 when it is empty)."""
        size = chunk_size(unit, size)
        buf = self._buf()
        if unit == "lines":
            return -(-buf.n_lines // size)
        if unit == "chars":
            return -(-buf.n_chars // size)
        return -(-buf.n_chars // self._chars_per_chunk(size))

    def chunks(self, size: int | None = None, unit: str = "lines") -> Iterator[Chunk]:
        size = chunk_size(unit, size)
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

    def probe(self, config: ProbeConfig | None = None) -> FileProbe:
        """Shape, structure and a load / excerpt / skip decision (see probe.py)."""
        return probe_text(self._buf(), name=self.name, kind=self.kind, path=getattr(self, "path", None),
                          tokens=self.n_tokens, config=config)


class TextHandle(BufferHandle):
    """A context held in memory as a str (encoded once to UTF-8 for RE2)."""

    kind = "text"

    def __init__(self, text: str, name: str = "text") -> None:
        super().__init__(name)
        self._data = TextBuffer(text.encode("utf-8", "surrogatepass"))

    def _buffer(self) -> TextBuffer:
        return self._data


class FileHandle(BufferHandle):
    """A file mapped read-only. Opened from a path or an already-open descriptor."""

    kind = "file"

    def __init__(self, path: str | os.PathLike[str] | None = None, *, fd: int | None = None, name: str | None = None,
                 keep: bool = False) -> None:
        """Args:
            path: the file to open (followed, as a person names it), or
            fd: a descriptor of it, opened by the caller (who checked what it opened);
                the caller closes ``fd``.
            keep: with ``fd``, keep a duplicate of it, so that the very file mapped is what
                goes to a worker (``descriptor``), never a path opened again.
        """
        if (path is None) == (fd is None):
            raise ValueError("give exactly one of path or fd")
        self.path = str(path) if path is not None else None
        super().__init__(name or (Path(self.path).name if self.path else f"fd{fd}"))
        self._kept: int | None = None
        if fd is None:
            assert self.path is not None
            try:
                # O_NONBLOCK: a FIFO at the path (put there after it was looked at) is refused
                # below as no regular file, instead of holding the opener until a writer comes.
                fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
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
            #: (device, inode) of the file mapped: what a later open of ``path`` must find
            #: to be the same file (``searching`` indexes a file by its path).
            self.identity = (st.st_dev, st.st_ino)
            if size:
                self._map: Any = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
                if hasattr(self._map, "madvise") and hasattr(mmap, "MADV_SEQUENTIAL"):
                    self._map.madvise(mmap.MADV_SEQUENTIAL)
            else:
                self._map = b""
        finally:
            if owned:
                os.close(fd)
        #: The file's own encoding when it was UTF-16 or UTF-32 (its text is then a UTF-8
        #: copy in an unnamed temporary file, not the file itself); None for UTF-8.
        self.transcoded: str | None = None
        wide = wide_encoding(bytes(self._map[:4]))
        if wide is not None:
            self._map, self.transcoded = _transcoded(self._map, *wide, name=self.name), wide[0]
        self._data = TextBuffer(self._map)
        if looks_binary(self._data.head_bytes(BINARY_SNIFF_BYTES)):
            self.close()
            raise ContextError(f"{self.name} looks like a binary file (NUL or control bytes); only text can be a context")
        if keep and not owned and self.transcoded is None:
            self._kept = os.dup(fd)

    def descriptor(self) -> int | None:
        """A new descriptor of the file mapped (the caller closes it), when the handle kept
        one (``keep``); None otherwise."""
        return None if self._kept is None else os.dup(self._kept)

    def _buffer(self) -> TextBuffer:
        # Reading a mapped page past the file's end kills the process (SIGBUS): a file cut
        # short since it was mapped (logrotate's copytruncate, `> file`) is refused instead.
        # mmap.size() is the file's size now (an fstat of the mapping's own descriptor).
        if self.transcoded is None and isinstance(self._map, mmap.mmap):
            try:
                now = self._map.size()
            except (OSError, ValueError):
                now = -1
            if now < len(self._map):
                raise ContextError(f"{self.name} was cut short after it was opened ({max(now, 0):,} of {len(self._map):,} "
                                   "bytes left): open it again")
        return self._data

    def close(self) -> None:
        self._data.release()
        if isinstance(self._map, mmap.mmap):
            self._map.close()
        kept, self._kept = self._kept, None
        if kept is not None:
            os.close(kept)


#: A UTF-16 or UTF-32 file is decoded into a UTF-8 copy up to this size (larger: convert it first).
MAX_TRANSCODED_BYTES = 1 << 30
_TRANSCODE_BLOCK = 1 << 22


def _transcoded(data: Any, encoding: str, bom: int, *, name: str) -> Any:
    """``data`` (a UTF-16/32 file's map, its mark ``bom`` bytes long) as a read-only map of its
    UTF-8 text, in an unnamed temporary file: block by block (linear, bounded memory), with
    what does not decode replaced. The original map is closed."""
    if len(data) > MAX_TRANSCODED_BYTES:
        raise ContextError(f"{name} is {encoding} text of {len(data):,} bytes, more than the "
                           f"{MAX_TRANSCODED_BYTES:,} decoded on the fly; convert it first: iconv -f {encoding} -t utf-8")
    decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
    with tempfile.TemporaryFile(prefix="rlm-utf8-") as out:
        for start in range(bom, len(data), _TRANSCODE_BLOCK):
            out.write(decoder.decode(data[start:start + _TRANSCODE_BLOCK]).encode("utf-8"))
        out.write(decoder.decode(b"", final=True).encode("utf-8"))
        out.flush()
        text: Any = mmap.mmap(out.fileno(), 0, access=mmap.ACCESS_READ) if out.tell() else b""
    if isinstance(data, mmap.mmap):
        data.close()
    return text


class SliceHandle(BufferHandle):
    """Text in a slice of a read-only buffer that another object keeps open: one document of
    a corpus whose in-memory texts crossed into the worker packed in one mapping."""

    kind = "text"

    def __init__(self, data: Any, name: str, start: int = 0, nbytes: int | None = None) -> None:
        super().__init__(name)
        self._data = TextBuffer(data, start, nbytes)

    def _buffer(self) -> TextBuffer:
        return self._data


class LazyHandle(BufferHandle):
    """Text produced by ``loader()`` on first use and cached; the cache is shared and bounded."""

    kind = "lazy"

    def __init__(self, loader: Callable[[], str], name: str = "lazy", cache: LazyCache | None = None) -> None:
        super().__init__(name)
        self._loader = loader
        self._cache = cache or DEFAULT_LAZY_CACHE

    def _buffer(self) -> TextBuffer:
        return self._cache.get(self, self._load)

    def invalidate(self) -> None:
        """Forget the loaded text: the next read calls the loader again (its source changed)."""
        self._cache.drop(self)
        self._records = None

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

    def set_budget(self, budget_bytes: int) -> None:
        """A new budget; texts past it go now, least recently read first (one always stays)."""
        self.budget = budget_bytes
        while self.used > self.budget and len(self._items) > 1:
            _, (_, old) = self._items.popitem(last=False)
            self.used -= old.nbytes

    def drop(self, handle: LazyHandle) -> None:
        """Forget ``handle``'s text (``LazyHandle.invalidate``)."""
        hit = self._items.get(id(handle))
        if hit is not None and hit[0] is handle:
            del self._items[id(handle)]
            self.used -= hit[1].nbytes

    def __contains__(self, handle: LazyHandle) -> bool:
        hit = self._items.get(id(handle))
        return hit is not None and hit[0] is handle


DEFAULT_LAZY_CACHE = LazyCache()
