"""Red team, second round, of the fixes made after the first attack on issue 39's fixes: memory
stores read through ``/proc/self/fd`` (``memory.db.descriptor_path``), ``Registry.add(checked=)``,
seals that keep every identity they saw, kept search indexes and the search time bound,
``--no-memory``, ``rlm ask --server``'s bounded hello, SIGHUP, and lone surrogates at the edge.

Each test plants a canary (a private file outside every root, indexed by a local run under the
home; the bearer token; a trajectory) or builds a hostile state, then plays a client with the
token, someone who can write under a served root, or an impostor on a dead server's port. A
race is won deterministically (a function wrapped to act at the moment a racing process would):
the window is real, the wrapper only removes the luck. A test marked
``xfail(strict=True, reason="HOLE: ...")`` passes today because the attack gets through; it
turns into an XPASS failure the day the hole is fixed, and the mark must then go. The unmarked
tests are attacks that held.

Servers run on 127.0.0.1 only (a thread, or one ``rlm serve --http`` subprocess) and every
test stops what it started. No local model: the scripted one.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import httpx  # noqa: E402
from _timing import SLACK_S  # noqa: E402

from rlm_runtime import session as session_module  # noqa: E402
from rlm_runtime.cli import attach  # noqa: E402
from rlm_runtime.cli.common import UsageError  # noqa: E402
from rlm_runtime.config import Paths  # noqa: E402
from rlm_runtime.context import beneath, open_context  # noqa: E402
from rlm_runtime.errors import RLMError, TooLarge  # noqa: E402
from rlm_runtime.llm.scripted import ScriptedClient  # noqa: E402
from rlm_runtime.memory.db import descriptor_path  # noqa: E402
from rlm_runtime.memory.store import MemoryStore  # noqa: E402
from rlm_runtime.registry import metadata  # noqa: E402
from rlm_runtime.searching import ChunkSearch  # noqa: E402
from rlm_runtime.serve import auth, running  # noqa: E402
from rlm_runtime.serve.http import HttpServer, start_in_thread  # noqa: E402
from rlm_runtime.serve.httperrors import status_of  # noqa: E402
from rlm_runtime.serve.limits import ServeLimits  # noqa: E402
from rlm_runtime.serve.service import Service  # noqa: E402

IN_HOME = "c4n4ry-TRACE-IN-HOME-91d2"
OUTSIDE = "c4n4ry-PRIVATE-OUTSIDE-ROOTS-3e5a"
QUICK = "```python\nFINAL('ok')\n```"
#: The model's code: what the session's memory store holds about the vault and the deploy key.
SEARCH_BOTH = "```python\nFINAL(str(search_chunks('vault combination', k=5)) + str(search_chunks('deploy key', k=5)))\n```"


@pytest.fixture
def house(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A user's folder served as the root with the runtime's home inside it (``--root ~`` with
    ``~/.rlm``): a token, a trajectory quoting a private file, notes; a secret beside it."""
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


@pytest.fixture
def seals() -> Iterator[None]:
    """The process's seals as they were before the test (a test that makes a server seal a
    folder of its own must not leave that folder sealed for the tests after it)."""
    with beneath._sealed_lock:
        paths, seen = set(beneath._sealed_paths), set(beneath._sealed_seen)
    yield
    with beneath._sealed_lock:
        beneath._sealed_paths.clear()
        beneath._sealed_paths.update(paths)
        beneath._sealed_seen.clear()
        beneath._sealed_seen.update(seen)
        beneath._sealed_cache = None


def _service(house: dict[str, Any], responder: Any = (QUICK,), **options: Any) -> Service:
    model = ScriptedClient(responder if callable(responder) else list(responder))
    return Service(model, roots=[house["user"]], paths=house["paths"], limits=options.pop("limits", ServeLimits(sessions=1)),
                   session_options={"memory": None, "trace": False, **options})


def _leaks(text: str, house: dict[str, Any]) -> list[str]:
    return [s for s in (IN_HOME, OUTSIDE, house["token"]) if s in text]


