"""The SQLite connection of a memory store: opening it (WAL, busy timeout, foreign keys), the
check that this SQLite has FTS5 with the porter and unicode61 tokenizers, and short
transactions.

Concurrency model: many readers and one writer, across processes. WAL lets readers go on
while a writer commits; every write is a ``BEGIN IMMEDIATE`` transaction (it takes the write
lock at once, so two writers queue on ``busy_timeout`` instead of failing half-way with
"database is locked"), kept short by its caller. ``synchronous=NORMAL``: a killed process
loses at most the transaction in flight and never corrupts the file; a power cut may also
lose the last commits before a checkpoint (``durable=True`` selects ``FULL``).

One ``Database`` serves one process: its connection is shared by threads under a lock.

A store file may come from elsewhere (``--memory PATH``, an eval task), so it is opened
defensively: a file whose schema holds anything the migrations do not make (a trigger, a view,
another table) is refused before any statement runs in it (``NotAMemoryStore``), and so is one
whose values are not of the types the columns declare (``value_check.py``); limits bound a value's size (``MAX_VALUE_BYTES``), a statement's
length, trigger depth, and ATTACH (none); and no single statement runs longer than
``MAX_STATEMENT_S`` (a progress handler interrupts it: ``StoreError``).
"""

from __future__ import annotations

import math
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rlm_runtime import timestamps
from rlm_runtime.memory.errors import NotAMemoryStore, StoreError

#: The FTS5 tokenizer of the chunk index (porter stemming over unicode61, accents folded).
TOKENIZER = "porter unicode61 remove_diacritics 2"
#: The condition on ``chunks c`` that keeps live chunks, not those in the trash (``curation``):
#: every reader of chunks adds it.
LIVE = "c.deleted_at IS NULL"
#: The same over ``chunks_fts``: its rowids not in the trash (the partial index
#: ``chunks_deleted`` makes the subquery read only the trash).
LIVE_FTS = "chunks_fts.rowid NOT IN (SELECT id FROM chunks WHERE deleted_at IS NOT NULL)"
#: Longest any one statement may run (seconds) before it is interrupted.
MAX_STATEMENT_S = 300.0
#: Largest string or blob a statement may make or read (bytes).
MAX_VALUE_BYTES = 256 << 20
#: SQLite virtual-machine steps between two looks at the statement's clock.
_PROGRESS_STEPS = 50_000


def now() -> float:
    """Seconds since the epoch: every timestamp of the store."""
    return time.time()


def decay(strength: float, since: float, at: float, half_life_s: float) -> float:
    """``strength`` set at time ``since``, decayed to time ``at`` with this half-life. A
    strength that is not finite, or a ``since`` that is no time (``timestamps.valid``: a store
    file from elsewhere), stays as it is: an infinite strength decayed to 0 * inf made NaN,
    which SQLite stores as NULL in a NOT NULL column, and every prune failed on it."""
    value = float(strength)
    if half_life_s <= 0 or not math.isfinite(value) or timestamps.valid(since) is None or at <= since:
        return value
    return value * math.pow(0.5, (at - since) / half_life_s)


def fts5_features(conn: sqlite3.Connection) -> dict[str, bool]:
    """Which FTS5 features this SQLite has: ``fts5`` (with porter and unicode61) and ``trigram``."""
    found = {}
    for name, tokenize in (("fts5", TOKENIZER), ("trigram", "trigram")):
        try:
            conn.execute(f"CREATE VIRTUAL TABLE temp._rlm_probe USING fts5(x, tokenize='{tokenize}')")
            conn.execute("DROP TABLE temp._rlm_probe")
            found[name] = True
        except sqlite3.Error:
            found[name] = False
    return found


class _StatementClock:
    """Interrupts a statement past ``limit_s``: SQLite calls ``started`` as each statement
    begins (its trace hook) and ``over`` every ``_PROGRESS_STEPS`` steps (a true value aborts)."""

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self.began = time.monotonic()

    def started(self, _sql: str) -> None:
        self.began = time.monotonic()

    def over(self) -> bool:
        return time.monotonic() - self.began > self.limit_s


