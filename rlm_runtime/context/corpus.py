"""A corpus: many documents (a folder, a glob or a list), each with an id, a name and a handle.

Documents open lazily, so listing a folder of 10,000 files costs a directory walk, not
10,000 maps. grep and chunk span documents and say which document each line comes from.
"""

from __future__ import annotations

import fnmatch
import os
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlm_runtime.context import grep as _grep
from rlm_runtime.context.handles import _DEFAULT_CHUNK, AccessStats, Chunk, ContextHandle, FileHandle, Text, TextHandle
from rlm_runtime.errors import ContextError

DEFAULT_EXCLUDES = (
    ".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".tox", ".mypy_cache",
    ".pytest_cache", ".ruff_cache", "build", "dist", "target", ".idea", ".vscode", "*.egg-info",
)
BINARY_EXTENSIONS = frozenset(
    ".png .jpg .jpeg .gif .bmp .ico .webp .pdf .zip .gz .bz2 .xz .zst .tar .7z .rar .so .dll .dylib .exe .bin "
    ".o .a .class .jar .pyc .pyo .whl .mp3 .mp4 .wav .ogg .flac .mov .avi .ttf .otf .woff .woff2 .sqlite .db "
    ".gguf .npy .npz .pt .onnx .parquet".split()
)


@dataclass
class Document:
    """One document of a corpus. ``handle`` opens it on first use."""

    id: int
    name: str
    path: str | None = None
    size: int = 0
    _handle: ContextHandle | None = field(default=None, repr=False)
    _fd: int | None = field(default=None, repr=False)

    @property
    def handle(self) -> ContextHandle:
        if self._handle is None:
            if self._fd is not None:
                self._handle = FileHandle(fd=self._fd, name=self.name)
            elif self.path is not None:
                self._handle = FileHandle(self.path, name=self.name)
            else:
                raise ContextError(f"document {self.name} has no content")
        return self._handle

    def __repr__(self) -> str:
        return f"<document {self.id}: {self.name} ({self.size} bytes)>"


