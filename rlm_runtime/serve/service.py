"""What ``rlm serve`` does, whatever the protocol: each operation a plain function of plain data.

MCP tools and REST endpoints are thin adapters over ``Service``; the operations are the
ones the CLI offers (``rlm peek``, ``grep``, ``chunk``, ``ask``, ``context add``...), with
the same handles underneath, so a client sees what a model in the sandbox sees.

What a client may read: the contexts of the registry (the user published them with
``rlm context add``), and files or folders under the server's roots (``rlm serve --root``),
resolved with symlinks. A client registers contexts only under the roots; a server started
without roots lets clients read the registry and nothing else. Every size a request names
is capped (``ServeLimits``) and a request over a cap is refused whole (``TooLarge``).

Who asks: each operation that touches the memory store or writes takes the request's
``caller`` (``tokens.Caller``, ``OWNER`` by default: the server's own token, MCP over stdio, a
program calling ``Service`` itself). A read-only caller's writes are refused
(``ReadOnlyToken``: a note, a memory edit, a registration) and its questions remember nothing;
a caller with a store of its own searches, remembers and edits there, never in the default
store. Its sessions are its own (a session name is kept per caller), and so are the
trajectories of its questions: a named token reads only those.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlm_runtime import contextual
from rlm_runtime.config import Paths, paths_from_env
from rlm_runtime.context.beneath import seal, sealed
from rlm_runtime.errors import (
    ConfigError,
    ContextError,
    DamagedContext,
    ReadOnlyToken,
    RegistryError,
    RLMError,
    SourceRefused,
    TooLarge,
    UnknownContext,
    UnknownTrajectory,
    WorkersBusy,
)
from rlm_runtime.memory.db import descriptor_path
from rlm_runtime.memory.edits import KEEP, Edit
from rlm_runtime.memory.errors import StoreError
from rlm_runtime.memory.idlefill import IdleFill
from rlm_runtime.registry.ids import shown
from rlm_runtime.serve.auth import token_path as auth_token_path
from rlm_runtime.serve.limits import ServeLimits
from rlm_runtime.serve.sessions import Listener, SessionPool
from rlm_runtime.serve.tokens import OWNER, Caller, usable_store

#: A trajectory's id: the stem of its file under ``$RLM_HOME/traces``.
TRACE_ID = re.compile(r"run-[0-9]{8}-[0-9]{6}-[0-9a-f]{6}")
_UNITS = ("lines", "chars", "tokens")
_MODES = ("hybrid", "bm25", "vector")
#: Trajectories whose caller a server remembers (the latest; older ones only the owner reads).
_TRACE_OWNERS = 10_000
#: Tags one memory edit adds or removes at most.
_EDIT_TAGS = 64

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Opening:
    """What a client's session is opened over: the contexts it names (each checked again when
    opened), for whom (its memory store, whether it may write)."""

    refs: tuple[str, ...]
    caller: Caller


class Service:
    """The operations of a server, over one registry and one set of roots.

    Args:
        model: the root model of every question (clients cannot choose another: the
            server's keys pay for it).
        sub_model: the model of sub-calls (default: ``model``).
        roots: folders whose files and subfolders clients may name and register.
        limits: per-request caps and session settings.
        paths: ``$RLM_HOME`` and friends (default: from the environment).
        session_options: more keyword arguments for each ``Session`` (policy, profile,
            limits, memory...).
        registry: the registry of contexts (default: the one under ``paths.home``).
    """

    def __init__(self, model: str | Any, sub_model: str | Any | None = None, *, roots: Sequence[str | Path] = (),
                 limits: ServeLimits | None = None, paths: Paths | None = None,
                 session_options: dict[str, Any] | None = None, registry: Any = None) -> None:
        from rlm_runtime.governor import Governor

        self.model = model
        self.sub_model = sub_model
        #: Why ``ask`` cannot run (the model cannot be set up here), said to each ``ask``;
        #: None when it can. Everything else a server does needs no model.
        self.model_error: RLMError | None = None
        self.paths = paths or paths_from_env()
        self.limits = limits or ServeLimits()
        self.roots = tuple(_root(r) for r in roots)
        self._session_options = dict(session_options or {})
        # Where the sessions write their trajectories (a folder given to them, else $RLM_HOME/traces).
        trace = self._session_options.get("trace")
        self._traces = Path(trace) if isinstance(trace, (str, Path)) and Path(trace).suffix != ".jsonl" else self.paths.traces
        if registry is None:
            from rlm_runtime.registry import Registry

            registry = Registry.open(self.paths)
        self.registry = registry
        size = self.limits.sessions or Governor.from_system().max_workers
        self.sessions = SessionPool(self._open_session, size=size, idle_s=self.limits.idle_s, wait_s=self.limits.wait_s)
        #: Writable memory stores by path (the default one, and each token's own), opened on first use.
        self._stores: dict[Path, Any] = {}
        self._memory_lock = threading.Lock()
        self._trace_owners: OrderedDict[str, Caller] = OrderedDict()
        self._owners_lock = threading.Lock()
        self._searches = threading.BoundedSemaphore(max(1, self.limits.searches))
        self._home = self.paths.home.expanduser().resolve()
        # No folder walk or open beneath a root enters the runtime's home or the traces, even
        # through a root above them (a second name, a hard link of the token included).
        self._traces_real = self._traces.expanduser().resolve()
        seal(self._home)
        seal(self._traces_real)
        seal(auth_token_path(self.paths))
        seal(paths_from_env({}).home)  # the default home too, when this server was given another
        if isinstance(trace, (str, Path)) and Path(trace).suffix == ".jsonl":
            seal(Path(trace).expanduser().resolve())  # a trace file of its own, wherever it is
        #: Whether clients reach the user's memory store (``--memory``). Without it
        #: (``--no-memory``) searches leave it out, ``remember`` is refused, and a memory
        #: store a client names (a registered store file) is opened read-only.
        self.memory_on = bool(self._session_options.get("memory"))
        if not self.memory_on:
            self._session_options.setdefault("memory_readonly", True)
        # The memory store's quality tier is filled while no request runs (``memory.idlefill``).
        self.filler: IdleFill | None = None
        if self.memory_on and contextual.installed(self.paths.models):
            self.filler = IdleFill(self._filling_stores, idle_s=self.limits.fill_idle_s)
            self.filler.start()
        # Idle sessions are closed on time even when no request comes to trigger it.
        self._stop = threading.Event()
        self._sweeper = threading.Thread(target=self._sweep, name="rlm-serve-sweep", daemon=True)
        self._sweeper.start()

    def close(self) -> None:
        """Close every client's session and the memory store."""
        self._stop.set()
        if self.filler is not None:
            self.filler.close()
        self.sessions.close_all()
        with self._memory_lock:
            stores, self._stores = list(self._stores.values()), {}
        for store in stores:
            store.close()

    def _filling_stores(self) -> list[tuple[str, Callable[[], Any]]]:
        """The stores the background fill keeps, labelled by path: the default store, then the
        stores of the named tokens as their file holds them now (one already there and still a
        file of this user's: ``tokens.usable_store``; none is made here)."""
        from rlm_runtime.memory.store import MemoryStore, default_store_path
        from rlm_runtime.serve.tokens import load_tokens

        quality = contextual.factory(self.paths.models)
        places = [default_store_path(self.paths)]
        try:
            named = load_tokens(self.paths)
        except ConfigError as e:  # a damaged tokens file: the server refuses its tokens, the fill skips them
            log.warning("the quality fill skips the named tokens' stores: %s", e)
            named = []
        for token in named:
            try:
                place = usable_store(token.caller)
            except ConfigError as e:
                log.warning("the quality fill skips a store: %s", e)
                continue
            if place is not None and place.exists() and place not in places:
                places.append(place)
        return [(str(place), functools.partial(MemoryStore, place, quality=quality)) for place in places]

    @contextlib.contextmanager
    def request(self) -> Iterator[None]:
        """Around each request a protocol answers: the background fill waits for the quiet after it."""
        if self.filler is None:
            yield
            return
        with self.filler.request():
            yield

    def memory_report(self) -> dict[str, Any]:
        """What the governor allows this server and the memory in use, its sessions' workers
        included (``memreport``: for ``/api/health``)."""
        from rlm_runtime import memreport

        return memreport.report(worker_rss=self.sessions.worker_rss())

    def meaning(self, caller: Caller = OWNER) -> dict[str, Any]:
        """How far ``caller``'s memory store's quality tier is filled (for ``/api/health``):
        never an error (a store that cannot be read says so), never a path of the host's.
        The background fill keeps the default store and every named token's own."""
        if not self.memory_on:
            return {"memory": False}
        with self._memory_lock:
            if self._stop.is_set():
                return {"memory": "closed"}
            try:
                store = self._store(caller)
                stats = store.stats()
            except Exception:  # noqa: BLE001 - a damaged or changed store: health still answers
                return {"error": "the memory store cannot be read (rlm memory stats says why)"}
        out: dict[str, Any] = {"chunks": stats.chunks, "fast_vectors": stats.vectors, "quality_vectors": stats.quality_vectors,
                               "quality_model": stats.quality_model, "quality_eta_s": stats.quality_eta_s,
                               "quality_installed": self.filler is not None}
        if self.filler is not None:
            error = self.filler.errors.get(str(store.path))
            out["fill_error"] = None if error is None else error.replace(str(store.path), "the memory store")
        return out

    # ------------------------------------------------------------------ contexts

    def contexts_list(self, kind: str | None = None, tag: str | None = None, type: str | None = None) -> list[dict[str, Any]]:
        """The registered contexts (id, name, kind, type, size, shape...), optionally of one kind, tag or type."""
        return [e.to_json() for e in self.registry.list(kind=kind, tag=tag, type=type)]

    def context_show(self, context: str) -> dict[str, Any]:
        """One registered context, with its access statistics."""
        return dict(self.registry.get(_registry_id(context)).to_json())

    def context_add(self, path: str, name: str | None = None, tags: Sequence[str] = (), *,
                    caller: Caller = OWNER) -> dict[str, Any]:
        """Register a file or folder under the server's roots; its entry (``existing``: the
        path was registered already, and its entry is the one returned, refreshed)."""
        _may_write(caller, "register contexts")
        if not self.roots:
            raise SourceRefused("this server lets clients register nothing: it was started without --root")
        if not isinstance(path, str) or not path or len(path) > 4096 or "\x00" in path:
            raise ContextError("path must be a file or folder under the server's roots")
        _text(path, "path")  # a lone surrogate: the file system cannot be asked about it
        # A relative path is taken from each root (as every other operation takes it), never
        # from the server's working folder; the registry checks the roots again.
        real = self._under_roots(path)
        entries = self.registry.list()
        if len(entries) >= self.limits.registered_contexts and not any(e.source == str(real) for e in entries):
            raise TooLarge(f"the registry holds {len(entries):,} contexts, this server's limit for registering more is "
                           f"{self.limits.registered_contexts:,}: remove some (rlm context rm ID)")
        began = time.time()
        entry = self.registry.add(real, name=name, tags=tuple(tags), roots=list(self.roots), checked=real)
        # A path registered already keeps its entry (refreshed): an agent that registers its
        # project every session does not fill the registry.
        return {**entry.to_json(), "existing": entry.created < began}

    def stats(self) -> dict[str, Any]:
        """The registry's access statistics and the server's sessions."""
        usage = {k: u.to_json() for k, u in self.registry.stats().items()}
        return {"contexts": usage, "sessions": len(self.sessions), "session_places": self.sessions.size,
                "roots": [str(r) for r in self.roots]}

    # ------------------------------------------------------------------ reading

    def peek(self, context: str, chars: int = 2000) -> dict[str, Any]:
        """The first ``chars`` characters of a context."""
        _at_most("chars", chars, self.limits.peek_chars)
        with self._opened(context) as (handle, rid):
            out = {"context": context, "text": handle.peek(chars), "length": len(handle)}
        self._record(rid, "peeks")
        return out

    def grep(self, context: str, pattern: str, context_lines: int = 0, max_matches: int = 100,
             ignore_case: bool = False) -> dict[str, Any]:
        """Lines of a context matching an RE2 pattern, with their numbers."""
        _text(pattern, "pattern", cap=self.limits.pattern_chars)
        _at_most("max_matches", max_matches, self.limits.grep_matches)
        _at_most("context_lines", context_lines, 50, least=0)
        with self._opened(context) as (handle, rid):
            found = handle.grep(pattern, context_lines=context_lines, max_matches=max_matches, ignore_case=ignore_case)
            matches = [m.to_dict() for m in found]
        # Lines are as long as the file makes them: the answer is bounded in characters too.
        size = sum(len(m["line"]) + sum(map(len, m["before"])) + sum(map(len, m["after"])) for m in matches)  # type: ignore[arg-type]
        if size > self.limits.load_chars:
            raise TooLarge(f"the matching lines hold {size:,} characters, over this server's {self.limits.load_chars:,}: "
                           "ask for fewer matches or context lines, or a narrower pattern")
        self._record(rid, "greps")
        return {"context": context, "pattern": pattern, "matches": matches, "complete": bool(getattr(found, "complete", True))}

    def chunk(self, context: str, index: int, size: int | None = None, unit: str = "lines") -> dict[str, Any]:
        """Chunk ``index`` of a context cut in ``size`` ``unit``s, with where it sits."""
        if unit not in _UNITS:
            raise ContextError(f"unit must be one of {', '.join(_UNITS)}")
        _at_most("index", index, 10**9, least=0)
        if size is not None:
            _at_most("size", size, self.limits.chunk_chars, least=1)
        with self._opened(context) as (handle, rid):
            piece = handle.chunk(index, size, unit)
        if len(piece) > self.limits.chunk_chars:
            raise TooLarge(f"chunk {index} has {len(piece):,} characters, over this server's {self.limits.chunk_chars:,}: "
                           "ask for a smaller size")
        self._record(rid, "chunks")
        return {"context": context, "text": str(piece), "index": piece.index, "total": piece.total, "unit": piece.unit,
                "size": piece.size, "prev": piece.prev, "next": piece.next}

    def load(self, context: str, max_chars: int | None = None) -> dict[str, Any]:
        """A whole context's text, refused when it is longer than ``max_chars`` (at most the server's cap)."""
        cap = self.limits.load_chars if max_chars is None else max_chars
        _at_most("max_chars", cap, self.limits.load_chars, least=1)
        with self._opened(context) as (handle, rid):
            length = len(handle)
            if length > cap:
                raise TooLarge(f"{shown(context)} has {length:,} characters, over the {cap:,} asked for: peek, grep or chunk "
                               "it instead")
            text = handle.peek(length)
        self._record(rid, "loads")
        return {"context": context, "text": text, "length": length}

    def search(self, query: str, k: int = 10, contexts: Sequence[str] | None = None, mode: str | None = None, *,
               caller: Caller = OWNER) -> dict[str, Any]:
        """Ranked search over contexts (default: every registered one) and ``caller``'s memory
        store, by words and meaning fused (``mode`` ``hybrid``, the default), or ``bm25`` or ``vector``."""
        _text(query, "query", cap=self.limits.question_chars)
        if mode is not None and mode not in _MODES:
            raise ContextError(f"mode must be one of {', '.join(_MODES)}")
        _at_most("k", k, self.limits.search_k, least=1)
        skipped: list[dict[str, str]] = []
        if contexts is not None:
            refs = list(contexts)
            _at_most("contexts", len(refs), self.limits.search_contexts)
        else:
            # Every registered text, most recently refreshed first, up to the cap; the rest
            # are said to be left out. A memory store is searched as the memory, not read.
            entries = [e for e in self.registry.list() if e.kind != "memory"]
            entries.sort(key=lambda e: -_number(getattr(e, "refreshed", 0)))
            refs = [f"ctx:{e.id}" for e in entries[: self.limits.search_contexts]]
            skipped += [{"context": f"ctx:{e.id}", "error": f"left out: a search covers at most "
                         f"{self.limits.search_contexts} contexts; name the ones to search"}
                        for e in entries[self.limits.search_contexts:]]
        if not self._searches.acquire(timeout=self.limits.wait_s):
            raise WorkersBusy(f"the server is busy: {self.limits.searches} searches are running; try again shortly",
                              pool_size=self.limits.searches)
        try:
            return self._search(query, k, refs, skipped, explicit=contexts is not None, mode=mode, caller=caller)
        finally:
            self._searches.release()

    def _search(self, query: str, k: int, refs: list[str], skipped: list[dict[str, str]], *,
                explicit: bool, mode: str | None = None, caller: Caller = OWNER) -> dict[str, Any]:
        from rlm_runtime.searching import ChunkSearch

        opened: list[tuple[Any, str | None]] = []
        # A search of its own (its own store connection: SQLite reads in parallel), so that
        # one client's index being built holds up no other client's search or note.
        store = self._search_store(caller) if self.memory_on else None
        search = ChunkSearch(self.paths.home / "index", store)
        try:
            size = 0
            for ref in refs:
                try:
                    handle, rid = self._handle(ref)
                except RLMError as e:
                    # Named by the client: its error is the answer. One of the registry's
                    # (gone, moved, refused): left out, so it breaks no one's search.
                    if explicit:
                        raise
                    skipped.append({"context": ref, "error": str(e)})
                    continue
                size += _size(handle)
                if size > self.limits.search_bytes:
                    _close(handle)
                    over = (f"over the {self.limits.search_bytes:,} bytes of text one search of this server covers: "
                            "name fewer or smaller contexts")
                    if explicit:
                        raise TooLarge(f"these contexts hold {over}")
                    size -= _size(handle)
                    skipped.append({"context": ref, "error": f"left out: {over}"})
                    continue
                opened.append((handle, rid))
            search.set_contexts([h for h, _ in opened])
            deadline = time.monotonic() + self.limits.search_s

            def in_time() -> None:  # called between the files and windows an index is built from
                if time.monotonic() > deadline:
                    raise TooLarge(f"this search took over {self.limits.search_s:.0f} s building indexes; what was "
                                   "indexed is kept, so asking again goes further (or name fewer contexts)")

            with self._paths_hidden(store.path if store is not None else None):
                hits = search.search(query, k=k, stop=in_time, mode=mode)
        finally:
            search.close()
            if store is not None:
                store.close()
            for handle, _ in opened:
                _close(handle)
        for _, rid in opened:
            self._record(rid, "searches")
        out: dict[str, Any] = {"query": query, "hits": hits}
        if skipped:
            out["skipped"] = skipped
        return out

    def remember(self, text: str, tags: Sequence[str] = (), source: str = "notes", *,
                 caller: Caller = OWNER) -> dict[str, Any]:
        """Store a note in ``caller``'s memory store; the ids of its chunks."""
        if not self.memory_on:
            raise SourceRefused("this server keeps no notes: it was started with --no-memory")
        _may_write(caller, "store notes")
        _text(text, "text", cap=self.limits.remember_chars)
        for tag in tags:
            _text(tag, "a tag", cap=64)
        with self._memory_lock:
            store = self._store(caller)
            with self._paths_hidden(store.path):
                ids = store.add_text(text, source=source, tags=list(tags))
        return {"ids": ids, "source": source}

    def memory_edit(self, chunk_id: int, edit: Edit, *, caller: Caller = OWNER) -> dict[str, Any]:
        """Change a chunk of ``caller``'s memory store in place (``MemoryStore.edit``): its
        text, kind, tags, summary or confidence; a field ``edit`` leaves ``KEEP`` stays. The
        fields it changed and the version it kept (``MemoryStore.history`` lists them).

        Raises:
            SourceRefused: the server runs with --no-memory.
            ReadOnlyToken: ``caller`` may only read.
            ChunkNotFound: no live chunk of that store has this id.
            ContextError / StoreError / TooLarge: a bad value (empty text, a confidence outside
                [0, 1], a text longer than one chunk, too many tags...).
        """
        if not self.memory_on:
            raise SourceRefused("this server keeps no notes: it was started with --no-memory")
        _may_write(caller, "edit the memory store")
        _at_most("id", chunk_id, 2**63 - 1, least=1)
        if not isinstance(edit, Edit):
            raise ContextError("an edit is a memory.edits.Edit")
        if edit.text is not KEEP:
            _text(edit.text, "text", cap=self.limits.remember_chars)
        if edit.kind is not KEEP:
            _text(edit.kind, "kind", cap=64)
        _at_most("tags", len(edit.add_tags) + len(edit.remove_tags), _EDIT_TAGS)
        for tag in (*edit.add_tags, *edit.remove_tags):
            _text(tag, "a tag", cap=64)
        if edit.summary is not KEEP and edit.summary is not None:
            if not isinstance(edit.summary, str):
                raise ContextError("summary must be a string or null")
            _at_most("summary length", len(edit.summary), self.limits.remember_chars)
            if edit.summary.strip():
                _text(edit.summary, "summary")
        if edit == Edit():
            raise ContextError("say what to change: text, kind, add_tags, remove_tags, summary or confidence")
        with self._memory_lock:
            store = self._store(caller)
            with self._paths_hidden(store.path):
                done = store.edit(chunk_id, edit)
        return {"id": done.chunk_id, "changed": list(done.changed), "kept_version": done.kept_version}

    # ------------------------------------------------------------------ questions

    def ask(self, question: str, contexts: Sequence[str], *, client: Hashable | None = None,
            listener: Listener | None = None, on_session: Callable[[Any], None] | None = None,
            caller: Caller = OWNER) -> dict[str, Any]:
        """Answer ``question`` over ``contexts`` in the client's session.

        Args:
            client: the client's key: its session (worker, variables, conversation) is kept
                for its next question over the same contexts (kept apart per ``caller``: the
                same name from another token is another session); None: a session for this
                question alone.
            caller: who asks: the session searches its memory store, and a read-only
                caller's remembers nothing.
            listener: gets the run's events as they happen (progress).
            on_session: called with the session once it is had (to cancel it from elsewhere).
        """
        if self.model_error is not None:
            raise self.model_error
        _text(question, "question", cap=self.limits.question_chars)
        refs = tuple(contexts)
        _at_most("contexts", len(refs), self.limits.contexts_per_ask)
        # Checked now, so that a bad name is refused before a session place is taken; the
        # session is given what was checked, opened (``_open_session``), never a name.
        for ref in refs:
            self._source(ref)
        key = None if client is None else (caller, client)
        with self.request(), self.sessions.lease(key, refs, Opening(refs, caller), listener) as session:
            if on_session is not None:
                on_session(session)
            result = session.ask(question)
        trace = Path(result.trajectory).stem if result.trajectory else None
        if trace is not None:
            with self._owners_lock:
                self._trace_owners[trace] = caller
                self._trace_owners.move_to_end(trace)
                while len(self._trace_owners) > _TRACE_OWNERS:
                    self._trace_owners.popitem(last=False)
        return {"answer": result.answer, "value": result.value, "ok": result.error is None, "error": result.error,
                "error_type": result.error_type, "iterations": result.iterations, "usage": result.usage,
                "duration_s": round(result.duration_s, 3), "trajectory": trace}

    def trajectory(self, trace_id: str, fmt: str = "json", *, caller: Caller = OWNER) -> str:
        """A trajectory by id: its events as a JSON array (``json``) or the HTML page (``html``).
        A named token reads only the trajectories of its own questions (in this server's
        life); the owner reads every one."""
        import json

        from rlm_runtime.trajectory.reader import read_events
        from rlm_runtime.trajectory.render import render_html

        if not isinstance(trace_id, str) or not TRACE_ID.fullmatch(trace_id):
            raise ContextError("a trajectory id looks like run-20261126-221500-0a1b2c")
        path = self._traces / f"{trace_id}.jsonl"
        if caller != OWNER:
            with self._owners_lock:
                theirs = self._trace_owners.get(trace_id) == caller
            if not theirs:  # another caller's, or none: the same answer
                raise UnknownTrajectory(f"no trajectory {trace_id}")
        if path.is_symlink() or not path.is_file():
            raise UnknownTrajectory(f"no trajectory {trace_id}")
        events = read_events(path)
        if fmt == "html":
            return render_html(events)
        if fmt != "json":
            raise ContextError("format must be json or html")
        return json.dumps(events, ensure_ascii=False)

    # ------------------------------------------------------------------ internals

    def _open_session(self, opening: Opening, on_event: Callable[[dict[str, Any]], None]) -> Any:
        """A session over ``opening.refs``, each checked again and opened here, as every other
        operation opens it (a file by descriptor beneath the root): the session maps the
        very file checked, and hands its worker that file, never the name again. Its memory
        store is the caller's, read-only for a read-only caller."""
        from rlm_runtime.registry import Opened
        from rlm_runtime.session import Session

        opened: list[Any] = []
        published: list[Path] = []
        held: list[int] = []  # descriptors of memory stores, until the session has opened them
        try:
            for ref in opening.refs:
                source, rid, resolved = self._source(ref)
                if resolved is None:
                    # A path under the roots: read again when it changes, checked again as now.
                    opened.append(Opened(_open_real(source, None, keep=True), None, reopen=functools.partial(
                        self._reopen, ref), path=source))
                    continue
                entry = resolved.entry
                if entry.source:
                    published.append(Path(entry.source))
                if entry.kind == "memory" and resolved.path is not None:
                    # The store as checked, by descriptor: read-only, nothing written beside it.
                    held.append(_open_store(resolved.path))
                    opened.append(Opened(descriptor_path(held[-1]), entry.id, kind="memory"))
                else:
                    handle = _open_real(resolved.path, entry.name, keep=True) if resolved.path is not None else \
                        _open_text(resolved)
                    # Read again when it changes between questions, checked as now (``context.living``).
                    again = functools.partial(self._reopen, ref) if resolved.path is not None else None
                    opened.append(Opened(handle, entry.id, kind=entry.kind, reopen=again, path=resolved.path))
            options = {"paths": self.paths, "registry": self.registry, "context_roots": [*self.roots, *published],
                       **self._session_options, **self._memory_options(opening.caller)}
            return Session(self.model, self.sub_model, contexts=opened, on_event=on_event, **options)
        except BaseException:
            for item in opened:
                _close(getattr(item, "handle", item))
            raise
        finally:
            for fd in held:
                os.close(fd)

    def _reopen(self, ref: str) -> Any:
        """A registered file or folder, or a path under the roots, opened again for a client's
        session after it changed: resolved and checked again, as when the session opened it."""
        source, _rid, resolved = self._source(ref)
        if resolved is None:
            return _open_real(source, None, keep=True)
        if resolved.path is None:
            raise ContextError(f"{_quoted(ref)} is no file or folder to read again")
        return _open_real(resolved.path, resolved.entry.name, keep=True)

    def _source(self, ref: str) -> tuple[Any, str | None, Any]:
        """What ``ref`` names, checked: ``ctx:ID`` for a registered context (a ``Session``
        opens it and counts its use), or the real path of one under the roots; its registry
        id (None for a path); and the registry's ``Resolved`` (None for a path)."""
        if not isinstance(ref, str) or not ref or len(ref) > 4096 or "\x00" in ref:
            raise ContextError("a context is named by ctx:ID, a registered id, or a path under the server's roots")
        _text(ref, "a context")
        rid = _registry_id(ref) if ref.startswith("ctx:") or self._registered(ref) else None
        if rid is None:
            return self._under_roots(ref), None, None
        # What a registered path leads to now is never told (gone, a file, a folder, a FIFO
        # outside the roots): one answer for all, naming nothing but the id.
        moved = SourceRefused(f"ctx:{rid} is no longer what was registered (gone, or it leads elsewhere now): "
                              f"rlm context refresh {rid} if it moved on purpose")
        try:
            resolved = self.registry.resolve(rid)
        except (UnknownContext, DamagedContext):
            raise
        except (ContextError, RegistryError):
            raise moved from None
        entry = resolved.entry
        # The registry holds real paths: one that resolves elsewhere now (a folder on its way
        # was swapped for a symlink) is not what was published.
        if resolved.path is not None and entry.source is not None and str(resolved.path) != entry.source:
            raise moved
        if resolved.path is not None:
            self._not_home(resolved.path, ref)
        return entry.ref, entry.id, resolved

    def _handle(self, ref: str) -> tuple[Any, str | None]:
        """A handle on what ``ref`` names (see ``_source``: what was checked is what is
        opened) and its registry id. The caller closes it (``_opened`` does)."""
        source, rid, resolved = self._source(ref)
        if resolved is None:
            return _open_real(source, None), None
        if resolved.path is not None:
            return _open_real(resolved.path, resolved.entry.name), rid
        return _open_text(resolved), rid

    @contextmanager
    def _opened(self, ref: str) -> Iterator[tuple[Any, str | None]]:
        handle, rid = self._handle(ref)
        try:
            yield handle, rid
        finally:
            _close(handle)

    def _not_home(self, path: Path, text: str) -> None:
        """Refuse what lies in ``$RLM_HOME`` or is sealed (``beneath.seal``: the traces, the
        token, by identity, so a second name or a hard link of them too): the token, the
        registry, traces and indexes of other contexts are there, whatever roots the server
        was given. A folder above them is walked without them."""
        refused = path == self._home or path.is_relative_to(self._home) or \
            path == self._traces_real or path.is_relative_to(self._traces_real)
        if not refused:
            seals = sealed()
            for place in (path, *path.parents):  # the place itself, or a folder holding it
                try:
                    st = os.stat(place)
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) in seals:
                    refused = True
                    break
        if refused:
            raise SourceRefused(f"{_quoted(text)} is in the runtime's own folder ($RLM_HOME), which no client may read")

    def _registered(self, ref: str) -> bool:
        from rlm_runtime.registry.ids import valid_id

        if not valid_id(ref):
            return False
        try:
            self.registry.get(ref)
        except UnknownContext:
            return False
        return True

    def _under_roots(self, text: str) -> Path:
        """The real path of ``text`` if it lies under a root. A relative path is taken from
        each root in turn (never from the server's working folder). A path not under a root
        as written is refused before the file system is asked (whether it exists is not told)."""
        if not self.roots:
            raise SourceRefused(f"{_quoted(text)} is not a registered context, and this server reads no paths "
                                "(started without --root)")
        given = Path(text)
        written = [Path(os.path.normpath(given))] if given.is_absolute() else \
            [Path(os.path.normpath(root / given)) for root in self.roots]
        candidates = [c for c in written if any(c == r or c.is_relative_to(r) for r in self.roots)]
        if not candidates:
            raise SourceRefused(f"{_quoted(text)} is not under the folders this server may read")
        for candidate in candidates:
            try:
                path = candidate.resolve(strict=True)
            except (OSError, RuntimeError):
                continue
            if not any(path == r or path.is_relative_to(r) for r in self.roots):
                raise SourceRefused(f"{_quoted(text)} leads outside the folders this server may read")
            self._not_home(path, text)
            return path
        raise ContextError(f"no such context: {_quoted(text)} (not a registered id, nor a file or folder under the roots)")

    def _sweep(self) -> None:
        every = max(1.0, min(60.0, self.limits.idle_s / 4))
        while not self._stop.wait(every):
            self.sessions.sweep()

    def _record(self, rid: str | None, op: str, run_id: str | None = None) -> None:
        if rid is not None:
            self.registry.record(rid, op, run_id=run_id)


    def _memory_path(self, caller: Caller) -> Path:
        """Where ``caller``'s notes are: its own store (checked: ``tokens.usable_store``), or the default one."""
        from rlm_runtime.memory.store import default_store_path

        return usable_store(caller) or default_store_path(self.paths)

    def _store(self, caller: Caller = OWNER) -> Any:
        """``caller``'s memory store, writable, shared by the requests that use it (the caller
        holds ``_memory_lock``)."""
        from rlm_runtime.memory.store import MemoryStore

        path = self._memory_path(caller)
        store = self._stores.get(path)
        if store is None:
            with self._paths_hidden(path):
                store = MemoryStore(path, quality=contextual.factory(self.paths.models))
            self._stores[path] = store
        return store

    def _search_store(self, caller: Caller) -> Any:
        """A store connection of one search's own over ``caller``'s notes: read-only for a
        read-only caller (none when its store does not exist yet: nothing to find)."""
        from rlm_runtime.memory.store import MemoryStore

        path = self._memory_path(caller)
        quality = contextual.factory(self.paths.models)
        with self._paths_hidden(path):
            if not caller.read_only:
                return MemoryStore(path, quality=quality)
            return MemoryStore(path, readonly=True, quality=quality) if path.exists() else None

    def _memory_options(self, caller: Caller) -> dict[str, Any]:
        """The session options that make a session's memory ``caller``'s: its own store, and
        for a read-only caller a store opened read-only that remembers nothing."""
        if caller == OWNER:
            return {}
        options: dict[str, Any] = {}
        if self.memory_on:
            path = self._memory_path(caller)
            options["memory"] = str(path) if not caller.read_only or path.exists() else None
        if caller.read_only:
            options.update(remember=False, memory_readonly=True)
        return options

    @contextmanager
    def _paths_hidden(self, path: Path | None) -> Iterator[None]:
        """A store's errors without its path (a client is told of "the memory store", never
        where on the host it lies)."""
        try:
            yield
        except StoreError as e:
            text = str(e)
            if path is None or str(path) not in text:
                raise
            raise StoreError(text.replace(str(path), "the memory store")) from e


