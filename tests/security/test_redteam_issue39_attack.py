"""Red team of the fixes landed for issue 39 (the sealed home, ask opening what it checked, the
server record's key, token rotation, --no-memory, bounded searches, kept search indexes).

Each test plants a canary (a note in the server's own memory store, a private file outside
every root indexed by a local run, a trajectory or the bearer token in the home, a client's
question) or builds a hostile state, then plays a client with the token, a process that can
write under a served root, or another local process. A test marked
``xfail(strict=True, reason="HOLE: ...")`` passes today because the attack gets through; it
turns into an XPASS failure the day the hole is fixed, and the mark must then go. The
unmarked tests are attacks that held.

Servers run on 127.0.0.1 only (a thread, or one ``rlm serve --http`` subprocess) and every
test stops what it started. No local model: the scripted one.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import httpx  # noqa: E402
from _timing import SLACK_S  # noqa: E402

from rlm_runtime import session as session_module  # noqa: E402
from rlm_runtime.cli.attach import _prove as prove  # noqa: E402
from rlm_runtime.cli.common import UsageError  # noqa: E402
from rlm_runtime.config import Paths  # noqa: E402
from rlm_runtime.context import open_context  # noqa: E402
from rlm_runtime.context.handles import FileHandle  # noqa: E402
from rlm_runtime.errors import RLMError  # noqa: E402
from rlm_runtime.llm.scripted import ScriptedClient  # noqa: E402
from rlm_runtime.memory.store import MemoryStore, default_store_path  # noqa: E402
from rlm_runtime.searching import ChunkSearch  # noqa: E402
from rlm_runtime.serve import auth, running  # noqa: E402
from rlm_runtime.serve.http import HttpServer  # noqa: E402
from rlm_runtime.serve.limits import ServeLimits  # noqa: E402
from rlm_runtime.serve.service import Service  # noqa: E402

IN_HOME = "c4n4ry-TRACE-IN-HOME-5be0"
OUTSIDE = "c4n4ry-PRIVATE-OUTSIDE-ROOTS-0c7d"
IN_MEMORY = "c4n4ry-REMEMBERED-NOTE-a41f"
QUESTION = "c4n4ry-ANOTHER-CLIENTS-QUESTION-77e2"
#: A pattern that finds QUESTION without holding it (a grep's answer repeats its pattern).
SEEK_QUESTION = "c4n4ry-ANOTHER.CLIENTS"
QUICK = "```python\nFINAL('ok')\n```"
#: The model's code: every line of every document it was given.
DUMP = "```python\nFINAL('\\n'.join(m.line for m in grep('.', context, max_matches=5000)))\n```"
#: The model's code: every line, every search hit and every chunk of the index it can reach.
READ_ALL = """```python
out = [m.line for m in grep('.', context, max_matches=5000)]
for words in ('private file said', 'password', 'token'):
    out += [h['snippet'] for h in search_chunks(words, k=50)]
for i in range(0, 400):
    try:
        out.append(read_chunk(f'c0.{i}'))
    except Exception:
        pass
FINAL('\\n'.join(out))
```"""


@pytest.fixture
def house(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A user's folder served as the root with the runtime's home inside it (``--root ~`` with
    ``~/.rlm``): a token, a trajectory quoting a private file, a note; a secret beside it."""
    user = tmp_path / "user"
    home = user / ".rlm"
    (home / "traces").mkdir(parents=True)
    paths = Paths(home=home)
    token = auth.load_or_create_token(paths)[0]
    (home / "traces" / "run-20261206-000000-abcdef.jsonl").write_text(
        json.dumps({"type": "cell", "output": f"the private file said {IN_HOME}"}) + "\n")
    (user / "notes.txt").write_text("alpha\nthe launch is on friday\nomega\n")
    secret = tmp_path / "private.txt"
    secret.write_text(f"the vault combination is {OUTSIDE}\n")
    yield {"user": user, "home": home, "paths": paths, "token": token, "secret": secret, "tmp": tmp_path}


def _service(house: dict[str, Any], responder: Any = (QUICK,), roots: Any = None, **options: Any) -> Service:
    model = ScriptedClient(responder if callable(responder) else list(responder))
    return Service(model, roots=roots if roots is not None else [house["user"]], paths=house["paths"],
                   limits=ServeLimits(sessions=1), session_options={"memory": None, "trace": False, **options})


