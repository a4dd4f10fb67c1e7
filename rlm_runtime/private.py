"""Files the runtime writes are private to the user: 0700 folders, 0600 files, whatever the umask.

A context can be a 0600 file; its text ends up in trajectories, context indexes, the memory
store and the REPL's history. Each writer makes its folder with ``make_dir`` and its file
with ``open_append`` / ``open_write`` / ``create_file`` (a SQLite database created 0600 gets its ``-wal`` and
``-shm`` files with the same mode: SQLite copies the database's). ``secure_home`` takes group
and other permissions off ``$RLM_HOME`` and everything in it the user owns (once per process
and folder: files written by an older version, or by hand); ``exposed`` lists what is still
readable by others, for ``rlm sandbox doctor``.

Symbolic links are never followed or changed: a link under ``$RLM_HOME`` may point anywhere.
``$RLM_HOME`` itself may be a link: the folder it names is the one made private and checked.
"""

from __future__ import annotations

import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

DIR_MODE = 0o700
FILE_MODE = 0o600
#: Permission bits no path under ``$RLM_HOME`` may have: any for group or others.
OPEN_BITS = 0o077

_secured: set[str] = set()
_secured_lock = threading.Lock()


def _owned(st: os.stat_result) -> bool:
    return not hasattr(os, "geteuid") or st.st_uid == os.geteuid()


def tighten(path: str | os.PathLike[str]) -> None:
    """Take group and other bits off ``path`` if the user owns it (a link is left alone)."""
    try:
        st = os.lstat(path)
    except OSError:
        return
    if stat.S_ISLNK(st.st_mode) or not _owned(st) or not st.st_mode & OPEN_BITS:
        return
    try:
        os.chmod(path, stat.S_IMODE(st.st_mode) & ~OPEN_BITS)
    except OSError:  # a read-only file system: doctor will say so
        pass


def make_dir(path: str | os.PathLike[str]) -> Path:
    """``path`` as a folder, each missing part created 0700 (``mkdir -p`` would make the
    parents 0777 less the umask)."""
    folder = Path(path)
    missing = []
    probe = folder
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for part in reversed(missing):
        try:
            os.mkdir(part, DIR_MODE)
        except FileExistsError:  # another process made it meanwhile
            continue
        os.chmod(part, DIR_MODE)  # the umask may have taken bits from the owner too
    return folder


def open_append(path: str | os.PathLike[str]) -> IO[str]:
    """``path`` opened to append text (UTF-8), created 0600; an existing file of the user's
    loses its group and other bits."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), FILE_MODE)
    try:
        _fix_fd(fd)
        return os.fdopen(fd, "a", encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


def open_write(path: str | os.PathLike[str], *, binary: bool = False) -> IO[Any]:
    """``path`` opened to write from its start (text in UTF-8, or ``binary``), created 0600;
    an existing file of the user's is emptied and loses its group and other bits. For whole
    files copied from private ones: a trajectory's HTML page, a transcript, an export, a model."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), FILE_MODE)
    try:
        _fix_fd(fd)
        return os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="\n")
    except BaseException:
        os.close(fd)
        raise


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """``path`` holding ``text`` (UTF-8), 0600 (see ``open_write``)."""
    with open_write(path) as f:
        f.write(text)


def create_file(path: str | os.PathLike[str]) -> None:
    """Make ``path`` exist as a 0600 file (empty if it was missing; kept, tightened, if not).

    Used before SQLite opens a database: it creates its files with 0644 less the umask.
    """
    fd = os.open(path, os.O_RDONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), FILE_MODE)
    try:
        _fix_fd(fd)
    finally:
        os.close(fd)


def _fix_fd(fd: int) -> None:
    st = os.fstat(fd)
    if stat.S_ISREG(st.st_mode) and _owned(st) and st.st_mode & OPEN_BITS:
        os.fchmod(fd, stat.S_IMODE(st.st_mode) & ~OPEN_BITS)


def secure_home(home: str | os.PathLike[str]) -> None:
    """Make ``home`` and everything in it the user owns private (once per process and path).

    ``home`` itself 0700 first: from then on nothing under it is reachable by others, even a
    file another writer creates 0644 before this walk gets to it.
    """
    # $RLM_HOME itself may be a link (to another disk): the folder it names is the one to
    # tighten (tighten leaves a link alone, so the real folder stayed 0755 and listable).
    key = os.path.realpath(home)
    with _secured_lock:
        if key in _secured:
            return
        _secured.add(key)
    if not os.path.isdir(key):  # the writers make it, 0700, when they first need it
        return
    tighten_tree(key)


def tighten_tree(top: str | os.PathLike[str]) -> None:
    """``tighten`` ``top`` and everything under it (links neither followed nor changed)."""
    tighten(top)
    for root, dirs, files in os.walk(top):  # never follows links to folders
        for name in dirs + files:
            tighten(os.path.join(root, name))


@dataclass(frozen=True)
class Exposed:
    """A path under ``$RLM_HOME`` that group or others may read, write or enter."""

    path: str
    mode: int
    owned: bool

    def __str__(self) -> str:
        owner = "" if self.owned else " (owned by another user)"
        return f"{stat.filemode(self.mode)} {oct(stat.S_IMODE(self.mode))} {self.path}{owner}"


def exposed(home: str | os.PathLike[str], limit: int = 1000) -> list[Exposed]:
    """Paths under ``home`` (``home`` included) with any group or other permission bit,
    at most ``limit`` of them. Links are not reported (their own mode means nothing)."""
    found: list[Exposed] = []
    top = os.path.realpath(home)  # a linked $RLM_HOME: its folder's own mode counts (see secure_home)
    if not os.path.lexists(top):
        return found

    def check(path: str) -> None:
        try:
            st = os.lstat(path)
        except OSError:
            return
        if not stat.S_ISLNK(st.st_mode) and st.st_mode & OPEN_BITS:
            found.append(Exposed(path, st.st_mode, _owned(st)))

    check(top)
    for root, dirs, files in os.walk(top):
        for name in dirs + files:
            if len(found) >= limit:
                return found
            check(os.path.join(root, name))
    return found