def walk_folder(root: str | Path, *, extensions: Sequence[str] | None = None, max_depth: int | None = None,
                excludes: Sequence[str] = DEFAULT_EXCLUDES, pattern: str | None = None) -> list[tuple[str, int]]:
    """(relative path, size) of the text candidates under ``root``, sorted, binaries excluded."""
    root = Path(root)
    if not root.is_dir():
        raise ContextError(f"context folder not found: {root}")
    exts = {(e if e.startswith(".") else f".{e}").lower() for e in extensions} if extensions else None
    found: list[tuple[str, int]] = []
    stack = [(str(root), 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if any(fnmatch.fnmatch(entry.name, ex) for ex in excludes):
                continue
            if entry.is_dir(follow_symlinks=False):
                if max_depth is None or depth < max_depth:
                    stack.append((entry.path, depth + 1))
            elif entry.is_file(follow_symlinks=False):
                ext = os.path.splitext(entry.name)[1].lower()
                if ext in BINARY_EXTENSIONS or (exts is not None and ext not in exts):
                    continue
                rel = os.path.relpath(entry.path, root)
                if pattern and not fnmatch.fnmatch(rel, pattern):
                    continue
                found.append((rel, entry.stat(follow_symlinks=False).st_size))
    found.sort()
    return found


class CorpusHandle:
    """Documents addressed by index or name; grep and chunk run across all of them."""

    kind = "corpus"

    def __init__(self, documents: list[Document], name: str = "corpus", root: str | None = None) -> None:
        self.name = name
        self.root = root
        self.documents = documents
        self.stats = AccessStats()
        self._by_name = {d.name: d for d in documents}

    # ------------------------------------------------------------ construction

    @classmethod
    def from_folder(cls, root: str | Path, **walk: Any) -> CorpusHandle:
        files = walk_folder(root, **walk)
        docs = [Document(i, rel, str(Path(root) / rel), size) for i, (rel, size) in enumerate(files)]
        return cls(docs, name=Path(root).name or str(root), root=str(root))

    @classmethod
    def from_glob(cls, pattern: str) -> CorpusHandle:
        import glob

        paths = sorted(p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p))
        if not paths:
            raise ContextError(f"no files match {pattern}")
        docs = [Document(i, p, p, os.path.getsize(p)) for i, p in enumerate(paths)]
        return cls(docs, name=pattern)

    @classmethod
    def from_items(cls, items: Sequence[Any]) -> CorpusHandle:
        """From a list of paths, strs (in-memory documents) or handles."""
        docs = []
        for i, item in enumerate(items):
            if isinstance(item, ContextHandle):
                docs.append(Document(i, item.name, None, item.n_bytes, _handle=item))
            elif isinstance(item, os.PathLike) or (isinstance(item, str) and os.path.isfile(item)):
                p = os.path.expanduser(str(item))
                if not os.path.isfile(p):
                    raise ContextError(f"context file not found: {p}")
                docs.append(Document(i, p, p, os.path.getsize(p)))
            elif isinstance(item, str):
                handle = TextHandle(item, name=f"doc{i}")
                docs.append(Document(i, handle.name, None, handle.n_bytes, _handle=handle))
            else:
                raise ContextError(f"cannot make a document of a {type(item).__name__}")
        return cls(docs, name="documents")

    # ----------------------------------------------------------- list-likeness

    def __len__(self) -> int:
        return len(self.documents)

    def __iter__(self) -> Iterator[Document]:
        return iter(self.documents)

    def __getitem__(self, key: int | str) -> ContextHandle:
        return self.doc(key)

    def doc(self, key: int | str) -> ContextHandle:
        """A document's handle, by index or by name."""
        if isinstance(key, int):
            if not -len(self.documents) <= key < len(self.documents):
                raise ContextError(f"document index {key} out of range: there are {len(self.documents)} documents")
            return self.documents[key].handle
        doc = self._by_name.get(key)
        if doc is None:
            import difflib

            close = [n for n in self._by_name if key.lower() in n.lower()][:5]
            close += [n for n in difflib.get_close_matches(key, list(self._by_name), n=5) if n not in close]
            raise ContextError(f"no document named {key!r}" + (f"; similar: {', '.join(close)}" if close else ""))
        return doc.handle

    @property
    def n_bytes(self) -> int:
        return sum(d.size for d in self.documents)

    def names(self) -> list[str]:
        return [d.name for d in self.documents]

    def __repr__(self) -> str:
        return f"<corpus {self.name!r}: {len(self.documents)} documents, {self.n_bytes} bytes; use peek(), grep(), doc(i)>"

    __str__ = __repr__

    # ------------------------------------------------------------------ probing

    def peek(self, n: int = 2000) -> str:
        """An inventory: how many documents, and the first ones with their sizes."""
        rows = [f"corpus {self.name}: {len(self.documents)} documents, {self.n_bytes} bytes (~{self.n_bytes // 4} tokens)"]
        for d in self.documents:
            row = f"  [{d.id}] {d.name} ({d.size} bytes)"
            if sum(map(len, rows)) + len(row) > n:
                rows.append(f"  ... {len(self.documents) - d.id} more; corpus.names() lists them all")
                break
            rows.append(row)
        text = Text("\n".join(rows))
        self.stats.record("peeks", str(n), len(text))
        return text

    def grep(self, pattern: str, context_lines: int = 0, max_matches: int = 100, ignore_case: bool = False) -> _grep.GrepResult:
        """Matching lines across documents; each match names its document."""
        _grep.compile_pattern(pattern, ignore_case)  # fail before opening anything
        found: list[_grep.GrepMatch] = []
        # One match more than asked tells whether the scan was complete.
        for handle, d in self._readable():
            res = _grep.grep_buffer(handle._buf(), pattern, context_lines=context_lines,
                                    max_matches=max_matches + 1 - len(found), ignore_case=ignore_case, doc=d.name)
            found.extend(res)
            if len(found) > max_matches:
                break
        complete = len(found) <= max_matches
        found = found[:max_matches]
        self.stats.record("greps", pattern, sum(len(m.line) for m in found))
        prober = None if found else (lambda p: self.count(p, True))
        return _grep.GrepResult(found, pattern, complete, lambda: self.count(pattern, ignore_case),
                                prober=prober, ignore_case=ignore_case)

    def _readable(self) -> Iterator[tuple[ContextHandle, Document]]:
        """Documents that open as text (binary or vanished files are skipped everywhere)."""
        for d in self.documents:
            try:
                yield d.handle, d
            except ContextError:
                continue

    def count(self, pattern: str, ignore_case: bool = False) -> int:
        return sum(handle.count(pattern, ignore_case) for handle, _ in self._readable())

    def chunk(self, i: int, size: int | None = None, unit: str = "lines") -> Chunk:
        """Chunk ``i`` of the documents taken in order; a chunk never spans two documents."""
        size = size or _DEFAULT_CHUNK.get(unit, 200)
        seen = 0
        for handle, d in self._readable():
            n = handle.n_chunks(size, unit) if handle.n_bytes else 0
            if i < seen + n:
                part = handle.chunk(i - seen, size, unit)
                self.stats.record("chunks", f"{i} ({d.name})", len(part))
                total = self.n_chunks(size, unit)
                return Chunk(f"[document {d.id}: {d.name}]\n{part}", i, total, unit, part.size)
            seen += n
        raise ContextError(f"chunk index {i} out of range: there are {seen} chunks")

    def n_chunks(self, size: int | None = None, unit: str = "lines") -> int:
        size = size or _DEFAULT_CHUNK.get(unit, 200)
        return sum(h.n_chunks(size, unit) for h, _ in self._readable() if h.n_bytes)

    def chunks(self, size: int | None = None, unit: str = "lines") -> Iterator[Chunk]:
        for i in range(self.n_chunks(size, unit)):
            yield self.chunk(i, size, unit)

    @property
    def n_tokens(self) -> int:
        return sum(h.n_tokens.value for h, _ in self._readable() if h.n_bytes)

    def get_full(self) -> str:
        if self.n_bytes > 1_000_000:
            warnings.warn(f"get_full() on corpus {self.name}: loading {self.n_bytes} bytes", stacklevel=2)
        self.stats.record("full_loads", "", self.n_bytes)
        return "\n\n".join(f"=== {d.name} ===\n{h.get_full()}" for h, d in self._readable())

    def probe(self) -> Any:
        from rlm_runtime.context.probe import probe_corpus

        return probe_corpus(self)