def _leaks(text: str, house: dict[str, Any], *more: str) -> list[str]:
    return [s for s in (IN_HOME, OUTSIDE, house["token"], *more) if s in text]


def _attempt(fn: Callable[[], Any]) -> str:
    try:
        return json.dumps(fn())
    except RLMError as e:
        return f"{type(e).__name__}: {e}"


def _swap(path: Path, target: Path) -> None:
    """Replace ``path`` with a symlink to ``target`` in one rename (what a writer under a root does)."""
    temp = path.with_name(path.name + ".swap")
    temp.symlink_to(target)
    os.replace(temp, path)


def _chunks(store: Path) -> int:
    with sqlite3.connect(f"{store.as_uri()}?mode=ro", uri=True) as conn:
        return int(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])


def _local_index_of(house: dict[str, Any]) -> Path:
    """A local ``rlm ask -c private.txt`` run searched a private file outside every root: its
    index (a store holding the file's text) is kept under the home. Its path."""
    search = ChunkSearch(house["home"] / "index", None, embedder=None)
    handle = open_context(house["secret"])
    try:
        search.set_contexts([handle])
        assert OUTSIDE in json.dumps(search.search("vault combination"))
    finally:
        search.close()
        handle.close()  # type: ignore[attr-defined]
    return next((house["home"] / "index").glob("path-*.db"))


# ============================================================== 5. --no-memory


def test_no_memory_keeps_clients_off_the_server_s_memory_store(house: dict[str, Any]) -> None:
    """It plants a remembered note in the server's own memory store, serves with --no-memory,
    and searches for it and writes a note, as a client with the token."""
    store = default_store_path(house["paths"])
    with MemoryStore(store) as memory:
        memory.add_text(f"remembered answer: the private file said {IN_MEMORY}", source="notes")
    before = _chunks(store)
    service = _service(house)
    try:
        found = [_attempt(lambda: service.search("private file said", contexts=[])),
                 _attempt(lambda: service.search("private file said"))]
        wrote = _attempt(lambda: service.remember("a client's note under --no-memory"))
    finally:
        service.close()
    assert not any(IN_MEMORY in out for out in found), found
    assert _chunks(store) == before, wrote


# ============================================================== 2. ask opens what it checked


