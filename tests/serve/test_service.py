"""``Service``'s rules of what a client may name, apart from any protocol: relative paths
are taken from the roots (never the server's working folder), a registered context that now
resolves elsewhere is refused, and a server without roots reads the registry only."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rlm_runtime.errors import ContextError, SourceRefused
from rlm_runtime.llm.scripted import ScriptedClient
from rlm_runtime.registry import Registry
from rlm_runtime.serve.service import Service


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "root"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "notes.txt").write_text("the gate code is 4711\n")
    return folder


def _service(*roots: Path) -> Service:
    return Service(ScriptedClient(["```python\nFINAL('x')\n```"]), roots=list(roots), session_options={"memory": None})


def test_a_relative_path_is_taken_from_the_roots(root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It registers and reads 'sub/notes.txt' under the root whatever the server's working
    folder, and refuses '../' out of it even when the working folder holds that file."""
    elsewhere = tmp_path / "cwd"
    (elsewhere / "sub").mkdir(parents=True)
    (elsewhere / "sub" / "notes.txt").write_text("WRONG FILE\n")
    (tmp_path / "outside.txt").write_text("outside\n")
    monkeypatch.chdir(elsewhere)
    service = _service(root)
    try:
        entry = service.context_add("sub/notes.txt", name="notes")
        assert entry["source"] == str(root / "sub" / "notes.txt")
        assert "4711" in service.peek("sub/notes.txt")["text"]
        with pytest.raises(SourceRefused):
            service.peek("../outside.txt")
        with pytest.raises(ContextError):
            service.peek("nothing/here.txt")
    finally:
        service.close()


def test_a_registered_context_that_now_resolves_elsewhere_is_refused(root: Path, tmp_path: Path, secret: dict[str, str]) -> None:
    """It refuses a registered file whose folder was swapped for a symlink after registration
    (the registry holds the real path it published), and the secret is not read."""
    service = _service(root)
    try:
        service.context_add(str(root / "sub" / "notes.txt"), name="notes")
        moved = tmp_path / "moved"
        os.rename(root / "sub", moved)
        planted = Path(secret["path"]).parent
        (planted / "notes.txt").write_text(secret["value"])
        (root / "sub").symlink_to(planted)
        with pytest.raises(SourceRefused) as refused:
            service.peek("ctx:notes")
        assert secret["value"] not in str(refused.value)
    finally:
        service.close()


def test_without_roots_only_the_registry_is_read(root: Path) -> None:
    """It reads a context the user registered, and refuses every path and every registration
    when started without roots."""
    Registry.open().add(root / "sub" / "notes.txt", name="notes")
    service = _service()
    try:
        assert "4711" in service.peek("ctx:notes")["text"]
        assert "4711" in service.peek("notes")["text"]
        with pytest.raises(SourceRefused):
            service.peek(str(root / "sub" / "notes.txt"))
        with pytest.raises(SourceRefused):
            service.context_add(str(root / "sub" / "notes.txt"))
    finally:
        service.close()


def test_a_path_that_is_not_text_is_refused_before_the_file_system_is_asked(root: Path) -> None:
    """It refuses to register a path holding a lone surrogate as bad input (ContextError: 400,
    a tool error), which os.path.realpath cannot encode (POST /api/context/register answered 500)."""
    service = _service(root)
    try:
        for path in ("\ud800", "sub/\udfffnotes.txt", str(root / "sub" / "\ud800")):
            with pytest.raises(ContextError, match="lone surrogate"):
                service.context_add(path)
        assert service.registry.list() == []
    finally:
        service.close()


def test_a_registered_file_that_grows_is_read_again_in_a_kept_session(root: Path) -> None:
    """It reads a registered file again when it changed between two questions of one client's
    kept session: the second answer sees the appended line, the worker's variables stay."""
    asked: list[int] = []

    def reply(messages: list[dict[str, str]]) -> str:
        first = not asked
        asked.append(1)
        return f"```repl\n{'marker = 1' if first else 'marker += 1'}\nFINAL(str(marker) + ' ' + str(len(grep('code'))))\n```"

    service = Service(ScriptedClient(reply), roots=[root], session_options={"memory": None, "trace": False})
    try:
        entry = service.context_add(str(root / "sub" / "notes.txt"), name="notes")
        ref = f"ctx:{entry['id']}"
        assert service.ask("how many codes?", [ref], client="c1")["answer"] == "1 1"
        with (root / "sub" / "notes.txt").open("a") as fh:
            fh.write("the door code is 1234\n")
        assert service.ask("and now?", [ref], client="c1")["answer"] == "2 2"
    finally:
        service.close()


def test_a_path_under_the_roots_that_grows_is_read_again_in_a_kept_session(root: Path) -> None:
    """It reads a file named by its path under the roots (not registered) again when it
    changed between two questions of one client's kept session, as a registered one."""
    service = Service(ScriptedClient(["```repl\nFINAL(str(len(grep('code'))))\n```"] * 2), roots=[root],
                      session_options={"memory": None, "trace": False})
    try:
        assert service.ask("how many codes?", ["sub/notes.txt"], client="c1")["answer"] == "1"
        with (root / "sub" / "notes.txt").open("a") as fh:
            fh.write("the door code is 1234\n")
        assert service.ask("and now?", ["sub/notes.txt"], client="c1")["answer"] == "2"
    finally:
        service.close()


def test_a_folder_swapped_for_a_symlink_out_of_the_roots_is_not_read_again(root: Path, tmp_path: Path,
                                                                           secret: dict[str, str]) -> None:
    """It refuses the next question of a kept session over a served folder that was swapped
    for a symlink to a folder outside the roots: the check made at opening is made again, and
    the planted secret reaches neither the model nor the error."""
    seen: list[str] = []

    def reply(messages: list[dict[str, str]]) -> str:
        seen.append("\n".join(m["content"] for m in messages))
        return "```repl\nFINAL(str(grep('.')))\n```"

    service = Service(ScriptedClient(reply), roots=[root], session_options={"memory": None, "trace": False})
    try:
        assert "4711" in service.ask("what is written?", ["sub"], client="c1")["answer"]
        os.rename(root / "sub", tmp_path / "moved")
        (root / "sub").symlink_to(Path(secret["path"]).parent)
        with pytest.raises(SourceRefused) as refused:
            service.ask("and now?", ["sub"], client="c1")
        assert secret["value"] not in str(refused.value)
        assert len(seen) == 1
    finally:
        service.close()
