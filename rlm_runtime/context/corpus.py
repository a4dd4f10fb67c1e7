"""A corpus: many documents (a folder, a glob or a list), each with an id, a name and a handle.

Documents open lazily, so listing a folder of 10,000 files costs a directory walk, not
10,000 maps. grep and chunk span documents and say which document each line comes from.

A document can be marked skipped (``mark_skipped``, done by ``describe`` from a probe's
verdict; or found binary or unreadable when opened): it stays listed (``names()``, ``peek``,
``repr``), and grep, count, chunks and get_full leave it out unless called with
``include_skipped=True``. The marks travel to a sandbox worker with the corpus.
"""

from __future__ import annotations

import difflib
import errno
import fnmatch
import glob
import os
import stat
import warnings
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlm_runtime.context import grep as _grep
from rlm_runtime.context import records as _records
from rlm_runtime.context import tokens as _tokens
from rlm_runtime.context.beneath import Root, open_beneath, walk_beneath
from rlm_runtime.context.buffer import TextBuffer, looks_binary, wide_encoding
from rlm_runtime.context.handles import BufferHandle, FileHandle, TextHandle, line_number
from rlm_runtime.context.probe import FolderProbe, probe_corpus
from rlm_runtime.context.protocol import (
    BINARY_EXTENSIONS,
    BINARY_SNIFF_BYTES,
    DEFAULT_EXCLUDES,
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
from rlm_runtime.quoting import quoted

__all__ = ["BINARY_EXTENSIONS", "DEFAULT_EXCLUDES", "CorpusHandle", "Document", "walk_folder"]


@dataclass
class Document:
    """One document of a corpus. ``handle`` opens it on first use.

    ``skip`` is why the document is left out of searches by default (None: searched).
    """

    id: int
    name: str
    path: str | None = None
    size: int = 0
    skip: str | None = None
    _handle: BufferHandle | None = field(default=None, repr=False)
    _fd: int | None = field(default=None, repr=False)
    #: The folder whose walk listed the document (its name is then its path under it). The
    #: walk takes regular files and real folders only: a symlink found on the way later, at
    #: any component, was put there since (to reach a file outside the folder), and is not
    #: followed (``beneath.open_beneath``).
    folder: Root | None = field(default=None, repr=False)

    def close(self) -> None:
        """Unmap a document mapped from its path (it is mapped again on next use); one held
        by a descriptor or in memory stays."""
        if self._handle is not None and self._fd is None and self.path is not None:
            handle, self._handle = self._handle, None
            close = getattr(handle, "close", None)
            if close is not None:
                close()

    def open_fd(self) -> int:
        """A read-only descriptor of the document's file (OSError if it cannot be opened;
        for a walked document, ELOOP when a component of its path became a symlink and
        EINVAL when it is no longer a regular file)."""
        if self.folder is not None:
            return open_beneath(self.folder, self.name)
        assert self.path is not None
        return os.open(self.path, os.O_RDONLY)

    def _open(self) -> FileHandle:
        """The document's file mapped, through ``open_fd``."""
        try:
            fd = self.open_fd()
        except OSError as e:
            raise ContextError(f"cannot open document {quoted(self.name)}: {e.strerror}") from e
        try:
            return FileHandle(fd=fd, name=self.name)
        finally:
            os.close(fd)

    @property
    def handle(self) -> BufferHandle:
        if self._handle is None:
            if self._fd is not None:
                self._handle = FileHandle(fd=self._fd, name=self.name)
            elif self.path is not None:
                self._handle = self._open()
            else:
                raise ContextError(f"document {quoted(self.name)} cannot be read: {self.skip or 'it has no content'}")
        return self._handle

    def check(self) -> str | None:
        """Why the document cannot be searched (empty, binary content, unreadable), or None.

        Reads at most the first ``BINARY_SNIFF_BYTES`` and keeps nothing open.
        """
        if self._handle is not None:
            try:
                return None if self._handle.n_bytes else "empty"
            except ContextError as e:  # a lazy document whose loader failed
                return f"unreadable: {e}"
        if self.path is None:
            return None if self._fd is not None else (self.skip or "no content")
        try:
            fd = self.open_fd()
        except OSError as e:
            return f"unreadable: {e.strerror}"
        try:
            head = os.pread(fd, BINARY_SNIFF_BYTES, 0)
        except OSError as e:  # a folder by now, or an I/O error
            return f"unreadable: {e.strerror}"
        finally:
            os.close(fd)
        if not head:
            return "empty"
        return "binary content" if looks_binary(head) and wide_encoding(head) is None else None

    @contextmanager
    def read(self) -> Iterator[TextBuffer]:
        """The text for the length of a ``with`` block. A document not open yet is mapped and
        closed again after, so a probe of 10,000 files does not hold 10,000 maps (each keeps a
        file descriptor)."""
        if self._handle is not None or self.path is None:
            yield self.handle._buf()
            return
        handle = self._open()
        try:
            yield handle._buf()
        finally:
            handle.close()

    def __repr__(self) -> str:
        skipped = f", skipped: {self.skip}" if self.skip else ""
        return f"<document {self.id}: {self.name} ({self.size} bytes{skipped})>"


def walk_folder(root: str | Path | Root, *, extensions: Sequence[str] | None = None, max_depth: int | None = None,
                excludes: Sequence[str] = DEFAULT_EXCLUDES, pattern: str | None = None) -> list[tuple[str, int]]:
    """(relative path, size) of the text candidates under ``root``, sorted, binaries excluded.

    Regular files only, and never through a symlinked folder (``beneath.walk_beneath``)."""
    folder = root if isinstance(root, Root) else _root(root)
    exts = {(e if e.startswith(".") else f".{e}").lower() for e in extensions} if extensions else None

    def excluded(rel: str) -> bool:
        name = os.path.basename(rel)
        return any(fnmatch.fnmatch(name, ex) for ex in excludes)

    def enter(rel: str, depth: int) -> bool:
        return not excluded(rel) and (max_depth is None or depth <= max_depth)

    found: list[tuple[str, int]] = []
    try:
        for rel, st in walk_beneath(folder, enter):
            if not stat.S_ISREG(st.st_mode) or excluded(rel):
                continue
            ext = os.path.splitext(rel)[1].lower()
            if ext in BINARY_EXTENSIONS or (exts is not None and ext not in exts):
                continue
            if pattern and not fnmatch.fnmatch(rel, pattern):
                continue
            found.append((rel, st.st_size))
    except OSError as e:
        raise ContextError(f"cannot read context folder {folder.path}: {e.strerror or e}") from e
    found.sort()
    return found


def _root(path: str | Path) -> Root:
    """The folder at ``path``, to walk and open documents under."""
    try:
        return Root.of(path)
    except OSError as e:
        raise ContextError(f"context folder not found: {path}") from e


class CorpusHandle:
    """Documents addressed by index or name; grep and chunk run across all of them.

    A corpus is a sequence of documents: ``len(corpus)`` counts them, ``corpus[i]`` and
    ``corpus['name']`` are their handles, iteration yields ``Document``s.
    """

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
        folder = _root(root)
        files = walk_folder(folder, **walk)
        docs = [Document(i, rel, str(Path(root) / rel), size, folder=folder) for i, (rel, size) in enumerate(files)]
        return cls(docs, name=Path(root).name or str(root), root=str(root))

    @classmethod
    def from_glob(cls, pattern: str) -> CorpusHandle:
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
            if isinstance(item, BufferHandle):
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

    def __getitem__(self, key: int | str) -> BufferHandle:
        return self.doc(key)

    def doc(self, key: int | str) -> BufferHandle:
        """A document's handle, by index or by name (a skipped document too: asked by name, it is read)."""
        return self._document(key).handle

    def _document(self, key: int | str) -> Document:
        if isinstance(key, int):
            if not -len(self.documents) <= key < len(self.documents):
                raise ContextError(f"document index {key} out of range: there are {len(self.documents)} documents")
            return self.documents[key]
        doc = self._by_name.get(key)
        if doc is None:
            close = [n for n in self._by_name if key.lower() in n.lower()][:5]
            close += [n for n in difflib.get_close_matches(key, list(self._by_name), n=5) if n not in close]
            raise ContextError(f"no document named {key!r}" + (f"; similar: {', '.join(map(quoted, close))}" if close else ""))
        return doc

    @property
    def n_bytes(self) -> int:
        return sum(d.size for d in self.documents)

    def names(self) -> list[str]:
        """Every document's name, skipped ones included."""
        return [d.name for d in self.documents]

    @property
    def skipped(self) -> dict[str, str]:
        """Documents left out of grep, count, chunks and get_full by default: name -> reason."""
        return {d.name: d.skip for d in self.documents if d.skip}

    def mark_skipped(self, reasons: Mapping[str, str]) -> None:
        """Mark exactly these documents (name -> reason) skipped; every other one is searched again.

        Unknown names raise ContextError. A host-side call: ``describe`` makes it from a probe's verdict.
        """
        unknown = [n for n in reasons if n not in self._by_name]
        if unknown:
            raise ContextError(f"no document named {unknown[0]!r} in corpus {self.name}")
        for d in self.documents:
            d.skip = reasons.get(d.name) or None

    def __repr__(self) -> str:
        n_skipped = sum(1 for d in self.documents if d.skip)
        skipped = f" ({n_skipped} skipped)" if n_skipped else ""
        return f"<corpus {self.name!r}: {len(self.documents)} documents{skipped}, {self.n_bytes} bytes; use peek(), grep(), doc(i)>"

    __str__ = __repr__

    # ------------------------------------------------------------------ probing

    def peek(self, n: int = DEFAULT_PEEK_CHARS) -> str:
        """An inventory: how many documents, and the first ones with their sizes (skipped ones marked)."""
        rows = [f"corpus {self.name}: {len(self.documents)} documents, {self.n_bytes} bytes (~{self.n_bytes // 4} tokens)"]
        n_skipped = sum(1 for d in self.documents if d.skip)
        if n_skipped:
            rows.append(f"  {n_skipped} skipped: listed, left out of grep, count and chunks unless include_skipped=True")
        for d in self.documents:
            row = f"  [{d.id}] {d.name} ({d.size} bytes)" + (f" [skipped: {d.skip}]" if d.skip else "")
            if sum(map(len, rows)) + len(row) > n:
                rows.append(f"  ... {len(self.documents) - d.id} more; corpus.names() lists them all")
                break
            rows.append(row)
        text = Text("\n".join(rows))
        self.stats.record("peeks", str(n), len(text))
        return text

    def _searched(self, include_skipped: bool = False, *, one_at_a_time: bool = False) -> Iterator[tuple[BufferHandle, Document]]:
        """The documents a search reads, as (handle, document). One that turns out binary or
        unreadable when opened is marked skipped and left out, everywhere and from now on.

        ``one_at_a_time``: a document mapped for this search is unmapped once the caller asks
        for the next, so a scan of a folder of more files than the process may open holds
        one at a time (each mapping holds a descriptor). Running out of descriptors is not a
        reason to skip a document: it is raised, never answered as 'no match'.
        """
        for d in self.documents:
            if d.skip and not include_skipped:
                continue
            was_open = d._handle is not None
            try:
                handle = d.handle
            except ContextError as e:
                if isinstance(e.__cause__, OSError) and e.__cause__.errno in (errno.EMFILE, errno.ENFILE):
                    raise ContextError(f"{quoted(self.name)}: too many files open to read {quoted(d.name)} (the process's limit of "
                                       "open files: ulimit -n)") from e
                d.skip = d.skip or _unreadable_reason(e)
                continue
            try:
                yield handle, d
            finally:
                if one_at_a_time and not was_open:
                    d.close()

    def texts(self, include_skipped: bool = False) -> Iterator[tuple[str, str]]:
        """``(name, text)`` of each document searched (skipped ones left out), one at a time: a
        document mapped for this is unmapped once the next is asked for."""
        for handle, d in self._searched(include_skipped, one_at_a_time=True):
            yield d.name, handle.get_full()

    def close(self) -> None:
        """Unmap every document mapped from its path (each is mapped again on next use)."""
        for d in self.documents:
            d.close()

    def grep(self, pattern: str, context_lines: int = 0, max_matches: int = DEFAULT_MAX_MATCHES, ignore_case: bool = False,
             include_skipped: bool = False) -> _grep.GrepResult:
        """Matching lines across documents; each match names its document.

        Args:
            include_skipped: also search the documents marked skipped (``corpus.skipped``).
        """
        _grep.compile_pattern(pattern, ignore_case)  # fail before opening anything
        found: list[_grep.GrepMatch] = []
        # One match more than asked tells whether the scan was complete.
        for handle, d in self._searched(include_skipped, one_at_a_time=True):
            res = _grep.grep_buffer(handle._buf(), pattern, context_lines=context_lines,
                                    max_matches=max_matches + 1 - len(found), ignore_case=ignore_case, doc=d.name)
            found.extend(res)
            if len(found) > max_matches:
                break
        complete = len(found) <= max_matches
        found = found[:max_matches]
        self.stats.record("greps", pattern, sum(len(m.line) for m in found))
        prober = None if found else (lambda p: self.count(p, True, include_skipped=include_skipped))
        tallier = None if complete else (lambda: self._tally(pattern, ignore_case, include_skipped))
        return _grep.GrepResult(found, pattern, complete, lambda: self.count(pattern, ignore_case, include_skipped=include_skipped),
                                prober=prober, ignore_case=ignore_case, tallier=tallier)

    def _tally(self, pattern: str, ignore_case: bool, include_skipped: bool) -> dict[str, int]:
        """GrepResult.tally() over every document searched."""
        counts: Counter[str] = Counter()
        for handle, _ in self._searched(include_skipped, one_at_a_time=True):
            counts.update(_grep.tally_matching_lines(handle._buf(), pattern, ignore_case))
        return dict(counts.most_common())

    def records(self, include_skipped: bool = False) -> _records.Records:
        """Every searched document's records, in corpus order, each naming its document (``r.doc``)."""
        out = _records.Records()
        shapes: set[str] = set()
        total = 0
        for handle, document in self._searched(include_skipped):
            total += handle.n_bytes
            if total > _records.MAX_PARSE_BYTES:
                raise ContextError(f"records(): the documents hold over {_records.MAX_PARSE_BYTES} bytes, more than "
                                   "records() reads at once; take one document's: records(contexts[0][i])")
            part = handle.records()
            for r in part:
                r.doc = document.name
            out.extend(part)
            shapes.add(part.shape)
            if len(out) > _records.MAX_RECORDS:
                raise ContextError(f"records(): more than {_records.MAX_RECORDS} records; take one document's")
        out.shape = shapes.pop() if len(shapes) == 1 else "mixed"
        return out

    def count(self, pattern: str, ignore_case: bool = False, include_skipped: bool = False) -> int:
        """How many lines match ``pattern`` across the documents searched."""
        return sum(handle.count(pattern, ignore_case) for handle, _ in self._searched(include_skipped, one_at_a_time=True))

    def lines(self, first: int | None = None, last: int | None = None, doc: int | str | None = None) -> list[str]:
        """Lines ``first``..``last`` (1-based, inclusive) of one document, numbered as grep
        numbers them; every line of it when neither is given.

        Args:
            doc: the document, by index or name; may be left out when the corpus searches
                only one document.
        """
        if doc is None:
            searched = [d for d in self.documents if not d.skip]
            if len(searched) != 1:
                example = (searched or self.documents)[0].name if self.documents else "name"
                shown = "" if first is None else f"{first}, {first if last is None else last}, "
                raise ContextError(f"a corpus numbers lines per document: say which, e.g. lines({shown}doc={quoted(example)})")
            document = searched[0]
        else:
            document = self._document(doc)
        first, last = line_number(first), line_number(last)
        out = document.handle.lines(first, last)
        span = "all" if first is None and last is None else f"{first or 1}-{first if last is None else last}"
        self.stats.record("lines", f"{document.name} {span}", sum(map(len, out)))
        return out

    def chunk(self, i: int, size: int | None = None, unit: str = "lines", include_skipped: bool = False) -> Chunk:
        """Chunk ``i`` of the documents taken in order; a chunk never spans two documents."""
        size = chunk_size(unit, size)
        seen = 0
        for handle, d in self._searched(include_skipped):
            n = handle.n_chunks(size, unit)
            if i < seen + n:
                part = handle.chunk(i - seen, size, unit)
                self.stats.record("chunks", f"{i} ({d.name})", len(part))
                total = self.n_chunks(size, unit, include_skipped)
                return Chunk(f"[document {d.id}: {d.name}]\n{part}", i, total, unit, part.size)
            seen += n
        raise ContextError(f"chunk index {i} out of range: there are {seen} chunks")

    def n_chunks(self, size: int | None = None, unit: str = "lines", include_skipped: bool = False) -> int:
        size = chunk_size(unit, size)
        return sum(h.n_chunks(size, unit) for h, _ in self._searched(include_skipped))

    def chunks(self, size: int | None = None, unit: str = "lines", include_skipped: bool = False) -> Iterator[Chunk]:
        size = chunk_size(unit, size)
        total = self.n_chunks(size, unit, include_skipped)
        i = 0
        for handle, d in self._searched(include_skipped):
            for k in range(handle.n_chunks(size, unit)):
                part = handle.chunk(k, size, unit)
                self.stats.record("chunks", f"{i} ({d.name})", len(part))
                yield Chunk(f"[document {d.id}: {d.name}]\n{part}", i, total, unit, part.size)
                i += 1

    @property
    def n_tokens(self) -> _tokens.TokenCount:
        """Tokens of the documents searched by default (skipped ones left out), summed."""
        return _tokens.add_counts(h.n_tokens for h, _ in self._searched())

    def get_full(self, include_skipped: bool = False) -> str:
        """Every document searched, each under a ``=== name ===`` header. Warns when large."""
        if self.n_bytes > LARGE_FULL_LOAD:
            warnings.warn(f"get_full() on corpus {self.name}: loading {self.n_bytes} bytes", stacklevel=2)
        self.stats.record("full_loads", "", self.n_bytes)
        return "\n\n".join(f"=== {d.name} ===\n{h.get_full()}" for h, d in self._searched(include_skipped))

    def probe(self, config: ProbeConfig | None = None, *, rank_keywords: Sequence[str] = ()) -> FolderProbe:
        """An inventory with a verdict per document (see probe.py). It marks nothing: ``describe`` acts on it.

        Args:
            rank_keywords: words (from a question) that order the documents, most relevant
                first; they never make a document skipped.
        """
        return probe_corpus(self, config, rank_keywords=rank_keywords)


def _unreadable_reason(error: ContextError) -> str:
    text = str(error)
    return "binary content" if "binary" in text else f"unreadable: {text}"