def _attempt(fn: Callable[[], Any]) -> str:
    try:
        return json.dumps(fn())
    except RLMError as e:
        return f"{type(e).__name__}: {e}"


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


def _team_store(path: Path) -> Path:
    with MemoryStore(path, embedder=None) as store:
        store.add_text("the deploy key rotates every ninety days", source="ops")
    return path


def _unblock(fifo: Path) -> None:
    """Let an open of the FIFO ``fifo`` that blocks (no writer) return: a writer comes and goes."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # ENXIO: nobody is blocked reading it
        return
    os.close(fd)


# ============================================================== 1. a store read through its descriptor


def test_a_store_given_by_its_descriptor_is_the_file_of_that_descriptor(tmp_path: Path) -> None:
    """It opens a store, unlinks its name and plants ``team.db (deleted)`` as a symlink to
    another store; then reads the first one through its descriptor."""
    team = _team_store(tmp_path / "team.db")
    other = tmp_path / "elsewhere" / "vault.db"
    with MemoryStore(other, embedder=None) as store:
        store.add_text(f"the vault combination is {OUTSIDE}", source="vault")
    fd = os.open(team, os.O_RDONLY)
    try:
        team.unlink()
        Path(f"{team} (deleted)").symlink_to(other)
        with MemoryStore(descriptor_path(fd), readonly=True, embedder=None) as store:
            found = [h.snippet for h in store.search("vault combination", k=5)]
            found += [h.snippet for h in store.search("deploy key", k=5)]
            opened = str(store.db.conn.execute("PRAGMA database_list").fetchall())
    finally:
        os.close(fd)
    assert OUTSIDE not in json.dumps(found), (opened, found)
    assert any("ninety days" in s for s in found), (opened, found)


def test_a_registered_store_unlinked_after_the_check_does_not_open_what_its_old_name_leads_to(
        house: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """It registers a store under the root (--no-memory: read-only, by descriptor), and once the
    server has opened it for the session, unlinks it and plants ``team.db (deleted)``, a
    symlink to the index a local run kept of a private file outside every root."""
    index = _local_index_of(house)
    team = _team_store(house["user"] / "team.db")
    service = _service(house, (SEARCH_BOTH,))
    try:
        ref = f"ctx:{service.context_add(str(team), name='team')['id']}"
        real_init = session_module.Session.__init__

        def unlinked_then_started(self: Any, *args: Any, **kwargs: Any) -> None:
            if team.exists():
                team.unlink()
                Path(f"{team} (deleted)").symlink_to(index)
            real_init(self, *args, **kwargs)

        monkeypatch.setattr(session_module.Session, "__init__", unlinked_then_started)
        out = _attempt(lambda: service.ask("when does the key rotate?", [ref]))
    finally:
        service.close()
    assert _leaks(out, house) == [], out


def test_an_immutable_store_rewritten_under_its_reader_fails_as_a_store_error(tmp_path: Path) -> None:
    """A store read through its descriptor (immutable: no lock) while a writer rewrites the
    file in place (a checkpoint of a very different state): every failure is a ``StoreError``
    (a tool error for the model, a 4xx for a client), never a bare sqlite3 error or a hang."""
    team = tmp_path / "team.db"
    with MemoryStore(team, embedder=None) as store:
        for i in range(200):
            store.add_text(f"note {i} about alpha beta gamma " * 20, source=f"s{i}")
    other = tmp_path / "other.db"
    with MemoryStore(other, embedder=None) as store:
        for i in range(40):
            store.add_text(f"other {i} zeta " * 30, source=f"o{i}")
    fd = os.open(team, os.O_RDONLY)
    try:
        with MemoryStore(descriptor_path(fd), readonly=True, embedder=None) as store:
            assert store.search("alpha", k=5)
            with team.open("r+b") as f:
                f.write(other.read_bytes())
                f.truncate()
            started = time.monotonic()
            for query in ("zeta", "note", "other", "alpha"):
                try:
                    store.search(query, k=5)
                    store.read(1)
                except RLMError:
                    pass
            assert time.monotonic() - started < SLACK_S
    finally:
        os.close(fd)


def test_proc_and_dev_fd_links_under_a_root_lead_nowhere(house: dict[str, Any]) -> None:
    """Under the root, symlinks to the server's own descriptors (/proc/self/fd/N, /dev/fd/N,
    /proc/PID/fd/N of a file it holds open: the private file) and to /proc/self/root; and the
    same names given directly: refused as a path, a registration, a store; nothing leaks."""
    held = os.open(house["secret"], os.O_RDONLY)
    user = house["user"]
    links = {"fd-self": f"/proc/self/fd/{held}", "fd-dev": f"/dev/fd/{held}", "fd-pid": f"/proc/{os.getpid()}/fd/{held}",
             "root-self": f"/proc/self/root{house['secret']}"}
    for name, target in links.items():
        (user / name).symlink_to(target)
    service = _service(house)
    try:
        outs = []
        for name in [*links, *links.values()]:
            outs += [_attempt(partial(service.peek, name)), _attempt(partial(service.context_add, name, name="x")),
                     _attempt(partial(service.search, "vault", contexts=[name]))]
    finally:
        service.close()
        os.close(held)
    for out in outs:
        assert _leaks(out, house) == [] and out.startswith(("SourceRefused", "ContextError")), out


# ============================================================== 2. registrations and resolutions


def test_a_fifo_swapped_in_while_a_registered_file_is_resolved_holds_no_request(house: dict[str, Any],
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """It registers notes.txt, then swaps it for a FIFO right after the server's stat of it."""
    notes = house["user"] / "notes.txt"
    service = _service(house)
    outcome: dict[str, str] = {}
    worker: threading.Thread | None = None
    answered = False
    try:
        ref = f"ctx:{service.context_add('notes.txt', name='notes')['id']}"
        real = metadata._is_sqlite

        def swapped_after_stat(path: Path) -> bool:
            if Path(path) == notes.resolve() and notes.is_file():
                os.replace(notes, notes.with_name("notes.orig"))
                os.mkfifo(notes)
            return real(path)

        monkeypatch.setattr(metadata, "_is_sqlite", swapped_after_stat)
        worker = threading.Thread(target=lambda: outcome.update(out=_attempt(lambda: service.peek(ref))), daemon=True)
        worker.start()
        worker.join(SLACK_S)
        answered = not worker.is_alive()
    finally:
        _unblock(notes)
        if worker is not None:
            worker.join(10)
        service.close()
    assert answered, "the peek was still waiting on the FIFO"


