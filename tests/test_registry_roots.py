"""Roots: a registered path must resolve under the caller's roots, at registration and at
each use; planted symlinks and ``..`` paths are refused, and a secret outside the roots is
never read, neither by registering nor by a run through ``ctx:ID``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rlm_runtime import Session
from rlm_runtime.budget import RunLimits
from rlm_runtime.errors import ContextError, ContextOutsideRoots, SourceRefused
from rlm_runtime.llm import ScriptedClient
from rlm_runtime.registry import Registry, within


def code(src: str) -> str:
    return f"```python\n{src}\n```"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "root"
    (folder / "kb").mkdir(parents=True)
    (folder / "kb" / "a.txt").write_text("alpha public words\n")
    (folder / "doc.txt").write_text("a public document\n")
    return folder


def test_roots_none_trusts_the_caller_and_an_empty_list_refuses_all(root: Path, tmp_path: Path) -> None:
    """It allows any existing path for roots=None, none for [], and those under a root otherwise."""
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("x")
    assert within(outside, None) == outside.resolve()
    with pytest.raises(ContextOutsideRoots):
        within(root / "doc.txt", [])
    assert within(root / "doc.txt", [root]) == (root / "doc.txt").resolve()
    assert within(root, [root]) == root.resolve()
    with pytest.raises(ContextOutsideRoots):
        within(outside, [root, tmp_path / "no-such-root"])
    with pytest.raises(ContextError, match="no such file"):
        within(root / "missing.txt", [root])


def test_dotdot_and_symlinks_out_of_a_root_are_refused_at_registration(root: Path, secret: dict[str, str]) -> None:
    """It refuses a `..` path and a symlink (to a file or a folder) that resolve outside the roots, without naming the target."""
    secret_path = Path(secret["path"])
    os.symlink(secret_path, root / "kb" / "leak.txt")
    os.symlink(secret_path.parent, root / "outside-dir")
    dotdot = root / "kb" / ".." / ".." / os.path.relpath(secret_path, root.parent)
    with Registry.open() as registry:
        for path in (root / "kb" / "leak.txt", root / "outside-dir", dotdot, secret_path):
            with pytest.raises(ContextOutsideRoots) as info:
                registry.add(path, roots=[root])
            assert str(secret_path.parent) not in str(info.value).replace(str(path), "")
        assert registry.list() == []
        # A trusted caller (roots=None) may register what its path names.
        assert registry.add(root / "kb" / "leak.txt").source == str(secret_path.resolve())


def test_a_path_that_became_a_symlink_is_refused_at_use(root: Path, secret: dict[str, str]) -> None:
    """It refuses, at resolve, refresh and session start, a registered file since replaced by a symlink out of the roots."""
    with Registry.open() as registry:
        registry.add(root / "doc.txt", id="doc", roots=[root])
        assert registry.resolve("ctx:doc", roots=[root]).path == (root / "doc.txt").resolve()
        (root / "doc.txt").unlink()
        os.symlink(secret["path"], root / "doc.txt")
        with pytest.raises(ContextOutsideRoots):
            registry.resolve("ctx:doc", roots=[root])
        with pytest.raises(ContextOutsideRoots):
            registry.refresh("doc", roots=[root])
        client = ScriptedClient([code("FINAL(peek(100))")])
        with pytest.raises(ContextOutsideRoots):
            Session(client, contexts=["ctx:doc"], context_roots=[root], trace=False)
        assert client.prompts == []


def test_neither_registering_nor_a_run_reads_a_secret_outside_the_root(root: Path, secret: dict[str, str],
                                                                       tmp_path: Path) -> None:
    """It registers a folder holding a symlink to a secret outside the root, and no probe, peek, grep or prompt reads it."""
    os.symlink(secret["path"], root / "kb" / "leak.txt")
    with Registry.open() as registry:
        entry = registry.add(root / "kb", id="kb", roots=[root])
    assert entry.meta["files"] == 1  # the symlink is not a document of the folder
    assert secret["value"] not in json.dumps(entry.to_json())
    client = ScriptedClient([
        code("print(grep('CANARY|s3cr3t|public'))\nprint(peek(5000))\nprint(context.names())"),
        code("FINAL('looked')"),
    ])
    trace = tmp_path / "run.jsonl"
    with Session(client, contexts=["ctx:kb"], context_roots=[root], limits=RunLimits(max_iterations=3, max_wall_s=60),
                 trace=trace) as session:
        result = session.ask("What does the folder hold?")
    assert result.answer == "looked", result.error
    seen = trace.read_text() + json.dumps(client.prompts)
    assert "alpha public words" in seen and "a.txt" in seen
    assert secret["value"] not in seen and "leak.txt" not in seen


def test_a_task_file_confines_registered_contexts(root: Path, tmp_path: Path) -> None:
    """It allows a ctx:ID under the task file's folder, refuses one outside it (unless --context-root), a text and an unknown id."""
    from rlm_runtime.eval.confine import SourceRules
    from rlm_runtime.eval.tasks import load_tasks

    outside = tmp_path / "outside.txt"
    outside.write_text("private notes\n")
    with Registry.open() as registry:
        registry.add(root / "doc.txt", id="inside")
        registry.add(outside, id="outside")
        registry.add("a private text", kind="text", id="mytext")
    tasks = root / "tasks.jsonl"
    rows = [{"id": "1", "question": "q", "context": "ctx:inside", "answer": "x"},
            {"id": "2", "question": "q", "context": "ctx:outside", "answer": "x"},
            {"id": "3", "question": "q", "context": ["ctx:inside", "kb"], "answer": "x"},
            {"id": "4", "question": "q", "context": "ctx:mytext", "answer": "x"},
            {"id": "5", "question": "q", "context": "ctx:nosuch", "answer": "x"}]
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows))
    loaded = load_tasks(tasks)
    assert [t.id for t in loaded.tasks] == ["1", "3"]
    errors = {e.line: e.message for e in loaded.errors}
    assert "ctx:outside" in errors[2] and "registered outside" in errors[2] and "--context-root" in errors[2]
    assert "a task file may not read it" in errors[4]
    assert "no registered context" in errors[5]
    by_id = {t.id: t for t in loaded.tasks}
    assert loaded.sources(by_id["1"]) == ([(root / "doc.txt").resolve()], None)
    assert loaded.sources(by_id["3"])[0] == [(root / "doc.txt").resolve(), (root / "kb").resolve()]
    widened = load_tasks(tasks, SourceRules(root=tmp_path))
    assert {t.id for t in widened.tasks} == {"1", "2", "3"}
    # A registered file swapped for a symlink out of the folder after the file was read is refused when it runs.
    (root / "doc.txt").unlink()
    os.symlink(outside, root / "doc.txt")
    with pytest.raises(SourceRefused):
        loaded.sources(by_id["1"])
