"""``context.beneath``: a file found by a folder walk is opened with no symlink followed below the folder."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from rlm_runtime.context.beneath import CONFINED, Root, list_beneath, open_beneath, walk_beneath


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "top" / "a" / "b").mkdir(parents=True)
    (tmp_path / "top" / "a" / "b" / "deep.txt").write_text("deep text\n")
    (tmp_path / "top" / "one.txt").write_text("one\n")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "deep.txt").write_text("elsewhere\n")
    return tmp_path / "top"


def read(fd: int) -> str:
    with open(fd, "rb") as f:
        return f.read().decode()


@pytest.mark.skipif(not sys.platform.startswith(("linux", "darwin")), reason="the platforms opens are confined on")
def test_opens_are_confined_here() -> None:
    """It confines opens component by component on Linux and macOS."""
    assert CONFINED


def test_it_opens_a_nested_file_from_a_root_or_a_descriptor(folder: Path) -> None:
    """It allows a nested regular file, from a Root or from an open folder's descriptor, blocking as usual."""
    root = Root.of(folder)
    fd = open_beneath(root, "a/b/deep.txt")
    assert os.get_blocking(fd)
    assert read(fd) == "deep text\n"
    top = root.open()
    try:
        assert read(open_beneath(top, os.path.join("a", "b", "deep.txt"))) == "deep text\n"
    finally:
        os.close(top)


def test_it_denies_a_symlink_at_any_component(folder: Path) -> None:
    """It denies a path through a folder or to a file that is a symlink, naming the link."""
    root = Root.of(folder)
    (folder / "via").symlink_to(folder.parent / "elsewhere", target_is_directory=True)
    (folder / "link.txt").symlink_to(folder / "one.txt")  # inside, but not followed either
    with pytest.raises(OSError, match="via is a symlink") as denied:
        open_beneath(root, "via/deep.txt")
    assert denied.value.filename == "via"
    with pytest.raises(OSError, match="link.txt is a symlink"):
        open_beneath(root, "link.txt")


def test_it_denies_paths_that_leave_the_folder(folder: Path) -> None:
    """It denies an absolute path and one with .. in it."""
    root = Root.of(folder)
    with pytest.raises(OSError, match=r"\.\."):
        open_beneath(root, "a/../../elsewhere/deep.txt")
    with pytest.raises(OSError, match="absolute"):
        open_beneath(root, str(folder / "one.txt"))


def test_it_denies_what_is_not_a_regular_file(folder: Path) -> None:
    """It denies a FIFO (without blocking) and a folder where a file was asked for."""
    os.mkfifo(folder / "pipe")
    root = Root.of(folder)
    with pytest.raises(OSError, match="not a regular file"):
        open_beneath(root, "pipe")
    with pytest.raises(OSError, match="not a regular file"):
        open_beneath(root, "a")


def test_it_denies_a_root_replaced_since_it_was_walked(folder: Path) -> None:
    """It denies every open under a folder whose path now names another folder."""
    root = Root.of(folder)
    folder.rename(folder.parent / "moved")
    folder.symlink_to(folder.parent / "elsewhere", target_is_directory=True)
    with pytest.raises(OSError, match="folder was replaced"):
        open_beneath(root, "deep.txt")


def test_the_walk_lists_entries_without_entering_symlinks(folder: Path) -> None:
    """It walks real folders only, reporting a symlink as a symlink, and prunes where told."""
    (folder / "via").symlink_to(folder.parent / "elsewhere", target_is_directory=True)
    root = Root.of(folder)
    found = {rel: st for rel, st in walk_beneath(root)}
    assert sorted(found) == ["a/b/deep.txt", "one.txt", "via"]
    assert stat.S_ISLNK(found["via"].st_mode)
    assert sorted(rel for rel, _ in walk_beneath(root, lambda rel, depth: depth < 2)) == ["one.txt", "via"]
    assert sorted(name for name, _ in list_beneath(root, "a")) == ["b"]


def test_the_walk_stops_at_its_depth_bound(tmp_path: Path) -> None:
    """It walks a folder MAX_DEPTH levels down and no deeper: a file at the bound is found,
    one a level below is not (a tree thousands of levels deep costs no more than the bound)."""
    from rlm_runtime.context.beneath import MAX_DEPTH

    folder = tmp_path / "deep"
    folder.mkdir()
    at = folder
    for _ in range(MAX_DEPTH + 1):
        at = at / "d"
        at.mkdir()
        (at / "f.txt").write_text("x")
    found = [rel for rel, _ in walk_beneath(Root.of(folder))]
    assert len(found) == MAX_DEPTH and max(rel.count("/") for rel in found) == MAX_DEPTH
