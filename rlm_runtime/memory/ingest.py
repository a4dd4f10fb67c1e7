"""Ingest of files and folders: walk, read in bounded windows, chunk, write incrementally.

* Folders are walked with symlinks followed only while they stay inside the folder given (as
  the folder context does): a symlink whose target resolves outside it is not followed, and
  one line per folder says how many were left out (a repository's link to a credentials file
  is never stored; a file stored through such a link by an earlier ingest is removed). A file
  named on the command line is read wherever it is. A file is opened and checked to be the
  one the walk found (device and inode), so a link swapped meanwhile is not read; a file
  (or folder) found by a walk is reached from the folder given one component at a time, no
  symlink followed on the way (``context.beneath``: its path under the folder is the one the
  walk resolved), so a folder on its path swapped for a symlink does not lead out either,
  and the folders are listed the same way. A folder
  reached twice (a symlink loop) or a file reached twice (two links to it) is walked once
  and the repeat reported. Names in
  ``IngestConfig.excludes`` are not entered; files with a binary extension, files whose first
  bytes look binary, empty files, non-regular files (FIFOs, devices) and unreadable ones are
  skipped with their reason in ``IngestReport.skipped``, and the ingest goes on.
* A file is read one window (``window_bytes``, cut after a blank line or a newline) at a time
  and fed as bytes to ``chunking.chunk_bytes``, which finds the same pieces whatever the
  windows, so a 1 GB file costs a window of memory (and the chunker's bounded look-ahead).
  Invalid UTF-8 is replaced with U+FFFD in the stored text and reported (``stored=True``);
  byte spans stay those of the file's own bytes.
* Incremental: a file whose size and mtime match its source row is skipped unread; one whose
  content hash matches is skipped after hashing. A changed file is re-chunked and each piece
  whose text is already stored for that file keeps its chunk (id, statistics, links); only the
  chunks whose text is gone are deleted, at the end, in the transaction that marks the source
  complete. Chunks are written (with their vectors, when the store has a model) about
  ``batch_chunks`` per transaction (small files share
  one): a killed ingest leaves every committed batch, and a file cut off in the middle keeps
  its source in state ``ingesting``, which the next ingest redoes.
* Skipping never deletes: a file that turned binary, empty or unreadable keeps what it had.
  Only a file gone from a re-ingested folder loses its chunks (``remove_missing``).
"""

from __future__ import annotations

import errno
import fnmatch
import hashlib
import os
import sqlite3
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from typing import IO, TYPE_CHECKING

from rlm_runtime.context.beneath import Root, list_beneath, open_beneath
from rlm_runtime.context.buffer import looks_binary
from rlm_runtime.context.protocol import BINARY_EXTENSIONS, BINARY_SNIFF_BYTES
from rlm_runtime.memory.chunking import ChunkingConfig, chunk_bytes
from rlm_runtime.memory.chunks import NewChunk, delete_chunks
from rlm_runtime.memory.db import Database, now
from rlm_runtime.memory.records import IngestProgress, IngestReport, Skipped
from rlm_runtime.memory.writer import SourceWriter
from rlm_runtime.utf8safe import is_utf8

if TYPE_CHECKING:
    from rlm_runtime.memory.settings import MemorySettings
    from rlm_runtime.memory.vectors import Vectors

Progress = Callable[[IngestProgress], None]
#: Called between files and between windows of a file; raises to stop (``Budget.check_time``).
Stop = Callable[[], None]
_READ_BLOCK = 1024 * 1024
#: Where a walk found a file: the folder given, and the file's path under it with no symlink.
Beneath = tuple[Root, str]


def _open_binary(path: str, beneath: Beneath | None = None) -> IO[bytes]:
    """Open a file for reading: one named on the command line by its path, one a walk found
    under its folder (``open_beneath``). A seam: tests make it fail."""
    if beneath is None:
        return open(path, "rb")  # noqa: SIM115 - closed by the caller's with
    return open(open_beneath(*beneath), "rb")  # noqa: SIM115 - closed by the caller's with