def test_a_memory_store_swapped_after_the_check_is_not_what_the_session_opens(house: dict[str, Any],
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """It registers a memory store under the root (--no-memory: opened read-only), and swaps it
    for a symlink into the home's index folder once the server has checked and opened
    everything it gives the session (just before the session starts)."""
    index = _local_index_of(house)
    team = house["user"] / "team.db"
    with MemoryStore(team) as store:
        store.add_text("the deploy key rotates every ninety days", source="ops")
    code = "```python\nFINAL(str(search_chunks('vault combination', k=5)) + str(search_chunks('deploy key', k=5)))\n```"
    service = _service(house, (code,))
    try:
        ref = f"ctx:{service.context_add(str(team), name='team')['id']}"
        real_init = session_module.Session.__init__

        def swapped_then_started(self: Any, *args: Any, **kwargs: Any) -> None:
            if not team.is_symlink():
                os.replace(team, team.with_name("team.orig"))
                _swap(team, index)
            real_init(self, *args, **kwargs)

        monkeypatch.setattr(session_module.Session, "__init__", swapped_then_started)
        out = _attempt(lambda: service.ask("when does the key rotate?", [ref]))
    finally:
        service.close()
    assert _leaks(out, house) == [], out


# ============================================================== 6. what an error says


def _swapped_outside(house: dict[str, Any]) -> dict[str, str]:
    """A registered file swapped (by someone who can write under the root) for a symlink to
    places outside every root: a FIFO, a file that exists, one that does not, a folder. What
    a client reads back for each: an unfiltered search's ``skipped`` and a peek's error."""
    outside = house["tmp"] / f"private-{OUTSIDE}"
    outside.mkdir()
    os.mkfifo(outside / "pipe")
    (outside / "exists.txt").write_text("x\n")
    a = house["user"] / "a.txt"
    a.write_text("alpha launch\n")
    service = _service(house)
    said: dict[str, str] = {}
    try:
        ref = f"ctx:{service.context_add('a.txt', name='a')['id']}"
        for target in ("pipe", "exists.txt", "missing.txt", "."):
            a.unlink()
            a.symlink_to(outside / target)
            skipped = service.search("launch").get("skipped", [])
            said[target] = json.dumps(skipped) + _attempt(lambda: service.peek(ref))
    finally:
        service.close()
    return said


def test_a_registered_file_swapped_for_a_link_names_no_outside_path(house: dict[str, Any]) -> None:
    """No answer names the place outside the roots the link leads to."""
    said = _swapped_outside(house)
    assert not any(OUTSIDE in text for text in said.values()), said


def test_a_registered_file_swapped_for_a_link_does_not_tell_what_exists_outside(house: dict[str, Any]) -> None:
    """A client cannot tell a missing place from a file, a folder or a FIFO by the answers."""
    said = _swapped_outside(house)
    assert len(set(said.values())) == 1, said


# ============================================================== 5. a read-only store


def test_a_read_only_store_gets_nothing_written_beside_it(house: dict[str, Any]) -> None:
    """It registers a WAL-mode store (as MemoryStore makes it) under the root with --no-memory
    and asks over it: the folder holds what it held."""
    folder = house["user"] / "team"
    folder.mkdir()
    team = folder / "team.db"
    with MemoryStore(team) as store:
        store.add_text("the deploy key rotates every ninety days", source="ops")
    before = sorted(os.listdir(folder))
    digest = hashlib.sha256(team.read_bytes()).hexdigest()
    service = _service(house, ("```python\nFINAL(str(search_chunks('deploy key', k=3)))\n```",))
    try:
        entry = service.context_add(str(team), name="team")
        result = service.ask("when?", [f"ctx:{entry['id']}"])
        assert "ninety days" in (result["answer"] or ""), result
    finally:
        service.close()
    assert hashlib.sha256(team.read_bytes()).hexdigest() == digest
    assert sorted(os.listdir(folder)) == before


# ============================================================== 1. the home and what the server writes


def test_a_trace_file_under_a_root_is_not_served(house: dict[str, Any]) -> None:
    """It gives the server a trace file under the root; one client asks a question, another
    greps the root for it."""
    trace = house["user"] / "logs" / "runs.jsonl"
    service = _service(house, (QUICK,), trace=str(trace))
    try:
        assert service.ask(f"what is the {QUESTION} of alice?", ["notes.txt"])["ok"]
        assert trace.exists()
        out = _attempt(lambda: service.grep(str(house["user"]), SEEK_QUESTION, max_matches=5)) + \
            _attempt(lambda: service.peek("logs/runs.jsonl", chars=100_000))
    finally:
        service.close()
    assert QUESTION not in out, out[:500]


def test_a_trace_folder_under_a_root_is_sealed_from_its_first_trace(house: dict[str, Any]) -> None:
    """It gives the server a traces folder under the root that does not exist yet; right after
    the first question creates it, another client's walk of the root leaves it out."""
    traces = house["user"] / "runs"
    service = _service(house, (QUICK,), trace=str(traces))
    try:
        service.grep(str(house["user"]), "nothing-matches-this")  # the seals looked up before the folder exists
        assert service.ask(f"what is the {QUESTION} of alice?", ["notes.txt"])["ok"]
        assert list(traces.glob("run-*.jsonl"))
        out = _attempt(lambda: service.grep(str(house["user"]), SEEK_QUESTION, max_matches=5)) + \
            _attempt(lambda: service.peek("runs"))
    finally:
        service.close()
    assert QUESTION not in out


def test_a_home_moved_under_a_registered_folder_stays_sealed(house: dict[str, Any], tmp_path: Path) -> None:
    """It serves a folder beside the home, registers it, and moves the home into it while
    the server runs (a person tidying up, or a backup tool's rename)."""
    projects = tmp_path / "projects"
    projects.mkdir()
    (projects / "readme.txt").write_text("hello\n")
    service = _service(house, roots=[projects])
    try:
        ref = f"ctx:{service.context_add(str(projects), name='projects')['id']}"
        os.rename(house["home"], projects / "old-rlm")
        time.sleep(1.2)  # the seals are looked up again
        out = _attempt(lambda: service.grep(ref, ".", max_matches=1000))
    finally:
        service.close()
    assert _leaks(out, house) == [], out[:300]


def test_a_registration_records_what_was_checked(house: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """It swaps the file a client registers for a symlink to the token right after the server checked it."""
    a = house["user"] / "a.txt"
    a.write_text("alpha\n")
    checked = a.resolve()
    real = Service._under_roots

    def checked_then_swapped(self: Service, text: str) -> Path:
        found = real(self, text)
        if found == checked and not a.is_symlink():
            _swap(a, house["home"] / "serve" / "token")
        return found

    monkeypatch.setattr(Service, "_under_roots", checked_then_swapped)
    service = _service(house)
    try:
        out = _attempt(lambda: service.context_add("a.txt", name="a"))
    finally:
        service.close()
    assert str(house["home"]) not in out, out


@pytest.mark.xfail(strict=True, reason="LIMIT: only the home, the traces folder and the token are sealed by identity: a "
                   "hard link under a root of a trajectory or of an index (index/path-*.db, a private file's text) is "
                   "served (a path, a walk; the index as a registered memory store). Making such a link takes the "
                   "user's own rights (fs.protected_hardlinks), yet docs/serve.md says nothing in $RLM_HOME is served")
def test_hard_links_of_home_files_other_than_the_token_are_not_served(house: dict[str, Any]) -> None:
    """A hard link of a trajectory and of a local run's index, put under the root (by a backup
    tool's ``cp -al``, say): a peek, a walk, and an ask over the index as a memory store."""
    index = _local_index_of(house)
    os.link(house["home"] / "traces" / "run-20261206-000000-abcdef.jsonl", house["user"] / "old-run.jsonl")
    os.link(index, house["user"] / "cache.db")
    code = "```python\nFINAL(str(search_chunks('vault combination', k=5)))\n```"
    service = _service(house, (code,))
    try:
        outs = [_attempt(lambda: service.peek("old-run.jsonl")),
                _attempt(lambda: service.grep(str(house["user"]), "private file said")),
                _attempt(lambda: service.ask("what is the combination?",
                                             [f"ctx:{service.context_add('cache.db', name='cache')['id']}"]))]
    finally:
        service.close()
    assert all(_leaks(out, house) == [] for out in outs), outs


def test_a_symlinked_home_is_sealed_by_what_it_names(tmp_path: Path) -> None:
    """$RLM_HOME is a symlink to a folder under the root: the token and a trajectory are
    refused by the target's path and left out of a walk, a search and an ask."""
    user = tmp_path / "user"
    target = user / "dot-rlm"
    (target / "traces").mkdir(parents=True)
    (tmp_path / "home-link").symlink_to(target)
    paths = Paths(home=tmp_path / "home-link")
    token = auth.load_or_create_token(paths)[0]
    (target / "traces" / "run-20261206-000000-abcdef.jsonl").write_text(json.dumps({"output": IN_HOME}) + "\n")
    (user / "notes.txt").write_text("the launch is on friday\n")
    service = Service(ScriptedClient([DUMP]), roots=[user], paths=paths, limits=ServeLimits(sessions=1),
                      session_options={"memory": None, "trace": False})
    try:
        outs = [_attempt(lambda: service.peek(str(target / "serve" / "token"))),
                _attempt(lambda: service.peek("dot-rlm/traces/run-20261206-000000-abcdef.jsonl")),
                _attempt(lambda: service.grep(str(user), ".", max_matches=1000)),
                _attempt(lambda: service.search(token[:16], contexts=[str(user)])),
                _attempt(lambda: service.ask("dump", [str(user)]))]
    finally:
        service.close()
    assert "launch is on friday" in outs[-1]
    for out in outs:
        assert IN_HOME not in out and token not in out, out[:300]


def test_a_model_reading_everything_under_a_root_above_the_home_gets_none_of_it(house: dict[str, Any]) -> None:
    """A registered folder above the home whose subfolder was swapped for a symlink into the
    home, beside a FIFO and a device that never ends (/dev/zero's numbers): the model greps
    every line, searches and reads every chunk of its index; nothing of the home, no hang."""
    sub = house["user"] / "sub"
    sub.mkdir()
    (sub / "doc.txt").write_text("inside the sub folder\n")
    os.mkfifo(house["user"] / "pipe.txt")
    try:
        os.mknod(house["user"] / "zero.txt", stat.S_IFCHR | 0o600, os.makedev(1, 5))
    except (PermissionError, OSError):
        pass  # not root: the FIFO stands for both
    service = _service(house, (READ_ALL,))
    try:
        ref = f"ctx:{service.context_add(str(house['user']), name='everything')['id']}"
        os.rename(sub, house["user"] / "sub.orig")
        _swap(sub, house["home"])
        started = time.monotonic()
        result = service.ask("read it all", [ref])
        took = time.monotonic() - started
    finally:
        service.close()
    assert result["ok"], result
    assert "launch is on friday" in result["answer"]
    assert _leaks(json.dumps(result), house) == []
    assert took < 60 + SLACK_S


@pytest.mark.parametrize("what", ["wal", "shm"])
def test_links_planted_beside_a_read_only_store_are_not_followed(house: dict[str, Any], what: str) -> None:
    """Beside a registered store (--no-memory), a team.db-wal or -shm symlink to a trajectory
    in the home: SQLite opens neither through the link, and the file is not changed by a byte."""
    team = house["user"] / "team.db"
    with MemoryStore(team) as store:
        store.add_text("the deploy key rotates every ninety days", source="ops")
    victim = house["home"] / "traces" / "run-20261206-000000-abcdef.jsonl"
    service = _service(house, ("```python\nFINAL(str(search_chunks('deploy key', k=3)))\n```",))
    try:
        entry = service.context_add(str(team), name="team")
        for name in ("team.db-wal", "team.db-shm"):
            (house["user"] / name).unlink(missing_ok=True)
        (house["user"] / f"team.db-{what}").symlink_to(victim)
        before = hashlib.sha256(victim.read_bytes()).hexdigest()
        out = _attempt(lambda: service.ask("when?", [f"ctx:{entry['id']}"]))
        assert hashlib.sha256(victim.read_bytes()).hexdigest() == before
    finally:
        service.close()
    assert _leaks(out, house) == []


# ============================================================== 7. kept search indexes


def test_two_searches_of_a_growing_file_leave_a_kept_index_that_finds_it(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """It runs search A (the log as it was) and search B (after a line was appended) so that
    A puts its index in place while B is between placing its own and opening it, then
    searches the unchanged log again."""
    index = tmp_path / "index"
    log = tmp_path / "app.log"
    log.write_text("".join(f"line {i} of a boring log\n" for i in range(50)))

    def handle() -> FileHandle:
        fd = os.open(log, os.O_RDONLY)
        try:
            return FileHandle(fd=fd, name="app.log")
        finally:
            os.close(fd)

    real_keep, real_kept = ChunkSearch._keep, ChunkSearch._kept
    a_keeping, a_go, b_opening, b_go = (threading.Event() for _ in range(4))

    def keep(self: ChunkSearch, *args: Any) -> Any:
        if threading.current_thread().name == "search-A":
            a_keeping.set()
            a_go.wait(20)
        return real_keep(self, *args)

    def kept(self: ChunkSearch, *args: Any) -> Any:
        if threading.current_thread().name == "search-B":
            b_opening.set()
            b_go.wait(20)
        return real_kept(self, *args)

    monkeypatch.setattr(ChunkSearch, "_keep", keep)
    monkeypatch.setattr(ChunkSearch, "_kept", kept)
    found: dict[str, Any] = {}

    def search(name: str, query: str) -> None:
        h = handle()
        engine = ChunkSearch(index, None, embedder=None)
        try:
            engine.set_contexts([h])
            found[name] = engine.search(query)
        except Exception as e:  # noqa: BLE001 - told below
            found[name] = repr(e)
        finally:
            engine.close()
            h.close()

    a = threading.Thread(target=search, args=("A", "boring"), name="search-A", daemon=True)
    a.start()
    assert a_keeping.wait(20)
    with log.open("a") as f:
        f.write("a zebra crossed at midnight\n")
    b = threading.Thread(target=search, args=("B", "zebra"), name="search-B", daemon=True)
    b.start()
    try:
        assert b_opening.wait(20)
    finally:
        a_go.set()
        a.join(20)
        b_go.set()
        b.join(20)
    monkeypatch.undo()
    search("C", "zebra")
    assert "zebra" in json.dumps(found["B"]) and "zebra" in json.dumps(found["C"]), found


def test_a_kept_index_is_never_shared_by_files_with_the_same_identity(tmp_path: Path) -> None:
    """Inode reuse: a file's kept index is keyed by its (device, inode) and a hash of its bytes,
    so a later file with the same identity (made to look so here) and other text gets an index
    of its own, never the deleted file's secret."""
    index = tmp_path / "index"
    first = tmp_path / "first.txt"
    first.write_text(f"the vault combination is {OUTSIDE}\n")
    second = tmp_path / "second.txt"
    second.write_text("the vault is empty and public\n")

    def search(path: Path, identity: tuple[int, int] | None) -> str:
        fd = os.open(path, os.O_RDONLY)
        try:
            h = FileHandle(fd=fd, name=path.name)
        finally:
            os.close(fd)
        if identity is not None:
            h.identity = identity  # type: ignore[misc]
        engine = ChunkSearch(index, None, embedder=None)
        try:
            engine.set_contexts([h])
            return json.dumps([engine.search("vault"), engine.read("c0.1")])
        except RLMError as e:
            return str(e)
        finally:
            engine.close()
            h.close()

    fd = os.open(first, os.O_RDONLY)
    try:
        identity = FileHandle(fd=fd, name="x").identity
    finally:
        os.close(fd)
    assert OUTSIDE in search(first, None)
    first.unlink()
    assert OUTSIDE not in search(second, identity)


# ============================================================== 3. the server record and /api/hello


def _impostor(answer: Callable[[socket.socket], None]) -> tuple[str, threading.Thread, socket.socket]:
    """A program listening on a loopback port (what took a dead server's port), answering one
    connection with ``answer``."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)

    def serve() -> None:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(30)
            try:
                conn.recv(65536)
                answer(conn)
            except OSError:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}", thread, listener


def _prove(url: str) -> Any:
    return prove(running.Running(url, os.getpid(), "scripted", (), running.new_key()))


def test_an_impostor_s_huge_hello_answer_is_not_read_whole() -> None:
    """The impostor answers /api/hello with a 64 MB body; the client stops reading early."""
    total = 64 << 20
    sent = {"bytes": 0}

    def huge(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % total)
        block = b" " * (1 << 20)
        while sent["bytes"] < total:
            conn.sendall(block)
            sent["bytes"] += len(block)

    url, thread, listener = _impostor(huge)
    try:
        with pytest.raises(UsageError):
            _prove(url)
        thread.join(10)
    finally:
        listener.close()
    assert sent["bytes"] < total, f"the client read all {sent['bytes']:,} bytes"


def test_an_impostor_s_slow_hello_answer_is_bounded_in_time() -> None:
    """The impostor trickles a chunked answer, a byte a second; the client gives up within its
    10 s timeout (and some slack)."""
    stop = threading.Event()

    def slow(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n")
        while not stop.wait(1.0):
            conn.sendall(b"1\r\n \r\n")

    url, thread, listener = _impostor(slow)
    outcome: dict[str, Any] = {}

    def attempt() -> None:
        try:
            outcome["value"] = _prove(url)
        except BaseException as e:  # noqa: BLE001 - told below
            outcome["error"] = e

    client = threading.Thread(target=attempt, daemon=True)
    client.start()
    try:
        client.join(10 + SLACK_S)
        gave_up = not client.is_alive()
    finally:
        stop.set()
        listener.close()
        thread.join(5)
        client.join(15)
    assert gave_up and isinstance(outcome.get("error"), UsageError), outcome


def test_a_replayed_proof_is_refused(tmp_path: Path) -> None:
    """An impostor that once relayed a challenge to the real server answers the client's fresh
    challenge with that old proof: refused, and nothing else is sent."""
    paths = Paths(home=tmp_path / "home")
    key = running.new_key()
    service = Service(ScriptedClient([QUICK]), paths=paths, limits=ServeLimits(sessions=1),
                      session_options={"memory": None, "trace": False})
    server = HttpServer(service, host="127.0.0.1", port=0, token="t" * 43, mcp=False, hello_key=key)
    listening = threading.Event()
    server.thread = threading.Thread(target=server.run, args=(lambda url: listening.set(),), daemon=True)
    server.thread.start()
    try:
        assert listening.wait(30)
        old = running.challenge()
        proof = httpx.get(f"{server.url}/api/hello", params={"challenge": old}, timeout=10).json()
        assert running.proven(running.Running(server.url, 1, "m", (), key), old, proof)
        seen: list[bytes] = []

        def replay(conn: socket.socket) -> None:
            body = json.dumps(proof).encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                         % (len(body), body))
            conn.settimeout(1)
            try:
                seen.append(conn.recv(65536))
            except OSError:
                pass

        url, thread, listener = _impostor(replay)
        try:
            with pytest.raises(UsageError, match="not the server"):
                prove(running.Running(url, os.getpid(), "scripted", (), key))
            thread.join(5)
        finally:
            listener.close()
        assert not any(b"Bearer" in s for s in seen)
    finally:
        server.stop(30)


def test_a_fifo_at_the_token_path_freezes_nothing(tmp_path: Path) -> None:
    """It replaces the token file with a FIFO while the server runs; a second later, requests
    are refused or answered, in time."""
    paths = Paths(home=tmp_path / "home")
    token = auth.load_or_create_token(paths)[0]
    service = Service(ScriptedClient([QUICK]), paths=paths, limits=ServeLimits(sessions=1),
                      session_options={"memory": None, "trace": False})
    server = HttpServer(service, host="127.0.0.1", port=0, token=auth.TokenFile(paths, token), mcp=False,
                        hello_key=running.new_key())
    listening = threading.Event()
    server.thread = threading.Thread(target=server.run, args=(lambda url: listening.set(),), daemon=True)
    server.thread.start()
    path = auth.token_path(paths)
    answered: list[int] = []
    try:
        assert listening.wait(30)
        client = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=3)
        assert client.get("/api/health").status_code == 200
        path.unlink()
        os.mkfifo(path, 0o600)
        time.sleep(auth.TOKEN_CHECK_S + 0.2)
        for route in ("/api/health", "/api/hello?challenge=" + "a" * 24):
            try:
                answered.append(client.get(route).status_code)
            except httpx.HTTPError:
                pass
        client.close()
    finally:
        # Unblock the server: a writer for the FIFO lets its blocked open return, and a token
        # file is back in place before the server looks again.
        writer = None
        if path.exists() and stat.S_ISFIFO(os.lstat(path).st_mode):
            try:
                writer = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO: nobody is blocked reading it
                pass
            os.unlink(path)
        auth.load_or_create_token(paths)
        if writer is not None:
            os.close(writer)
        server.stop(30)
    assert len(answered) == 2, answered


def test_a_symlink_at_the_token_path_refuses_everything(tmp_path: Path) -> None:
    """It replaces the token file with a symlink to a file holding a token of its choosing
    while the server runs: neither that token nor the old one gets in (fail closed)."""
    paths = Paths(home=tmp_path / "home")
    token = auth.load_or_create_token(paths)[0]
    planted = tmp_path / "planted-token"
    mine = "m" * 43
    planted.write_text(mine + "\n")
    service = Service(ScriptedClient([QUICK]), paths=paths, limits=ServeLimits(sessions=1),
                      session_options={"memory": None, "trace": False})
    server = HttpServer(service, host="127.0.0.1", port=0, token=auth.TokenFile(paths, token), mcp=False)
    listening = threading.Event()
    server.thread = threading.Thread(target=server.run, args=(lambda url: listening.set(),), daemon=True)
    server.thread.start()
    try:
        assert listening.wait(30)
        _swap(auth.token_path(paths), planted)
        time.sleep(auth.TOKEN_CHECK_S + 0.2)
        for given in (token, mine):
            response = httpx.get(f"{server.url}/api/context", headers={"Authorization": f"Bearer {given}"}, timeout=10)
            assert response.status_code == 401, given
    finally:
        server.stop(30)


# ============================================================== 3. what a stopped server leaves


def _hangup_as_default() -> None:
    """The server's SIGHUP as a terminal gives it, whatever runs this test (under ``nohup``
    it is ignored, and an ignored signal is inherited: the server then rightly survives)."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def test_sighup_leaves_no_server_record(tmp_path: Path) -> None:
    """It starts ``rlm serve --http`` and hangs up on it."""
    home = tmp_path / "home"
    root = tmp_path / "root"
    root.mkdir()
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"content": QUICK}) + "\n")
    env = {**os.environ, "RLM_HOME": str(home)}
    paths = Paths(home=home)
    process = subprocess.Popen([sys.executable, "-m", "rlm_runtime.cli", "serve", "--http", "--port", "0", "-m",
                                f"scripted:{script}", "--root", str(root), "--no-memory", "--sessions", "1"],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               preexec_fn=_hangup_as_default)
    try:
        deadline = time.monotonic() + 60 + SLACK_S
        while running.find(paths) is None and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.1)
        assert running.find(paths) is not None
        process.send_signal(signal.SIGHUP)
        process.wait(20 + SLACK_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    assert not running.record_path(paths).exists()
