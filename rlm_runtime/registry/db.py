"""The SQLite connection of the registry: opening it (private file, WAL, busy timeout, foreign
keys), refusing a file that is not a registry, and short transactions.

Concurrency: one ``Database`` is one connection shared by the threads of a process under a
lock; several processes share the file through WAL (readers go on while a writer commits),
every write being a short ``BEGIN IMMEDIATE`` transaction that queues on ``busy_timeout``
instead of failing half-way with "database is locked".

The file is opened defensively, as the memory store's is: a file that is not SQLite, another
program's database, or one whose schema holds anything the migrations do not make (a trigger
or a view SQLite would run in this process) is refused before anything writes to it
(``RegistryError``, the file left as it was).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rlm_runtime import private
from rlm_runtime.errors import RegistryError
from rlm_runtime.registry.migrations import migrate, unexpected_objects

#: Largest string a statement may make or read: a text context is capped far below.
MAX_VALUE_BYTES = 64 << 20


def _refuse(path: Path, why: object) -> RegistryError:
    return RegistryError(f"{path} is not a usable registry of contexts ({why}); it was left unchanged: "
                         "move it away to start a new one")


def connect(path: Path, *, busy_timeout_s: float = 10.0) -> sqlite3.Connection:
    """A connection to the registry at ``path`` (created 0600 in a 0700 folder when missing),
    checked and migrated.

    Raises:
        RegistryError: the file cannot be opened, is not SQLite, is another program's
            database, or holds schema objects the migrations do not make.
    """
    try:
        private.make_dir(path.parent)
        private.create_file(path)  # SQLite would create it 0644 less the umask
        conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False, timeout=busy_timeout_s)
    except (OSError, sqlite3.Error) as e:
        raise RegistryError(f"cannot open the registry of contexts {path}: {getattr(e, 'strerror', None) or e}") from e
    try:
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        conn.setlimit(sqlite3.SQLITE_LIMIT_TRIGGER_DEPTH, 8)
        tables = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
        if tables and "_migrations" not in tables:
            raise _refuse(path, f"another program's database: tables {', '.join(sorted(tables)[:5])}")
        foreign = unexpected_objects(conn)
        if foreign:
            raise _refuse(path, f"schema objects the registry does not make: {', '.join(foreign[:5])}")
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise RegistryError(f"the registry of contexts {path} cannot use WAL mode (journal mode stays {mode})")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        migrate(conn)
    except sqlite3.OperationalError as e:
        conn.close()
        if "locked" in str(e) or "busy" in str(e):
            raise RegistryError(f"the registry of contexts {path} is busy (another writer held it past the timeout): {e}") from e
        raise _refuse(path, e) from e
    except sqlite3.DatabaseError as e:  # "file is not a database", "database disk image is malformed"
        conn.close()
        raise _refuse(path, e) from e
    except BaseException:
        conn.close()
        raise
    return conn


class Database:
    """One connection and the transactions on it."""

    def __init__(self, path: Path, *, busy_timeout_s: float = 10.0) -> None:
        self.path = path
        self.conn = connect(path, busy_timeout_s=busy_timeout_s)
        self.lock = threading.RLock()
        self._depth = 0

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (nested calls join the outer one); rolled back on any exception.

        Raises:
            RegistryError: another writer held the file past the busy timeout, or SQLite failed.
        """
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
            except sqlite3.Error as e:
                raise RegistryError(f"the registry of contexts {self.path} is busy or unusable: {e}") from e
            self._depth = 1
            try:
                yield self.conn
                self.conn.execute("COMMIT")
            except sqlite3.Error as e:
                self.conn.rollback()
                raise RegistryError(f"the registry of contexts {self.path} failed: {e}") from e
            except BaseException:
                self.conn.rollback()
                raise
            finally:
                self._depth = 0

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: the queries inside see one state of the registry."""
        with self.lock:
            if self._depth:
                yield self.conn
                return
            try:
                self.conn.execute("BEGIN")
            except sqlite3.Error as e:
                raise RegistryError(f"the registry of contexts {self.path} is unusable: {e}") from e
            try:
                yield self.conn
            except sqlite3.Error as e:
                raise RegistryError(f"the registry of contexts {self.path} failed: {e}") from e
            finally:
                self.conn.execute("COMMIT")

    def close(self) -> None:
        with self.lock:
            self.conn.close()