def windows(fh: IO[bytes], window_bytes: int) -> Iterator[tuple[bytes, int, int]]:
    """(bytes, byte offset, 1-based line) of consecutive windows of a file, each at most
    ``window_bytes`` long unless a line is longer, cut after a blank line when one lies in the
    second half of the window, else after a newline, else at a UTF-8 character boundary."""
    buf = b""
    offset, line = 0, 1
    eof = False
    while not eof or buf:
        while not eof and len(buf) <= window_bytes:  # one byte more: is a cut at the window's end a boundary?
            block = fh.read(window_bytes + 1 - len(buf))
            if not block:
                eof = True
            buf += block
        if eof and len(buf) <= window_bytes:
            cut = len(buf)
        else:
            cut = buf.rfind(b"\n\n", window_bytes // 2, window_bytes) + 2
            if cut < 2:
                cut = buf.rfind(b"\n", 0, window_bytes) + 1
            if cut <= 0:  # one very long line: cut before a UTF-8 continuation byte never
                cut = window_bytes
                while cut > 0 and (buf[cut] & 0xC0) == 0x80:
                    cut -= 1
                cut = cut or window_bytes
        if cut == 0:
            break
        raw, buf = buf[:cut], buf[cut:]
        yield raw, offset, line
        offset += len(raw)
        line += raw.count(b"\n")


def file_hash(fh: IO[bytes]) -> str:
    """The content hash of a whole file, read in blocks."""
    h = hashlib.blake2b(digest_size=16)
    while block := fh.read(_READ_BLOCK):
        h.update(block)
    return h.hexdigest()


def _excluded(name: str, excludes: Sequence[str]) -> bool:
    return any(fnmatch.fnmatch(name, ex) for ex in excludes)


def _inside(real: str, real_root: str) -> bool:
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)



def _walked_twice(path: str, folder: str) -> str:
    """Why a folder reached again is not walked again: a link back to a folder above it (a
    loop), or a second path to a folder already walked (a link beside it, say ``latest -> v2``)."""
    target, here = os.path.realpath(path), os.path.realpath(folder)
    if here == target or here.startswith(target.rstrip(os.sep) + os.sep):
        return "symlink loop (a link back to a folder above it)"
    return "a second path to a folder already walked"


