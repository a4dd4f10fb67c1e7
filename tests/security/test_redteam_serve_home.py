"""Red team of ``rlm serve``, third round: a root that holds the runtime's home, a swap during
``ask``'s start, a memory store under a root with ``--no-memory``, and one client's contexts
breaking everyone's search (issue 39, findings 1, 2, 7 and 8).

The home holds the bearer token and other runs' trajectories (which quote private files from
anywhere). Each test plants a canary there, or beside the root, and proves no operation of a
client hands it out: a folder walk, a registration, a path, a ``ctx:`` id, a search, an
``ask`` whose model greps everything it was given.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from rlm_runtime.config import Paths  # noqa: E402
from rlm_runtime.errors import RLMError, SourceRefused, TooLarge  # noqa: E402
from rlm_runtime.llm.scripted import ScriptedClient  # noqa: E402
from rlm_runtime.memory.store import MemoryStore  # noqa: E402
from rlm_runtime.serve import service as service_module  # noqa: E402
from rlm_runtime.serve.auth import load_or_create_token  # noqa: E402
from rlm_runtime.serve.limits import ServeLimits  # noqa: E402
from rlm_runtime.serve.service import Service  # noqa: E402

CANARY = "c4n4ry-IN-THE-HOME-77f1"
OUTSIDE = "c4n4ry-OUTSIDE-THE-ROOT-19ab"
#: The model's code: every line of every document it was given, as its answer.
DUMP = "```python\nFINAL('\\n'.join(m.line for m in grep('.', context, max_matches=1000)))\n```"


@pytest.fixture
def house(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A user's folder served as the root, with the runtime's home inside it (the default
    ``~/.rlm`` under ``--root ~``): a token, a trajectory quoting a private file, a note."""
    user = tmp_path / "user"
    home = user / ".rlm"
    (home / "traces").mkdir(parents=True)
    paths = Paths(home=home)
    token = load_or_create_token(paths)[0]
    (home / "traces" / "run-20261206-000000-abcdef.jsonl").write_text(
        json.dumps({"type": "cell", "output": f"the private file said {CANARY}"}) + "\n")
    (user / "notes.txt").write_text("alpha\nthe launch is on friday\nomega\n")
    secret = tmp_path / "secret.txt"
    secret.write_text(f"password = {OUTSIDE}\n")
    yield {"user": user, "home": home, "paths": paths, "token": token, "secret": secret}


def _service(house: dict[str, Any], responder: Any = (DUMP,), **options: Any) -> Service:
    model = ScriptedClient(list(responder) if not callable(responder) else responder)
    return Service(model, roots=[house["user"]], paths=house["paths"], limits=ServeLimits(sessions=1),
                   session_options={"memory": None, "trace": False, **options})


def _leaks(text: str, house: dict[str, Any]) -> list[str]:
    return [s for s in (CANARY, house["token"], OUTSIDE) if s in text]


def _attempt(fn: Any) -> str:
    try:
        return json.dumps(fn())
    except RLMError as e:
        return f"{type(e).__name__}: {e}"


def test_a_root_above_the_home_is_walked_without_it(house: dict[str, Any]) -> None:
    """It leaves the home out of a grep, a load and a search of the root folder itself."""
    service = _service(house)
    try:
        user = str(house["user"])
        for out in (_attempt(lambda: service.grep(user, ".", max_matches=1000)),
                    _attempt(lambda: service.load(user)),
                    _attempt(lambda: service.search("private file said", contexts=[user])),
                    _attempt(lambda: service.search(house["token"][:20], contexts=[user]))):
            assert _leaks(out, house) == []
        assert "launch is on friday" in service.grep(user, "launch")["matches"][0]["line"]
    finally:
        service.close()


def test_a_registered_root_above_the_home_does_not_serve_it(house: dict[str, Any]) -> None:
    """It registers the root folder, and neither its probe, a grep, an unfiltered search nor
    an ask over ctx:ID hands out the token or a trajectory."""
    service = _service(house)
    try:
        entry = service.context_add(str(house["user"]), name="everything")
        assert _leaks(json.dumps(entry), house) == []
        ref = f"ctx:{entry['id']}"
        assert _leaks(_attempt(lambda: service.grep(ref, ".", max_matches=1000)), house) == []
        assert _leaks(_attempt(lambda: service.search("private file said")), house) == []
        result = service.ask("what is in here?", [ref])
        assert result["ok"], result
        assert "launch is on friday" in result["answer"]
        assert _leaks(json.dumps(result), house) == []
    finally:
        service.close()