def _may_write(caller: Caller, what: str) -> None:
    if caller.read_only:
        raise ReadOnlyToken(f"the token {caller.name!r} is read-only: it may read and search, not {what}")


def _root(path: str | Path) -> Path:
    try:
        root = Path(path).expanduser().resolve(strict=True)
    except (OSError, RuntimeError) as e:
        raise ConfigError(f"root folder not found: {path}") from e
    if not root.is_dir():
        raise ConfigError(f"a root must be a folder: {path}")
    return root


def _text(value: Any, what: str, *, cap: int | None = None) -> str:
    """``value`` if it is a non-empty str that can be written as UTF-8 (a lone surrogate
    cannot: echoed back, it would break the answer's JSON), at most ``cap`` characters."""
    if not isinstance(value, str) or not value.strip():
        raise ContextError(f"{what} must be a non-empty string")
    if cap is not None:
        _at_most(f"{what} length", len(value), cap)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ContextError(f"{what} holds a lone surrogate (not text): {shown(value)}") from e
    return value


def _quoted(text: str) -> str:
    """A path a client wrote, for a message: whole (paths are capped at 4,096 characters), escaped."""
    return repr(text)


def _open_store(path: Path) -> int:
    """A read-only descriptor of the memory store file at the real path ``path`` as it was
    checked (one component at a time, no symlink followed)."""
    from rlm_runtime.context.beneath import Root, open_beneath

    try:
        return open_beneath(Root.of(path.anchor), path.relative_to(path.anchor))
    except OSError as e:
        raise SourceRefused(f"{shown(str(path))} changed after it was checked ({e.strerror or e}): not read") from e


