"""kill -9 at random points of ingests and writes, many times: the file is never corrupt, every
commit a writer reported is there, and the next ingest finishes what a killed one began."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _timing import SLACK_S

from rlm_runtime.memory import IngestConfig, MemorySettings, MemoryStore
from rlm_runtime.memory.chunking import ChunkingConfig, chunk_text

KILLS = 30
SETTINGS = MemorySettings(ingest=IngestConfig(min_tokens=5, max_tokens=60, batch_chunks=4))

# A single-threaded process that has imported everything and loaded the tokenizer, and forks a
# writer for each seed it reads: a kill costs the test no interpreter start.
ZYGOTE = r"""
import json, os, random, sys
from rlm_runtime.memory import IngestConfig, MemorySettings, MemoryStore
from rlm_runtime.llm.tokens import count_tokens

count_tokens("load the tokenizer before forking")
db, side, folder = sys.argv[1:4]
settings = MemorySettings(ingest=IngestConfig(min_tokens=5, max_tokens=60, batch_chunks=4))

def text(rng, n):
    return "\n\n".join(" ".join(f"w{rng.randrange(400)}" for _ in range(rng.randrange(10, 60))) for _ in range(n)) + "\n"

def writer(seed):
    rng = random.Random(seed)
    fd = os.open(side, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    def note(**rec):  # written after the commit it reports
        os.write(fd, (json.dumps(rec) + "\n").encode())
    st = MemoryStore(db, settings=settings)
    for i in range(10**6):
        r = rng.random()
        if r < 0.4:
            ids = st.add_text(text(rng, rng.randrange(1, 4)), source=f"notes{seed % 3}", run_id=f"run{seed}", tags=[f"t{rng.randrange(4)}"])
            note(kind="text", ids=ids)
        elif r < 0.75:
            names = sorted(n for n in os.listdir(folder) if n.endswith(".txt"))
            if names and rng.random() < 0.4:
                path = os.path.join(folder, rng.choice(names))
                note(kind="start", path=path)  # a changed file may lose chunks from here on
                with open(path, "a") as f:
                    f.write(text(rng, 2))
            else:
                path = os.path.join(folder, f"f{seed}-{i}.txt")
                with open(path + ".part", "w") as f:  # renamed whole: a kill leaves no empty file
                    f.write(text(rng, rng.randrange(5, 30)))
                os.replace(path + ".part", path)
            st.ingest(path)
            ids = [r[0] for r in st.db.conn.execute(
                "SELECT c.id FROM chunks c JOIN sources s ON s.id = c.source_id WHERE s.path = ?", (path,))]
            note(kind="file", path=path, ids=ids)
        elif r < 0.9:
            st.search(f"w{rng.randrange(400)} w{rng.randrange(400)}")
        else:
            st.decay_and_promote()

for line in sys.stdin:
    pid = os.fork()
    if pid == 0:
        try:
            writer(int(line))
        finally:
            os._exit(0)
    print(pid, flush=True)
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass
"""


def committed(side: Path) -> tuple[set[int], dict[str, set[int]]]:
    """Chunk ids that must be there: every reported text, and each file's last reported chunks
    unless a change of that file began after its last report."""
    texts: set[int] = set()
    files: dict[str, set[int] | None] = {}
    for line in side.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:  # the line being written when the kill came
            continue
        if rec["kind"] == "text":
            texts.update(rec["ids"])
        elif rec["kind"] == "file":
            files[rec["path"]] = set(rec["ids"])
        else:
            files[rec["path"]] = None
    return texts, {p: ids for p, ids in files.items() if ids is not None}


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_kill_9_never_loses_a_commit(tmp_path: Path) -> None:
    """It survives 30 SIGKILLs at random points: integrity ok, every reported commit present, ingests finishable."""
    db, side, folder = tmp_path / "memory.db", tmp_path / "committed.jsonl", tmp_path / "files"
    folder.mkdir()
    MemoryStore(db, settings=SETTINGS).close()  # migrations done once, outside the kills
    zygote = subprocess.Popen([sys.executable, "-c", ZYGOTE, str(db), str(side), str(folder)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert zygote.stdin is not None and zygote.stdout is not None
    rng = random.Random(12)
    try:
        for seed in range(KILLS):
            zygote.stdin.write(f"{seed}\n")
            zygote.stdin.flush()
            pid = int(zygote.stdout.readline())
            time.sleep(rng.uniform(0.05, 0.6))
            os.kill(pid, signal.SIGKILL)
    finally:
        zygote.stdin.close()
        zygote.wait(timeout=10 + SLACK_S)
    texts, files = committed(side)
    assert len(texts) > 20 and len(files) > 5, "the writers should have committed a good deal before the kills"

    with MemoryStore(db, settings=SETTINGS) as st:
        assert st.integrity_check() == []
        stored = {r[0] for r in st.db.conn.execute("SELECT id FROM chunks")}
        assert texts <= stored
        for path, ids in files.items():
            assert ids <= stored, f"chunks of {path} lost"
        for part in folder.glob("*.part"):  # a file the writer was killed while creating
            part.unlink()
        report = st.ingest([folder])  # finishes what killed ingests began
        assert report.skipped == []
        assert {r[0] for r in st.db.conn.execute("SELECT state FROM sources WHERE kind = 'file'")} == {"complete"}
        cfg = ChunkingConfig(min_tokens=5, max_tokens=60)
        for path in sorted(folder.iterdir()):
            want = [p.text for p in chunk_text(path.read_text(), path=str(path), config=cfg)]
            got = [r[0] for r in st.db.conn.execute(
                "SELECT c.text FROM chunks c JOIN sources s ON s.id = c.source_id WHERE s.path = ? ORDER BY c.seq, c.id", (str(path),))]
            assert got == want, f"{path.name} is not stored as its text chunks"
        assert st.integrity_check() == []