def collect(paths: Sequence[str | os.PathLike[str]], excludes: Sequence[str],
            report: IngestReport) -> tuple[list[tuple[str, os.stat_result, Beneath | None]], list[str], set[str]]:
    """The files to ingest (absolute path, stat, where a walk found it: None for a file
    named), sorted, the folders walked, and the symlinks in them that lead outside their
    folder (not followed); what is skipped goes into ``report``."""
    files: dict[str, tuple[os.stat_result, Beneath | None]] = {}
    seen_files: dict[tuple[int, int], str] = {}
    seen_dirs: set[tuple[int, int]] = set()
    roots: list[str] = []
    outside: set[str] = set()

    def skip(path: str, reason: str) -> None:
        report.skipped.append(Skipped(path, reason))

    def status(path: str) -> os.stat_result | None:
        try:
            return os.stat(path)
        except OSError as e:
            if e.errno == errno.ELOOP:
                skip(path, "symlink loop")
            elif os.path.islink(path) and isinstance(e, FileNotFoundError):
                skip(path, "broken symlink")
            elif isinstance(e, FileNotFoundError):
                skip(path, "not found")
            else:
                skip(path, f"unreadable: {e.strerror or e}")
            return None

    def add_file(path: str, st: os.stat_result, beneath: Beneath | None) -> None:
        if not is_utf8(path):  # the store keeps a file's path as text (SQLite takes no lone surrogate)
            skip(path, "its name is not UTF-8")
            return
        if not stat.S_ISREG(st.st_mode):
            skip(path, "not a regular file")
            return
        ext = os.path.splitext(path)[1].lower()
        if beneath is not None and ext in BINARY_EXTENSIONS:
            skip(path, f"binary file type ({ext})")
            return
        key = (st.st_dev, st.st_ino)
        if key in seen_files:
            if seen_files[key] != path:
                skip(path, f"same file as {seen_files[key]}")
            return
        seen_files[key] = path
        files[path] = (st, beneath)

    def walk(root: str) -> None:
        try:
            folder = Root.of(root)
        except OSError as e:
            skip(root, f"unreadable folder: {e.strerror or e}")
            return
        real_root = os.path.realpath(root)
        left_out: list[str] = []
        stack = [(root, "")]  # (path as walked, its path under the root with no symlink)
        while stack:
            at, under = stack.pop()
            try:
                entries = sorted(list_beneath(folder, under), key=lambda e: e[0], reverse=True)
            except OSError as e:
                skip(at, f"unreadable folder: {e.strerror or e}")
                continue
            for name, lst in entries:
                if _excluded(name, excludes):
                    continue
                path = os.path.join(at, name)
                if stat.S_ISLNK(lst.st_mode):
                    real = os.path.realpath(path)
                    if not _inside(real, real_root):
                        left_out.append(path)
                        continue
                    st = status(path)
                    if st is None:
                        continue
                    rel = os.path.relpath(real, real_root)
                else:
                    st, rel = lst, os.path.join(under, name)
                if stat.S_ISDIR(st.st_mode):
                    key = (st.st_dev, st.st_ino)
                    if key in seen_dirs:
                        skip(path, _walked_twice(path, at))
                        continue
                    seen_dirs.add(key)
                    stack.append((path, rel))
                else:
                    add_file(path, st, (folder, rel))
        if left_out:  # one line for them all: a repository may hold thousands
            outside.update(left_out)
            first = os.path.relpath(min(left_out), root)
            skip(root, f"{len(left_out)} symlink{'s' if len(left_out) > 1 else ''} leading outside the folder, not "
                       f"followed (the first: {first})")

    for given in paths:
        path = os.path.abspath(os.path.expanduser(os.fspath(given)))
        if not is_utf8(path):
            skip(path, "its name is not UTF-8")
            continue
        st = status(path)
        if st is None:
            continue
        if stat.S_ISDIR(st.st_mode):
            seen_dirs.add((st.st_dev, st.st_ino))
            roots.append(path)
            walk(path)
        else:
            add_file(path, st, None)
    return sorted((path, st, beneath) for path, (st, beneath) in files.items()), roots, outside