def _harden(conn: sqlite3.Connection, statement_timeout_s: float) -> None:
    """Defensive settings for a file that may come from elsewhere (see the module docstring)."""
    # trusted_schema stays on: the store's own triggers write its FTS5 table, which SQLite
    # allows only from a trusted schema. What makes the schema trustworthy is the check that it
    # is exactly what the migrations make (_check_is_store), before any statement runs.
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, 16 << 20)
    conn.setlimit(sqlite3.SQLITE_LIMIT_TRIGGER_DEPTH, 8)
    conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    clock = _StatementClock(statement_timeout_s)
    conn.set_trace_callback(clock.started)
    conn.set_progress_handler(clock.over, _PROGRESS_STEPS)


def descriptor_path(fd: int) -> Path:
    """A path naming the file open as ``fd`` (``/proc/self/fd/N``; ``/dev/fd/N`` on macOS):
    given to ``MemoryStore`` (read-only), the store reads that very file through the
    descriptor into a private copy, whatever its name leads to since."""
    return Path(f"/proc/self/fd/{fd}" if os.path.isdir("/proc/self/fd") else f"/dev/fd/{fd}")


def is_descriptor(path: Path) -> bool:
    return str(path).startswith(("/proc/self/fd/", "/dev/fd/"))


def connect(path: Path, *, readonly: bool = False, busy_timeout_s: float = 10.0, durable: bool = False,
            statement_timeout_s: float = MAX_STATEMENT_S) -> sqlite3.Connection:
    """A connection to the store at ``path`` with the store's pragmas, after checking FTS5
    and that the file's schema is the store's own.

    Raises:
        NotAMemoryStore: the file is another program's database, or its schema holds objects
            the migrations do not make.
        StoreError: the file cannot be opened, is not a database, or this SQLite lacks FTS5.
    """
    try:
        if is_descriptor(path):
            # SQLite turns a name into a full path (following /proc/self/fd/N to the name the
            # file has now) and opens that: never hand it one (MemoryStore copies the file).
            raise StoreError("a memory store given by its descriptor is read through a copy (MemoryStore)")
        if readonly:
            if not path.exists():
                raise StoreError(f"no memory store at {path}")
            conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None,
                                   check_same_thread=False, timeout=busy_timeout_s)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False, timeout=busy_timeout_s)
    except (sqlite3.Error, OSError) as e:
        raise StoreError(f"cannot open the memory store {path}: {e}") from e
    try:
        _harden(conn, statement_timeout_s)
        _check_is_store(conn, path)
        features = fts5_features(conn)
        if not features["fts5"]:
            raise StoreError(
                f"the SQLite in this Python ({sqlite3.sqlite_version}) has no FTS5 with the porter and unicode61 "
                "tokenizers, which the memory store needs: use a Python whose sqlite3 module is built with FTS5 "
                "(python.org, Homebrew, uv and Debian builds are)")
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        if not readonly:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"the memory store {path} cannot use WAL mode (journal mode stays {mode})")
        conn.execute(f"PRAGMA synchronous = {'FULL' if durable else 'NORMAL'}")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA temp_store = MEMORY")
        conn.execute("PRAGMA cache_size = -32000")  # 32 MB of page cache
        conn.create_function("rlm_decay", 4, decay, deterministic=True)
    except sqlite3.DatabaseError as e:
        conn.close()
        raise StoreError(f"{path} is not a usable memory store: {e}") from e
    except StoreError:
        conn.close()
        raise
    return conn


