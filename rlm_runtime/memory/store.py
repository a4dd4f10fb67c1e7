"""``MemoryStore``: the persistent memory of rlm_runtime, one SQLite file.

The one object the rest of the runtime uses: the sandbox's ``search_chunks`` / ``read_chunk``
are ``search`` / ``read`` with ``record=True``; ``rlm memory ...`` maps a command to a method;
a session calls ``remember`` after a run. Each method is one short transaction or a few (see
``db`` for the concurrency model); the work is done by one module per concern: ``ingest``,
``writer`` and ``chunks`` (writing), ``links``, ``search``, ``vectors`` (search by meaning),
``lifecycle``, ``transfer``.

Search ranks by words (BM25), by meaning (vectors of an embedding model: ``embeddings.py``,
the ``embed`` extra) or by both fused (``hybrid``, the default). The model is loaded on first
need (a write or a search), through the factory the store is given; without one (the extra
not installed, or ``embedder=None``) the store keeps no vectors and a hybrid search ranks by
words, and says so in ``Hits.fallback``.

A store is used from one process by any number of threads (one connection under a lock), and
by any number of processes at once (many readers, one writer at a time).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import sqlite3
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlm_runtime import hostwrites, private, timestamps
from rlm_runtime.config import Paths, paths_from_env
from rlm_runtime.embeddings import EmbedderFactory, default_embedder
from rlm_runtime.memory import chunks as _chunks
from rlm_runtime.memory import curation, edits, learned, lifecycle, links, search, transfer
from rlm_runtime.memory import db as db_module
from rlm_runtime.memory import ingest as _ingest
from rlm_runtime.memory.chunking import WINDOW_BYTES, ChunkingConfig, chunk_stream
from rlm_runtime.memory.db import Database
from rlm_runtime.memory.errors import ChunkNotFound, StoreError
from rlm_runtime.memory.idlefill import IdleFill
from rlm_runtime.memory.migrations import READ_ONLY_OPTIONAL, applied, migrate, pending, read_as_current
from rlm_runtime.memory.records import (
    Added,
    Changed,
    ChunkStats,
    ChunkView,
    Hit,
    Hits,
    IngestReport,
    LifecycleReport,
    Link,
    Listed,
    ReindexProgress,
    ReindexReport,
    StoreStats,
)
from rlm_runtime.memory.search import Filters
from rlm_runtime.memory.settings import SEARCH_MODES, MemorySettings
from rlm_runtime.memory.value_check import COUNT_LIMIT, bad_counters, reset_counters
from rlm_runtime.memory.writer import SourceWriter
from rlm_runtime.utf8safe import utf8safe

if TYPE_CHECKING:
    from rlm_runtime.memory.vectors import Vectors

#: Chunk ids one remembered answer links ``derived_from`` at most.
MAX_DERIVED = 64



#: How ``remember`` writes a run's question and answer into one chunk, and the words of that
#: form (never key terms: every remembered answer has them).
ANSWER_FORMAT = "Question: {question}\nAnswer: {answer}"
ANSWER_TEMPLATE = frozenset({"question", "answer"})

def _private_file(path: Path) -> None:
    """Create a new store's file 0600 in a 0700 folder before SQLite does (it would use 0644
    less the umask; its ``-wal`` and ``-shm`` files take the database's mode)."""
    if os.fspath(path) in ("", ":memory:") or os.fspath(path).startswith("file:"):
        return
    try:
        private.make_dir(path.parent)
        private.create_file(path)
    except OSError:  # the Database says why it cannot open the file
        pass


def _clip_cells(cells: Sequence[str]) -> list[str]:
    """The cells of a run, in order, until ``REMEMBERED_CELLS_CHARS`` are used."""
    kept: list[str] = []
    left = hostwrites.REMEMBERED_CELLS_CHARS
    for cell in cells:
        if left <= 0:
            break
        kept.append(hostwrites.clip(cell, left))
        left -= len(cell)
    return kept


def _embedder_hint() -> str:
    from rlm_runtime.embeddings import INSTALL_HINT, unavailable_reason

    return unavailable_reason() or f"no embedding model (for search by meaning: {INSTALL_HINT})"


def _quality_stats(conn: sqlite3.Connection) -> tuple[int, str | None, float | None]:
    """(live chunks with a quality vector, its model, seconds to fill the rest at the last rate).
    Plain SQL: stats need no numpy (``vectors`` imports it)."""
    have = int(conn.execute("""SELECT count(*) FROM quality_vectors v JOIN chunks c ON c.id = v.chunk_id
                               WHERE c.deleted_at IS NULL""").fetchone()[0])
    row = conn.execute("SELECT model, rate FROM quality_meta WHERE id = 1").fetchone()
    speed = float(row[1]) if row is not None and isinstance(row[1], (int, float)) and math.isfinite(row[1]) and row[1] > 0 else None
    left = int(conn.execute("""SELECT coalesce(sum(length(c.text)), 0) FROM chunks c WHERE c.deleted_at IS NULL
                               AND NOT EXISTS (SELECT 1 FROM quality_vectors v WHERE v.chunk_id = c.id)""").fetchone()[0]) if speed else 0
    eta = left / speed if speed and left else None
    return have, None if row is None else str(row[0]), (eta if eta is not None and math.isfinite(eta) else None)


def _chunk_count(conn: sqlite3.Connection) -> int:
    """About how many chunks the store holds (the largest id ever given: no count(*) scan)."""
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'chunks'").fetchone()
    return int(row[0]) if row else 0


def default_store_path(paths: Paths | None = None) -> Path:
    """``$RLM_HOME/brain/memory.db`` (``~/.rlm/brain/memory.db`` without RLM_HOME)."""
    return (paths or paths_from_env()).home / "brain" / "memory.db"