class Ingest:
    """One ``ingest`` call: the files, the report, the progress callback.

    Writes are queued and committed ``batch_chunks`` chunks at a time, across files: a folder
    of small files costs one transaction per batch, not one per file (each commit makes FTS5
    flush a segment). A file longer than a batch is committed batch by batch, its source
    marked ``ingesting`` until its last batch."""

    def __init__(self, db: Database, settings: MemorySettings, *, tags: Sequence[str] = (), kind: str | None = None,
                 progress: Progress | None = None, stop: Stop | None = None, vectors: Vectors | None = None) -> None:
        self.db = db
        self.vectors = vectors
        self.settings = settings
        self.cfg = settings.ingest
        self.chunking = ChunkingConfig(min_tokens=self.cfg.min_tokens, max_tokens=self.cfg.max_tokens, exact_tokens=self.cfg.exact_tokens)
        self.tags = tuple(dict.fromkeys(tags))
        self.kind = kind
        self.progress = progress
        self.stop = stop
        self.report = IngestReport()
        self.started = time.perf_counter()
        self.files_total = 0
        self.files_done = 0
        self.chunks_written = 0
        self._queue: list[Callable[[sqlite3.Connection], object]] = []
        self._queued = 0
        self._queued_chunks = 0
        self._path = ""

    def run(self, paths: Sequence[str | os.PathLike[str]]) -> IngestReport:
        files, roots, outside = collect(paths, self.cfg.excludes, self.report)
        self.files_total = len(files)
        for done, (path, st, beneath) in enumerate(files, 1):
            if self.stop is not None:
                self.stop()
            self._path = path
            self._file(path, st, beneath)
            self.files_done = done
        self._flush()
        if self.cfg.remove_missing:
            for root in roots:
                self._remove_missing(root, {p for p, _, _ in files}, outside)
        self.report.seconds = time.perf_counter() - self.started
        self._tell()
        return self.report

    def _tell(self) -> None:
        if self.progress is not None:
            self.progress(IngestProgress(self._path, self.files_done, self.files_total, self.chunks_written, self.report.bytes,
                                         time.perf_counter() - self.started))

    def _enqueue(self, write: Callable[[sqlite3.Connection], object], chunks: int) -> None:
        """Queue a write of ``chunks`` chunks (a row update counts as one)."""
        self._queue.append(write)
        self._queued += max(chunks, 1)
        self._queued_chunks += chunks
        if self._queued >= self.cfg.batch_chunks:
            self._flush()

    def _flush(self) -> None:
        """Commit what is queued, in order, in one transaction."""
        if not self._queue:
            return
        with self.db.write() as conn:
            for write in self._queue:
                write(conn)
        self.chunks_written += self._queued_chunks
        self._queue, self._queued, self._queued_chunks = [], 0, 0
        self._tell()

    def _skip(self, path: str, reason: str, *, stored: bool = False) -> None:
        self.report.skipped.append(Skipped(path, reason, stored))

    def _file(self, path: str, st: os.stat_result, beneath: Beneath | None) -> None:
        with self.db.lock:
            row = self.db.conn.execute("SELECT id, size, mtime_ns, hash, state FROM sources WHERE kind = 'file' AND path = ?",
                                       (path,)).fetchone()
        complete = row is not None and row[4] == "complete"
        if st.st_size == 0:
            self._skip(path, "empty file" + (" (the chunks stored before are kept)" if row else ""))
            return
        if complete and row[1] == st.st_size and row[2] == st.st_mtime_ns:
            self.report.unchanged += 1
            return
        try:
            fh = _open_binary(path) if beneath is None else _open_binary(path, beneath)
        except OSError as e:
            self._skip(path, f"unreadable: {e.strerror or e}")
            return
        with fh:
            try:
                now_st = os.fstat(fh.fileno())
                if (now_st.st_dev, now_st.st_ino) != (st.st_dev, st.st_ino):
                    self._skip(path, "changed while it was read (a link swapped?): not read")
                    return
                if looks_binary(fh.read(BINARY_SNIFF_BYTES)):
                    self._skip(path, "binary content" + (" (the chunks stored before are kept)" if row else ""))
                    return
                fh.seek(0)
                if complete and row[3]:
                    digest = file_hash(fh)
                    if digest == row[3]:
                        self._enqueue(lambda conn: conn.execute("UPDATE sources SET size = ?, mtime_ns = ?, updated = ? WHERE id = ?",
                                                                (st.st_size, st.st_mtime_ns, now(), row[0])), 0)
                        self.report.unchanged += 1
                        return
                    fh.seek(0)
                self._write(path, st, fh)
            except OSError as e:
                self._skip(path, f"read error: {e.strerror or e} (committed chunks kept; the next ingest redoes the file)")

    def _write(self, path: str, st: os.stat_result, fh: IO[bytes]) -> None:
        state: dict[str, SourceWriter] = {}
        sid = 0

        def writer(conn: sqlite3.Connection) -> SourceWriter:
            """The file's writer; made by the first write, which marks the source as being
            ingested and maps the texts it held to their chunks."""
            nonlocal sid
            if "w" not in state:
                stamp = now()
                conn.execute("""INSERT INTO sources (kind, path, size, mtime_ns, state, created, updated)
                                VALUES ('file', ?, ?, ?, 'ingesting', ?, ?)
                                ON CONFLICT (kind, path) DO UPDATE SET state = 'ingesting', updated = excluded.updated""",
                             (path, st.st_size, st.st_mtime_ns, stamp, stamp))
                sid = int(conn.execute("SELECT id FROM sources WHERE kind = 'file' AND path = ?", (path,)).fetchone()[0])
                old: dict[str, list[int]] = {}
                for chunk_id, digest in conn.execute("SELECT id, hash FROM chunks WHERE source_id = ? ORDER BY seq, id", (sid,)):
                    old.setdefault(str(digest), []).append(int(chunk_id))
                state["w"] = SourceWriter(sid, self.settings.links, tags=self.tags, old=old, vectors=self.vectors)
            return state["w"]

        def write(batch: list[NewChunk]) -> Callable[[sqlite3.Connection], object]:
            return lambda conn: writer(conn).write(conn, batch, now())

        hasher = hashlib.blake2b(digest_size=16)
        invalid = False
        size = 0

        def raws() -> Iterator[bytes]:
            nonlocal invalid, size
            for raw, _, _ in windows(fh, self.cfg.window_bytes):
                if self.stop is not None:  # a window is chunked in bounded time: the stop is reached
                    self.stop()
                hasher.update(raw)
                size += len(raw)
                if not invalid:
                    try:
                        raw.decode("utf-8")
                    except UnicodeDecodeError:
                        invalid = True
                yield raw

        pending: list[NewChunk] = []
        # Bytes, not decoded text: the spans stay those of the file even where invalid UTF-8
        # is shown as U+FFFD in a chunk's text.
        for p in chunk_bytes(raws(), path=path, kind=self.kind, config=self.chunking):
            pending.append(NewChunk(p.text, p.start_byte, p.end_byte, p.start_line, p.end_line, p.tokens, p.kind, p.header or None))
            if len(pending) >= self.cfg.batch_chunks:
                self._enqueue(write(pending), len(pending))
                pending = []
        note = "invalid UTF-8 replaced with U+FFFD" if invalid else None
        digest = hasher.hexdigest()

        def finish(conn: sqlite3.Connection) -> None:
            w = writer(conn)
            w.write(conn, pending, now())
            gone = delete_chunks(conn, w.leftover(), now(), bridge=False)
            w.drop_stale_follows(conn)
            conn.execute("UPDATE sources SET size = ?, mtime_ns = ?, hash = ?, state = 'complete', note = ?, updated = ? WHERE id = ?",
                         (size, st.st_mtime_ns, digest, note, now(), sid))
            self.report.files += 1
            self.report.bytes += size
            self.report.chunks_added += w.added
            self.report.chunks_kept += w.kept
            self.report.chunks_removed += gone

        if invalid:
            self._skip(path, "invalid UTF-8 replaced with U+FFFD", stored=True)
        self._enqueue(finish, len(pending))

    def _remove_missing(self, root: str, present: set[str], outside: set[str]) -> None:
        prefix = root.rstrip(os.sep) + os.sep
        with self.db.lock:
            rows = self.db.conn.execute("SELECT id, path FROM sources WHERE kind = 'file' AND substr(path, 1, ?) = ?",
                                        (len(prefix), prefix)).fetchall()
        for sid, path in rows:
            if path in present or (os.path.lexists(path) and path not in outside):
                continue
            self.report.chunks_removed += remove_source(self.db, int(sid))
            self.report.removed_files += 1


def remove_source(db: Database, sid: int, batch: int = 1000) -> int:
    """Delete a source and its chunks, ``batch`` chunks per transaction; return the chunks deleted."""
    removed = 0
    while True:
        with db.write() as conn:
            ids = [int(r[0]) for r in conn.execute("SELECT id FROM chunks WHERE source_id = ? LIMIT ?", (sid, batch))]
            if not ids:
                conn.execute("DELETE FROM sources WHERE id = ?", (sid,))
                return removed
            removed += delete_chunks(conn, ids, now(), bridge=False)
