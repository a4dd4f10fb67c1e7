"""Named tokens of ``rlm serve --http``: more tokens besides the server's own, each with a name,
a scope and a memory store.

The server's own token (``auth.py``) has full access and the user's default memory store. A
named token (``rlm serve --add-token NAME [--read-only] [--store PATH]``) is made for one
client or person: a read-only one may read and search but not write (no note, no memory edit,
no registration, and its questions remember nothing), and one with a store of its own keeps
its notes there, apart from the default store, which it never sees (``Caller``).

They are kept in ``$RLM_HOME/serve/tokens.json`` (0600, its folder 0700: ``private.py``),
one entry per token: its name, scope, store, when it was made, and the SHA-256 of its
secret. The secret itself is printed once, when it is made, and kept nowhere: a client's
token is hashed and compared with ``hmac.compare_digest``. Writers (``add_token``,
``remove_token``) take a lock and replace the file whole; a running server reads it again
when it changes (``TokensFile``, within ``auth.TOKEN_CHECK_S``), so a removed token stops
working then. A file that is a link, not a regular file or not what this module writes is
refused with a ``ConfigError`` saying so: at a server's start it stops the server; while it
runs, every named token is refused until the file is right again (fail closed).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import stat
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from rlm_runtime.config import Paths, user_path
from rlm_runtime.errors import ConfigError, RLMError
from rlm_runtime.private import FILE_MODE, make_dir, tighten

log = logging.getLogger(__name__)

#: How often a ``TokensFile`` looks at its file (seconds), as ``auth.TokenFile`` does.
TOKENS_CHECK_S = 1.0
#: A token's name: what ``--list-tokens`` shows and a request's caller is known by.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
#: The name of the server's own token (reserved: no named token takes it).
OWNER_NAME = "owner"
#: Named tokens kept at most, and the largest tokens file read.
MAX_TOKENS = 256
MAX_FILE_BYTES = 1 << 20
_VERSION = 1
_DIGEST = re.compile(r"[0-9a-f]{64}")
#: Files SQLite keeps beside a store: they hold its recent writes, so they are sealed with it.
_SIDECARS = ("-wal", "-shm", "-journal")


@dataclass(frozen=True)
class Caller:
    """Who a request to the server comes from: a token's name, whether it may only read,
    and its memory store (None: the user's default store).

    The server's own token and MCP over stdio are ``OWNER``: full access, the default store.
    ``key`` tells tokens apart beyond their names (a named token's digest): one removed and
    made again under the same name is another caller, with none of the first one's sessions.
    """

    name: str
    read_only: bool = False
    store: Path | None = None
    key: str = field(default="", repr=False)


OWNER = Caller(OWNER_NAME)


@dataclass(frozen=True)
class NamedToken:
    """One entry of the tokens file: ``digest`` is the SHA-256 (hex) of its secret."""

    name: str
    digest: str
    read_only: bool
    store: Path | None
    created: float

    @property
    def caller(self) -> Caller:
        return Caller(self.name, self.read_only, self.store, self.digest)

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "sha256": self.digest, "read_only": self.read_only,
                "store": None if self.store is None else str(self.store), "created": self.created}


def tokens_path(paths: Paths) -> Path:
    """Where the named tokens are kept: ``$RLM_HOME/serve/tokens.json``."""
    return paths.home / "serve" / "tokens.json"


def digest(secret: str | bytes) -> str:
    """The SHA-256 (hex) of a token as a client sends it."""
    return hashlib.sha256(secret.encode("utf-8", "surrogateescape") if isinstance(secret, str) else secret).hexdigest()


def match(table: Mapping[str, Caller], given: bytes) -> Caller | None:
    """The caller whose token is ``given`` (the bytes a client sent), or None. Every entry is
    compared, in constant time each."""
    wanted = digest(given)
    found = None
    for key, caller in table.items():
        if hmac.compare_digest(key, wanted):
            found = caller
    return found


def load_tokens(paths: Paths) -> list[NamedToken]:
    """The named tokens, as the file holds them (none when there is no file).

    Raises:
        ConfigError: the file is a link, not a regular file, too large, or not a tokens file.
    """
    path = tokens_path(paths)
    data = _read(path)
    return [] if data is None else _parse(data, path, paths)


def add_token(paths: Paths, name: str, *, read_only: bool = False, store: str | os.PathLike[str] | None = None) -> tuple[str, NamedToken]:
    """Make a named token: its secret (shown to the user once, kept nowhere) and its entry.

    Args:
        name: what it is known by (``NAME``; not ``owner``, not one taken).
        read_only: it may read and search, never write.
        store: a memory store of its own (created now when missing; see ``checked_store``);
            None: the default store.

    Raises:
        ConfigError: a bad or taken name, a store that cannot be one, a damaged tokens file,
            ``MAX_TOKENS`` reached.
    """
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ConfigError("a token's name is 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit")
    if name == OWNER_NAME:
        raise ConfigError(f"{OWNER_NAME!r} is the server's own token (rlm serve --show-token): choose another name")
    place = checked_store(paths, store) if store is not None else None
    secret = secrets.token_urlsafe(32)
    entry = NamedToken(name, digest(secret), read_only, place, round(time.time(), 3))
    with _locked(paths):
        tokens = load_tokens(paths)
        if any(t.name == name for t in tokens):
            raise ConfigError(f"there is a token named {name!r} already: rlm serve --remove-token {name} first")
        if len(tokens) >= MAX_TOKENS:
            raise ConfigError(f"there are {len(tokens)} named tokens, the most kept: remove some (rlm serve --remove-token NAME)")
        if place is not None:
            _create_store(place)
        _write(paths, [*tokens, entry])
    return secret, entry


def remove_token(paths: Paths, name: str) -> bool:
    """Remove the named token ``name``; whether there was one. Its store stays on disk.

    Raises:
        ConfigError: the tokens file is damaged (remove it: every named token goes with it).
    """
    with _locked(paths):
        tokens = load_tokens(paths)
        kept = [t for t in tokens if t.name != name]
        if len(kept) == len(tokens):
            return False
        _write(paths, kept)
    return True


def checked_store(paths: Paths, text: str | os.PathLike[str]) -> Path:
    """The absolute path of a token's memory store as the user gave it (``~`` expanded, a
    relative path taken from the working folder, its folders' links resolved).

    Raises:
        ConfigError: the default store (leave ``--store`` out for it), a file in ``$RLM_HOME``
            other than ``$RLM_HOME/brain/NAME.db`` (the runtime's own files are there), a
            link, or something other than a regular file.
    """
    given = user_path(text)
    if not str(given) or "\x00" in str(given):
        raise ConfigError("a store is a file path")
    if given.name in ("", ".", ".."):
        raise ConfigError(f"a store is a file, not a folder: {text}")
    place = Path(os.path.realpath(given.absolute().parent)) / given.name
    problem = _misplaced(paths, place)
    if problem is not None:
        raise ConfigError(problem)
    try:
        st = os.lstat(place)
    except FileNotFoundError:
        return place
    except OSError as e:
        raise ConfigError(f"cannot use {place} as a store: {e.strerror or e}") from e
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"{place} is {'a link' if stat.S_ISLNK(st.st_mode) else 'not a regular file'}: a store is a file of its own")
    return place


def usable_store(caller: Caller) -> Path | None:
    """``caller``'s store if it may be opened now: missing (it is then created), or a regular
    file of the user's, in a folder no one else may write to. A link or someone else's file
    put at its place since the token was made is refused, never opened.

    Raises:
        ConfigError: the store's place holds a link, not a regular file, or another user's
            file, or its folder is gone or writable by others.
    """
    if caller.store is None:
        return None
    # Said to a client: the store's folder is not named (rlm serve --list-tokens names it).
    problem = _open_folder(caller.store.parent)
    if problem is not None:
        raise ConfigError(f"the memory store of the token {caller.name!r} is not opened: its folder {problem} "
                          "(rlm serve --list-tokens names it)")
    try:
        st = os.lstat(caller.store)
    except FileNotFoundError:
        return caller.store
    except OSError as e:
        raise ConfigError(f"the memory store of the token {caller.name!r} cannot be opened ({e.strerror or e})") from e
    if not stat.S_ISREG(st.st_mode) or (hasattr(os, "geteuid") and st.st_uid != os.geteuid()):
        raise ConfigError(f"the memory store of the token {caller.name!r} is no longer a file of this user's: "
                          "not opened (rlm serve --list-tokens names it)")
    return caller.store


class TokensFile:
    """The named tokens as their file holds them now, as a table from each secret's digest to
    its ``Caller``: read again when the file's content changes, looked at no more than every
    ``TOKENS_CHECK_S``. A file that goes gives no named tokens; a damaged one none either
    (fail closed), said once in the server's log.

    Every store a token names is sealed (``context.beneath.seal``) with the files SQLite keeps
    beside it: no client reads it as a file, whatever the server's roots.

    Args:
        paths: whose ``$RLM_HOME/serve/tokens.json``.

    Raises:
        ConfigError: at construction, the file is damaged (a server does not start on it).
    """

    def __init__(self, paths: Paths, *, clock: Callable[[], float] | None = None) -> None:
        self.path = tokens_path(paths)
        self._paths = paths
        self._clock = clock or time.monotonic
        self._lock = threading.Lock()
        self._data = _read(self.path)
        self._table = self._table_of(_parse(self._data, self.path, paths) if self._data is not None else [])
        self._checked = self._clock()

    def __call__(self) -> Mapping[str, Caller]:
        now = self._clock()
        with self._lock:
            if now - self._checked < TOKENS_CHECK_S:
                return self._table
            self._checked = now
            try:
                data = _read(self.path)
            except (OSError, ConfigError) as e:
                data = b"\x00unreadable"
                error: Exception | None = e
            else:
                error = None
            if data == self._data:
                return self._table
            self._data = data
            if error is not None:
                log.warning("named tokens refused: %s", error)
                self._table = {}
                return self._table
            try:
                self._table = self._table_of(_parse(data, self.path, self._paths) if data is not None else [])
            except Exception as e:  # noqa: BLE001 - whatever the file holds, the server refuses named tokens, not requests
                log.warning("named tokens refused: %s", e)
                self._table = {}
            return self._table

    @staticmethod
    def _table_of(tokens: list[NamedToken]) -> dict[str, Caller]:
        from rlm_runtime.context.beneath import seal

        for token in tokens:
            if token.store is not None:
                for suffix in ("", *_SIDECARS):
                    seal(f"{token.store}{suffix}")
        return {t.digest: t.caller for t in tokens}


def _misplaced(paths: Paths, place: Path) -> str | None:
    """Why ``place`` (absolute, its folders resolved) cannot be a token's store, or None."""
    home = Path(os.path.realpath(paths.home))
    if place == Path(os.path.realpath(home / "brain" / "memory.db")):
        return "that is the default memory store: leave --store out to give a token the default store"
    if place.is_relative_to(home) and (place.parent != home / "brain" or place.suffix != ".db"):
        return (f"a store in $RLM_HOME goes beside the default one, as {home / 'brain' / 'NAME.db'}: the rest of "
                "$RLM_HOME holds the runtime's own files")
    return None


def _open_folder(folder: Path) -> str | None:
    """Why ``folder`` may not hold a store (said after "its folder"), or None: it must be a
    folder of this user's (or root's) that neither group nor others may write to, since SQLite
    makes and removes files beside the store (anyone who may write there could put a link in
    their place)."""
    try:
        st = os.stat(folder)
    except OSError as e:
        return f"cannot be used ({e.strerror or e})"
    owner_ok = not hasattr(os, "geteuid") or st.st_uid in (os.geteuid(), 0)
    if not stat.S_ISDIR(st.st_mode) or not owner_ok or st.st_mode & 0o022:
        return "is writable by others or not this user's: keep a store in a folder only you can write to (chmod go-w)"
    return None


# ---------------------------------------------------------------------------------- the file


def _read(path: Path) -> bytes | None:
    """The tokens file's bytes (None: there is none). O_NOFOLLOW: a link planted at its place
    is refused, not followed; O_NONBLOCK: a FIFO does not hold the reader."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ConfigError(f"cannot read the named tokens {path}: {e.strerror or e} (a link there is refused: "
                          "remove it)") from e
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"{path} is not a regular file: remove it (named tokens are made again with "
                              "rlm serve --add-token)")
        if st.st_mode & 0o077:
            try:
                os.fchmod(f.fileno(), stat.S_IMODE(st.st_mode) & ~0o077)
            except OSError:  # not the user's file: read it anyway; rlm sandbox doctor says it is exposed
                pass
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError(f"{path} is over {MAX_FILE_BYTES:,} bytes: it is not a tokens file this runtime wrote; remove it")
    return data


def _parse(data: bytes, path: Path, paths: Paths) -> list[NamedToken]:
    """The entries of a tokens file, every value checked.

    Raises:
        ConfigError: anything this module would not have written, said without quoting it.
    """
    from rlm_runtime import strictjson

    def damaged(problem: str) -> ConfigError:
        return ConfigError(f"the named tokens file {path} is damaged ({problem}): remove it, then make the tokens "
                           "again with rlm serve --add-token")

    try:
        value = strictjson.loads(data.decode("utf-8"), max_depth=4, max_int_digits=20)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise damaged("not JSON") from None
    if not isinstance(value, dict) or value.get("version") != _VERSION or not isinstance(value.get("tokens"), list):
        raise damaged(f"not a version {_VERSION} tokens file")
    entries = value["tokens"]
    if len(entries) > MAX_TOKENS:
        raise damaged(f"over {MAX_TOKENS} tokens")
    tokens: list[NamedToken] = []
    for n, item in enumerate(entries, 1):
        if not isinstance(item, dict):
            raise damaged(f"entry {n} is not an object")
        name, hashed, read_only, store, created = (item.get(k) for k in ("name", "sha256", "read_only", "store", "created"))
        if not isinstance(name, str) or not NAME.fullmatch(name) or name == OWNER_NAME:
            raise damaged(f"entry {n} has no valid name")
        if not isinstance(hashed, str) or not _DIGEST.fullmatch(hashed):
            raise damaged(f"token {name!r} has no SHA-256")
        if not isinstance(read_only, bool):
            raise damaged(f"token {name!r}: read_only is not true or false")
        if store is not None and (not isinstance(store, str) or not store.startswith("/") or "\x00" in store
                                  or len(store) > 4096 or os.path.normpath(store) != store):
            raise damaged(f"token {name!r}: its store is not an absolute, normal path")
        if store is not None and (problem := _misplaced(paths, Path(store))) is not None:
            raise damaged(f"token {name!r}: {problem}")
        if isinstance(created, bool) or not isinstance(created, (int, float)):
            raise damaged(f"token {name!r}: created is not a time")
        tokens.append(NamedToken(name, hashed, read_only, None if store is None else Path(store), float(created)))
    if len({t.name for t in tokens}) != len(tokens):
        raise damaged("a name is given twice")
    if len({t.digest for t in tokens}) != len(tokens):
        raise damaged("a token is given twice")
    return tokens


def _write(paths: Paths, tokens: list[NamedToken]) -> None:
    """Replace the tokens file whole (a reader sees the old file or the new one, never half)."""
    path = tokens_path(paths)
    text = json.dumps({"version": _VERSION, "tokens": [t.to_json() for t in tokens]}, indent=1, ensure_ascii=False)
    temp = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), FILE_MODE)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), FILE_MODE)  # whatever the umask
            f.write(text + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)


@contextmanager
def _locked(paths: Paths) -> Iterator[None]:
    """Hold the tokens' lock: two ``rlm serve --add-token`` at once each keep their token."""
    folder = tokens_path(paths).parent
    make_dir(folder)
    tighten(folder)
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(folder / ".tokens.lock", flags, FILE_MODE)
    except OSError as e:
        raise ConfigError(f"cannot lock the named tokens in {folder}: {e.strerror or e}") from e
    try:
        try:
            import fcntl
        except ImportError:  # Windows: not a target; one writer at a time is then the user's care
            yield
            return
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _create_store(place: Path) -> None:
    """Create (or check) the store at ``place`` now (its missing folders 0700), so that a path
    that cannot hold one is refused when the token is made, not at its first request."""
    from rlm_runtime.memory.store import MemoryStore

    try:
        make_dir(place.parent)
    except OSError as e:
        raise ConfigError(f"cannot make the folder of the store {place}: {e.strerror or e}") from e
    problem = _open_folder(place.parent)
    if problem is not None:
        raise ConfigError(f"{place} cannot be a token's memory store: its folder {place.parent} {problem}")
    try:
        MemoryStore(place, embedder=None).close()
    except RLMError as e:
        raise ConfigError(f"{place} cannot be a token's memory store: {e}") from e