@pytest.mark.parametrize("op", ["register", "peek"])
def test_a_folder_swapped_during_its_probe_does_not_tell_what_exists_outside(house: dict[str, Any], op: str,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder under the root is swapped for a symlink to a folder outside the roots (or to a
    place there that does not exist) right after the server's check, for a registration and
    for a peek of the registered folder."""
    outside = house["tmp"] / "outside"
    (outside / "exists").mkdir(parents=True)
    (outside / "exists" / "doc.txt").write_text("x\n")
    docs = house["user"] / "docs"
    said: dict[str, str] = {}
    real_kind, real_open = metadata.kind_of, beneath.open_beneath
    service = _service(house)
    try:
        for target in ("exists", "missing"):
            if docs.is_symlink():
                docs.unlink()
            docs.mkdir(exist_ok=True)
            (docs / "a.txt").write_text("hello\n")
            ref = f"ctx:{service.context_add('docs', name='docs')['id']}" if op == "peek" else ""

            def swap(target: str = target) -> None:
                if not docs.is_symlink():
                    os.rename(docs, docs.with_name(f"docs.{target}"))
                    docs.symlink_to(outside / target)

            if op == "register":
                def kind_of(real: Path, asked: str | None) -> str:
                    found = real_kind(real, asked)
                    swap()
                    return found

                monkeypatch.setattr(metadata, "kind_of", kind_of)
                said[target] = _attempt(lambda: service.context_add("docs", name="again"))
            else:
                def opened(base: Any, relative: Any, *, directory: bool = False) -> int:
                    fd = real_open(base, relative, directory=directory)
                    if directory and str(relative).endswith("docs"):
                        swap()
                    return fd

                monkeypatch.setattr(beneath, "open_beneath", opened)
                said[target] = _attempt(partial(service.peek, ref))
            monkeypatch.undo()
    finally:
        service.close()
    assert said["exists"] == said["missing"], said


def test_registering_a_link_to_a_name_that_is_not_utf8_is_no_500(house: dict[str, Any]) -> None:
    """Under the root, a file whose name is not UTF-8 (an old archive's Latin-1 name) and a
    symlink to it with a plain name; a client registers the symlink over REST."""
    user = house["user"]
    odd = os.path.join(os.fsencode(user), b"caf\xe9.txt")
    with open(odd, "wb") as f:
        f.write(b"an old file\n")
    (user / "cafe.txt").symlink_to(os.fsdecode(odd))
    service = Service(ScriptedClient([QUICK]), roots=[user], paths=house["paths"], limits=ServeLimits(sessions=1),
                      session_options={"memory": None, "trace": False})
    server = start_in_thread(service, token=house["token"], mcp=False)
    try:
        response = httpx.post(f"{server.url}/api/context/register", json={"path": "cafe.txt", "name": "cafe"},
                              headers={"Authorization": f"Bearer {house['token']}"}, timeout=30)
    finally:
        server.stop(30)
    assert "Traceback" not in response.text
    assert response.status_code < 500, response.text


# ============================================================== 3. seals


def test_a_link_left_a_moment_at_a_missing_sealed_path_does_not_seal_the_root(house: dict[str, Any], seals: None) -> None:
    """The server's traces folder is under the root and not made yet. Someone who can write
    under the root puts a symlink to the root there for one request, then removes it."""
    runs = house["user"] / "runs"
    service = _service(house, trace=str(runs))
    try:
        assert "launch is on friday" in _attempt(lambda: service.peek("notes.txt"))
        runs.symlink_to(house["user"])
        _attempt(lambda: service.grep("notes.txt", "launch"))  # any request looks the seals up
        runs.unlink()
        time.sleep(beneath.SEAL_CHECK_S + 0.2)
        out = _attempt(lambda: service.peek("notes.txt"))
    finally:
        service.close()
    assert "launch is on friday" in out, out


def test_a_file_made_after_a_token_rotation_is_not_taken_for_the_old_token(house: dict[str, Any], seals: None) -> None:
    """The server looks its seals up (a request), the user rotates the token, then saves a new
    note under the root; a client peeks it."""
    service = _service(house)
    try:
        assert "launch is on friday" in _attempt(lambda: service.peek("notes.txt"))
        old = os.stat(auth.token_path(house["paths"])).st_ino
        auth.rotate_token(house["paths"])
        fresh = house["user"] / "fresh.txt"
        fresh.write_text("a note saved after the rotation\n")
        if os.stat(fresh).st_ino != old:
            pytest.skip("this file system gave the new file another inode than the old token's")
        out = _attempt(lambda: service.peek("fresh.txt"))
    finally:
        service.close()
    assert "saved after the rotation" in out, out


# ============================================================== 4. kept indexes and the search bound


def test_a_kept_index_removed_as_it_is_reused_is_no_500(house: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """It searches notes.txt (its index is kept), then searches it again while another search,
    which built a newer version of the same source, removes the kept one right after it was
    opened."""
    service = _service(house)
    try:
        assert service.search("launch", contexts=["notes.txt"])["hits"]
        real = ChunkSearch._kept

        def kept_then_removed(self: ChunkSearch, path: Path, text: Any) -> Any:
            store = real(self, path, text)
            if path.name.startswith("file-"):
                path.unlink()
            return store

        monkeypatch.setattr(ChunkSearch, "_kept", kept_then_removed)
        try:
            out = service.search("launch", contexts=["notes.txt"])
        except Exception as e:  # noqa: BLE001 - its status is what a client gets
            out = {"status": status_of(e), "error": repr(e)}
    finally:
        service.close()
    assert out.get("status", 200) < 500, out


def test_a_search_refused_by_its_time_bound_first_read_no_whole_folder(house: dict[str, Any]) -> None:
    """With ``search_s=0`` (every search over new text is refused at its first look at the
    clock), it searches an 8 MB folder and measures what the process held meanwhile."""
    big = house["user"] / "big"
    big.mkdir()
    line = "lorem ipsum dolor sit amet consectetur\n"
    size = 0
    for i in range(8):
        text = line * (1_000_000 // len(line))
        (big / f"d{i}.txt").write_text(text)
        size += len(text)
    service = _service(house, limits=ServeLimits(sessions=1, search_s=0.0))
    tracemalloc.start()
    try:
        with pytest.raises(TooLarge):
            service.search("lorem", contexts=["big"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        service.close()
    assert peak < size, f"{peak:,} bytes held at once for a folder of {size:,} bytes of text"


# ============================================================== 5. the bounded hello


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


def _record(url: str) -> running.Running:
    return running.Running(url, os.getpid(), "scripted", (), running.new_key())


def test_an_impostor_trickling_headers_is_bounded_in_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The impostor sends a status line, then a header byte every 0.3 s (the bound made 1 s here)."""
    monkeypatch.setattr(attach, "_HELLO_S", 1.0)
    stop = threading.Event()

    def trickle(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\n")
        while not stop.wait(0.3):
            conn.sendall(b"x")

    url, thread, listener = _impostor(trickle)
    outcome: dict[str, Any] = {}

    def attempt() -> None:
        try:
            attach._prove(_record(url))
            outcome["value"] = "proven"
        except BaseException as e:  # noqa: BLE001 - told below
            outcome["error"] = e

    client = threading.Thread(target=attempt, daemon=True)
    client.start()
    try:
        client.join(1.0 + SLACK_S)
        gave_up = not client.is_alive()
    finally:
        stop.set()
        listener.close()
        thread.join(5)
        client.join(15)
    assert gave_up, "rlm ask --server was still reading headers"


@pytest.mark.parametrize("body", [b'{"proof": "\\u00e9t\\u00e9"}', b"[" * 2048 + b"]" * 2048], ids=["non-ascii", "nested"])
def test_an_impostor_s_odd_json_is_refused_as_not_the_server(body: bytes) -> None:
    def odd(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))

    url, thread, listener = _impostor(odd)
    try:
        with pytest.raises(UsageError):
            attach._prove(_record(url))
    finally:
        listener.close()
        thread.join(5)


# ============================================================== 6. SIGHUP


def _start_cli_server(tmp_path: Path, preexec: Callable[[], None] | None = None) -> tuple[subprocess.Popen[bytes], Paths]:
    home = tmp_path / "home"
    root = tmp_path / "root"
    root.mkdir()
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"content": QUICK}) + "\n")
    paths = Paths(home=home)
    process = subprocess.Popen([sys.executable, "-m", "rlm_runtime.cli", "serve", "--http", "--port", "0", "-m",
                                f"scripted:{script}", "--root", str(root), "--no-memory", "--sessions", "1"],
                               env={**os.environ, "RLM_HOME": str(home)}, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, preexec_fn=preexec)
    deadline = time.monotonic() + 60 + SLACK_S
    while running.find(paths) is None and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.1)
    return process, paths


