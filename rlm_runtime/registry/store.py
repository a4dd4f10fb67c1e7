"""``Registry``: named contexts that outlive a process, in ``$RLM_HOME/registry.db``.

A registered context has a stable id (``ctx:ID`` names it wherever a context is accepted), a
name, a kind (``file``, ``folder``, ``text``: a text held in the registry itself, at most
``metadata.MAX_TEXT_BYTES``; ``memory``: a memory store file), its source (the real path,
symlinks resolved; None for a text), the metadata its probe found, tags, created and
refreshed times, and how runs used it: counts of peeks, greps, chunks, loads (runs that
opened it) and searches, the last access, and the last ``RECENT_RUNS`` run ids.

Every call that takes a path takes ``roots`` (``roots.py``): None for a trusted caller (a
person on the command line), a list of folders for one that may read only under them (a
server's ``--root``). ``resolve`` checks again at each use.

Every value read back from the file is checked (``value_check.py``): a context with one this
version never writes is damaged (``DamagedContext``): ``list`` and ``stats`` leave it out with
a warning naming its id, ``get`` and ``resolve`` refuse it, ``remove`` removes it.

Threads and processes: a ``Registry`` is one connection under a lock (``db.py``); any
number of processes may open the same file (WAL, busy timeout, short write transactions).
"""

from __future__ import annotations

import builtins
import difflib
import json
import os
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rlm_runtime.config import Paths, paths_from_env, user_path
from rlm_runtime.errors import ContextError, DamagedContext, RegistryError, SourceRefused, UnknownContext
from rlm_runtime.registry import ids, metadata, types, value_check
from rlm_runtime.registry import leads as _leads
from rlm_runtime.registry.db import Database
from rlm_runtime.registry.roots import Roots, within

#: Run ids kept per context (the most recent): the file stays bounded however often it is used.
RECENT_RUNS = 50
#: What ``record`` counts.
OPS = ("peeks", "greps", "chunks", "loads", "searches")
#: Ids compared with an unknown one for a suggestion, at most (difflib is quadratic per pair).
SUGGEST_FROM = 2_000
#: A count added at once, at most (a hostile caller cannot overflow a column).
MAX_COUNT = 1 << 31
#: A stored count grows no further (SQLite's integers end at 2**63-1; an overflow is a REAL,
#: which the next read calls damaged): at most this plus ``MAX_COUNT``.
COUNT_LIMIT = 1 << 62
#: Answer leads kept a context (the most used, then the latest), and shown in a brief.
LEADS_KEPT = 20
LEADS_SHOWN = 3
_MAX_RUN_ID = value_check.MAX_RUN_ID
#: A context's type when it has no row in ``context_types`` (``types.default_type``), in SQL.
_DEFAULT_TYPE_SQL = "CASE contexts.kind WHEN 'memory' THEN 'memory' ELSE 'document' END"


@dataclass(frozen=True)
class Usage:
    """How runs used a context, aggregated across runs. ``runs``: the most recent first."""

    peeks: int = 0
    greps: int = 0
    chunks: int = 0
    loads: int = 0
    searches: int = 0
    last_access: float | None = None
    runs: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "runs": list(self.runs)}


@dataclass(frozen=True)
class Entry:
    """A registered context (see the module docstring; ``meta``'s keys: ``metadata.py``)."""

    id: str
    name: str
    kind: str
    source: str | None
    tags: tuple[str, ...]
    meta: Mapping[str, Any]
    created: float
    refreshed: float
    usage: Usage = field(default_factory=Usage)
    #: What it is for, and so how it is loaded (``types.py``).
    type: str = "document"

    @property
    def ref(self) -> str:
        """``ctx:ID``: how a context source names it."""
        return ids.REF_PREFIX + self.id

    def to_json(self) -> dict[str, Any]:
        """Plain data (JSON-ready)."""
        return {"id": self.id, "ref": self.ref, "name": self.name, "kind": self.kind, "type": self.type, "source": self.source,
                "tags": list(self.tags), "meta": dict(self.meta), "created": self.created, "refreshed": self.refreshed,
                "usage": self.usage.to_json()}


