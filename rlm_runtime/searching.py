"""``search_chunks``, ``read_chunk`` and ``semantic_grep``: ranked search over a session's
contexts and memory.

Served on the host, like ``llm_query``: the worker never opens an index or the store. Each
context is chunked and indexed on first use into a store of its own under
``$RLM_HOME/index/`` (``MemoryStore``: SQLite + FTS5), keyed by the file's or folder's path
(re-ingest is incremental: unchanged files are skipped) or by the text's hash, so a second
question over the same 1 GB file does not index it again. The memory store, when the
session has one, is searched with them, and its hits count as recalls.

Indexes are bounded in time (``hostwrites``): the index of a text context (a str, a
sub-call's document) is the session's own, named with its process id, and removed when the
session closes; one left by a process that died is removed by the next session that builds an
index. An index of a file is reused by later sessions and removed once unused for
``PATH_INDEX_MAX_AGE_S``: a file given by its path is ingested by path (``path-``), and text
read from files some other way (a folder's documents, a file a server opened by descriptor) is
keyed by where it comes from and what it holds (``file-<source>-<version>``, the version a
hash of its bytes): built under a name of its own, renamed into place once whole, reused while
the text is the same, and its older versions removed when a new one is built. A folder's
documents are each indexed as a source of their own, named as the folder names them: a hit
says which file it is in, and its lines are that file's. The folder is
private (0700) and the databases 0600.

Chunk ids given to the model are strings naming where they live: ``m12`` is chunk 12 of the
memory store, ``c0.31`` chunk 31 of the index of ``contexts[0]``.

Search ranks by words (BM25), by meaning (vectors) or both (``mode``, default ``hybrid``: see
``MemoryStore.search``); an index gets its chunks' vectors as it is built, and an index built
before vectors existed gets them the first time it is used. ``semantic_grep`` ranks one
context's paragraph chunks by meaning alone and returns them with their line numbers, like
grep's hits. Every argument comes from sandboxed code: each is checked here, on the host.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlm_runtime import embeddings, hostwrites, private
from rlm_runtime.errors import HostCallError, RLMError, RunFailed, TooLarge
from rlm_runtime.utf8safe import is_utf8

if TYPE_CHECKING:  # the store is imported on first use: a session that never searches never pays for it
    from rlm_runtime.memory.records import ChunkView, Hit
    from rlm_runtime.memory.store import MemoryStore

#: Most hits one search returns.
MAX_K = 50
#: Characters of a hit's snippet given to the model.
SNIPPET_CHARS = 300
#: Links a memory hit names (``linked``), at most.
LINKS_SHOWN = 3
#: Characters of a paragraph ``semantic_grep`` returns.
PARAGRAPH_CHARS = 600
#: The ranking modes ``search_chunks`` takes (``MemoryStore.search``).
MODES = ("hybrid", "bm25", "vector")


class ChunkSearch:
    """The searchable chunks of one session: an index per context, and the memory store.

    Args:
        index_dir: where context indexes live (``$RLM_HOME/index``).
        memory: the memory store searched too (None: none).
        embedder: the embedding model's factory for the context indexes (default: the
            store's, ``embeddings.default_embedder``; None: words only).
        mode: how a search that names no ``mode`` ranks (None: the stores' setting,
            ``SearchConfig.mode``, hybrid): ``rlm eval``'s ``rlm-words`` sets ``bm25``.
    """

    def __init__(self, index_dir: Path, memory: MemoryStore | None = None,
                 embedder: embeddings.EmbedderFactory | None = embeddings.default_embedder,
                 mode: str | None = None) -> None:
        if mode is not None and mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}")
        self.index_dir = index_dir
        self.memory = memory
        self.embedder = embedder
        self.mode = mode
        self.handles: list[Any] = []
        self._indexes: dict[int, MemoryStore] = {}
        #: Index files of text contexts this object made: removed at ``close``.
        self._own_files: list[Path] = []
        self._swept = False
        self._lock = threading.Lock()
        #: Memory chunks the current question read, distinct, in order, at most REMEMBERED_READ_IDS.
        self.memory_ids_read: dict[int, None] = {}
        self._recorded: dict[str | None, int] = {}  # searches recorded in the memory store, by run
        self._recorded_lock = threading.Lock()

    def _shown(self, e: BaseException) -> str:
        """An error's message as sandboxed code may read it: the host's index folder and
        memory store path, which a store error names, left out."""
        text = str(e)
        if self.memory is not None:
            text = text.replace(str(self.memory.path), "the memory store")
        return text.replace(str(self.index_dir), "the index folder")

    def set_contexts(self, handles: Sequence[Any]) -> None:
        self.handles = list(handles)

    def drop_context(self, k: int) -> None:
        """Close the index of ``contexts[k]``: its text changed (a file read again), and the
        next search brings it up to date (a file's or folder's index incrementally)."""
        with self._lock:
            store = self._indexes.pop(k, None)
            if store is not None:
                store.close()

    def drop_contexts_from(self, k: int) -> None:
        """Close the indexes of ``contexts[k:]``: a context taken out at place ``k`` moves the
        later ones down a place, and each index is found by its place (a later search opens
        them again, a file's or folder's from the index kept on disk)."""
        with self._lock:
            for n in [n for n in self._indexes if n >= k]:
                self._indexes.pop(n).close()

    def close(self) -> None:
        """Close the indexes; remove those of text contexts (no later session can reuse them)."""
        with self._lock:
            for store in self._indexes.values():
                store.close()
            self._indexes.clear()
            for path in self._own_files:
                _remove_db(path)
            self._own_files.clear()

    # ------------------------------------------------------------------ indexes

    def _index(self, k: int, stop: Callable[[], None] | None = None) -> MemoryStore:
        """The index of ``contexts[k]``, built (or brought up to date) on first use; ``stop``
        is called between files and windows of the build (``Budget.check_time``: cancel and
        ``max_wall_s`` reach a build of hostile or huge text)."""
        with self._lock:
            if k in self._indexes:
                return self._indexes[k]
            handle = self.handles[k]
            key, paths, text, documents = _index_key(handle)
            from rlm_runtime.memory.store import MemoryStore

            private.make_dir(self.index_dir)
            if not self._swept:
                self._swept = True
                _sweep(self.index_dir)
            kept = self.index_dir / f"{key}.db"
            if key.startswith("file-") and kept.exists():
                found = self._kept(kept, text)
                if found is not None:
                    try:
                        os.utime(kept)  # used now: the sweep keeps it another PATH_INDEX_MAX_AGE_S
                    except OSError:
                        pass  # removed meanwhile (a newer version built): this one is open all the same
                    self._indexes[k] = found
                    return found
            if paths:
                path = kept
                if path.exists():
                    os.utime(path)
            else:
                # A text's (the session's own) or a file's text built under a name of its own:
                # removed at close, or renamed into place once whole (``_keep``).
                path = self.index_dir / f"text-{key.split('-', 2)[-1][:32]}-{os.getpid()}-{uuid.uuid4().hex[:8]}.db"
                self._own_files.append(path)
            began = time.time_ns()
            store = MemoryStore(path, embedder=self.embedder)
            try:
                if paths:
                    store.ingest(paths, stop=stop)
                elif text is not None and store.stats().chunks == 0:
                    if stop is not None:
                        stop()  # before the text is read: a folder's may be large
                    # All or nothing; every paragraph kept, a repeated one too (dedup is for notes).
                    # A folder's documents each a source of their own: a hit names its file
                    # and the file's own lines, as grep does.
                    for name, doc in documents() if documents is not None else [(handle.name, text())]:
                        if stop is not None:
                            stop()
                        if doc.strip():
                            store.add_text(doc, source=name, kind=None, stop=stop, dedup=False)
                stats = store.stats()
                if store.vectors is not None and stats.vectors < stats.chunks:
                    store.reindex(stop=stop)  # an index built before vectors, or by a process without the model
            except BaseException:
                store.close()
                raise
            if key.startswith("file-"):
                store = self._keep(store, path, kept, text, began)
            self._indexes[k] = store
            return store

    def _kept(self, path: Path, text: Callable[[], str] | None) -> MemoryStore | None:
        """A kept index of a file's text, opened read-only; None when it is not there (removed
        meanwhile: an empty store where the text has words), not this version's, or damaged:
        the caller builds it again."""
        from rlm_runtime.memory.store import MemoryStore, StoreError

        try:
            store = MemoryStore(path, embedder=self.embedder, readonly=True)
        except StoreError:
            return None
        try:
            if store.stats().chunks == 0 and text is not None and text().strip():
                store.close()
                return None
        except (StoreError, OSError):
            store.close()
            return None
        return store

    def _keep(self, store: MemoryStore, built: Path, kept: Path, text: Callable[[], str] | None,
              began: int) -> MemoryStore:
        """Put the whole index ``built`` in its kept place ``kept``, remove the older versions
        of the same source, and open it there, read-only.

        A kept index has no write-ahead log (journal mode DELETE, set before it is closed):
        renamed over a version another process still reads, it leaves that process its own
        file, and no -wal or -shm beside the name belongs to another file."""
        try:
            with store._sql_errors():
                store.db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                store.db.conn.execute("PRAGMA journal_mode = DELETE")
        finally:
            store.close()
        # Opened before it is renamed: this search reads the file it built whatever another
        # process does to the kept name meanwhile.
        found = self._kept(built, text)
        if found is None:
            raise HostCallError("a search index could not be opened after it was built: search again")
        # Its time is when its build began (the text read then): a version of the same source
        # built from a later read is newer and stays; older ones go.
        os.utime(built, ns=(began, began))
        os.replace(built, kept)
        _remove_db(built)  # a -wal or -shm left beside the old name
        self._own_files.remove(built)
        source = kept.name[: -len(".db")].rsplit("-", 1)[0] + "-"
        for old in self.index_dir.glob(f"{source}*.db"):
            try:
                older = old.stat().st_mtime_ns < began
            except OSError:
                continue
            if old != kept and older:
                _remove_db(old)
        return found

    # ------------------------------------------------------------------ the tools

    def meaning_available(self) -> bool:
        """Whether search by meaning can work here (an embedding model is installed), without
        loading the model."""
        return self.embedder is not None and (self.embedder is not embeddings.default_embedder or embeddings.installed())

    def search(self, query: str, k: int = 10, kind: str | None = None, tags: list[str] | None = None,
               source: str | None = None, run_id: str | None = None,
               stop: Callable[[], None] | None = None, mode: str | None = None) -> list[dict[str, Any]]:
        """The ``k`` best chunks for ``query`` over every context and the memory store,
        ranked by ``mode`` (``hybrid``, the default, ``bm25`` or ``vector``). Each store's hits
        are put on one scale before they are merged (``Hits.relative``: a note that holds the
        query's words ranks with the context's best, however few chunks its store holds); a hit
        ``score`` is on that scale, from 0 to 1.

        ``stop`` (``Budget.check_time``) is called while an index is built; what it raises
        (``Cancelled``, ``BudgetExceeded``) comes out as it is."""
        if not isinstance(query, str) or not query.strip():
            raise HostCallError("search_chunks takes a non-empty query str")
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
            raise HostCallError(f"k must be an int from 1 to {MAX_K}")
        if mode is not None and (type(mode) is not str or mode not in MODES):
            raise HostCallError(f"mode must be one of {', '.join(repr(m) for m in MODES)}")
        mode = mode if mode is not None else self.mode
        if kind is not None and not isinstance(kind, str):
            raise HostCallError("kind must be a str")
        if tags is not None and not (isinstance(tags, list) and all(isinstance(t, str) for t in tags)):
            raise HostCallError("tags must be a list of str")
        if source is not None and not isinstance(source, str):
            raise HostCallError("source must be a str")
        # Words past the first few thousand characters change no ranking worth having, and
        # the query is kept in the memory store's recall traces.
        query = query[: hostwrites.SEARCH_QUERY_CHARS]
        found: list[tuple[str, Hit, float]] = []
        try:
            for n in range(len(self.handles)):
                hits = self._index(n, stop).search(query, k=k, kind=kind, tags=tags, source=source, record=False, mode=mode)
                found += [(f"c{n}.{h.chunk_id}", h, hits.relative(h)) for h in hits]
            if self.memory is not None:
                hits = self.memory.search(query, k=k, kind=kind, tags=tags, source=source, record=self._may_record(run_id),
                                          run_id=run_id, mode=mode)
                found += [(f"m{h.chunk_id}", h, hits.relative(h)) for h in hits]
                self._note_read(h.chunk_id for h in hits)
        except (RunFailed, TooLarge):  # cancelled, or out of time (a run's or a server's): not the call's error
            raise
        except RLMError as e:
            raise HostCallError(f"search_chunks failed: {self._shown(e)}") from e
        found.sort(key=lambda one: one[2], reverse=True)
        out = [_hit(cid, h, score) for cid, h, score in found[:k]]
        if self.memory is not None:
            self._say_links(out)
        return out

    def _say_links(self, hits: list[dict[str, Any]]) -> None:
        """Give each memory hit the links a person gave it (``linked``: id and type, at most
        ``LINKS_SHOWN``): a note another note contradicts says so where it is found."""
        from rlm_runtime.memory.links import AUTOMATIC_TYPES

        assert self.memory is not None
        for hit in hits:
            if not hit["id"].startswith("m"):
                continue
            number = int(hit["id"][1:])
            try:
                given = [x for x in self.memory.links(number) if x.type not in AUTOMATIC_TYPES][:LINKS_SHOWN]
            except RLMError:
                continue
            if given:
                hit["linked"] = [{"id": f"m{x.dst if x.src == number else x.src}", "link": x.type} for x in given]

    def semantic_grep(self, query: str, k: int = 10, context: int = 0, stop: Callable[[], None] | None = None) -> list[dict[str, Any]]:
        """The ``k`` paragraphs of ``contexts[context]`` nearest in meaning to ``query``, best
        first: ``{"source", "lines": "12-18", "score", "text"}`` (the text cut at
        ``PARAGRAPH_CHARS``; in a folder, ``source`` is the file and ``lines`` are its own).
        The index's chunks nearest to the query (``2k`` of them) are split at blank lines,
        and their paragraphs ranked against the query by the same model."""
        if not isinstance(query, str) or not query.strip():
            raise HostCallError("semantic_grep takes a non-empty query str")
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
            raise HostCallError(f"k must be an int from 1 to {MAX_K}")
        if not isinstance(context, int) or isinstance(context, bool) or not 0 <= context < len(self.handles):
            raise HostCallError(f"context must be the number of a context, from 0 to {len(self.handles) - 1}"
                                if self.handles else "semantic_grep: this run has no context")
        if not self.meaning_available():
            raise HostCallError(f"semantic_grep needs an embedding model ({embeddings.INSTALL_HINT}): use search_chunks or grep")
        query = query[: hostwrites.SEARCH_QUERY_CHARS]
        try:
            store = self._index(context, stop)
            hits = store.search(query, k=min(MAX_K, 2 * k), record=False, mode="vector")
            views = store.read_many([h.chunk_id for h in hits], record=False)
        except RunFailed:
            raise
        except RLMError as e:
            raise HostCallError(f"semantic_grep failed: {self._shown(e)}") from e
        paragraphs = [(v.source, *p) for v in views for p in _paragraphs(v.text, v.start_line)]
        if not paragraphs or store.vectors is None:
            return []
        model = store.vectors.embedder
        scores = model.embed([text for _, _, _, text in paragraphs]) @ model.embed([query])[0]
        ranked = sorted(range(len(paragraphs)), key=lambda i: -float(scores[i]))[:k]
        out = []
        for i in ranked:
            source, first, last, text = paragraphs[i]
            text = text if len(text) <= PARAGRAPH_CHARS else text[:PARAGRAPH_CHARS] + "…"
            out.append({"source": source, "lines": f"{first}-{last}", "score": round(float(scores[i]), 3), "text": text})
        return out

    def _note_read(self, ids: Iterable[int]) -> None:
        for i in ids:
            if len(self.memory_ids_read) >= hostwrites.REMEMBERED_READ_IDS:
                return
            self.memory_ids_read.setdefault(i)

    def _may_record(self, run_id: str | None) -> bool:
        """Whether this search of ``run_id`` is recorded in the memory store (``hostwrites``)."""
        with self._recorded_lock:
            done = self._recorded.get(run_id, 0)
            self._recorded[run_id] = done + 1
        return done < hostwrites.RUN_RECORDED_SEARCHES

    def read(self, chunk_id: str, around: int = 0, stop: Callable[[], None] | None = None) -> str:
        """A chunk's text, with ``around`` neighbours each side, headed by where it is from
        (``stop``: as ``search``'s, while a context's index is built)."""
        if not isinstance(around, int) or isinstance(around, bool) or not 0 <= around <= 5:
            raise HostCallError("around must be an int from 0 to 5")
        store, number = self._locate(chunk_id, stop)
        if not 0 <= number < 2**63:  # not a SQLite integer: no such chunk (fail closed)
            raise HostCallError(f"no chunk {chunk_id!r}: give an id as search_chunks returned it (like 'c0.12' or 'm7')")
        try:
            view = store.read(number, around=around, record=store is self.memory)
        except RLMError as e:
            raise HostCallError(f"read_chunk({chunk_id!r}): {self._shown(e)}") from e
        if store is self.memory:
            self._note_read([number])
        return _render(view)

    def related(self, chunk_id: str, k: int = 10, stop: Callable[[], None] | None = None) -> list[dict[str, Any]]:
        """The chunks linked to one (``m12``, ``c0.31``), strongest link first: each with its id,
        the link's type and strength, which way it points (``to`` the other chunk or ``from``
        it; both for a symmetric type), where it is from and the start of its text. Links to
        the chunk's neighbours (``follows``) are left out: ``read_chunk(id, around=1)`` reads those.
        ``stop``: as ``search``'s, while a context's index is built."""
        from rlm_runtime.memory.links import SYMMETRIC_TYPES

        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
            raise HostCallError(f"k must be an int from 1 to {MAX_K}")
        store, number = self._locate(chunk_id, stop)
        if not 0 <= number < 2**63:
            raise HostCallError(f"no chunk {chunk_id!r}: give an id as search_chunks returned it (like 'c0.12' or 'm7')")
        prefix = str(chunk_id)[: str(chunk_id).index(".") + 1] if str(chunk_id).startswith("c") else "m"
        try:
            store.read(number, record=False)  # ChunkNotFound for an id that names no live chunk
            found = [link for link in store.links(number) if link.type != "follows"][:k]
            views = {v.chunk_id: v for v in store.read_many([link.dst if link.src == number else link.src for link in found],
                                                            record=False)}
        except RLMError as e:
            raise HostCallError(f"related({chunk_id!r}): {self._shown(e)}") from e
        out = []
        for link in found:
            other = link.dst if link.src == number else link.src
            view = views.get(other)
            if view is None:
                continue
            way = "both" if link.type in SYMMETRIC_TYPES else ("to" if link.src == number else "from")
            out.append({"id": f"{prefix}{other}", "link": link.type, "way": way, "strength": round(link.strength, 3),
                        "source": view.source, "lines": f"{view.start_line}-{view.end_line}",
                        "snippet": " ".join(view.text.split())[:SNIPPET_CHARS]})
        return out

    def _locate(self, chunk_id: Any, stop: Callable[[], None] | None = None) -> tuple[MemoryStore, int]:
        text = str(chunk_id) if isinstance(chunk_id, (str, int)) and not isinstance(chunk_id, bool) else ""
        try:
            if text.startswith("m") and self.memory is not None:
                return self.memory, int(text[1:])
            if text.startswith("c") and "." in text:
                k, number = text[1:].split(".", 1)
                if 0 <= int(k) < len(self.handles):
                    return self._index(int(k), stop), int(number)
        except ValueError:
            pass
        except (RunFailed, TooLarge):  # cancelled, or out of time while the index was built
            raise
        except RLMError as e:
            raise HostCallError(f"read_chunk({chunk_id!r}): {self._shown(e)}") from e
        raise HostCallError(f"no chunk {chunk_id!r}: give an id as search_chunks returned it (like 'c0.12' or 'm7')")


def _paragraphs(text: str, first_line: int) -> list[tuple[int, int, str]]:
    """(first line, last line, text) of each paragraph of a chunk starting at ``first_line``:
    runs of lines between blank ones."""
    out: list[tuple[int, int, str]] = []
    run: list[str] = []
    start = first_line
    for n, line in enumerate(text.split("\n"), first_line):
        if line.strip():
            if not run:
                start = n
            run.append(line)
        elif run:
            out.append((start, n - 1, "\n".join(run)))
            run = []
    if run:
        out.append((start, start + len(run) - 1, "\n".join(run)))
    return out


def _hit(cid: str, h: Hit, score: float) -> dict[str, Any]:
    snippet = " ".join(h.snippet.split())
    return {"id": cid, "score": round(score, 3), "source": h.source, "lines": f"{h.start_line}-{h.end_line}",
            "by": h.by, "snippet": snippet[:SNIPPET_CHARS]}


def _render(view: ChunkView) -> str:
    parts = [*view.before, view, *view.after]
    first, last = parts[0], parts[-1]
    head = f"[{view.source} lines {first.start_line}-{last.end_line}]"
    return head + "\n" + "\n".join(p.text for p in parts)


def _remove_db(path: Path) -> None:
    for name in (path.name, path.name + "-wal", path.name + "-shm", path.name + "-journal"):
        try:
            os.unlink(path.with_name(name))
        except OSError:
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists (another user's): not ours to judge
        return True
    return True


def _sweep(index_dir: Path) -> None:
    """Remove the text indexes of processes that died, and file indexes unused for long."""
    now = time.time()
    try:
        entries = list(os.scandir(index_dir))
    except OSError:
        return
    for entry in entries:
        name = entry.name
        if not name.endswith(".db"):
            continue
        parts = name[:-3].split("-")
        try:
            if name.startswith("text-"):
                # text-<hash>-<pid>-<token>.db; one without a pid predates session-owned indexes.
                stale = len(parts) != 4 or not parts[2].isdigit() or not _alive(int(parts[2]))
            elif name.startswith(("path-", "file-")):
                stale = now - entry.stat(follow_symlinks=False).st_mtime > hostwrites.PATH_INDEX_MAX_AGE_S
            else:
                continue
        except OSError:
            continue
        if stale:
            _remove_db(Path(entry.path))


#: How a folder's index is laid out: bumped when it changes, so an index built the old way is
#: built again (2: one source a document, named as the folder names it).
_FOLDER_LAYOUT = "2"


def _index_key(handle: Any) -> tuple[str, list[str], Callable[[], str] | None, Callable[[], Iterable[tuple[str, str]]] | None]:
    """(file name of the index, paths to ingest, or what gives the text to index, and for a
    folder what gives its documents' names and texts, each indexed as a source of its own)."""
    # Only a single file given as the context is ingested by path. A folder is indexed from
    # what its corpus handle exposes (the same text grep sees): a folder walk of its own
    # would follow symlinks out of the folder and hand the model files it was never given.
    path = getattr(handle, "path", None)
    if isinstance(path, (str, os.PathLike)) and os.path.isfile(path) and getattr(handle, "root", None) is None:
        real = os.path.realpath(path)
        # Ingested by path only while the path still names the file the handle mapped: one
        # swapped for a symlink (or replaced) since is indexed from the handle's own text.
        try:
            st = os.stat(real)
            same = (st.st_dev, st.st_ino) == getattr(handle, "identity", None)
        except OSError:
            same = False
        # A name that is not UTF-8 cannot be a path in the memory store (it skips the file): its text is indexed.
        if same and is_utf8(real):
            return _path_key(real), [real], None, None
    source = _file_source(handle)
    buffer = getattr(handle, "_buf", None)
    if source is not None and source.startswith("folder:"):
        # A folder's version is what its documents are on disk (name, size, time, inode): no
        # text is read unless it is indexed.
        return f"file-{_hashed(source)}-{_folder_version(handle)}", [], _whole(handle), _texts(handle)
    if source is not None and source.startswith("file:") and buffer is not None:
        # A mapped file's version is the hash of its bytes: nothing decoded unless it is indexed.
        digest = hashlib.sha256(buffer().view).hexdigest()
        return f"file-{_hashed(source)}-{digest[:32]}", [], _whole(handle), None
    text = _whole(handle)()
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    documents = _texts(handle) if hasattr(handle, "texts") else None  # a corpus of items: no files
    if source is not None:
        return f"file-{_hashed(source)}-{digest[:32]}", [], lambda: text, documents
    return "text-" + digest[:32], [], lambda: text, documents


def _folder_version(corpus: Any) -> str:
    """A hash of what the corpus's documents are on disk now: each one's name, size,
    modification time, inode and skip mark (a document gone counts as gone)."""
    digest = hashlib.sha256(_FOLDER_LAYOUT.encode())
    for doc in corpus.documents:
        try:
            st = os.lstat(doc.path) if doc.path else None
            stamp = f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}" if st is not None else "memory"
        except OSError:
            stamp = "gone"
        digest.update(f"{doc.name}\0{stamp}\0{doc.skip}\n".encode("utf-8", "surrogatepass"))
    return digest.hexdigest()[:32]


