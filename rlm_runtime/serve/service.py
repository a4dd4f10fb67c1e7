"""What ``rlm serve`` does, whatever the protocol: each operation a plain function of plain data.

MCP tools and REST endpoints are thin adapters over ``Service``; the operations are the
ones the CLI offers (``rlm peek``, ``grep``, ``chunk``, ``ask``, ``context add``...), with
the same handles underneath, so a client sees what a model in the sandbox sees.

What a client may read: the contexts of the registry (the user published them with
``rlm context add``), and files or folders under the server's roots (``rlm serve --root``),
resolved with symlinks. A client registers contexts only under the roots; a server started
without roots lets clients read the registry and nothing else. Every size a request names
is capped (``ServeLimits``) and a request over a cap is refused whole (``TooLarge``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any

from rlm_runtime.config import Paths, paths_from_env
from rlm_runtime.errors import ConfigError, ContextError, SourceRefused, TooLarge, UnknownTrajectory
from rlm_runtime.serve.limits import ServeLimits
from rlm_runtime.serve.sessions import Listener, SessionPool

#: A trajectory's id: the stem of its file under ``$RLM_HOME/traces``.
TRACE_ID = re.compile(r"run-[0-9]{8}-[0-9]{6}-[0-9a-f]{6}")
_UNITS = ("lines", "chars", "tokens")


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
        self.paths = paths or paths_from_env()
        self.limits = limits or ServeLimits()
        self.roots = tuple(_root(r) for r in roots)
        self._session_options = dict(session_options or {})
        if registry is None:
            from rlm_runtime.registry import Registry

            registry = Registry.open(self.paths)
        self.registry = registry
        size = self.limits.sessions or Governor.from_system().max_workers
        self.sessions = SessionPool(self._open_session, size=size, idle_s=self.limits.idle_s, wait_s=self.limits.wait_s)
        self._memory: Any = None
        self._memory_lock = threading.Lock()

    def close(self) -> None:
        """Close every client's session and the memory store."""
        self.sessions.close_all()
        with self._memory_lock:
            if self._memory is not None:
                self._memory.close()
                self._memory = None

    # ------------------------------------------------------------------ contexts

    def contexts_list(self, kind: str | None = None, tag: str | None = None) -> list[dict[str, Any]]:
        """The registered contexts (id, name, kind, size, shape...), optionally of one kind or tag."""
        return [e.to_json() for e in self.registry.list(kind=kind, tag=tag)]

    def context_show(self, context: str) -> dict[str, Any]:
        """One registered context, with its access statistics."""
        return dict(self.registry.get(_registry_id(context)).to_json())

    def context_add(self, path: str, name: str | None = None, tags: Sequence[str] = ()) -> dict[str, Any]:
        """Register a file or folder under the server's roots; its entry."""
        if not self.roots:
            raise SourceRefused("this server lets clients register nothing: it was started without --root")
        if not isinstance(path, str) or not path or len(path) > 4096 or "\x00" in path:
            raise ContextError("path must be a file or folder under the server's roots")
        # A relative path is taken from each root (as every other operation takes it), never
        # from the server's working folder; the registry checks the roots again.
        entry = self.registry.add(self._under_roots(path), name=name, tags=tuple(tags), roots=list(self.roots))
        return dict(entry.to_json())

    def stats(self) -> dict[str, Any]:
        """The registry's access statistics and the server's sessions."""
        usage = {k: u.to_json() for k, u in self.registry.stats().items()}
        return {"contexts": usage, "sessions": len(self.sessions), "session_places": self.sessions.size,
                "roots": [str(r) for r in self.roots]}

    # ------------------------------------------------------------------ reading

    def peek(self, context: str, chars: int = 2000) -> dict[str, Any]:
        """The first ``chars`` characters of a context."""
        _at_most("chars", chars, self.limits.peek_chars)
        handle, rid = self._handle(context)
        self._record(rid, "peeks")
        return {"context": context, "text": handle.peek(chars), "length": len(handle)}

    def grep(self, context: str, pattern: str, context_lines: int = 0, max_matches: int = 100,
             ignore_case: bool = False) -> dict[str, Any]:
        """Lines of a context matching an RE2 pattern, with their numbers."""
        if not isinstance(pattern, str) or not pattern:
            raise ContextError("pattern must be a non-empty string")
        _at_most("pattern length", len(pattern), self.limits.pattern_chars)
        _at_most("max_matches", max_matches, self.limits.grep_matches)
        _at_most("context_lines", context_lines, 50, least=0)
        handle, rid = self._handle(context)
        found = handle.grep(pattern, context_lines=context_lines, max_matches=max_matches, ignore_case=ignore_case)
        self._record(rid, "greps")
        return {"context": context, "pattern": pattern, "matches": [m.to_dict() for m in found],
                "complete": bool(getattr(found, "complete", True))}

    def chunk(self, context: str, index: int, size: int | None = None, unit: str = "lines") -> dict[str, Any]:
        """Chunk ``index`` of a context cut in ``size`` ``unit``s, with where it sits."""
        if unit not in _UNITS:
            raise ContextError(f"unit must be one of {', '.join(_UNITS)}")
        _at_most("index", index, 10**9, least=0)
        if size is not None:
            _at_most("size", size, self.limits.chunk_chars, least=1)
        handle, rid = self._handle(context)
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
        handle, rid = self._handle(context)
        length = len(handle)
        if length > cap:
            raise TooLarge(f"{context} has {length:,} characters, over the {cap:,} asked for: peek, grep or chunk it instead")
        self._record(rid, "loads")
        return {"context": context, "text": handle.peek(length), "length": length}

    def search(self, query: str, k: int = 10, contexts: Sequence[str] | None = None) -> dict[str, Any]:
        """Ranked full-text search over contexts (default: every registered one) and the memory store."""
        from rlm_runtime.searching import ChunkSearch

        if not isinstance(query, str) or not query.strip():
            raise ContextError("query must be a non-empty string")
        _at_most("query length", len(query), self.limits.question_chars)
        _at_most("k", k, self.limits.search_k, least=1)
        refs = list(contexts) if contexts is not None else [f"ctx:{e.id}" for e in self.registry.list()]
        _at_most("contexts", len(refs), max(self.limits.contexts_per_ask, 64))
        opened = [self._handle(r) for r in refs]
        with self._memory_lock:
            search = ChunkSearch(self.paths.home / "index", self._store())
            try:
                search.set_contexts([h for h, _ in opened])
                hits = search.search(query, k=k)
            finally:
                search.close()
        for _, rid in opened:
            self._record(rid, "searches")
        return {"query": query, "hits": hits}

    def remember(self, text: str, tags: Sequence[str] = (), source: str = "notes") -> dict[str, Any]:
        """Store a note in the memory store; the ids of its chunks."""
        if not isinstance(text, str) or not text.strip():
            raise ContextError("text must be a non-empty string")
        _at_most("text length", len(text), self.limits.remember_chars)
        with self._memory_lock:
            ids = self._store().add_text(text, source=source, tags=list(tags))
        return {"ids": ids, "source": source}

    # ------------------------------------------------------------------ questions

    def ask(self, question: str, contexts: Sequence[str], *, client: Hashable | None = None,
            listener: Listener | None = None, on_session: Callable[[Any], None] | None = None) -> dict[str, Any]:
        """Answer ``question`` over ``contexts`` in the client's session.

        Args:
            client: the client's key: its session (worker, variables, conversation) is kept
                for its next question over the same contexts; None: a session for this
                question alone.
            listener: gets the run's events as they happen (progress).
            on_session: called with the session once it is had (to cancel it from elsewhere).
        """
        if not isinstance(question, str) or not question.strip():
            raise ContextError("question must be a non-empty string")
        _at_most("question length", len(question), self.limits.question_chars)
        refs = tuple(contexts)
        _at_most("contexts", len(refs), self.limits.contexts_per_ask)
        # A registered context goes to the session as ctx:ID: it opens it and counts its use.
        sources = [source for source, _ in map(self._source, refs)]
        with self.sessions.lease(client, refs, sources, listener) as session:
            if on_session is not None:
                on_session(session)
            result = session.ask(question)
        trace = Path(result.trajectory).stem if result.trajectory else None
        return {"answer": result.answer, "ok": result.error is None, "error": result.error, "error_type": result.error_type,
                "iterations": result.iterations, "usage": result.usage, "duration_s": round(result.duration_s, 3),
                "trajectory": trace}

    def trajectory(self, trace_id: str, fmt: str = "json") -> str:
        """A trajectory by id: its events as a JSON array (``json``) or the HTML page (``html``)."""
        import json

        from rlm_runtime.trajectory.reader import read_events
        from rlm_runtime.trajectory.render import render_html

        if not isinstance(trace_id, str) or not TRACE_ID.fullmatch(trace_id):
            raise ContextError("a trajectory id looks like run-20261126-221500-0a1b2c")
        path = self.paths.traces / f"{trace_id}.jsonl"
        if path.is_symlink() or not path.is_file():
            raise UnknownTrajectory(f"no trajectory {trace_id}")
        events = read_events(path)
        if fmt == "html":
            return render_html(events)
        if fmt != "json":
            raise ContextError("format must be json or html")
        return json.dumps(events, ensure_ascii=False)

    # ------------------------------------------------------------------ internals

    def _open_session(self, sources: Sequence[Any], on_event: Callable[[dict[str, Any]], None]) -> Any:
        from rlm_runtime.session import Session

        options = {"paths": self.paths, "registry": self.registry, **self._session_options}
        return Session(self.model, self.sub_model, contexts=list(sources), on_event=on_event, **options)

    def _source(self, ref: str) -> tuple[Any, str | None]:
        """What ``ref`` names, checked: ``ctx:ID`` for a registered context (a ``Session``
        opens it and counts its use), or the real path of one under the roots; and its
        registry id (None for a path)."""
        if not isinstance(ref, str) or not ref or len(ref) > 4096 or "\x00" in ref:
            raise ContextError("a context is named by ctx:ID, a registered id, or a path under the server's roots")
        rid = _registry_id(ref) if ref.startswith("ctx:") or self._registered(ref) else None
        if rid is None:
            return self._under_roots(ref), None
        resolved = self.registry.resolve(rid)
        entry = resolved.entry
        # The registry holds real paths: one that resolves elsewhere now (a folder on its way
        # was swapped for a symlink) is not what was published.
        if resolved.path is not None and entry.source is not None and str(resolved.path) != entry.source:
            raise SourceRefused(f"ctx:{entry.id} now resolves to another place than the one registered: "
                                f"rlm context refresh {entry.id} if that is meant")
        return entry.ref, entry.id

    def _handle(self, ref: str) -> tuple[Any, str | None]:
        """A handle on what ``ref`` names (see ``_source``) and its registry id."""
        from rlm_runtime.context import open_context
        from rlm_runtime.registry import open_resolved

        source, rid = self._source(ref)
        if rid is None:
            return open_context(source), None
        return open_resolved(self.registry.resolve(rid)), rid

    def _registered(self, ref: str) -> bool:
        from rlm_runtime.errors import UnknownContext
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
        each root in turn (never from the server's working folder)."""
        if not self.roots:
            raise SourceRefused(f"{text} is not a registered context, and this server reads no paths (started without --root)")
        given = Path(text)
        candidates = [given] if given.is_absolute() else [root / given for root in self.roots]
        for candidate in candidates:
            try:
                path = candidate.resolve(strict=True)
            except (OSError, RuntimeError):
                continue
            if any(path == r or path.is_relative_to(r) for r in self.roots):
                return path
            raise SourceRefused(f"{text} is outside the folders this server may read")
        raise ContextError(f"no such context: {text} (not a registered id, nor a file or folder under the roots)")

    def _record(self, rid: str | None, op: str, run_id: str | None = None) -> None:
        if rid is not None:
            self.registry.record(rid, op, run_id=run_id)


    def _store(self) -> Any:
        from rlm_runtime.memory.store import MemoryStore, default_store_path

        if self._memory is None:
            self._memory = MemoryStore(default_store_path(self.paths))
        return self._memory


def _root(path: str | Path) -> Path:
    try:
        root = Path(path).expanduser().resolve(strict=True)
    except (OSError, RuntimeError) as e:
        raise ConfigError(f"root folder not found: {path}") from e
    if not root.is_dir():
        raise ConfigError(f"a root must be a folder: {path}")
    return root


def _registry_id(ref: str) -> str:
    return ref[4:] if ref.startswith("ctx:") else ref


def _at_most(what: str, value: Any, cap: int, *, least: int = 0) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ContextError(f"{what} must be an integer")
    if value < least:
        raise ContextError(f"{what} must be at least {least}")
    if value > cap:
        raise TooLarge(f"{what} is {value:,}, over this server's limit of {cap:,}")