@dataclass(frozen=True)
class Resolved:
    """A registered context checked for use: the real path to open (file, folder, memory
    store) or the text (a ``text`` context)."""

    entry: Entry
    path: Path | None = None
    text: str | None = None


def _identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of what ``path`` names now (not followed: a link put there is not it), or None."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


class Registry:
    """The registry of named contexts in one SQLite file. Use ``Registry.open``.

    Args:
        path: the registry file.
        index_dir: the search indexes of ``searching.py`` (a refreshed file's is dropped).
    """

    def __init__(self, path: str | os.PathLike[str], *, index_dir: Path | None = None) -> None:
        self.path = Path(path)
        self.index_dir = index_dir if index_dir is not None else self.path.parent / "index"
        self.db = Database(self.path)

    @classmethod
    def open(cls, paths: Paths | str | os.PathLike[str] | None = None) -> Registry:
        """The registry of ``paths`` (``$RLM_HOME/registry.db``; None: from the environment),
        or the registry file named; created when missing.

        Raises:
            RegistryError: the file is not a usable registry (corrupt, another program's).
        """
        if paths is None or isinstance(paths, Paths):
            from rlm_runtime.context.beneath import seal

            paths = paths or paths_from_env()
            seal(paths.home)  # a folder registered above the home is walked without it
            return cls(paths.registry, index_dir=paths.home / "index")
        return cls(paths)

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()

    # ------------------------------------------------------------------ registering

    def add(self, source: str | os.PathLike[str], *, id: str | None = None, name: str | None = None,
            kind: str | None = None, tags: Iterable[str] = (), roots: Roots = None,
            checked: Path | None = None, another: bool = False, type: str | None = None) -> Entry:
        """Register ``source`` and return its entry. A path registered already (the same real
        path and kind) is not registered twice: its entry is probed again (as ``refresh``),
        given the new tags (and ``name``, when one is given), and returned with its id, so an
        agent that registers its project every session keeps one entry; ``another`` (or an
        ``id`` of its own) registers it a second time. The entry's ``created`` tells which:
        before this call for an entry reused.

        Args:
            source: a path (a file, a folder, a memory store file), or with ``kind="text"``
                the text itself.
            id: its id (default: derived from the name, made unique).
            name: its display name (default: the path's last part; ``text`` for a text).
            kind: ``file``, ``folder``, ``text`` or ``memory`` (default: what the path is).
            tags: labels to list it by.
            roots: the folders the path must resolve under (None: anywhere; see ``roots.py``).
            checked: the real path a caller checked (a server, beneath its roots): the path
                must resolve there, and be the same file or folder before and after it is
                probed, or nothing is registered (``SourceRefused``, naming no other place).
            another: register a path registered already once more, under a new id.
            type: what it is for (``types.py``: ``identity`` is in every question); None: its
                kind's default (a context registered already keeps its own).

        Raises:
            RegistryError: a bad id, name, tag or kind, an id taken, a text too large.
            ContextError: the path does not exist, cannot be read or probed.
            ContextOutsideRoots: the path resolves outside ``roots``.
        """
        if kind is not None:
            ids.check_kind(kind)
        if type is not None:
            types.check_type(type)
        if id is not None:
            ids.check_id(id)
        tag_list = ids.check_tags(tags)
        name_given = name is not None
        text: str | None = None
        real: Path | None = None
        if kind == "text":
            text = metadata.check_text(source)
            name = ids.check_name(name if name is not None else "text")
            meta = metadata.describe_text(text, name)
        else:
            if not isinstance(source, (str, os.PathLike)):
                raise RegistryError("a context source is a path (or, with kind text, a str)")
            real = within(user_path(source), roots)
            try:
                str(real).encode("utf-8")
            except UnicodeEncodeError:
                raise ContextError(f"{ids.shown(str(real))}: a name that is not UTF-8 cannot be registered") from None
            before = _identity(real) if checked is not None else None
            if checked is not None and (real != checked or before is None):
                raise SourceRefused(f"{ids.shown(str(checked))} changed after it was checked: not registered")
            changed = SourceRefused(f"{ids.shown(str(checked))} changed while it was read: not registered")
            try:
                kind = metadata.kind_of(real, kind)
                name = ids.check_name(name if name is not None else (real.name or str(real)))
                meta = metadata.describe_path(real, kind)
            except (ContextError, RegistryError):
                # What a path changed into is not told (an error naming it, or saying it is gone).
                if checked is not None and (Path(os.path.realpath(real)) != checked or _identity(real) != before):
                    raise changed from None
                raise
            if checked is not None and (Path(os.path.realpath(real)) != checked or _identity(real) != before):
                raise changed
        now = time.time()
        with self.db.write() as conn:
            reused = None
            if id is None and real is not None and not another:
                reused = self._reuse(conn, real, kind, meta, name if name_given else None, tag_list, now)
            if reused is not None:
                id = reused
            else:
                if id is None:
                    base = ids.slug(name)
                    rows = conn.execute("SELECT id FROM contexts WHERE substr(id, 1, ?) = ?", (len(base), base))
                    id = ids.unique(base, (str(r[0]) for r in rows))
                elif conn.execute("SELECT 1 FROM contexts WHERE id = ?", (id,)).fetchone():
                    raise RegistryError(f"the id {id} is taken: choose another with --id, or rlm context rm {id} first")
                conn.execute("INSERT INTO contexts (id, name, kind, source, meta, created, refreshed) VALUES (?, ?, ?, ?, ?, ?, ?)",
                             (id, name, kind, str(real) if real is not None else None, json.dumps(meta), now, now))
                if text is not None:
                    conn.execute("INSERT INTO context_texts (id, text) VALUES (?, ?)", (id, text))
                conn.executemany("INSERT INTO context_tags (id, tag) VALUES (?, ?)", [(id, t) for t in tag_list])
                conn.execute("INSERT INTO context_usage (id) VALUES (?)", (id,))
            if type is not None:
                conn.execute("INSERT OR REPLACE INTO context_types (id, type) VALUES (?, ?)", (id, type))
        return self.get(id)

    def set_type(self, id: str, type: str) -> Entry:
        """Give the context ``id`` the type ``type`` (``types.py``); return its entry.

        Raises:
            UnknownContext: no context has this id.
            RegistryError: not a type.
        """
        types.check_type(type)
        key = self._known(id)
        with self.db.write() as conn:
            conn.execute("INSERT OR REPLACE INTO context_types (id, type) VALUES (?, ?)", (key, type))
        return self.get(key)

    def always(self) -> builtins.list[Entry]:
        """The contexts whose type is loaded in every question (``identity``), by id; a damaged
        one is left out with a warning."""
        return [e for e in self.list() if types.POLICIES[e.type].load == "always"]

    def _reuse(self, conn: Any, real: Path, kind: str, meta: Mapping[str, Any], name: str | None,
               tags: Sequence[str], now: float) -> str | None:
        """The id of the first context of ``real``'s kind registered from ``real``, brought up
        to date (its metadata as just probed, a changed file's search index dropped, ``tags``
        added, ``name`` when given); None when there is none."""
        row = conn.execute("SELECT id, name, meta FROM contexts WHERE source = ? AND kind = ? ORDER BY created, id LIMIT 1",
                           (str(real), kind)).fetchone()
        if row is None:
            return None
        key = str(row[0])
        try:
            before = json.loads(row[2]) if isinstance(row[2], str) else {}
        except ValueError:
            before = {}
        if kind == "file" and (not isinstance(before, dict) or (before.get("size_bytes"), before.get("mtime_ns"))
                               != (meta.get("size_bytes"), meta.get("mtime_ns"))):
            from rlm_runtime.searching import drop_path_index

            drop_path_index(self.index_dir, real)
        conn.execute("UPDATE contexts SET name = ?, meta = ?, refreshed = ? WHERE id = ?",
                     (name if name is not None else str(row[1]), json.dumps(dict(meta)), now, key))
        conn.executemany("INSERT OR IGNORE INTO context_tags (id, tag) VALUES (?, ?)", [(key, t) for t in tags])
        return key

    def remove(self, id: str) -> str:
        """Forget the context ``id`` (its text, tags and usage with it; files are untouched),
        a damaged one too; return its id.

        Raises:
            UnknownContext: no context has this id.
        """
        key = self._known(id)
        with self.db.write() as conn:
            conn.execute("DELETE FROM contexts WHERE id = ?", (key,))
        return key

    def refresh(self, id: str, roots: Roots = None) -> Entry:
        """Probe the context ``id`` again if its file changed (size or modification time; a
        folder or a store is always probed again), dropping a file's search index so that it
        is rebuilt. The path is checked against ``roots`` again; if it now resolves to
        another real path (a symlink was planted), that path is what is recorded.

        Raises:
            UnknownContext: no context has this id.
            ContextError: its file is gone or unreadable.
            ContextOutsideRoots: it now resolves outside ``roots``.
            RegistryError: it changed kind (a file became a folder).
        """
        entry = self.get(id)
        now = time.time()
        if entry.kind == "text":
            with self.db.write() as conn:
                conn.execute("UPDATE contexts SET refreshed = ? WHERE id = ?", (now, entry.id))
            return self.get(entry.id)
        assert entry.source is not None
        real = within(entry.source, roots)
        kind = metadata.kind_of(real, None if entry.kind == "file" else entry.kind)
        if kind != entry.kind:
            raise RegistryError(f"ctx:{entry.id} is now a {kind}, not a {entry.kind}: remove it and add it again")
        meta: Mapping[str, Any] = entry.meta
        size, mtime_ns = metadata.fingerprint(real)
        changed = (kind != "file" or str(real) != entry.source or size != meta.get("size_bytes")
                   or mtime_ns != meta.get("mtime_ns"))
        if changed:
            meta = metadata.describe_path(real, kind)
            if kind == "file":
                from rlm_runtime.searching import drop_path_index

                drop_path_index(self.index_dir, entry.source)
                drop_path_index(self.index_dir, real)
        with self.db.write() as conn:
            conn.execute("UPDATE contexts SET source = ?, meta = ?, refreshed = ? WHERE id = ?",
                         (str(real), json.dumps(dict(meta)), now, entry.id))
        return self.get(entry.id)

    # ------------------------------------------------------------------ reading

    def get(self, id: str) -> Entry:
        """The context ``id`` (``ctx:ID`` is accepted too).

        Raises:
            UnknownContext: no context has this id (the nearest id is suggested).
            DamagedContext: its rows hold a value this version never writes.
        """
        key = self._known(id)
        with self.db.read() as conn:
            row = conn.execute("SELECT id, name, kind, source, meta, created, refreshed FROM contexts WHERE id = ?",
                               (key,)).fetchone()
            if row is None:  # removed by another process since _known looked
                raise self._unknown(key)
            return self._entry(conn, row)

    def list(self, kind: str | None = None, tag: str | None = None, type: str | None = None) -> builtins.list[Entry]:
        """Every registered context (of ``kind``, with ``tag``, of ``type``), by id; a damaged
        one is left out with a warning naming it."""
        if kind is not None:
            ids.check_kind(kind)
        if type is not None:
            types.check_type(type)
        if tag is not None:  # a tag no entry could carry (a lone surrogate cannot even be bound to the query)
            ids.check_tags([tag])
        sql = "SELECT id, name, kind, source, meta, created, refreshed FROM contexts"
        where, args = [], []
        if kind is not None:
            where.append("kind = ?")
            args.append(kind)
        if tag is not None:
            where.append("id IN (SELECT id FROM context_tags WHERE tag = ?)")
            args.append(tag)
        if type is not None:
            where.append(f"coalesce((SELECT t.type FROM context_types t WHERE t.id = contexts.id), {_DEFAULT_TYPE_SQL}) = ?")
            args.append(type)
        if where:
            sql += " WHERE " + " AND ".join(where)
        entries = []
        with self.db.read() as conn:
            for row in conn.execute(sql + " ORDER BY id", args).fetchall():
                try:
                    entries.append(self._entry(conn, row))
                except DamagedContext as e:
                    warnings.warn(f"left out of the list: {e}", stacklevel=2)
        return entries

    def resolve(self, ref_or_id: str, roots: Roots = None) -> Resolved:
        """The context ``ref_or_id`` (``ctx:ID`` or ``ID``) checked for use now: its real path
        under ``roots`` (checked again: a path that has become a symlink out of them is
        refused), or its text. What ``open_context`` opens for a ``ctx:ID`` source.

        Raises:
            UnknownContext: no context has this id.
            DamagedContext: its rows hold a value this version never writes.
            ContextError: its file or folder is gone, or is no longer of its kind.
            ContextOutsideRoots: its path resolves outside ``roots``.
        """
        entry = self.get(ref_or_id)
        if types.expired(entry.type, entry.refreshed, time.time()):
            if entry.kind == "text":
                ttl = types.POLICIES[entry.type].ttl_s
                raise ContextError(f"ctx:{entry.id} has expired: a {entry.type} context is good for {ttl:.0f} s after it "
                                   f"was added; add it again (rlm context add) or give it another type (rlm context type)")
            entry = self.refresh(entry.id, roots)  # past its time to live: probed again before use
        if entry.kind == "text":
            with self.db.read() as conn:
                row = conn.execute("SELECT text FROM context_texts WHERE id = ?", (entry.id,)).fetchone()
            if row is None:
                raise RegistryError(f"ctx:{entry.id} has lost its text: remove it and add it again")
            problem = value_check.text_problem(row[0])
            if problem is not None:
                raise self._damaged(entry.id, problem)
            return Resolved(entry, text=str(row[0]))
        assert entry.source is not None
        try:
            real = within(entry.source, roots)
        except ContextError as e:
            if type(e) is ContextError:
                raise ContextError(f"ctx:{entry.id}: {e} (rlm context rm {entry.id}, or refresh it)") from e
            raise
        try:
            kind = metadata.kind_of(real, None if entry.kind == "file" else entry.kind)
        except (RegistryError, OSError) as e:
            raise ContextError(f"ctx:{entry.id} is no longer a {entry.kind}: {e}") from e
        if kind != entry.kind:
            raise ContextError(f"ctx:{entry.id} is no longer a {entry.kind} (now a {kind}): remove it and add it again")
        return Resolved(entry, path=real)

    # ------------------------------------------------------------------ usage

    def record(self, id: str, op: str, run_id: str | None = None, n: int = 1) -> None:
        """Count ``n`` uses ``op`` (one of ``OPS``) of the context ``id``, by the run ``run_id``.

        Raises:
            UnknownContext: no context has this id.
            RegistryError: an unknown op or a bad count.
        """
        key = self._known(id)
        self.record_run(run_id, {key: {op: n}})

    def record_run(self, run_id: str | None, counts: Mapping[str, Mapping[str, int]]) -> None:
        """Count what one run did with several contexts at once (``{id: {op: n}}``), in one
        transaction. Ids no longer registered are skipped (removed while the run ran)."""
        for per_id in counts.values():
            for op, n in per_id.items():
                if op not in OPS:
                    raise RegistryError(f"not a usage count: {ids.shown(op)} (one of {', '.join(OPS)})")
                if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_COUNT:
                    raise RegistryError(f"a usage count must be an int from 0 to {MAX_COUNT}, not {ids.shown(n)}")
        if run_id is not None and (not isinstance(run_id, str) or not 0 < len(run_id) <= _MAX_RUN_ID):
            raise RegistryError(f"a run id is 1 to {_MAX_RUN_ID} characters")
        now = time.time()
        with self.db.write() as conn:
            for key, per_id in counts.items():
                if not ids.valid_id(key) or not conn.execute("SELECT 1 FROM contexts WHERE id = ?", (key,)).fetchone():
                    continue
                sets = ", ".join(f"{op} = min({op}, {COUNT_LIMIT}) + ?" for op in per_id)  # op is one of OPS
                conn.execute(f"UPDATE context_usage SET {sets + ', ' if sets else ''}last_access = ? WHERE id = ?",
                             (*per_id.values(), now, key))
                if run_id is not None:
                    conn.execute("INSERT OR REPLACE INTO context_runs (id, run_id, at) VALUES (?, ?, ?)", (key, run_id, now))
                    conn.execute("DELETE FROM context_runs WHERE id = ? AND run_id NOT IN (SELECT run_id FROM context_runs "
                                 "WHERE id = ? ORDER BY at DESC, run_id LIMIT ?)", (key, key, RECENT_RUNS))

    def record_leads(self, found: Mapping[str, Sequence[str]]) -> None:
        """Count, for each context id, one more question each of its probes led to the answer
        of (``leads.leads``); keep the ``LEADS_KEPT`` most used. Ids no longer registered, and
        probes that are not short strings, are skipped."""
        now = time.time()
        with self.db.write() as conn:
            for key, probes in found.items():
                kept = [p for p in dict.fromkeys(probes) if _leads.shown(p)]
                if not kept or not ids.valid_id(key) or not conn.execute("SELECT 1 FROM contexts WHERE id = ?", (key,)).fetchone():
                    continue
                conn.executemany("INSERT INTO context_leads (id, probe, questions, last_at) VALUES (?, ?, 1, ?) "
                                 f"ON CONFLICT(id, probe) DO UPDATE SET questions = min(questions, {COUNT_LIMIT}) + 1, "
                                 "last_at = excluded.last_at",
                                 [(key, p, now) for p in kept[:_leads.PROBES_A_QUESTION]])
                conn.execute("DELETE FROM context_leads WHERE id = ? AND probe NOT IN (SELECT probe FROM context_leads "
                             "WHERE id = ? ORDER BY questions DESC, last_at DESC, probe LIMIT ?)", (key, key, LEADS_KEPT))

    def leads(self, id: str, most: int = LEADS_SHOWN) -> builtins.list[tuple[str, int]]:
        """The probes that led to answers over the context ``id`` (``(probe, questions)``),
        most used first, then the latest; [] for an id not registered."""
        key = ids.ref_id(id) if isinstance(id, str) else ""
        if not ids.valid_id(key):
            return []
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT probe, questions FROM context_leads WHERE id = ? AND typeof(probe) = 'text' "
                "AND typeof(questions) = 'integer' AND questions BETWEEN 1 AND ? AND length(probe) <= ? "
                "ORDER BY questions DESC, last_at DESC, probe LIMIT ?",
                (key, MAX_COUNT, _leads.PROBE_CHARS, max(0, int(most)))).fetchall()
        # A file may hold anything: only rows record_leads could have written come back.
        return [(str(p), int(n)) for p, n in rows if _leads.shown(p)]

    def stats(self, id: str | None = None) -> dict[str, Usage]:
        """The usage of the context ``id``, or of every context (by id; a damaged one is left
        out with a warning, as ``list`` does).

        Raises:
            UnknownContext: no context has this id.
            DamagedContext: its rows hold a value this version never writes.
        """
        if id is not None:
            return {(entry := self.get(id)).id: entry.usage}
        return {entry.id: entry.usage for entry in self.list()}

    # ------------------------------------------------------------------ internals

    def _known(self, id: str) -> str:
        """The id named by ``id`` (``ctx:`` stripped), or ``UnknownContext``."""
        key = ids.ref_id(id) if isinstance(id, str) else ""
        if ids.valid_id(key):
            with self.db.read() as conn:
                if conn.execute("SELECT 1 FROM contexts WHERE id = ?", (key,)).fetchone():
                    return key
        raise self._unknown(key if isinstance(id, str) else repr(id))

    def _unknown(self, key: str) -> UnknownContext:
        with self.db.read() as conn:
            rows = conn.execute("SELECT id, name FROM contexts ORDER BY refreshed DESC LIMIT ?", (SUGGEST_FROM,)).fetchall()
        probe = key[:100].lower()
        known = [str(i) for i, _ in rows]
        exact = [i for i in known if i == probe] or [str(i) for i, n in rows if str(n).lower() == probe]
        close = exact or difflib.get_close_matches(probe, known, n=1, cutoff=0.6)
        suggestion = close[0] if close else None
        hint = f" (did you mean ctx:{suggestion}?)" if suggestion else " (rlm context list shows them)"
        rule = "" if ids.valid_id(key) else f"; an id is {ids.ID_RULE}"
        return UnknownContext(f"no registered context {ids.shown(ids.REF_PREFIX + key)}{rule}{hint}", context_id=key,
                              suggestion=suggestion)

    def _damaged(self, key: object, problem: str) -> DamagedContext:
        """The error of a context whose rows hold ``problem`` (no path: a server's client reads it)."""
        if isinstance(key, str) and ids.valid_id(key):
            return DamagedContext(f"ctx:{key} is damaged in registry.db ({problem}): rlm context rm {key} removes it",
                                  context_id=key, problem=problem)
        return DamagedContext(f"a context of id {ids.shown(key)} is damaged in registry.db ({problem})",
                              context_id=str(key), problem=problem)

    def _entry(self, conn: Any, row: tuple[Any, ...]) -> Entry:
        """The entry of a ``contexts`` row, every value read back checked (``value_check``).

        Raises:
            DamagedContext: a value this version never writes.
        """
        meta, problem = value_check.meta_of(row[4])
        problem = value_check.context_problem(row) or problem
        if problem is not None:
            raise self._damaged(row[0], problem)
        key = str(row[0])
        tags = [r[0] for r in conn.execute("SELECT tag FROM context_tags WHERE id = ? ORDER BY tag", (key,))]
        problem = next((p for p in map(value_check.tag_problem, tags) if p is not None), None)
        if problem is not None:
            raise self._damaged(key, problem)
        typed = conn.execute("SELECT type FROM context_types WHERE id = ?", (key,)).fetchone()
        if typed is not None and typed[0] not in types.POLICIES:
            raise self._damaged(key, "context_types.type: not a type")
        return Entry(id=key, name=row[1], kind=row[2], source=row[3], tags=tuple(tags), meta=meta, created=float(row[5]),
                     refreshed=float(row[6]), usage=self._usage(conn, key),
                     type=str(typed[0]) if typed is not None else types.default_type(str(row[2])))

    def _usage(self, conn: Any, key: str) -> Usage:
        row = conn.execute("SELECT peeks, greps, chunks, loads, searches, last_access FROM context_usage WHERE id = ?",
                           (key,)).fetchone()
        runs = [r[0] for r in conn.execute(
            "SELECT run_id FROM context_runs WHERE id = ? ORDER BY at DESC, run_id LIMIT ?", (key, RECENT_RUNS))]
        problem = next((p for p in map(value_check.run_problem, runs) if p is not None), None)
        problem = (value_check.usage_problem(row) if row is not None else None) or problem
        if problem is not None:
            raise self._damaged(key, problem)
        if row is None:
            return Usage(runs=tuple(runs))
        peeks, greps, chunks, loads, searches = row[:5]
        return Usage(peeks=peeks, greps=greps, chunks=chunks, loads=loads, searches=searches,
                     last_access=None if row[5] is None else float(row[5]), runs=tuple(runs))