def _check_is_store(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse a file that is not a memory store, before any statement could change it (WAL
    mode alone rewrites the header): a new or empty file is a new store; a database with
    tables is one only if it has the store's ``_migrations`` table, holds no schema object
    our migrations do not make (SQLite would run a trigger or a view in this process), and
    no value of another type than its column declares. The file is left unchanged."""
    from rlm_runtime.memory.migrations import unexpected_objects  # migrations imports this module
    from rlm_runtime.memory.value_check import malformed_values

    refusals = ((_foreign_tables, "is an SQLite database of something else (tables {}), not a memory store"),
                (unexpected_objects, "holds schema objects the memory store does not make ({}): refused, since "
                                     "SQLite would run them in this process"),
                (malformed_values, "is not a memory store this version wrote: {}"),
                (_fts_settings, "sets its own full-text ranking ({}): refused, since every search would rank by it"))
    for check, refusal in refusals:
        try:
            found = check(conn)
        except sqlite3.DatabaseError as e:
            conn.close()
            raise NotAMemoryStore(f"{path} is not a memory store: {e}") from e
        if found:
            conn.close()
            shown = found if isinstance(found, str) else ", ".join(found[:5]) + (" ..." if len(found) > 5 else "")
            raise NotAMemoryStore(f"{path} {refusal.format(shown)}; it was left unchanged")


def _foreign_tables(conn: sqlite3.Connection) -> list[str]:
    """The tables and views of a database that is not a store (no ``_migrations``), else []."""
    names = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
    return sorted(names) if names and "_migrations" not in names else []


def _fts_settings(conn: sqlite3.Connection) -> list[str]:
    """The settings FTS5 keeps in the index of a store's file beside its version (none in a
    store this code made). ``rank`` is one: every unfiltered search orders by it, so a file
    from elsewhere could make it text (``highlight(...)``), an overflow or an inverted weight."""
    exists = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'chunks_fts_config'").fetchone()
    if not exists:
        return []
    return sorted(repr(str(r[0])[:40]) for r in conn.execute("SELECT k FROM chunks_fts_config WHERE k IS NOT 'version' LIMIT 5"))


class Database:
    """One connection and the transactions on it. ``write()`` is a short ``BEGIN IMMEDIATE``
    transaction; ``snapshot()`` a read transaction (one consistent view for several queries);
    plain ``conn`` statements outside both run in autocommit."""

    def __init__(self, path: Path, *, readonly: bool = False, busy_timeout_s: float = 10.0, durable: bool = False,
                 statement_timeout_s: float = MAX_STATEMENT_S) -> None:
        self.path = path
        self.readonly = readonly
        self.conn = connect(path, readonly=readonly, busy_timeout_s=busy_timeout_s, durable=durable,
                            statement_timeout_s=statement_timeout_s)
        self.lock = threading.RLock()
        self._depth = 0
        #: Bumped by every write of this connection (caches of counts key on it).
        self.generation = 0

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction; nested calls join the outer one. Commits at the end of the
        outermost block, rolls back on any exception."""
        if self.readonly:
            raise StoreError(f"the memory store {self.path} is open read-only")
        with self.lock:
            if self._depth:
                self._depth += 1
                try:
                    yield self.conn
                finally:
                    self._depth -= 1
                return
            try:
                self.conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as e:
                raise StoreError(f"the memory store {self.path} is busy (another writer held it past the timeout): {e}") from e
            self._depth = 1
            try:
                yield self.conn
            except BaseException:
                self._depth = 0
                self.conn.rollback()
                raise
            self._depth = 0
            try:
                self.conn.execute("COMMIT")
            except sqlite3.Error:
                self.conn.rollback()
                raise
            self.generation += 1

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: the queries inside see one state of the store."""
        with self.lock:
            if self._depth:  # inside a write: that transaction is the snapshot
                yield self.conn
                return
            self.conn.execute("BEGIN")
            try:
                yield self.conn
            finally:
                self.conn.execute("COMMIT")

    def data_version(self) -> tuple[int, int]:
        """Changes when any connection (ours or another process's) commits."""
        with self.lock:
            return int(self.conn.execute("PRAGMA data_version").fetchone()[0]), self.generation

    def close(self) -> None:
        with self.lock:
            self.conn.close()
