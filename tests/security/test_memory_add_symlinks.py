"""``rlm memory add FOLDER`` does not follow symlinks out of the folder: a repository's link
to a credentials file (or to a folder holding one) is never stored, so no later search returns
the secret. Links that stay inside the folder are still followed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rlm_runtime.cli import main
from rlm_runtime.memory import MemoryStore

SECRET = "AKIAZZZSECRETCANARY7731"


def plant(tmp_path: Path) -> Path:
    """A folder to add with links out of it to a secret file and a secret folder, and a link inside it."""
    private = tmp_path / "private"
    (private / "keys").mkdir(parents=True)
    (private / "credentials").write_text(f"[default]\naws_secret_access_key = {SECRET}\n")
    (private / "keys" / "id_token.txt").write_text(f"token {SECRET}\n")
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    (repo / "docs" / "guide.md").write_text("# Guide\n\nThe harbour lantern is lit at dusk.\n")
    os.symlink(private / "credentials", repo / "credentials.txt")
    os.symlink(private / "keys", repo / "docs" / "keys")
    os.symlink(repo / "docs" / "guide.md", repo / "guide-link.md")  # inside the folder: followed
    return repo


def all_text(store: Path) -> str:
    with MemoryStore(store, readonly=True) as s:
        return "\n".join(str(r[0]) for r in s.db.conn.execute("SELECT text FROM chunks"))


def test_memory_add_leaves_out_links_leading_outside_the_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It stores no text reached through a symlink out of the folder, says so in one line, and searches find no secret."""
    repo = plant(tmp_path)
    store = tmp_path / "memory.db"
    assert main(["memory", "add", str(repo), "--store", str(store)]) == 0
    captured = capsys.readouterr()
    said = captured.out + captured.err
    assert SECRET not in said
    assert said.count("leading outside the folder") == 1 and "2 symlinks" in said, said
    assert SECRET not in all_text(store)
    for query in (SECRET, "aws_secret_access_key", "token"):
        main(["memory", "search", query, "--store", str(store), "--json"])
        assert SECRET not in json.dumps(json.loads(capsys.readouterr().out)["hits"])
    with MemoryStore(store, readonly=True) as s:
        assert s.search("harbour lantern", record=False)  # the folder's own text is stored


def test_a_file_stored_through_such_a_link_before_is_removed(tmp_path: Path) -> None:
    """It removes, on the next ingest of the folder, a secret an older ingest stored through a link out of it."""
    repo = plant(tmp_path)
    with MemoryStore(tmp_path / "memory.db") as store:
        # What an older version did: store the link's target under the link's path.
        store.ingest([repo / "credentials.txt"])
        assert SECRET in all_text(tmp_path / "memory.db")
        store.ingest([repo])
    assert SECRET not in all_text(tmp_path / "memory.db")
