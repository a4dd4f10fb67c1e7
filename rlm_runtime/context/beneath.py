"""Reading what a folder walk found without leaving the folder: ``open_beneath``.

A folder a user or a task file names (``rlm ask -c notes/``, ``rlm memory add notes/``, a
task's folder context) is walked first and its files opened later. Between the two, any
component of a path can be swapped: ``notes/sub`` replaced by a symlink to ``/etc`` makes
``open("notes/sub/doc.txt")`` read a file outside the folder, even with ``O_NOFOLLOW``
(which guards the last component only). So a path found by a walk is opened one component
at a time from the folder's own descriptor, each folder with ``O_NOFOLLOW | O_DIRECTORY``
and the file with ``O_NOFOLLOW | O_NONBLOCK`` and checked to be a regular file (a FIFO
swapped in would block the host): no symlink below the folder is ever followed, and ``..``
is refused. The folder itself is the one the user named: its path is followed, and checked
to be the very folder walked (device and inode).

Sealed places (``seal``): the runtime's own home holds the server's token, the registry and
other runs' traces, which quote files from anywhere. A folder named above it (``rlm serve
--root ~``, ``rlm ask -c ~``) must not hand them out, so a sealed folder or file is left out of
every listing and walk, and an open beneath a folder refuses to pass through or end on one;
matched by device and inode, so a hard link or a second name of it is left out too. A sealed
place named itself (the folder a walk starts from, the base of an open) is the caller's
choice: a person may read their own traces; the server refuses those names before opening.

Linux and macOS have what this needs (``O_DIRECTORY``, ``O_NOFOLLOW``, ``dir_fd``). Where
they are missing (Windows, not a target) the module still imports and falls back to opening
the joined path, with ``O_NOFOLLOW`` when there is one: the last component alone guarded.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["CONFINED", "Root", "list_beneath", "open_beneath", "seal", "sealed", "walk_beneath"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
#: Whether opens are confined component by component (else: the fallback described above).
CONFINED = bool(_NOFOLLOW and _DIRECTORY) and os.open in os.supports_dir_fd and os.scandir in os.supports_fd \
    and os.stat in os.supports_dir_fd


@dataclass(frozen=True)
class Root:
    """A folder as it was when walked: the path it was named by, and its identity."""

    path: str
    dev: int
    ino: int

    @classmethod
    def of(cls, path: str | os.PathLike[str]) -> Root:
        """The folder at ``path`` now (the path followed: the user named it). OSError if it is none."""
        st = os.stat(path)
        if not stat.S_ISDIR(st.st_mode):
            raise NotADirectoryError(errno.ENOTDIR, "not a folder", os.fspath(path))
        return cls(os.fspath(path), st.st_dev, st.st_ino)

    def open(self) -> int:
        """A descriptor of the folder, checked to be the one walked (OSError if it was replaced)."""
        fd = os.open(self.path, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != (self.dev, self.ino):
                raise OSError(errno.ESTALE, "the folder was replaced since it was listed; not read", self.path)
        except BaseException:
            os.close(fd)
            raise
        return fd


Base = Root | int

#: Paths sealed in this process (``seal``): their identities are looked up again at most every
#: ``SEAL_CHECK_S`` (at every call while one of them does not exist yet), so a home made after
#: it was sealed, or a token file replaced, is still what is left out, and a walk of 10,000
#: folders costs no more stats. An identity once seen stays sealed: a home renamed or moved
#: (into a served folder) is still the same folder.
_sealed_paths: set[str] = set()
_sealed_seen: set[tuple[int, int]] = set()
_sealed_lock = threading.Lock()
_sealed_cache: tuple[float, frozenset[tuple[int, int]], tuple[str, ...]] | None = None
SEAL_CHECK_S = 1.0


def seal(path: str | os.PathLike[str]) -> None:
    """Leave the folder or file at ``path`` out of every listing, walk and open beneath a
    folder in this process, from now on (see the module's docstring). Idempotent; a path
    that does not exist yet is sealed once it does."""
    global _sealed_cache
    # Resolved now (a home that is a link names its folder), and never followed again: a
    # link put later at a sealed path that did not exist yet seals that link, not its target.
    real = os.path.realpath(os.fspath(path))
    with _sealed_lock:
        _sealed_paths.add(real)
        _sealed_cache = None


def sealed() -> frozenset[tuple[int, int]]:
    """(device, inode) of every sealed place that exists now (its path as resolved when it
    was sealed, not followed again), and of every sealed folder seen before.

    Folders are looked up at most every ``SEAL_CHECK_S``; files (the server's token) at
    every call: a file's inode is given to the next file made once it is replaced (a rotated
    token), so only its current one counts, and never a moment late."""
    global _sealed_cache
    now = time.monotonic()
    with _sealed_lock:
        cached = _sealed_cache
        paths = tuple(_sealed_paths)
    if cached is not None and now - cached[0] < SEAL_CHECK_S:
        folder_ids, files = cached[1], cached[2]
    else:
        found: set[tuple[int, int]] = set()
        file_paths: list[str] = []
        missing = False
        for path in paths:
            try:
                st = os.lstat(path)
            except (OSError, ValueError):
                missing = True
                continue
            if stat.S_ISDIR(st.st_mode):
                found.add((st.st_dev, st.st_ino))
            else:
                file_paths.append(path)
        with _sealed_lock:
            # A folder stays sealed once seen: moved, it is the same folder.
            _sealed_seen.update(found)
            folder_ids, files = frozenset(_sealed_seen), tuple(file_paths)
            if not missing and len(_sealed_paths) == len(paths):
                _sealed_cache = (now, folder_ids, files)
    live = set()
    for path in files:
        try:
            st = os.lstat(path)
        except (OSError, ValueError):
            continue
        live.add((st.st_dev, st.st_ino))
    return folder_ids | live if live else folder_ids


def _refuse_sealed(fd: int, seals: frozenset[tuple[int, int]], shown: str) -> None:
    """Close ``fd`` and raise when it is a sealed place."""
    if not seals:
        return
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        raise
    if (st.st_dev, st.st_ino) in seals:
        os.close(fd)
        raise PermissionError(errno.EACCES, "the runtime's own folder ($RLM_HOME) or a file of it: not read", shown)


@contextmanager
def _based(base: Base) -> Iterator[Base]:
    """``base`` as an open folder's descriptor (a Root opened for the block), or the Root
    itself where opens are not confined."""
    if isinstance(base, int) or not CONFINED:
        yield base
        return
    fd = base.open()
    try:
        yield fd
    finally:
        os.close(fd)


def _parts(relative: str | os.PathLike[str]) -> list[str]:
    text = os.fspath(relative)
    if os.path.isabs(text):
        raise OSError(errno.EINVAL, "an absolute path is not under the folder", text)
    parts = [p for p in text.replace(os.sep, "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise OSError(errno.EINVAL, "a path with .. may leave the folder", text)
    return parts


def _symlink_refused(error: OSError, parent: int, name: str, shown: str) -> OSError:
    """``error`` from opening ``name`` in ``parent``, said plainly when a symlink is why."""
    if error.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):  # EMLINK: FreeBSD's O_NOFOLLOW
        try:
            if stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
                return OSError(errno.ELOOP, f"{shown} is a symlink (put there after the folder was listed): "
                                            "not followed, nothing outside the folder is read", shown)
        except OSError:
            pass
    return error


def open_beneath(base: Base, relative: str | os.PathLike[str], *, directory: bool = False) -> int:
    """A read-only descriptor of the regular file (or, ``directory=True``, the folder) at
    ``relative`` under ``base``, no symlink followed on the way.

    Args:
        base: the folder, as a ``Root`` (opened and checked for the call) or the descriptor
            of an open folder.
        relative: the path under it, as the walk found it ('' or '.' for the folder itself).

    Raises:
        OSError: a component is a symlink (ELOOP, said so), is missing or not a folder, the
            file is not a regular file (EINVAL: a FIFO, a device or a folder), ``relative``
            is absolute or holds ``..``, or the Root was replaced (ESTALE).
    """
    parts = _parts(relative)
    shown = "/".join(parts) or "."
    if not CONFINED:  # no dir_fd / O_DIRECTORY here: the joined path, the last component guarded when possible
        if isinstance(base, int):
            raise OSError(errno.ENOTSUP, "opening under a folder descriptor is not supported here", shown)
        fd = os.open(os.path.join(base.path, *parts), os.O_RDONLY | _NOFOLLOW | getattr(os, "O_BINARY", 0))
        return _checked(fd, directory, shown)
    seals = sealed()
    with _based(base) as top:
        assert isinstance(top, int)
        fd = top  # the caller's (or _based's) to close; each folder below is this function's
        names = parts if directory else parts[:-1]
        for k, name in enumerate(names):
            try:
                child = os.open(name, os.O_RDONLY | _NOFOLLOW | _DIRECTORY | _NONBLOCK | _CLOEXEC, dir_fd=fd)
            except OSError as e:
                raise _symlink_refused(e, fd, name, "/".join(parts[: k + 1])) from None
            finally:
                if fd != top:
                    os.close(fd)
            _refuse_sealed(child, seals, "/".join(parts[: k + 1]))
            fd = child
        if directory:
            return fd if fd != top else os.dup(fd)
        last = parts[-1] if parts else "."
        try:
            child = os.open(last, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC, dir_fd=fd)
        except OSError as e:
            raise _symlink_refused(e, fd, last, shown) from None
        finally:
            if fd != top:
                os.close(fd)
        if parts:
            _refuse_sealed(child, seals, shown)
        return _checked(child, False, shown)


def _checked(fd: int, directory: bool, shown: str) -> int:
    """``fd`` if it is what was asked for (a folder, or a regular file made blocking again), else closed and OSError."""
    try:
        mode = os.fstat(fd).st_mode
        if directory and not stat.S_ISDIR(mode):
            raise NotADirectoryError(errno.ENOTDIR, "not a folder", shown)
        if not directory:
            if not stat.S_ISREG(mode):
                kind = "a folder" if stat.S_ISDIR(mode) else "a FIFO, socket or device" if not stat.S_ISLNK(mode) else "a symlink"
                raise OSError(errno.EINVAL, f"not a regular file (now {kind}): not read", shown)
            if _NONBLOCK:
                os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def list_beneath(base: Base, relative: str | os.PathLike[str] = "") -> list[tuple[str, os.stat_result]]:
    """(name, lstat) of each entry of the folder at ``relative`` under ``base``, reached as
    ``open_beneath`` reaches it; an entry gone while it is listed is left out.

    Sealed entries (``seal``) are left out.

    Raises:
        OSError: as ``open_beneath``.
    """
    seals = sealed()
    if not CONFINED:
        assert isinstance(base, Root)
        folder = os.path.join(base.path, *_parts(relative))
        return [(e.name, st) for e in os.scandir(folder) if (st := _lstat(e)) is not None and not _is_sealed(st, seals)]
    fd = open_beneath(base, relative, directory=True)
    try:
        with os.scandir(fd) as it:  # entry.stat() uses fd: kept open until every entry is statted
            return [(e.name, st) for e in it if (st := _lstat(e)) is not None and not _is_sealed(st, seals)]
    finally:
        os.close(fd)


def _is_sealed(st: os.stat_result, seals: frozenset[tuple[int, int]]) -> bool:
    return (st.st_dev, st.st_ino) in seals


def _lstat(entry: os.DirEntry[str] | os.DirEntry[bytes]) -> os.stat_result | None:
    try:
        return entry.stat(follow_symlinks=False)
    except OSError:
        return None


#: Folders deeper than this many levels under a walk's root are not walked: each folder is
#: opened from the root one component at a time, so a tree thousands of levels deep (made to
#: stall a walk that runs before every question) would cost the square of its depth.
MAX_DEPTH = 100


def walk_beneath(root: Root, enter: Callable[[str, int], bool] | None = None) -> Iterator[tuple[str, os.stat_result]]:
    """(relative path, lstat) of every entry under ``root`` that is not a folder (regular
    files, symlinks, FIFOs: the caller picks), folder by folder; never into a symlink, nor
    into a folder more than ``MAX_DEPTH`` levels down.

    Args:
        enter: called with a folder's relative path and depth (1 for the root's own
            folders): whether to walk into it (default: every one). A folder that cannot be
            opened (gone, or swapped for a symlink) is left out.

    Raises:
        OSError: the root itself cannot be opened, or was replaced since ``Root.of``.
    """
    with _based(root) as base:
        stack: list[tuple[str, int]] = [("", 0)]
        while stack:
            folder, depth = stack.pop()
            try:
                entries = list_beneath(base, folder)
            except OSError:
                if not folder:
                    raise
                continue
            for name, st in entries:
                rel = os.path.join(folder, name) if folder else name
                if stat.S_ISDIR(st.st_mode):
                    if depth + 1 <= MAX_DEPTH and (enter is None or enter(rel, depth + 1)):
                        stack.append((rel, depth + 1))
                else:
                    yield rel, st
