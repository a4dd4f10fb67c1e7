"""A hostile ``rlm eval`` task file (a benchmark bundle from someone else) cannot send the
user's files, environment or memory store to the model: its contexts are confined to its
own folder, ``memory:`` is refused, and ``rlm eval check`` lists every refusal.

Each run is a real ``rlm`` process with a secret planted in its environment (so that
``/proc/self/environ`` holds it), in a file beside the bundle and in the user's memory
store; a spy model records every prompt any method sends.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

FILE_SECRET = "CANARY-FILE-5f1e2d7c"
ENV_SECRET = "CANARY-ENV-9b3a61f0"
MEMORY_SECRET = "CANARY-MEMORY-c47d08e2"

#: Runs ``rlm ARGV...`` with a ``spy:`` model that appends every prompt to $SPY_LOG and
#: answers: direct/rag "unknown"; rlm first a cell that prints the context, then FINAL.
DRIVER = r"""
import json, os, sys
from rlm_runtime.llm import ScriptedClient, register_provider

def reply(messages):
    with open(os.environ["SPY_LOG"], "a", encoding="utf-8") as f:
        f.write(json.dumps(messages) + "\n")
    last = messages[-1]["content"]
    if "Answer with the answer alone" in last:
        return "unknown"
    if len(messages) <= 2:
        return "```python\nprint(str(context[:4000]) if 'context' in dir() else str(contexts))\n```"
    return "```python\nFINAL('done')\n```"