def test_the_home_and_its_files_are_refused_by_every_name(house: dict[str, Any]) -> None:
    """It refuses the home, a file in it, a symlink into it and a hard link of the token
    under the root, as a path and as a registration."""
    user, home = house["user"], house["home"]
    (user / "link-to-home").symlink_to(home)
    (user / "link-to-token").symlink_to(home / "serve" / "token")
    os.link(home / "serve" / "token", user / "token-copy")
    service = _service(house)
    try:
        for name in (str(home), ".rlm", ".rlm/serve/token", str(home / "traces"), "link-to-home",
                     "link-to-home/serve/token", "link-to-token", "token-copy"):
            for fn in (lambda n=name: service.peek(n), lambda n=name: service.load(n),
                       lambda n=name: service.context_add(n, name="x")):
                out = _attempt(fn)
                assert out.startswith(("SourceRefused", "ContextError")), (name, out)
                assert _leaks(out, house) == []
        # The hard link is left out of a walk of its folder too.
        assert _leaks(_attempt(lambda: service.load(str(user))), house) == []
    finally:
        service.close()


def test_ask_over_a_root_above_the_home_reads_nothing_of_it(house: dict[str, Any]) -> None:
    """It gives a model that dumps every line of the root folder no line of the home."""
    service = _service(house)
    try:
        result = service.ask("dump it", [str(house["user"])])
        assert result["ok"], result
        assert "launch is on friday" in result["answer"]
        assert _leaks(json.dumps(result), house) == []
    finally:
        service.close()


def _swap(path: Path, target: Path) -> None:
    """Replace ``path`` with a symlink to ``target`` (what someone who can write under a root does)."""
    temp = path.with_name(path.name + ".swap")
    temp.symlink_to(target)
    os.replace(temp, path)