class MemoryStore:
    """A memory store on disk: chunks of text with their sources, links and statistics.

    Args:
        path: the database file (created with its folder when missing); default
            ``default_store_path()``.
        settings: ingest, link, search and recall settings.
        readonly: open without writing (no migrations: the store must be current); every
            write raises ``StoreError``, and searches are not recorded.
        clock: seconds since the epoch (tests pass a fake one).
        embedder: makes the embedding model, called once when vectors are first needed
            (default: ``embeddings.default_embedder``, wordllama when the ``embed`` extra is
            installed); None: no vectors are written or searched.
        quality: makes the quality tier's model (``contextual.factory``), whose vectors
            ``fill_quality`` makes after ingest and search uses where they exist; None (the
            default): the fast tier alone.

    Raises:
        StoreError: the file cannot be opened, is not a store, is read-only and not migrated,
            or this Python's SQLite has no FTS5.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, settings: MemorySettings | None = None,
                 readonly: bool = False, clock: Callable[[], float] = time.time,
                 embedder: EmbedderFactory | None = default_embedder, quality: EmbedderFactory | None = None) -> None:
        self.path = Path(path) if path is not None else default_store_path()
        #: A store given by its descriptor (``db.descriptor_path``: read-only, as it was
        #: checked) is read through that descriptor into a private copy, opened and removed
        #: with the store: SQLite itself would open a name again.
        self._copy: Path | None = None
        if db_module.is_descriptor(self.path):
            if not readonly:
                raise StoreError("a memory store given by its descriptor opens read-only")
            self._copy = _copied(self.path)
            self.path = self._copy
        self.settings = settings or MemorySettings()
        self.clock = clock
        self._embedder_factory = embedder
        self._vectors: Vectors | None = None
        self._vectors_made = embedder is None
        self._quality_factory = quality
        self._quality: Vectors | None = None
        self._quality_made = quality is None
        self._coverage: tuple[Any, bool] | None = None
        self._idle_fill: IdleFill | None = None
        if not readonly:
            _private_file(self.path)
        try:
            self.db = Database(self.path, readonly=readonly, busy_timeout_s=self.settings.busy_timeout_s,
                               durable=self.settings.durable)
        except BaseException:
            _remove_copy(self._copy)
            raise
        try:
            if readonly:
                waiting = pending(self.db.conn)
                missing = [name for name in waiting if name not in READ_ONLY_OPTIONAL]
                if missing:
                    raise StoreError(f"the memory store {self.path} needs migrations ({', '.join(missing)}): open it once for writing")
                read_as_current(self.db.conn, waiting)
            else:
                migrate(self.db.conn)
        except sqlite3.Error as e:
            self.close()
            raise StoreError(f"cannot prepare the memory store {self.path}: {e}") from e
        except BaseException:
            self.close()
            raise
        self._df_cache: dict[int, dict[str, int]] = {}
        self._df_version: tuple[int, int] | None = None
        if not readonly:
            try:
                self._reset_counters()
                self.apply_related_cap()
                if self.settings.maintain_every_s > 0:
                    self.maintain()
            except StoreError:
                pass  # another writer holds the store: the upkeep runs on a later open

    def _reset_counters(self) -> None:
        """A writable open sets a change counter out of range to 0 and says so (``value_check``)."""
        with self._sql_errors():
            with self.db.snapshot() as conn:
                if not bad_counters(conn):
                    return
            with self.db.write() as conn:
                reset = reset_counters(conn)
        if reset:
            warnings.warn(f"the memory store {self.path}: {', '.join(reset)} out of the range 0 to 2**62: reset to 0",
                          stacklevel=3)

    # ------------------------------------------------------------------ lifetime

    def close(self) -> None:
        """Stop the fill started by ``fill_while_idle``, and close the connection (the store
        stays on disk)."""
        fill, self._idle_fill = self._idle_fill, None
        if fill is not None:
            fill.close()
        self.db.close()
        copy, self._copy = self._copy, None
        _remove_copy(copy)

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<MemoryStore {self.path}{' (read-only)' if self.db.readonly else ''}>"

    @contextmanager
    def _sql_errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as e:
            raise StoreError(f"memory store {self.path}: {e}") from e

    @property
    def vectors(self) -> Vectors | None:
        """The store's vectors under its model, made on first use; None without a model."""
        if not self._vectors_made:
            with self.db.lock:
                if not self._vectors_made:
                    factory = self._embedder_factory
                    model = factory() if factory is not None else None
                    if model is not None:
                        from rlm_runtime.memory.vectors import Vectors

                        self._vectors = Vectors(model)
                    self._vectors_made = True
        return self._vectors

    @property
    def quality(self) -> Vectors | None:
        """The quality tier's vectors, its model made on first use; None without one."""
        if not self._quality_made:
            with self.db.lock:
                if not self._quality_made:
                    model = self._quality_factory() if self._quality_factory is not None else None
                    if model is not None:
                        from rlm_runtime.memory.vectors import QUALITY, Vectors

                        self._quality = Vectors(model, QUALITY)
                    self._quality_made = True
        return self._quality

    def _writing_vectors(self) -> Vectors | None:
        """The vectors to write beside new chunks (None on a read-only store)."""
        return None if self.db.readonly else self.vectors

    # ------------------------------------------------------------------ writing

    def ingest(self, paths: Sequence[str | os.PathLike[str]] | str | os.PathLike[str], *, tags: Sequence[str] = (),
               kind: str | None = None, progress: _ingest.Progress | None = None, stop: _ingest.Stop | None = None) -> IngestReport:
        """Chunk and store files and folders (incrementally: unchanged files are skipped,
        unchanged chunks of a changed file are kept). See ``ingest`` for what is skipped.

        Args:
            paths: files and folders.
            tags: tags of every chunk written (added to kept chunks too).
            kind: the kind of every chunk (default: detected by the chunker per file).
            progress: called with an ``IngestProgress`` after every committed batch and at the end.
            stop: called between files and between windows of a file; what it raises ends the
                ingest (batches committed before are kept: the next ingest redoes the file).
        """
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        with self._sql_errors():
            return _ingest.Ingest(self.db, self.settings, tags=tags, kind=kind, progress=progress, stop=stop,
                                  vectors=self._writing_vectors()).run(paths)

    def _pieces(self, text: str, kind: str | None, stop: _ingest.Stop | None = None) -> list[_chunks.NewChunk]:
        cfg = self.settings.ingest
        # SQLite takes no lone surrogate (a model's answer may hold one, a folder's text a file
        # name that is not UTF-8): U+FFFD in its place, as for a file's bytes that are not UTF-8.
        text = utf8safe(text)

        def windows() -> Iterator[str]:
            for i in range(0, len(text), WINDOW_BYTES):
                if stop is not None:  # a window is chunked in bounded time: the stop is reached
                    stop()
                yield text[i : i + WINDOW_BYTES]

        found = chunk_stream(windows(), kind=kind, config=ChunkingConfig(min_tokens=cfg.min_tokens, max_tokens=cfg.max_tokens,
                                                                         exact_tokens=cfg.exact_tokens))
        return [_chunks.NewChunk(p.text, p.start_byte, p.end_byte, p.start_line, p.end_line, p.tokens, kind or p.kind, p.header or None)
                for p in found]

    def _writer(self, conn: sqlite3.Connection, source: str, now: float, **kw: Any) -> SourceWriter:
        sid = _chunks.source_id(conn, "memory", utf8safe(source), now)
        assert sid is not None
        tail = conn.execute("SELECT id, seq FROM chunks WHERE source_id = ? ORDER BY seq DESC, id DESC LIMIT 1", (sid,)).fetchone()
        # A position from elsewhere near 2**63 is not followed past COUNT_LIMIT (ties read in id order).
        next_seq = min(int(tail[1]) + 1, COUNT_LIMIT) if tail else 0
        return SourceWriter(sid, self.settings.links, next_seq=next_seq, prev_id=int(tail[0]) if tail else None,
                            vectors=self._writing_vectors(), **kw)

    def add_text(self, text: str, *, source: str = "notes", kind: str | None = None, tags: Sequence[str] = (),
                 run_id: str | None = None, meta: dict[str, Any] | None = None, pinned: bool = False,
                 ttl_s: float | None = None, stop: _ingest.Stop | None = None, dedup: bool = True) -> list[int]:
        """``store_text``, returning the ids of the text's chunks."""
        return list(self.store_text(text, source=source, kind=kind, tags=tags, run_id=run_id, meta=meta, pinned=pinned,
                                    ttl_s=ttl_s, stop=stop, dedup=dedup).ids)

    def store_text(self, text: str, *, source: str = "notes", kind: str | None = None, tags: Sequence[str] = (),
                   run_id: str | None = None, meta: dict[str, Any] | None = None, pinned: bool = False,
                   ttl_s: float | None = None, stop: _ingest.Stop | None = None, dedup: bool = True) -> Added:
        """Store a text that is not a file (a note, a fact, a decision) as one or more chunks
        appended to the memory source ``source`` (``follows`` its last chunk).

        Identical text is stored once: a chunk whose text, whitespace aside, a live chunk of any
        memory source already holds (a note, a remembered answer; not a file's chunk, which
        comes and goes with its file) is not written again: the held chunk stands for it and
        gets its tags (and its pin). A chunk in the trash does not count.

        Args:
            source: the label of the memory source (``notes``, ``run:<id>``...).
            kind: the chunks' kind (default: detected).
            tags: their tags.
            run_id: the run that wrote it (``context_of`` links to the run's other chunks).
            meta: provenance, kept as JSON.
            pinned: never pruned.
            ttl_s: pruned this many seconds from now (unless pinned or promoted first).
            stop: called between windows of the text while it is chunked; what it raises ends
                the call, with nothing stored.
            dedup: store identical text once (False: every piece is written, as a context's
                own index needs for a repeated paragraph).

        Raises:
            StoreError: the text is empty.
        """
        pieces = self._pieces(text, kind, stop)
        if not pieces:
            raise StoreError("nothing to store: the text is empty")
        now = self.clock()
        keys = [_chunks.text_key(p.text) for p in pieces]
        with self._sql_errors(), self.db.write() as conn:
            held = _chunks.held_texts(conn, keys) if dedup else {}
            fresh: list[_chunks.NewChunk] = []
            seen: set[str] = set()
            for piece, key in zip(pieces, keys, strict=True):
                if dedup and (key in held or key in seen):  # held, or repeated within the text: its first copy stands
                    continue
                seen.add(key)
                fresh.append(piece)
            new: list[int] = []
            if fresh:  # (a text held whole makes no source)
                writer = self._writer(conn, source, now, tags=tags, run_id=run_id, meta=meta, pinned=pinned,
                                      expires_at=None if ttl_s is None else now + ttl_s)
                new = writer.write(conn, fresh, now)
            _chunks.set_text_keys(conn, [(i, p.text) for i, p in zip(new, fresh, strict=True)])
            made = {_chunks.text_key(p.text): i for i, p in zip(new, fresh, strict=True)} if dedup else {}
            if held:
                old = list(dict.fromkeys(held.values()))
                _chunks.add_tags(conn, old, tags)
                if pinned:
                    curation.pin(conn, old, True)
            ids = new if not dedup else [held.get(key) or made[key] for key in keys]
        return Added(tuple(ids), tuple(new))

    def remember(self, question: str, answer: str, *, run_id: str, trajectory: str | os.PathLike[str] | None = None,
                 cells: Sequence[str] = (), read_chunk_ids: Sequence[int] = (), tags: Sequence[str] = ()) -> list[int]:
        """Store what a run found: the question and answer as kind ``answer``, the cells that
        produced it as kind ``code``, with provenance (run id, trajectory path) in ``meta``,
        under the memory source ``run:<run_id>``. The answer is linked ``derived_from`` the
        chunks the run read (which are linked ``co_recalled``: read together for one answer)
        and ``context_of`` the run's other chunks. Returns the ids, the answer's first."""
        now = self.clock()
        # Each search a cell made added its hits: distinct ones, and a bounded number (``hostwrites``).
        read = list(dict.fromkeys(read_chunk_ids))[: hostwrites.REMEMBERED_READ_IDS]
        meta = {"run_id": run_id, "trajectory": os.fspath(trajectory) if trajectory is not None else None,
                "read_chunk_ids": read}
        # What a run stores is bounded (``hostwrites``): the answer is whatever sandboxed code passed to FINAL.
        question = hostwrites.clip(question, hostwrites.REMEMBERED_QUESTION_CHARS)
        answer = hostwrites.clip(answer, hostwrites.REMEMBERED_ANSWER_CHARS)
        cells = _clip_cells(cells)
        answer_pieces = self._pieces(ANSWER_FORMAT.format(question=question, answer=answer), "answer")  # one chunk when it fits
        cell_pieces = self._pieces("\n\n".join(cells), "code") if any(c.strip() for c in cells) else []
        with self._sql_errors(), self.db.write() as conn:
            writer = self._writer(conn, f"run:{run_id}", now, tags=tags, run_id=run_id, meta=meta, template=ANSWER_TEMPLATE)
            answer_ids = writer.write(conn, answer_pieces, now)
            cell_ids = writer.write(conn, cell_pieces, now)
            _chunks.set_text_keys(conn, [*zip(answer_ids, [p.text for p in answer_pieces], strict=True),
                                         *zip(cell_ids, [p.text for p in cell_pieces], strict=True)])
            used = [i for i in read if conn.execute("SELECT 1 FROM chunks WHERE id = ? AND deleted_at IS NULL", (i,)).fetchone()]
            for a in answer_ids:
                for b in used[:MAX_DERIVED]:
                    links.upsert(conn, a, b, "derived_from", 1.0, now)
            links.co_recall(conn, used, self.settings.links, now)
        return answer_ids + cell_ids

    def link(self, a: int, b: int, type: str, strength: float = 1.0) -> None:
        """Link two chunks (``supports``, ``contradicts``, any type); an existing link of that
        type gets this strength.

        Raises:
            ChunkNotFound: either chunk does not exist (or is in the trash).
        """
        if not type or not type.strip():
            raise StoreError("a link needs a type")
        with self._sql_errors(), self.db.write() as conn:
            for i in (a, b):
                if not conn.execute("SELECT 1 FROM chunks WHERE id = ? AND deleted_at IS NULL", (i,)).fetchone():
                    raise ChunkNotFound(i)
            links.set_link(conn, a, b, type.strip(), strength, self.clock())

    def edit(self, chunk_id: int, edit: edits.Edit) -> edits.Edited:
        """Change a live chunk in place (text, kind, tags, summary, confidence): its id, links,
        statistics and recall history stay, and what it held before is kept as a version
        (``history``). A new text is indexed again (words, key terms, vectors) and must fit
        one chunk; only a note's text can change (a file's chunk mirrors its file).

        Raises:
            ChunkNotFound: no live chunk has this id.
            StoreError: a file chunk's text, a text longer than one chunk, a bad value.
        """
        tokens = 0
        if edit.text is not edits.KEEP:
            edit = edits.check(edit)
            pieces = self._pieces(edit.text, None)
            if len(pieces) != 1:
                raise StoreError(f"the new text is {len(pieces)} chunks long (a chunk holds up to "
                                 f"{self.settings.ingest.max_tokens} tokens): add it as a note and forget this one")
            edit = dataclasses.replace(edit, text=pieces[0].text)
            tokens = pieces[0].tokens
        with self._sql_errors(), self.db.write() as conn:
            template = ANSWER_TEMPLATE if conn.execute(
                "SELECT 1 FROM chunks c JOIN sources s ON s.id = c.source_id WHERE c.id = ? AND s.path LIKE 'run:%'",
                (chunk_id,)).fetchone() else frozenset()
            return edits.apply(conn, chunk_id, edit, now=self.clock(), link_cfg=self.settings.links, tokens=tokens,
                               fast=self._writing_vectors(), template=template)

    def history(self, chunk_id: int) -> list[edits.Version]:
        """Every state of a live chunk, oldest first, the current one last (``edit``).

        Raises:
            ChunkNotFound: no live chunk has this id.
        """
        with self._sql_errors(), self.db.snapshot() as conn:
            return edits.history(conn, chunk_id)

    def unlink(self, a: int, b: int, type: str) -> bool:
        """Remove a link; whether there was one."""
        with self._sql_errors(), self.db.write() as conn:
            return links.unlink(conn, a, b, type)

    def pin(self, ids: Iterable[int], pinned: bool = True) -> Changed:
        """Pin live chunks (never pruned) or unpin them (``curation.pin``)."""
        with self._sql_errors(), self.db.write() as conn:
            return curation.pin(conn, ids, pinned)

    def expire(self, ids: Iterable[int], at: float | None) -> Changed:
        """Set when live chunks expire (seconds since the epoch; None: never). A chunk
        promoted to long-term later loses its expiry (``lifecycle``).

        Raises:
            StoreError: ``at`` is not a finite time.
        """
        if at is not None and not (isinstance(at, (int, float)) and -1e12 < at < 1e12):
            raise StoreError(f"not a time: {at!r}")
        with self._sql_errors(), self.db.write() as conn:
            return curation.expire(conn, ids, at)

    def forget(self, ids: int | Iterable[int]) -> Changed:
        """Move chunks to the trash: every search, recall, read and export leaves them out
        until ``restore``; ``purge`` deletes them for good."""
        with self._sql_errors(), self.db.write() as conn:
            return curation.soft_delete(conn, [ids] if isinstance(ids, int) else ids, self.clock())

    def restore(self, ids: Iterable[int]) -> Changed:
        """Bring chunks back from the trash, as they were (links, vectors, statistics)."""
        with self._sql_errors(), self.db.write() as conn:
            return curation.restore(conn, ids)

    def purge(self, older_than_s: float | None = None, *, dry_run: bool = False) -> list[int]:
        """Delete for good the chunks in the trash (those moved there at least
        ``older_than_s`` seconds ago when given), with their links and statistics (their
        neighbours stay linked ``follows``); return their ids (that would go, with ``dry_run``)."""
        before = None if older_than_s is None else self.clock() - older_than_s
        with self._sql_errors():
            if dry_run:
                with self.db.snapshot() as conn:
                    return curation.in_trash(conn, before)
            with self.db.write() as conn:
                ids = curation.in_trash(conn, before)
                curation.purge(conn, ids, self.clock())
                return ids

    def in_trash(self, chunk_id: int) -> bool:
        """Whether the chunk is in the trash (forgotten, not yet purged)."""
        with self._sql_errors(), self.db.snapshot() as conn:
            return conn.execute("SELECT 1 FROM chunks WHERE id = ? AND deleted_at IS NOT NULL", (int(chunk_id),)).fetchone() is not None

    def list_chunks(self, filters: curation.ListFilter | None = None, *, limit: int = 50) -> list[Listed]:
        """Chunks without a query, most recently stored first (``curation.list_chunks``)."""
        with self._sql_errors(), self.db.snapshot() as conn:
            return curation.list_chunks(conn, filters or curation.ListFilter(), limit)

    def forget_source(self, path: str | os.PathLike[str], *, dry_run: bool = False) -> int:
        """Delete a source (a file path, a folder's path: every file stored under it, or a
        memory label such as ``run:<id>``) and all its chunks, with their links and stats.
        Returns the chunks deleted, or that would be with ``dry_run`` (0: no such source).
        This deletes for good, the source's chunks in the trash too: a file's chunks mirror
        the file, and ``rlm memory add`` brings them back.
        A folder matches whole path components: ``/a/b`` never takes ``/a/bc``."""
        name = os.fspath(path)
        full = os.path.abspath(os.path.expanduser(name))
        under = full.rstrip(os.sep) + os.sep
        like = under.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        with self._sql_errors():
            with self.db.snapshot() as conn:
                rows = conn.execute(
                    """SELECT s.id, (SELECT count(*) FROM chunks c WHERE c.source_id = s.id) FROM sources s
                       WHERE (s.kind = 'file' AND (s.path = ? OR s.path LIKE ? ESCAPE '\\')) OR (s.kind = 'memory' AND s.path = ?)""",
                    (full, like, name)).fetchall()
            if dry_run:
                return sum(int(r[1]) for r in rows)
            return sum(_ingest.remove_source(self.db, int(r[0])) for r in rows)

    # ------------------------------------------------------------------ reading

    def _df(self, budget: int | None = None) -> dict[str, int]:
        """Document frequencies counted up to ``budget + 1`` (default: ``rank_budget``), kept
        until the store changes; one cache a budget (a count capped lower would read as a
        smaller frequency under a higher one)."""
        version = self.db.data_version()
        if version != self._df_version:
            self._df_cache.clear()
            self._df_version = version
        return self._df_cache.setdefault(self.settings.search.rank_budget if budget is None else budget, {})

    def search(self, query: str, *, k: int = 10, kind: str | Sequence[str] | None = None, tags: str | Sequence[str] | None = None,
               source: str | os.PathLike[str] | None = None, record: bool = True, run_id: str | None = None,
               mode: str | None = None) -> Hits:
        """Ranked search over chunk text: by its words (BM25; see ``search`` for how any text
        becomes a safe, bounded query), by meaning (the chunks' vectors), or both.

        Args:
            query: plain text (never FTS syntax).
            k: hits wanted (at most ``SearchConfig.max_k``).
            kind / tags / source: keep chunks of this kind (or kinds), having every tag, from
                this source path or folder.
            record: count every hit as recalled (trace, reinforcement, ``co_recalled``).
            run_id: the run searching, kept in the trace.
            mode: ``hybrid`` (BM25 and vectors fused, ``SearchConfig.fusion``; by words alone when
                the store has no vectors of its model, said in ``Hits.fallback``), ``bm25`` or
                ``vector``; default ``SearchConfig.mode``.

        Raises:
            StoreError: an unknown mode, or ``vector`` without a model or vectors of it.
        """
        cfg = self.settings.search
        mode = cfg.mode if mode is None else mode
        query = utf8safe(query)  # lone surrogates (a name that is not UTF-8) are no text FTS5 or a tokenizer takes
        if mode not in SEARCH_MODES:
            raise StoreError(f"unknown search mode {mode!r}: one of {', '.join(SEARCH_MODES)}")
        k = max(0, min(k, cfg.max_k))
        filters = search.Filters.of(kind, tags, source)
        vectors = self.vectors if mode != "bm25" else None
        with self._sql_errors():
            with self.db.snapshot() as conn:
                why = _embedder_hint() if vectors is None else vectors.usable(conn)
                if mode == "vector" and why is not None:
                    raise StoreError(f"cannot search by meaning: {why}")
                # What the store recorded re-ranks the text's best (``learned``): it needs more
                # than k of them to choose from.
                depth = max(k, cfg.fuse_depth) if cfg.w_memory > 0 and k > 0 and learned.has_record(conn) else k
                if mode == "bm25" or why is not None:
                    found = search.search(conn, query, depth, filters, cfg, self._df(), snipped=k)
                    if mode == "hybrid":
                        found.fallback = why
                else:
                    assert vectors is not None
                    found = self._by_meaning(conn, vectors, query, depth, filters, mode, snipped=k)
                if depth > k:
                    found = learned.rerank(conn, found, k, filters, cfg, self.settings.recall, self.clock())
                found.strength = self._strength(conn, found)
            if record:
                found.recorded = self._record(found, "search", query, run_id, self.clock())
        return found

    def _strength(self, conn: sqlite3.Connection, found: Hits) -> float:
        """``Hits.strength``: how well the best hit matches the query, whatever the store's size."""
        if not found:
            return 0.0
        best = max(found, key=lambda h: h.score)
        if best.by == "words" and found.terms:
            df = self._df()
            for term in found.terms:
                if term.lower() not in df:  # counted under a hybrid search's budget: count it here too
                    df[term.lower()] = search.capped_df(conn, term, self.settings.search.rank_budget + 1)
            return search.coverage(conn, search.Plan(terms=list(found.terms)), best.chunk_id, df, _chunk_count(conn))
        return min(1.0, max(0.0, found.cosines.get(best.chunk_id, 0.0)))

    def _by_meaning(self, conn: sqlite3.Connection, vectors: Vectors, query: str, k: int, filters: Filters, mode: str,
                    snipped: int | None = None) -> Hits:
        """A ``vector`` or ``hybrid`` search (see ``search``; ``snipped`` as there). A query of
        common words only (BM25 capped: its matches unranked) is ranked by meaning alone."""
        from rlm_runtime.memory import vectors as fusion  # numpy: here only when vectors exist

        cfg = self.settings.search
        depth = max(k, cfg.fuse_depth) if mode == "hybrid" else k

        def allowed(ids: Sequence[int]) -> list[int]:
            return search.existing(conn, ids, filters)

        nearest, cosines, similarity = self._nearest(conn, vectors, query[: hostwrites.SEARCH_QUERY_CHARS], depth, allowed)
        the_plan = search.Plan()
        if mode == "hybrid":
            budget = min(cfg.rank_budget, cfg.hybrid_rank_budget)
            the_plan = search.plan(conn, query, cfg.model_copy(update={"rank_budget": budget}), self._df(budget))
        if mode == "vector" or the_plan.capped or not the_plan.terms:
            scored = nearest[:k]
            used = "vector"
        else:
            words = search.ranked(conn, the_plan, depth, filters)
            # Each list weighs what it is trusted for: words by the most of the query's word
            # weight that one of their first hits holds (1: it has every informative word),
            # raised to ``trust_power``; meaning the rest.
            held = search.coverages(conn, the_plan, [i for i, _ in words[:cfg.trust_hits]], self._df(budget), _chunk_count(conn))
            trust = max(held.values(), default=0.0) ** cfg.trust_power
            w_words, w_meaning = cfg.w_bm25 * trust, cfg.w_vector * (1 - trust)
            if cfg.fusion == "rrf":
                fused = fusion.rrf([([i for i, _ in words], w_words), ([i for i, _ in nearest], w_meaning)], cfg.rrf_k)
            else:
                meaning = dict(nearest)
                if similarity is not None:
                    meaning.update(similarity(conn, query[: hostwrites.SEARCH_QUERY_CHARS], [i for i, _ in words if i not in meaning]))
                    cosines = {**cosines, **meaning}
                fused = fusion.blend(words, meaning, w_words, w_meaning)
            if cfg.word_places:
                fused = fusion.keep_places(fused, [i for i, _ in words[:round(k * trust)]])
            scored = fused[:k]
            used = "hybrid"
        snips = search.snippets(conn, the_plan.any_match, [i for i, _ in scored[:snipped]], cfg.snippet_tokens) if the_plan.terms else {}
        ids = [i for i, _ in scored]
        worded = search.holding(conn, the_plan.any_match, ids) if the_plan.terms else set()
        found = Hits(search.hits(conn, scored, snips, by_meaning=frozenset(ids) - worded), terms=tuple(the_plan.terms),
                     dropped=tuple(the_plan.dropped), mode=used)
        found.cosines = cosines
        return found

    def _nearest(self, conn: sqlite3.Connection, vectors: Vectors, query: str, depth: int,
                 allowed: Callable[[Sequence[int]], list[int]]) -> tuple[list[tuple[int, float]], dict[int, float], Any]:
        """The chunks nearest the query by meaning, best first, with each one's cosine by the
        model that ranked it, and what scores other chunks on the list's scale (None: nothing
        can). The quality tier's vectors rank the chunks that have one; while the fill has not
        reached them all, the fast tier ranks the others and the two lists are joined by their
        ranks (``rrf``: cosines of two models are not on one scale)."""
        from rlm_runtime.memory import vectors as _vectors

        cfg = self.settings.search
        candidates = max(cfg.vector_candidates, depth)
        nearest = vectors.search(conn, query, depth, allowed=allowed, candidates=candidates)
        # The model is loaded only for a store that has quality vectors.
        quality = self.quality if self._quality_factory is not None and _vectors.meta(conn, _vectors.QUALITY) else None
        if quality is None or quality.usable(conn) is not None:
            return nearest, dict(nearest), vectors.similarity
        better = quality.search(conn, query, depth, allowed=allowed, candidates=candidates)
        held = quality.index.ids  # refreshed by its search: the chunks with a quality vector, ascending
        if not held.size:
            return nearest, dict(nearest), vectors.similarity
        if self._covered(vectors, quality):  # every chunk has one: the quality tier alone
            return better, dict(better), quality.similarity
        rest = [(i, s) for i, s in nearest if not _vectors.holds(held, i)]
        joined = _vectors.rrf([([i for i, _ in better], 1.0), ([i for i, _ in rest], 1.0)], cfg.rrf_k)[:depth]
        return joined, {**dict(rest), **dict(better)}, None

    def _covered(self, fast: Vectors, quality: Vectors) -> bool:
        """Whether every chunk with a fast vector has a quality one (their indexes as loaded;
        worked out once a change of either: a size alone would count vectors of chunks gone)."""
        import numpy as np

        key = (fast.index.state, quality.index.state)
        if self._coverage is None or self._coverage[0] != key:
            self._coverage = (key, bool(np.isin(fast.index.ids, quality.index.ids, assume_unique=True).all()))
        return self._coverage[1]

    def _record(self, hits: Sequence[Hit], op: str, query: str | None, run_id: str | None, now: float) -> bool:
        """Count hits as recalled together; False when there is nothing to record, the store
        is read-only, or another writer kept it busy past the timeout (the hits stand)."""
        if not hits or self.db.readonly:
            return False
        try:
            with self.db.write() as conn:
                # A query is whatever sandboxed code passed to search_chunks: kept short (``hostwrites``).
                kept = None if query is None else hostwrites.clip(query, hostwrites.STORED_QUERY_CHARS)
                lifecycle.record(conn, hits, op=op, query=kept, run_id=run_id, now=now, cfg=self.settings.recall,
                                 link_cfg=self.settings.links)
        except StoreError:
            return False
        return True

    def read(self, chunk_id: int, around: int = 0, *, record: bool = True) -> ChunkView:
        """A chunk's text and position, with up to ``around`` neighbours each side.

        Args:
            record: set the chunk's ``accessed`` time.

        Raises:
            ChunkNotFound: no chunk has this id.
        """
        with self._sql_errors():
            with self.db.snapshot() as conn:
                found = _chunks.view(conn, int(chunk_id), max(0, int(around)))
            if record and not self.db.readonly:
                with self.db.write() as conn:
                    conn.execute("UPDATE chunks SET accessed = ? WHERE id = ?", (self.clock(), found.chunk_id))
        return found

    def read_many(self, ids: Iterable[int], around: int = 0, *, record: bool = True) -> list[ChunkView]:
        """Several chunks (in the order given; ids that name no chunk are left out)."""
        ids = list(dict.fromkeys(int(i) for i in ids))
        out = []
        with self._sql_errors():
            with self.db.snapshot() as conn:
                for i in ids:
                    try:
                        out.append(_chunks.view(conn, i, max(0, int(around))))
                    except ChunkNotFound:
                        continue
            if record and out and not self.db.readonly:
                with self.db.write() as conn:
                    now = self.clock()
                    conn.executemany("UPDATE chunks SET accessed = ? WHERE id = ?", [(now, v.chunk_id) for v in out])
        return out

    def links(self, chunk_id: int, type: str | None = None) -> list[Link]:
        """The links from and to a chunk, strongest first."""
        with self._sql_errors(), self.db.snapshot() as conn:
            return links.links_of(conn, chunk_id, type)

    def chunk_stats(self, chunk_id: int) -> ChunkStats:
        """A chunk's recall count, strength (decayed to now), tier, pin and expiry.

        Raises:
            ChunkNotFound: no chunk has this id.
        """
        cfg = self.settings.recall
        with self._sql_errors(), self.db.snapshot() as conn:
            return _chunks.stats_of(conn, chunk_id, self.clock(), cfg.half_life_s, cfg.long_half_life_s)

    # ------------------------------------------------------------------ lifecycle

    def recall(self, query: str | None = None, seeds: Sequence[int] = (), k: int = 10, *, record: bool = True,
               run_id: str | None = None) -> Hits:
        """The ``k`` chunks most worth recalling for a query and/or seed chunks, ranked by text
        relevance, link strength from the seeds, recency and reinforcement (see
        ``lifecycle``; each hit's ``parts`` holds its four terms). Without a query or seeds,
        the recently created or recalled chunks are ranked. Seeds are not returned.

        Args:
            record: count the hits as recalled together.
        """
        cfg = self.settings.recall
        now = self.clock()
        with self._sql_errors():
            with self.db.snapshot() as conn:
                text_scores: dict[int, float] = {}
                snips: dict[int, str] = {}
                the_plan = search.Plan()
                if query:
                    the_plan = search.plan(conn, query, self.settings.search, self._df())
                    scored = search.ranked(conn, the_plan, cfg.candidates, search.Filters())
                    text_scores = dict(scored)
                link_sums = links.neighbours(conn, list(seeds), cfg.link_candidates) if seeds else {}
                top = lifecycle.rank(conn, cfg, now, text_scores=text_scores, link_sums=link_sums, exclude=seeds, k=max(0, k),
                                     recent=not query and not seeds)
                if the_plan.terms:
                    snips = search.snippets(conn, the_plan.any_match, [i for i, _, _ in top if i in text_scores],
                                            self.settings.search.snippet_tokens)
                base = {h.chunk_id: h for h in search.hits(conn, [(i, s) for i, _, s in top], snips)}
            found = Hits((dataclasses.replace(base[i], parts=parts) for i, parts, _ in top if i in base),
                         terms=tuple(the_plan.terms), dropped=tuple(the_plan.dropped), capped=the_plan.capped,
                         all_of=the_plan.all_of)
            if record:
                found.recorded = self._record(found, "recall", query, run_id, now)
        return found

    def reinforce(self, ids: Iterable[int]) -> int:
        """Count chunks as recalled once more (count, time, strength); return how many exist."""
        with self._sql_errors(), self.db.write() as conn:
            return lifecycle.reinforce(conn, list(ids), self.settings.recall, self.clock())

    def decay_and_promote(self, now: float | None = None, dry_run: bool = False) -> LifecycleReport:
        """Write strengths down decayed to ``now`` and promote chunks recalled often enough
        to long-term (see ``lifecycle``); ``dry_run`` only reports."""
        with self._sql_errors():
            return lifecycle.decay_and_promote(self.db, self.settings.recall, self.clock() if now is None else now, dry_run=dry_run)

    def apply_related_cap(self) -> int:
        """Trim ``related_to`` links to ``settings.links.related_cap`` a chunk, when the store
        was never trimmed (made before the cap was kept) or was trimmed to a larger cap; a
        writable open calls it. One pass over those links, once; afterwards one row read.
        Returns the links deleted."""
        if self.db.readonly:
            return 0
        cap = self.settings.links.related_cap
        with self._sql_errors():
            with self.db.snapshot() as conn:
                row = conn.execute("SELECT related_cap FROM upkeep WHERE id = 1").fetchone()
            if row is not None and row[0] is not None and int(row[0]) <= cap:
                return 0
            with self.db.write() as conn:
                removed = links.trim_related(conn, cap)
                # No upkeep row yet: this open starts the upkeep's clock too, as maintain() would.
                conn.execute("INSERT INTO upkeep (id, last_run, related_cap) VALUES (1, ?, ?) "
                             "ON CONFLICT(id) DO UPDATE SET related_cap = excluded.related_cap", (self.clock(), cap))
        return removed

    def maintain(self, *, force: bool = False) -> LifecycleReport | None:
        """The store's scheduled upkeep, when ``settings.maintain_every_s`` have passed since
        the last (a store opened for writing calls it; its first open starts the clock) or
        when ``force``: strengths decayed
        and often-recalled chunks promoted (``decay_and_promote``), the memories ``prune``
        would remove moved to the trash instead (``restore`` brings them back, ``purge``
        deletes them), recall traces past ``trace_retention_days`` dropped. One pass over
        the chunks' statistics, at most once a day by default. None when it was not due (or
        the store is read-only)."""
        if self.db.readonly:
            return None
        now = self.clock()
        cfg = self.settings.recall
        with self._sql_errors():
            with self.db.snapshot() as conn:
                row = conn.execute("SELECT last_run FROM upkeep WHERE id = 1").fetchone()
            every = self.settings.maintain_every_s
            if row is None and not force:
                # The first open since the upkeep existed starts its clock: a day from now.
                with self.db.write() as conn:
                    conn.execute("INSERT OR IGNORE INTO upkeep (id, last_run) VALUES (1, ?)", (now,))
                return None
            # A clock behind the last run (set back) is not due: never twice in a day. A last run
            # that is no time (a store file from elsewhere: 1e300 would never be due) is unknown: due.
            last = timestamps.valid(row[0]) if row is not None else None
            due = every > 0 and row is not None and (last is None or now - last >= every)
            if not (force or due):
                return None
            aged = lifecycle.decay_and_promote(self.db, cfg, now)
            with self.db.snapshot() as conn:
                reasons = lifecycle.prune_candidates(conn, cfg, now)
            with self.db.write() as conn:
                moved = curation.soft_delete(conn, sorted(reasons), now)
                traces = conn.execute("DELETE FROM recall_traces WHERE at < ?",
                                      (now - self.settings.trace_retention_days * lifecycle.DAY,)).rowcount
                conn.execute("INSERT INTO upkeep (id, last_run) VALUES (1, ?) "
                             "ON CONFLICT(id) DO UPDATE SET last_run = excluded.last_run", (now,))
        return LifecycleReport(dry_run=False, decayed=aged.decayed, promoted=aged.promoted, removed=moved.done,
                               reasons={i: reasons[i] for i in moved.done}, traces_removed=max(0, traces))

    def prune(self, now: float | None = None, dry_run: bool = False) -> LifecycleReport:
        """Remove expired and faded memories (never pinned ones, never file chunks by
        strength; see ``lifecycle``) and old recall traces; ``dry_run`` only reports."""
        at = self.clock() if now is None else now
        with self._sql_errors():
            return lifecycle.prune(self.db, self.settings.recall, at, dry_run=dry_run,
                                   trace_before=at - self.settings.trace_retention_days * lifecycle.DAY)

    # ------------------------------------------------------------------ the store as a whole

    def stats(self) -> StoreStats:
        """Chunks, sources, tokens, links by type, tiers, pinned chunks, traces, size on disk."""
        with self._sql_errors(), self.db.snapshot() as conn:
            # total(), not sum(): SQLite's sum() of integers raises on an overflow (tokens from elsewhere).
            chunks, tokens = conn.execute("SELECT count(*), total(tokens) FROM chunks WHERE deleted_at IS NULL").fetchone()
            deleted = conn.execute("SELECT count(*) FROM chunks WHERE deleted_at IS NOT NULL").fetchone()[0]
            sources = conn.execute("SELECT count(*) FROM sources").fetchone()[0]
            by_type = dict(conn.execute("SELECT type, count(*) FROM links GROUP BY type ORDER BY type").fetchall())
            # Less the links that touch the trash (read through its index, not link by link).
            for kind, n in conn.execute(
                    """SELECT type, count(*) FROM (
                           SELECT src, type, dst FROM links WHERE src IN (SELECT id FROM chunks WHERE deleted_at IS NOT NULL)
                           UNION SELECT src, type, dst FROM links WHERE dst IN (SELECT id FROM chunks WHERE deleted_at IS NOT NULL))
                       GROUP BY type"""):
                by_type[kind] -= n
            by_type = {k: v for k, v in by_type.items() if v}
            live = "chunk_id NOT IN (SELECT id FROM chunks WHERE deleted_at IS NOT NULL)"  # reads only the trash's index
            tiers = dict(conn.execute(f"SELECT tier, count(*) FROM chunk_stats WHERE {live} GROUP BY tier ORDER BY tier").fetchall())
            pinned = conn.execute(f"SELECT count(*) FROM chunk_stats WHERE pinned = 1 AND {live}").fetchone()[0]
            traces = conn.execute("SELECT count(*) FROM recall_traces").fetchone()[0]
            names = tuple(applied(conn))
            has_vectors = "m006_chunk_vectors" in names
            vectors = int(conn.execute(f"SELECT count(*) FROM chunk_vectors WHERE {live}").fetchone()[0]) if has_vectors else 0
            model = conn.execute("SELECT model FROM vector_meta WHERE id = 1").fetchone() if has_vectors else None
            quality = _quality_stats(conn) if "m012_quality_vectors" in names else (0, None, None)
        size = sum(p.stat().st_size for p in (self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm")) if p.exists())
        return StoreStats(str(self.path), int(chunks), int(sources), int(tokens), by_type, tiers, int(pinned), int(traces), size, names,
                          vectors, None if model is None else str(model[0]), int(deleted), *quality)

    def reindex(self, *, rebuild: bool = False, progress: Callable[[ReindexProgress], None] | None = None,
                stop: _ingest.Stop | None = None, batch: int = 0) -> ReindexReport:
        """Give every chunk without a vector one (a store made before vectors, or by a process
        without the model), ``batch`` chunks per transaction, so a killed reindex keeps what it
        committed and the next one goes on from there. The store's vectors of another model
        (or all of them, with ``rebuild``) are dropped first, in one transaction.

        Args:
            progress: called after each committed batch.
            stop: called between batches; what it raises ends the reindex (batches kept).
            batch: chunks per transaction (default ``vectors.REINDEX_BATCH``).

        Raises:
            StoreError: no embedding model, or the store is read-only.
        """
        from rlm_runtime.memory import vectors as _vectors

        model = self.vectors
        if model is None:
            raise StoreError(f"cannot make vectors: {_embedder_hint()}")
        began = time.perf_counter()
        with self._sql_errors():
            rebuilt, kept, total = self._claim_tier(model, rebuild)
            done, after = 0, 0
            while True:
                if stop is not None:
                    stop()
                with self.db.write() as conn:
                    written, after = model.fill(conn, after=after, limit=batch or _vectors.REINDEX_BATCH)
                if not after:
                    break
                done += written
                if progress is not None:
                    progress(ReindexProgress(done, total, time.perf_counter() - began))
        return ReindexReport(done, kept, model.embedder.name, rebuilt, time.perf_counter() - began)

    def _claim_tier(self, model: Vectors, rebuild: bool) -> tuple[bool, int, int]:
        """Before a fill of ``model``'s tier: drop the tier's vectors of another model (or all,
        with ``rebuild``), in one transaction; (whether it did, chunks with a vector, chunks)."""
        from rlm_runtime.memory import vectors as _vectors

        if self.db.readonly:
            raise StoreError(f"the memory store {self.path} is open read-only")
        with self.db.write() as conn:
            rebuilt = rebuild or (_vectors.meta(conn, model.tier) is not None and model.usable(conn) is not None)
            if rebuilt:
                model.reset(conn)
            kept, total = _vectors.counts(conn, model.tier)
        return rebuilt, kept, total

    def fill_quality(self, *, progress: Callable[[ReindexProgress], None] | None = None, stop: _ingest.Stop | None = None,
                     batch: int = 0, rebuild: bool = False) -> ReindexReport:
        """Give the quality tier's vectors to the chunks that have none, newest first, ``batch``
        chunks at a time: each batch is read in a snapshot, embedded with no lock held (the
        model is slow: ingest, search and other writers go on meanwhile), and written in one
        short transaction (a chunk removed meanwhile gets none). A fill stopped or killed keeps
        what it wrote, and the next goes on with the chunks still without. The tier's vectors
        of another model (or all, with ``rebuild``) are dropped first. The characters embedded
        a second are kept for the ETA ``stats`` gives.

        Args:
            progress: called after each batch written.
            stop: called between batches; what it raises ends the fill (batches kept).
            batch: chunks a batch (default ``vectors.QUALITY_BATCH``).

        Raises:
            StoreError: no quality model, or the store is read-only.
        """
        from rlm_runtime.memory import vectors as _vectors

        model = self.quality
        if model is None:
            raise StoreError("cannot make quality vectors: the quality model is not installed "
                             "(pip install 'rlm_runtime[quality]' && rlm model install minilm-l6)")
        began = time.perf_counter()
        size = batch or _vectors.QUALITY_BATCH
        with self._sql_errors():
            rebuilt, kept, total = self._claim_tier(model, rebuild)
            done, chars, before = 0, 0, None
            while True:
                if stop is not None:
                    stop()
                with self.db.snapshot() as conn:
                    rows = _vectors.missing(conn, model.tier, before, size)
                if not rows:
                    break
                before = rows[-1][0]
                texts = [text for _, text in rows]
                vectors = self._embed_stoppable(model, texts, stop)
                with self.db.write() as conn:
                    done += model.put(conn, [cid for cid, _ in rows], vectors, appended=False)
                    chars += sum(map(len, texts))
                    elapsed = time.perf_counter() - began
                    _vectors.set_rate(conn, model.tier, chars / elapsed if elapsed > 0 else 0.0)
                if progress is not None:
                    progress(ReindexProgress(done, total, time.perf_counter() - began))
        return ReindexReport(done, kept, model.embedder.name, rebuilt, time.perf_counter() - began)

    def fill_while_idle(self, *, idle_s: float = 60.0, recheck_s: float = 60.0) -> IdleFill:
        """Fill the quality tier in the background while this store's owner is idle (the
        owner marks its work with ``busy()``), on a connection of the fill's own, until the
        store is closed; the fill already started, when there is one (``memory.idlefill``).

        Raises:
            StoreError: the store is read-only, or was opened without a quality model.
        """
        if self.db.readonly:
            raise StoreError("a read-only store cannot be filled")
        if self._quality_factory is None:
            raise StoreError("this store was opened without a quality model (MemoryStore(quality=contextual.factory(...)))")
        if self._idle_fill is None:
            path, settings, embedder, quality = self.path, self.settings, self._embedder_factory, self._quality_factory
            self._idle_fill = IdleFill(
                lambda: [("store", lambda: MemoryStore(path, settings=settings, embedder=embedder, quality=quality))],
                idle_s=idle_s, recheck_s=recheck_s)
            self._idle_fill.start()
        return self._idle_fill

    def busy(self) -> contextlib.AbstractContextManager[None]:
        """Around the owner's work (a question, a request): the fill of ``fill_while_idle``
        stops until the quiet after it; nothing without one."""
        return self._idle_fill.request() if self._idle_fill is not None else contextlib.nullcontext()

    @staticmethod
    def _embed_stoppable(model: Vectors, texts: list[str], stop: _ingest.Stop | None) -> Any:
        """``texts``' vectors, as many texts a call as the model runs at once (its ``threads``,
        side by side; no more than the machine's cores), with ``stop`` called between calls: a
        request or a close waits for one call, about one text's time (eight windows at most),
        not a batch's."""
        import numpy as np

        at_once = max(1, min(int(getattr(model.embedder, "threads", 1)), os.cpu_count() or 1))
        rows: list[Any] = []
        for start in range(0, len(texts), at_once):
            if stop is not None:
                stop()
            rows.extend(model.embedder.embed(texts[start:start + at_once]))
        return np.stack(rows).astype(np.float32, copy=False)

    def export_jsonl(self, target: transfer.Target) -> int:
        """Write the whole store as JSON lines (see ``transfer``); return the records written."""
        with self._sql_errors():
            return transfer.export_jsonl(self.db, target, self.clock())

    def import_jsonl(self, source: transfer.Target) -> dict[str, int]:
        """Read an export into this store (ids kept when the store is empty, else merged; see
        ``transfer``); return the counts added."""
        model = self._writing_vectors()
        with self._sql_errors(), self.db.write() as conn:  # the import's own transaction joins this one
            counts = transfer.import_jsonl(self.db, source)
            after = 0
            while model is not None:  # the imported chunks' vectors, in the same transaction
                after = model.fill(conn, after=after, limit=4096)[1]
                if not after:
                    break
        return counts

    def integrity_check(self) -> list[str]:
        """Problems found by SQLite's ``integrity_check`` and FTS5's own check of the index
        against the chunks; empty when the store is sound. Reads the whole file (about a
        minute per GB)."""
        problems: list[str] = []
        with self.db.lock:
            rows = [str(r[0]) for r in self.db.conn.execute("PRAGMA integrity_check").fetchall()]
            if rows != ["ok"]:
                problems += rows
            try:
                self.db.conn.execute("INSERT INTO chunks_fts (chunks_fts, rank) VALUES ('integrity-check', 1)")
            except sqlite3.Error as e:
                problems.append(f"full-text index: {e}")
        return problems

    def optimize(self) -> None:
        """Merge the full-text index into one segment (faster searches after a big ingest;
        rewrites the index: minutes at 1M chunks) and refresh the planner's statistics."""
        with self._sql_errors(), self.db.write() as conn:
            conn.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('optimize')")
            conn.execute("PRAGMA optimize")


#: The largest store read through a descriptor into a private copy (a server's read-only mount).
MAX_COPIED_BYTES = 2 << 30


def _copied(source: Path) -> Path:
    """A private copy (0600, in a 0700 temporary folder) of the store open at the descriptor
    path ``source``, read through the descriptor itself: bounded, never by a name."""
    import shutil
    import stat
    import tempfile

    fd = int(source.name)
    try:
        st = os.fstat(fd)
    except OSError as e:
        raise StoreError(f"cannot read the memory store: {e.strerror or e}") from e
    if not stat.S_ISREG(st.st_mode):
        raise StoreError("the memory store is not a regular file")
    if st.st_size > MAX_COPIED_BYTES:
        raise StoreError(f"the memory store holds {st.st_size:,} bytes, more than the {MAX_COPIED_BYTES:,} read "
                         "through a descriptor")
    folder = Path(tempfile.mkdtemp(prefix="rlm-store-"))
    copy = folder / "store.db"
    try:
        out = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
        try:
            done = 0
            while done < st.st_size:
                block = os.pread(fd, min(1 << 20, st.st_size - done), done)
                if not block:
                    break
                view = memoryview(block)
                while view:
                    view = view[os.write(out, view):]
                done += len(block)
        finally:
            os.close(out)
    except OSError as e:
        shutil.rmtree(folder, ignore_errors=True)
        raise StoreError(f"cannot read the memory store: {e.strerror or e}") from e
    return copy


def _remove_copy(copy: Path | None) -> None:
    if copy is not None:
        import shutil

        shutil.rmtree(copy.parent, ignore_errors=True)