register_provider("spy:", lambda name, **o: ScriptedClient(reply, model=name), replace=True)
from rlm_runtime.cli import entry
sys.argv = ["rlm", *sys.argv[1:]]
entry()
"""


@pytest.fixture
def bundle(tmp_path: Path) -> dict[str, Path]:
    """A bundle folder with a benign task and hostile ones, a secret file beside it, a home
    with the secret at ``~/secret.txt`` and in the memory store."""
    home = tmp_path / "home"
    home.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text(f"the key is {FILE_SECRET}\n")
    (home / "secret.txt").write_text(f"the key is {FILE_SECRET}\n")
    rlm_home = tmp_path / "rlm-home"
    from rlm_runtime.config import paths_from_env
    from rlm_runtime.memory.store import MemoryStore, default_store_path

    store_path = default_store_path(paths_from_env({"RLM_HOME": str(rlm_home)}))
    store_path.parent.mkdir(parents=True, exist_ok=True)
    store = MemoryStore(store_path)
    try:
        store.add_text(f"What is the key? The key is {MEMORY_SECRET}.", source="notes")
    finally:
        store.close()
    b = tmp_path / "bundle"
    (b / "docs").mkdir(parents=True)
    (b / "ok.txt").write_text("the word is kiwi\n")
    (b / "docs" / "a.txt").write_text("the word is kiwi\n")
    (b / "docs" / "leak.txt").symlink_to(secret)  # inside a folder context
    (b / "link.txt").symlink_to(secret)
    (b / "up").symlink_to(tmp_path)  # a folder link out: up/secret.txt
    rows = [
        {"id": "ok", "question": "What is the key?", "context": "ok.txt", "answer": "kiwi"},
        {"id": "folder", "question": "What is the key?", "context": "docs", "answer": "kiwi"},
        {"id": "abs", "question": "What is the key?", "context": str(secret), "answer": "x"},
        {"id": "dotdot", "question": "What is the key?", "context": "../secret.txt", "answer": "x"},
        {"id": "tilde", "question": "What is the key?", "context": "~/secret.txt", "answer": "x"},
        {"id": "link", "question": "What is the key?", "context": "link.txt", "answer": "x"},
        {"id": "uplink", "question": "What is the key?", "context": "up/secret.txt", "answer": "x"},
        {"id": "environ", "question": "What is the key?", "context": "/proc/self/environ", "answer": "x"},
        {"id": "list", "question": "What is the key?", "context": ["ok.txt", "../secret.txt"], "answer": "x"},
        {"id": "memory", "question": "What is the key?", "context": "memory:", "answer": "x"},
    ]
    tasks = b / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return {"tasks": tasks, "home": home, "rlm_home": rlm_home, "tmp": tmp_path, "secret": secret}


def _env(tmp: Path, home: Path, rlm_home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLM_")}
    env.update(HOME=str(home), RLM_HOME=str(rlm_home), RLM_EVAL_KEY=ENV_SECRET, SPY_LOG=str(tmp / "prompts.jsonl"),
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return env


def _rlm(b: dict[str, Path], *args: str) -> subprocess.CompletedProcess[str]:
    env = _env(b["tmp"], b["home"], b["rlm_home"])
    return subprocess.run([sys.executable, "-c", DRIVER, *args], env=env, cwd=b["tmp"], capture_output=True, text=True,
                          timeout=300)


def _no_secret_under(folder: Path) -> None:
    for f in folder.rglob("*"):
        if f.is_file() and not f.is_symlink():
            data = f.read_bytes()
            for secret in (FILE_SECRET, ENV_SECRET, MEMORY_SECRET):
                assert secret.encode() not in data, f"{secret} leaked into {f}"


HOSTILE = ("abs", "dotdot", "tilde", "link", "uplink", "environ", "list", "memory")


def test_a_run_refuses_contexts_outside_the_bundle_and_sends_no_secret(bundle: dict[str, Path]) -> None:
    """It refuses every hostile context with a per-task message, runs the rest, and no prompt of any method holds a secret."""
    out = bundle["tmp"] / "run"
    r = _rlm(bundle, "eval", str(bundle["tasks"]), "--model", "spy:x", "--method", "rlm,direct,rag", "--out", str(out),
             "--window", "8192", "--json", "-q")
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    skipped = [line for line in r.stderr.splitlines() if line.endswith("(skipped)")]
    assert len(skipped) == len(HOSTILE) and all("context:" in line for line in skipped), r.stderr
    assert any("--allow-memory" in line for line in skipped) and any("--context-root" in line for line in skipped)
    summary = json.loads(r.stdout)
    assert summary["done"] == 6 and summary["invalid_lines"] == len(HOSTILE)  # ok and folder, three methods each
    prompts = (bundle["tmp"] / "prompts.jsonl").read_text()
    assert "kiwi" in prompts  # the spy saw the benign contexts
    for secret in (FILE_SECRET, ENV_SECRET, MEMORY_SECRET):
        assert secret not in prompts
    _no_secret_under(out)


def test_check_lists_every_refused_context_and_exits_1(bundle: dict[str, Path]) -> None:
    """It lists each path outside the folder and the memory: source, one line each, and exits 1 without a traceback."""
    r = _rlm(bundle, "eval", "check", str(bundle["tasks"]), "--json")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    errors = json.loads(r.stdout)["errors"]
    assert [e["line"] for e in errors] == [3, 4, 5, 6, 7, 8, 9, 10]
    assert all(e["field"] == "context" for e in errors)
    assert "outside" in errors[0]["message"] and "resolves to" in errors[1]["message"]
    assert "memory:" in errors[7]["message"] and "--allow-memory" in errors[7]["message"]
    r = _rlm(bundle, "eval", "check", str(bundle["tasks"]))
    assert r.returncode == 1 and r.stderr.count("context:") == len(HOSTILE)


def test_context_root_widens_the_folder_on_request(bundle: dict[str, Path]) -> None:
    """It allows a path outside the task file's folder only under --context-root, and memory: only with --allow-memory."""
    r = _rlm(bundle, "eval", "check", str(bundle["tasks"]), "--context-root", str(bundle["tmp"]), "--allow-memory",
             "--json")
    lines = {e["line"] for e in json.loads(r.stdout)["errors"]}
    assert lines == {8}  # /proc stays refused


def test_an_unknown_users_home_is_a_bad_line(bundle: dict[str, Path]) -> None:
    """It reports ~nosuchuser/... as that line's error, not an internal error, and runs the other tasks."""
    tasks = bundle["tasks"].parent / "nouser.jsonl"
    tasks.write_text(json.dumps({"id": "u", "question": "q", "context": "~nosuchuser-rlm/x", "answer": "x"}) + "\n"
                     + json.dumps({"id": "ok", "question": "q", "context": "ok.txt", "answer": "kiwi"}) + "\n")
    r = _rlm(bundle, "eval", "check", str(tasks))
    assert r.returncode == 1 and "line 1: context: cannot expand" in r.stderr and "internal error" not in r.stderr
    r = _rlm(bundle, "eval", str(tasks), "--model", "spy:x", "--method", "direct", "--out", str(bundle["tmp"] / "o"),
             "--window", "8192", "--json", "-q")
    assert r.returncode == 0 and json.loads(r.stdout)["done"] == 1, r.stderr