@pytest.mark.parametrize("named", ["path", "ctx"])
def test_ask_reads_the_file_it_checked_even_when_swapped_right_after(house: dict[str, Any], named: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """It swaps the file for a symlink to a secret the moment the server has checked it, and
    again the moment it has opened it: the session reads what was checked, or nothing."""
    notes = house["user"] / "notes.txt"
    service = _service(house)
    try:
        ref = f"ctx:{service.context_add(str(notes), name='notes')['id']}" if named == "ctx" else str(notes)
        real_source = Service._source

        def swapped_after_check(self: Service, text: str) -> Any:
            found = real_source(self, text)
            if notes.exists() and not notes.is_symlink():
                os.replace(notes, notes.with_name("notes.orig"))
                _swap(notes, house["secret"])
            return found

        monkeypatch.setattr(Service, "_source", swapped_after_check)
        out = _attempt(lambda: service.ask("dump it", [ref]))
        assert _leaks(out, house) == []
        monkeypatch.undo()

        # Put the file back, then swap it just after the server opened it.
        os.unlink(notes)
        os.replace(notes.with_name("notes.orig"), notes)
        real_open = service_module._open_real

        def swapped_after_open(path: Path, name: str | None, **kw: Any) -> Any:
            handle = real_open(path, name, **kw)
            if Path(path) == notes:
                _swap(notes, house["secret"])
            return handle

        monkeypatch.setattr(service_module, "_open_real", swapped_after_open)
        result = service.ask("dump it again", [ref])
        assert _leaks(json.dumps(result), house) == []
        assert "launch is on friday" in (result["answer"] or ""), result
    finally:
        service.close()


def test_a_store_under_a_root_is_read_only_without_memory(house: dict[str, Any]) -> None:
    """It registers a memory store file under the root with --no-memory and asks over it
    with a model that searches it: the file is not changed by a byte (journal mode, recalls)."""
    store_path = house["user"] / "team.db"
    with MemoryStore(store_path) as store:
        store.add_text("the deploy key rotates every ninety days", source="ops")
    with sqlite3.connect(store_path) as conn:
        conn.execute("PRAGMA journal_mode = DELETE")
    before = hashlib.sha256(store_path.read_bytes()).hexdigest()
    search = "```python\nFINAL(str(search_chunks('deploy key', k=3)))\n```"
    service = _service(house, (search,))
    try:
        entry = service.context_add(str(store_path), name="team")
        assert entry["kind"] == "memory"
        result = service.ask("when does the key rotate?", [f"ctx:{entry['id']}"])
        assert result["ok"], result
        assert "ninety days" in result["answer"]
    finally:
        service.close()
    assert hashlib.sha256(store_path.read_bytes()).hexdigest() == before
    with sqlite3.connect(f"{store_path.as_uri()}?mode=ro", uri=True) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert not store_path.with_name("team.db-wal").exists()


def test_a_missing_file_breaks_no_one_s_search(house: dict[str, Any]) -> None:
    """It registers a file, removes it, and an unfiltered search still answers, saying which
    context it left out; a search naming that context gets its error."""
    service = _service(house)
    try:
        gone = house["user"] / "gone.txt"
        gone.write_text("soon gone\n")
        entry = service.context_add(str(gone), name="gone")
        service.context_add(str(house["user"] / "notes.txt"), name="notes")
        gone.unlink()
        found = service.search("launch friday")
        assert any("launch" in h["snippet"] for h in found["hits"])
        assert [s["context"] for s in found["skipped"]] == [f"ctx:{entry['id']}"]
        with pytest.raises(RLMError):
            service.search("launch", contexts=[f"ctx:{entry['id']}"])
    finally:
        service.close()


def test_registrations_are_capped_and_a_search_covers_a_bounded_number(house: dict[str, Any]) -> None:
    """It stops a client registering past the cap (413), and an unfiltered search over more
    contexts than it covers answers, naming the ones left out."""
    model = ScriptedClient([DUMP])
    service = Service(model, roots=[house["user"]], paths=house["paths"],
                      limits=ServeLimits(sessions=1, registered_contexts=5, search_contexts=3),
                      session_options={"memory": None, "trace": False})
    try:
        for i in range(5):
            (house["user"] / f"n{i}.txt").write_text(f"note {i} about the launch\n")
            service.context_add(f"n{i}.txt", name=f"n{i}")
        (house["user"] / "n5.txt").write_text("one too many\n")
        with pytest.raises(TooLarge, match="limit"):
            service.context_add("n5.txt", name="n5")
        found = service.search("launch")
        assert len(found["hits"]) == 3
        assert len(found["skipped"]) == 2
        with pytest.raises(TooLarge):
            service.search("launch", contexts=[f"n{i}.txt" for i in range(5)])
    finally:
        service.close()


def test_sealing_leaves_the_home_out_of_a_local_walk_too(house: dict[str, Any]) -> None:
    """It leaves the home out of a folder context opened by a local session's process (rlm
    ask -c ~), while the home named itself stays readable to its owner."""
    from rlm_runtime.context import open_context
    from rlm_runtime.context.beneath import seal

    seal(house["home"])
    corpus = open_context(house["user"])
    assert all(".rlm" not in name for name in corpus.names())
    assert CANARY not in corpus.get_full()
    own = open_context(house["home"] / "traces")
    assert CANARY in own.get_full()


def test_a_refusal_names_no_home_path(house: dict[str, Any]) -> None:
    """It says the home is refused without reading anything in it."""
    service = _service(house)
    try:
        with pytest.raises(SourceRefused, match=r"\$RLM_HOME"):
            service.peek(".rlm/serve/token")
    finally:
        service.close()


@pytest.mark.parametrize("what", ["file", "folder"])
def test_a_repeated_server_search_reuses_its_index(house: dict[str, Any], what: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """It searches a file (opened by descriptor) or a folder twice and indexes it once;
    changed, it is indexed again and the older index is removed."""
    docs = house["user"] / "docs"
    docs.mkdir()
    for i in range(3):
        (docs / f"d{i}.txt").write_text("".join(f"line {n} of document {i} about topic{n % 7}\n" for n in range(300)))
    name = "docs" if what == "folder" else "docs/d1.txt"
    built: dict[str, None] = {}  # each build is a store of its own name (a folder's: a text a file)
    real_add = MemoryStore.add_text

    def counting_add(self: MemoryStore, text: str, **kw: Any) -> Any:
        built[self.path.name] = None
        return real_add(self, text, **kw)

    monkeypatch.setattr(MemoryStore, "add_text", counting_add)
    service = _service(house)
    try:
        first = service.search("topic3", contexts=[name])
        assert first["hits"] and len(built) == 1
        second = service.search("topic3", contexts=[name])
        assert second["hits"] == first["hits"] and len(built) == 1
        index = house["home"] / "index"
        kept = sorted(p.name for p in index.glob("file-*.db"))
        assert len(kept) == 1 and not list(index.glob("text-*"))
        with (docs / "d1.txt").open("a") as f:
            f.write("a new line about zebras\n")
        assert any("zebras" in h["snippet"] for h in service.search("zebras", contexts=[name])["hits"])
        assert len(built) == 2
        now = sorted(p.name for p in index.glob("file-*.db"))
        assert len(now) == 1 and now != kept
    finally:
        service.close()


def test_a_search_building_indexes_is_bounded_in_time(house: dict[str, Any]) -> None:
    """It refuses (413) a search whose index building runs past the server's time, and a
    search under a normal bound then answers."""
    big = house["user"] / "big.txt"
    big.write_text("".join(f"line {n} about topic{n % 13}\n" for n in range(20_000)))
    for limit, expect_refused in ((0.0, True), (300.0, False)):
        service = Service(ScriptedClient([DUMP]), roots=[house["user"]], paths=house["paths"],
                          limits=ServeLimits(sessions=1, search_s=limit), session_options={"memory": None, "trace": False})
        try:
            if expect_refused:
                with pytest.raises(TooLarge, match="building indexes"):
                    service.search("topic7", contexts=["big.txt"])
            else:
                assert service.search("topic7", contexts=["big.txt"])["hits"]
        finally:
            service.close()