def _hashed(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _whole(handle: Any) -> Callable[[], str]:
    """The handle's whole text, read for indexing (the host's read: no warning meant for a model)."""
    def read() -> str:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return str(handle.get_full())
    return read


def _texts(handle: Any) -> Callable[[], Iterable[tuple[str, str]]]:
    """A corpus's documents as (name, text), read for indexing (the host's read, as ``_whole``)."""
    def read() -> Iterator[tuple[str, str]]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            yield from handle.texts()
    return read


def _file_source(handle: Any) -> str | None:
    """Where a handle's text comes from when it is read from files (a file mapped from a
    descriptor: its device and inode; a folder: its real path), or None for a text held in
    memory, whose index stays the session's own."""
    from rlm_runtime.context.corpus import CorpusHandle
    from rlm_runtime.context.handles import FileHandle

    if isinstance(handle, FileHandle) and getattr(handle, "identity", None):
        dev, ino = handle.identity
        return f"file:{dev}:{ino}"
    root = getattr(handle, "root", None)
    if isinstance(handle, CorpusHandle) and isinstance(root, str):
        return f"folder:{os.path.realpath(root)}"
    return None


def _path_key(real: str) -> str:
    return "path-" + hashlib.sha256(real.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def drop_path_index(index_dir: Path, path: str | os.PathLike[str]) -> bool:
    """Remove the index of the file at ``path`` (keyed by its real path), so the next search
    builds it again (``rlm context refresh``); True if there was one. An index a session
    has open stays readable to it until it closes."""
    index = index_dir / f"{_path_key(os.path.realpath(path))}.db"
    existed = index.exists()
    _remove_db(index)
    return existed
