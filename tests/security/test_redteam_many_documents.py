"""Red team of the host's file descriptors (issue 22, class 10): ``rlm_query(p, context=[...])``
over a list of texts opened one host descriptor per item to pass them to the child's worker,
and failed with EMFILE near the host's open-files limit. The texts now cross in one
descriptor; a host out of descriptors is a ContextError, never a document quietly dropped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rlm_runtime.context import open_context
from rlm_runtime.context.corpus import CorpusHandle
from rlm_runtime.errors import ContextError
from rlm_runtime.sandbox import contexts

ITEMS = 1_500

#: A root run that hands 1,500 texts to rlm_query, under an open-files limit of 256.
RUN = textwrap.dedent(f"""
    import json, resource
    from rlm_runtime import RLM
    from rlm_runtime.budget import RunLimits
    from rlm_runtime.llm import ScriptedClient
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    cell = ("docs = ['document %d: nothing here' % i for i in range({ITEMS})]\\n"
            "docs[1234] = 'document 1234: the code word is PERIWINKLE'\\n"
            "a = rlm_query('What is the code word?', context=docs)\\nprint(a)")
    root = ScriptedClient(["```python\\n" + cell + "\\n```", "```python\\nFINAL('child said ' + a)\\n```"])
    sub = ScriptedClient(["```python\\nFINAL(str(grep('code word')[0]))\\n```"])
    with RLM(root, sub, limits=RunLimits(max_iterations=3, max_depth=1, max_wall_s=120), trace=False) as rlm:
        result = rlm.run("What is the code word?", "the context")
    print(json.dumps({{"answer": result.answer, "error": result.error}}))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_NOFILE and memfd as on Linux")
def test_rlm_query_over_more_texts_than_the_host_has_descriptors() -> None:
    """It passes 1,500 texts to a child run under a 256 open-files limit, and the child reads the one that matters."""
    done = subprocess.run([sys.executable, "-c", RUN], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["error"] is None and "PERIWINKLE" in out["answer"], out


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc/self/fd")
def test_a_corpus_of_texts_is_exported_in_one_descriptor() -> None:
    """It exports a corpus of 1,500 in-memory texts as one descriptor, each text a slice the worker side reads back."""
    corpus = CorpusHandle.from_items([open_context(f"text number {i}\n", as_text=True, name=f"doc{i}") for i in range(ITEMS)])
    before = _open_fds()
    specs, fds, total = contexts.export([corpus])
    try:
        assert len(fds) == 1 and _open_fds() == before + 1
        assert total == sum(len(f"text number {i}\n") for i in range(ITEMS))
        rebuilt = contexts.build(specs, list(fds))
    finally:
        fds.clear()  # build closed them
    assert _open_fds() == before + 1  # the one mapping of them all (mmap keeps its own descriptor)
    docs = rebuilt[0].documents
    assert len(docs) == ITEMS and docs[1234].handle.peek(20).startswith("text number 1234")


@pytest.mark.parametrize("kind", ["folder", "file handles"])
def test_no_descriptor_left_is_a_context_error_and_nothing_leaks(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                 kind: str) -> None:
    """It says a host out of descriptors as a ContextError, closes what it opened, and marks no document unreadable in silence."""
    files = []
    for i in range(5):
        path = tmp_path / f"f{i}.txt"
        path.write_text(f"file {i}\n", encoding="utf-8")
        files.append(str(path))
    corpus = open_context(str(tmp_path)) if kind == "folder" else CorpusHandle.from_items([open_context(f) for f in files])
    real_open = os.open
    opened = 0

    def scarce(path: str, flags: int, *args: int, **kw: int) -> int:  # kw: dir_fd, as a folder's documents are opened
        nonlocal opened
        opened += 1
        if opened > 3:
            raise OSError(24, "Too many open files")
        return real_open(path, flags, *args, **kw)

    before = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    monkeypatch.setattr(contexts.os, "open", scarce)
    with pytest.raises(ContextError, match="no file descriptor left"):
        contexts.export([corpus])
    monkeypatch.undo()
    if before is not None:
        assert len(os.listdir("/proc/self/fd")) == before