def test_a_server_started_under_nohup_survives_a_hangup(tmp_path: Path) -> None:
    """It starts ``rlm serve --http`` as ``nohup`` does (SIGHUP ignored) and hangs up on it."""
    def as_nohup_does() -> None:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    process, paths = _start_cli_server(tmp_path, preexec=as_nohup_does)
    try:
        assert running.find(paths) is not None
        process.send_signal(signal.SIGHUP)
        time.sleep(2.0)
        alive = process.poll() is None
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(20 + SLACK_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
    assert alive, f"the server ended with {process.returncode}"


def test_a_server_run_on_a_thread_or_embedded_leaves_sighup_as_it_found_it(tmp_path: Path) -> None:
    """A server on a thread installs nothing; one run on the main thread of a program with a
    SIGHUP handler of its own (or under nohup) leaves that handler as it is."""
    seen: list[int] = []

    def mine(signum: int, frame: Any) -> None:
        seen.append(signum)

    old = signal.signal(signal.SIGHUP, mine)
    try:
        paths = Paths(home=tmp_path / "home")
        service = Service(ScriptedClient([QUICK]), paths=paths, limits=ServeLimits(sessions=1),
                          session_options={"memory": None, "trace": False})
        threaded = start_in_thread(service, token="t" * 43, mcp=False)
        try:
            assert signal.getsignal(signal.SIGHUP) is mine
        finally:
            threaded.stop(30)
        service = Service(ScriptedClient([QUICK]), paths=paths, limits=ServeLimits(sessions=1),
                          session_options={"memory": None, "trace": False})
        server = HttpServer(service, host="127.0.0.1", port=0, token="t" * 43, mcp=False)
        during: list[Any] = []

        def ready(url: str) -> None:
            during.append(signal.getsignal(signal.SIGHUP))
            threading.Thread(target=server.stop, daemon=True).start()

        server.run(ready)
        assert during and during[0] is mine  # a program's own handler stays its own
        assert signal.getsignal(signal.SIGHUP) is mine
        os.kill(os.getpid(), signal.SIGHUP)
        time.sleep(0.1)
        assert seen == [signal.SIGHUP]
    finally:
        signal.signal(signal.SIGHUP, old)


# ============================================================== 7. lone surrogates at the edge, --no-memory


def test_lone_surrogates_in_every_field_get_no_500(house: dict[str, Any]) -> None:
    """Lone surrogates (JSON escapes, which json.loads turns into them) in every field of every
    REST body and query, with --no-memory: each answer is JSON with a status under 500, no
    traceback; the remembered note is refused and the server's store stays unmade."""
    lone = "\\ud800x\\udfff"
    bodies = {
        "/api/ask": [f'{{"question": "q{lone}", "contexts": ["notes.txt"]}}',
                     f'{{"question": "q", "contexts": ["notes{lone}.txt"]}}',
                     f'{{"question": "q", "contexts": ["ctx:{lone}"]}}',
                     f'{{"question": "q", "contexts": ["notes.txt"], "session": "s{lone}"}}',
                     f'{{"question": "q", "contexts": ["notes.txt"], "session": "s{lone}", "stream": true}}',
                     '{"question": "q", "contexts": ["notes.txt"]}',  # the model's answer holds one
                     '{"question": "q", "contexts": ["notes.txt"], "stream": true}'],
        "/api/context/register": [f'{{"path": "notes{lone}.txt", "name": "n"}}',
                                  f'{{"path": "notes.txt", "name": "n{lone}"}}',
                                  f'{{"path": "notes.txt", "name": "n", "tags": ["t{lone}"]}}'],
        "/api/memory/remember": [f'{{"text": "note{lone}"}}', f'{{"text": "note", "tags": ["t{lone}"]}}'],
    }
    gets = ["/api/context/n%ED%A0%80/peek", "/api/context/search/all?query=q%ED%A0%80",
            "/api/context/search/all?query=q&context=%ED%A0%80", "/api/context/notes.txt/grep?pattern=%ED%A0%80",
            "/api/traces/run-%ED%A0%80", "/api/context?tag=%ED%A0%80", "/api/memory/search?query=%ED%A0%80"]
    odd_answer = "```python\nFINAL('x\\ud800y ' + chr(0xdfff))\n```"
    service = Service(ScriptedClient([odd_answer] * 20), roots=[house["user"]], paths=house["paths"],
                      limits=ServeLimits(sessions=1), session_options={"memory": None, "trace": False})
    server = start_in_thread(service, token=house["token"], mcp=False)
    answers: list[tuple[str, int, str]] = []
    try:
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {house['token']}"}, timeout=60) as client:
            for route, items in bodies.items():
                for body in items:
                    r = client.post(route, content=body.encode(), headers={"content-type": "application/json"})
                    answers.append((body, r.status_code, r.text))
            for route in gets:
                r = client.get(route)
                answers.append((route, r.status_code, r.text))
    finally:
        server.stop(30)
    for what, status, text in answers:
        assert status < 500 and "Traceback" not in text and _leaks(text, house) == [], (what, status, text[:300])
    answered = [text for what, status, text in answers if what.startswith('{"question"') and status == 200]
    assert len(answered) == 2 and all("x\ufffdy \ufffd" in text or "x\\ufffdy \\ufffd" in text for text in answered), answered
    assert not (house["home"] / "brain" / "memory.db").exists()


def test_no_memory_leaves_no_other_way_to_the_user_s_store(house: dict[str, Any]) -> None:
    """With --no-memory and a note in the user's store: memory: and memory:PATH as contexts
    (a search, an ask), the store file named, through a symlink under the root and as a
    registration, and the statistics: none hands the note out or writes the store."""
    from rlm_runtime.memory.store import default_store_path

    store = default_store_path(house["paths"])
    with MemoryStore(store, embedder=None) as memory:
        memory.add_text(f"remembered: {OUTSIDE}", source="notes")
    (house["user"] / "brain.db").symlink_to(store)
    dump = "```python\nFINAL(str(search_chunks('remembered', k=5)))\n```"
    service = _service(house, (dump,) * 10)
    before = store.stat().st_mtime_ns
    try:
        names = ["memory:", f"memory:{store}", "memory:brain.db", str(store), "brain.db", ".rlm/brain/memory.db"]
        outs = [_attempt(lambda: service.stats()), _attempt(lambda: service.search("remembered")),
                _attempt(lambda: service.ask("what was remembered?", ["notes.txt"]))]
        for name in names:
            outs += [_attempt(partial(service.search, "remembered", contexts=[name])),
                     _attempt(partial(service.ask, "what was remembered?", [name])),
                     _attempt(partial(service.context_add, name, name="mine"))]
    finally:
        service.close()
    for out in outs:
        assert _leaks(out, house) == [], out
    assert store.stat().st_mtime_ns == before


def test_the_moved_message_is_the_same_for_a_store_and_a_file(house: dict[str, Any]) -> None:
    """A registered store and a registered file, each swapped for a symlink to a private
    store outside the roots (the local run's index) or to nothing: one message each, naming
    its id only; no chunk count or size of the outside store in any answer."""
    index = _local_index_of(house)
    team = _team_store(house["user"] / "team.db")
    notes = house["user"] / "notes.txt"
    service = _service(house)
    said: dict[str, set[str]] = {}
    try:
        refs = {p: f"ctx:{service.context_add(p.name, name=p.stem)['id']}" for p in (team, notes)}
        for path, ref in refs.items():
            os.replace(path, path.with_name(path.name + ".orig"))
            for target in (index, house["tmp"] / "missing.db", house["tmp"]):
                path.unlink(missing_ok=True)
                path.symlink_to(target)
                outs = [_attempt(partial(service.peek, ref)), _attempt(partial(service.ask, "q", [ref])),
                        _attempt(partial(service.search, "vault", contexts=[ref]))]
                said.setdefault(ref, set()).update(o.replace(ref, "REF").replace(ref[4:], "ID") for o in outs)
                for out in outs:
                    assert _leaks(out, house) == [] and "path-" not in out and "missing.db" not in out, out
    finally:
        service.close()
    assert all(len(messages) == 1 for messages in said.values()), said
    assert len(set().union(*said.values())) == 1, said


def test_a_registered_store_s_probe_writes_nothing_and_counts_what_it_checked(house: dict[str, Any]) -> None:
    """A WAL store being written by another connection (an open write transaction, pages in its
    -wal) is registered: the probe neither waits on nor writes beside it, and reports it."""
    team = _team_store(house["user"] / "team.db")
    writer = sqlite3.connect(team, isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("UPDATE chunks SET tokens = tokens + 1")
        before = sorted(os.listdir(house["user"]))
        service = _service(house)
        try:
            started = time.monotonic()
            entry = service.context_add("team.db", name="team")
            took = time.monotonic() - started
        finally:
            service.close()
        assert sorted(os.listdir(house["user"])) == before
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert entry["kind"] == "memory" and entry["meta"]["chunks"] >= 1, entry
    assert took < SLACK_S