def _open_text(resolved: Any) -> Any:
    """The handle of a registered text (no file: its text is in the registry)."""
    from rlm_runtime.registry import open_resolved

    return open_resolved(resolved)


def _size(handle: Any) -> int:
    """The bytes of text a handle holds (a folder: its documents' sizes on disk)."""
    documents = getattr(handle, "documents", None)
    if documents is not None:
        return sum(int(getattr(d, "size", 0) or 0) for d in documents)
    return int(getattr(handle, "n_bytes", 0) or 0)


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _open_real(path: Path, name: str | None, *, keep: bool = False) -> Any:
    """A handle on the real path ``path`` as it was checked: a file opened one component at
    a time with no symlink followed, a folder refused when its path has come to lead
    elsewhere (a folder on the way swapped for a symlink since the check). ``keep``: the
    file's handle keeps its descriptor, so that a session's worker gets that very file."""
    from rlm_runtime.context import open_context
    from rlm_runtime.context.beneath import Root, open_beneath
    from rlm_runtime.context.handles import FileHandle

    where = shown(str(path))
    try:
        if not path.is_dir():
            fd = open_beneath(Root.of(path.anchor), path.relative_to(path.anchor))
            try:
                return FileHandle(fd=fd, name=name or path.name, keep=keep)
            finally:
                os.close(fd)
        fd = open_beneath(Root.of(path.anchor), path.relative_to(path.anchor), directory=True)
        try:
            opened = os.fstat(fd)
        finally:
            os.close(fd)
    except OSError as e:
        raise SourceRefused(f"{where} changed after it was checked ({e.strerror or e}): not read") from e
    try:
        handle = open_context(path, name=name) if name else open_context(path)
    except ContextError:
        # A folder swapped since its check: what it leads to now (gone, elsewhere) is not told.
        if os.path.realpath(path) != str(path):
            raise SourceRefused(f"{where} changed after it was checked: not read") from None
        raise
    now = os.stat(path)
    if os.path.realpath(path) != str(path) or (now.st_dev, now.st_ino) != (opened.st_dev, opened.st_ino):
        _close(handle)
        raise SourceRefused(f"{where} changed after it was checked: not read")
    if name:
        handle.name = name
    return handle


def _close(handle: Any) -> None:
    close = getattr(handle, "close", None)
    if close is not None:
        try:
            close()
        except Exception:  # noqa: BLE001 - a handle that fails to close has nothing more to give
            pass


def _registry_id(ref: str) -> str:
    return ref[4:] if ref.startswith("ctx:") else ref


def _at_most(what: str, value: Any, cap: int, *, least: int = 0) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ContextError(f"{what} must be an integer")
    if value < least:
        raise ContextError(f"{what} must be at least {least}")
    if value > cap:
        raise TooLarge(f"{what} is {value:,}, over this server's limit of {cap:,}")
