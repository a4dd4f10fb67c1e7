"""Named tokens of ``rlm serve --http`` (``serve/tokens.py``): the file that keeps them, its
checks, and the Guard that turns a token into a caller."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest

from rlm_runtime.config import paths_from_env
from rlm_runtime.errors import ConfigError
from rlm_runtime.serve.auth import CALLER, Guard, local_hosts
from rlm_runtime.serve.tokens import (
    OWNER,
    Caller,
    TokensFile,
    add_token,
    checked_store,
    digest,
    load_tokens,
    match,
    remove_token,
    tokens_path,
    usable_store,
)

OWN = "o" * 43


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_a_token_is_kept_as_a_hash_in_a_private_file() -> None:
    """It keeps a named token's SHA-256, never its secret, in a 0600 file in a 0700 folder."""
    paths = paths_from_env()
    secret, entry = add_token(paths, "ci", read_only=True)
    path = tokens_path(paths)
    assert secret not in path.read_text() and entry.digest in path.read_text()
    assert entry.digest == digest(secret) and len(secret) >= 43
    assert mode(path) == 0o600 and mode(path.parent) == 0o700
    assert [(t.name, t.read_only, t.store) for t in load_tokens(paths)] == [("ci", True, None)]
    assert {p.name for p in path.parent.iterdir()} <= {"tokens.json", ".tokens.lock"}  # no temporary file left


def test_a_token_is_removed_and_its_name_is_free_again() -> None:
    """It removes a token by name (False for an unknown one), and a name is taken once at a time."""
    paths = paths_from_env()
    add_token(paths, "alice")
    with pytest.raises(ConfigError, match="already"):
        add_token(paths, "alice")
    assert remove_token(paths, "alice") and not remove_token(paths, "alice")
    assert load_tokens(paths) == []
    add_token(paths, "alice")


@pytest.mark.parametrize("name", ["", "owner", "-x", "a b", "x" * 65, "é", "a/b", "a\x00b"])
def test_a_bad_name_is_refused(name: str) -> None:
    """It refuses an empty, reserved, too long or oddly written name."""
    with pytest.raises(ConfigError):
        add_token(paths_from_env(), name)
    assert not tokens_path(paths_from_env()).exists()


def test_concurrent_writers_each_keep_their_token() -> None:
    """It keeps every token of writers adding at once (a lock, a whole-file replace)."""
    paths = paths_from_env()
    errors: list[BaseException] = []

    def make(n: int) -> None:
        try:
            add_token(paths, f"t{n}")
        except BaseException as e:  # noqa: BLE001 - told below
            errors.append(e)

    threads = [threading.Thread(target=make, args=(n,)) for n in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(t.name for t in load_tokens(paths)) == sorted(f"t{n}" for n in range(12))


@pytest.mark.parametrize("text", [
    "garbage", "", "\xff\xfe", "[]", '{"version": 2, "tokens": []}', '{"version": 1, "tokens": {}}',
    '{"version": 1, "tokens": [1]}',
    '{"version": 1, "tokens": [{"name": "a", "sha256": "00", "read_only": false, "store": null, "created": 0}]}',
    '{"version": 1, "tokens": [{"name": "owner", "sha256": "' + "0" * 64 + '", "read_only": false, "store": null, "created": 0}]}',
    '{"version": 1, "tokens": [{"name": "a", "sha256": "' + "0" * 64 + '", "read_only": "no", "store": null, "created": 0}]}',
    '{"version": 1, "tokens": [{"name": "a", "sha256": "' + "0" * 64 + '", "read_only": false, "store": "rel.db", "created": 0}]}',
    '{"version": 1, "tokens": [{"name": "a", "sha256": "' + "0" * 64 + '", "read_only": false, "store": "/a/../b.db", "created": 0}]}',
    '{"version": 1, "tokens": [{"name": "a", "sha256": "' + "0" * 64 + '", "read_only": false, "store": null, "created": NaN}]}',
    '{"version": 1, "tokens": [{"name": "a", "sha256": "' + "0" * 64 + '", "read_only": false, "store": "HOME/serve/token", '
    '"created": 0}]}',
    '{"version": 1, "tokens": [{"name": "a", "sha256": "' + "0" * 64 + '", "read_only": false, "store": "HOME/brain/memory.db", '
    '"created": 0}]}',
    '{"version": 1, "tokens": [' + ",".join('{"name": "a", "sha256": "' + c * 64 + '", "read_only": false, "store": null, '
                                          '"created": 0}' for c in "01") + "]}",
    '{"version": 1, "tokens": ' + "[" * 500 + "]" * 500 + "}",
])
def test_a_damaged_tokens_file_is_refused_clearly(text: str) -> None:
    """It refuses a tokens file it did not write (not JSON, another shape, a bad entry, a name
    twice, nesting) with a ConfigError naming the file and what to do, never another error."""
    paths = paths_from_env()
    tokens_path(paths).parent.mkdir(parents=True)
    text = text.replace("HOME", os.path.realpath(paths.home))
    tokens_path(paths).write_bytes(text.encode("utf-8", "surrogateescape") if text != "\xff\xfe" else b"\xff\xfe")
    with pytest.raises(ConfigError) as caught:
        load_tokens(paths)
    assert str(tokens_path(paths)) in str(caught.value) and "remove it" in str(caught.value)
    with pytest.raises(ConfigError):
        TokensFile(paths)
    with pytest.raises(ConfigError):  # nor does a writer build on it
        add_token(paths, "more")


def test_a_link_or_a_fifo_at_the_tokens_place_is_refused(tmp_path: Path) -> None:
    """It refuses a symlink (even to a valid tokens file) and a FIFO planted at the file's
    place, and writes nothing through the link."""
    paths = paths_from_env()
    elsewhere = tmp_path / "tokens.json"
    elsewhere.write_text(json.dumps({"version": 1, "tokens": [{"name": "x", "sha256": digest("A" * 43), "read_only": False,
                                                                "store": None, "created": 0}]}))
    before = elsewhere.read_text()
    tokens_path(paths).parent.mkdir(parents=True)
    tokens_path(paths).symlink_to(elsewhere)
    with pytest.raises(ConfigError, match="link"):
        load_tokens(paths)
    with pytest.raises(ConfigError):
        add_token(paths, "y")
    assert elsewhere.read_text() == before
    tokens_path(paths).unlink()
    os.mkfifo(tokens_path(paths))
    with pytest.raises(ConfigError, match="not a regular file"):
        load_tokens(paths)


def test_an_oversized_tokens_file_is_refused() -> None:
    """It reads at most a megabyte of a tokens file."""
    paths = paths_from_env()
    tokens_path(paths).parent.mkdir(parents=True)
    tokens_path(paths).write_text(" " * (2 << 20))
    with pytest.raises(ConfigError, match="over"):
        load_tokens(paths)


def test_the_tokens_file_is_followed_and_fails_closed() -> None:
    """It gives the tokens the file holds now (looked at once a second): a new one, none for
    a removed one, and none at all while the file is damaged."""
    paths = paths_from_env()
    now = [0.0]
    first, _ = add_token(paths, "a")
    source = TokensFile(paths, clock=lambda: now[0])
    assert match(source(), first.encode()) == Caller("a", key=digest(first))
    second, _ = add_token(paths, "b", read_only=True)
    assert match(source(), second.encode()) is None  # not looked at again within the second
    now[0] += 1.5
    assert match(source(), second.encode()) == Caller("b", True, key=digest(second))
    remove_token(paths, "a")
    now[0] += 1.5
    assert match(source(), first.encode()) is None
    tokens_path(paths).write_text("garbage")
    now[0] += 1.5
    assert source() == {}
    tokens_path(paths).unlink()
    now[0] += 1.5
    assert source() == {}
    third, _ = add_token(paths, "c")
    now[0] += 1.5
    assert match(source(), third.encode()) is not None
    kept = tokens_path(paths).with_name("kept.json")
    os.replace(tokens_path(paths), kept)
    tokens_path(paths).symlink_to(kept)  # a link to a valid file: refused, not followed
    now[0] += 1.5
    assert source() == {}
    tokens_path(paths).unlink()
    os.mkfifo(tokens_path(paths))  # a FIFO does not hold the server
    now[0] += 1.5
    assert source() == {}
    tokens_path(paths).unlink()
    os.replace(kept, tokens_path(paths))
    now[0] += 1.5
    assert match(source(), third.encode()) is not None


def test_a_token_made_again_under_its_name_is_another_caller() -> None:
    """It tells a token removed and made again under the same name from the first one."""
    paths = paths_from_env()
    first, a = add_token(paths, "a")
    remove_token(paths, "a")
    second, b = add_token(paths, "a")
    assert a.caller != b.caller and a.caller.name == b.caller.name


def test_a_store_is_a_file_of_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It takes a store path as given (relative to the working folder, its folders' links
    resolved), and refuses the default store, the runtime's own files, a link and a folder."""
    paths = paths_from_env()
    home = Path(os.path.realpath(paths.home))
    monkeypatch.chdir(tmp_path)
    assert checked_store(paths, "team.db") == Path(os.path.realpath(tmp_path)) / "team.db"
    (tmp_path / "real").mkdir()
    (tmp_path / "via").symlink_to(tmp_path / "real")
    assert checked_store(paths, tmp_path / "via" / "x.db") == Path(os.path.realpath(tmp_path / "real")) / "x.db"
    assert checked_store(paths, home / "brain" / "alice.db") == home / "brain" / "alice.db"
    refused = [home / "brain" / "memory.db", home / "brain" / ".." / "brain" / "memory.db", home / "serve" / "tokens.json",
               home / "serve" / "token", home / "registry.db", home / "brain" / "prompts.txt", tmp_path / "real", tmp_path]
    (tmp_path / "link.db").symlink_to(tmp_path / "team.db")
    refused.append(tmp_path / "link.db")
    for place in refused:
        with pytest.raises(ConfigError):
            checked_store(paths, place)


def test_a_token_with_a_store_creates_it_and_refuses_a_file_that_is_not_one(tmp_path: Path) -> None:
    """It creates a token's store when the token is made (0600), and refuses a path holding
    another file (no token is kept then)."""
    paths = paths_from_env()
    _, entry = add_token(paths, "alice", store=tmp_path / "alice.db")
    assert entry.store == Path(os.path.realpath(tmp_path)) / "alice.db" and mode(tmp_path / "alice.db") == 0o600
    (tmp_path / "notes.txt").write_text("not a store")
    with pytest.raises(ConfigError, match="cannot be a token's memory store"):
        add_token(paths, "bob", store=tmp_path / "notes.txt")
    assert (tmp_path / "notes.txt").read_text() == "not a store"
    assert [t.name for t in load_tokens(paths)] == ["alice"]
    with pytest.raises(ConfigError, match="already"):
        add_token(paths, "alice", store=tmp_path / "second.db")
    assert not (tmp_path / "second.db").exists()  # no store made for a token refused


def test_a_store_in_a_folder_others_may_write_to_is_refused(tmp_path: Path) -> None:
    """It refuses a store whose folder others may write to (they could put a link where
    SQLite makes its files), when the token is made and when the store is opened."""
    paths = paths_from_env()
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(ConfigError, match="writable by others"):
        add_token(paths, "alice", store=shared / "alice.db")
    assert load_tokens(paths) == [] and not (shared / "alice.db").exists()
    _, entry = add_token(paths, "bob", store=tmp_path / "own" / "bob.db")
    assert entry.store is not None and mode(tmp_path / "own") == 0o700
    (tmp_path / "own").chmod(0o777)
    with pytest.raises(ConfigError, match="writable by others"):
        usable_store(entry.caller)


def test_a_store_swapped_for_a_link_is_not_opened(tmp_path: Path) -> None:
    """It refuses to open a token's store that has become a link since the token was made."""
    caller = Caller("alice", store=tmp_path / "alice.db")
    assert usable_store(caller) == tmp_path / "alice.db"  # missing: created on first use
    (tmp_path / "elsewhere.db").write_text("x")
    (tmp_path / "alice.db").symlink_to(tmp_path / "elsewhere.db")
    with pytest.raises(ConfigError, match="no longer a file"):
        usable_store(caller)


def _through(guard: Guard, authorization: bytes | None) -> tuple[int, Any]:
    """One request through ``guard``: its status and the caller the app saw."""
    seen: list[Any] = []
    sent: list[dict[str, Any]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope.get(CALLER))
        await send({"type": "http.response.start", "status": 200, "headers": []})

    async def send(message: Any) -> None:
        sent.append(message)

    headers = [(b"host", b"127.0.0.1:8765")] + ([(b"authorization", authorization)] if authorization is not None else [])
    guard.app = app
    asyncio.run(guard({"type": "http", "path": "/api/health", "headers": headers}, None, send))
    return sent[0]["status"], seen[0] if seen else None


def test_the_guard_puts_the_caller_in_the_scope() -> None:
    """It lets the server's own token through as the owner and a named one as its caller,
    and refuses anything else (401), whatever bytes the header holds."""
    paths = paths_from_env()
    secret, _ = add_token(paths, "ci", read_only=True)
    guard = Guard(lambda *a: None, token=OWN, hosts=local_hosts("127.0.0.1", 8765), tokens=TokensFile(paths))  # type: ignore[arg-type, return-value]
    assert _through(guard, f"Bearer {OWN}".encode()) == (200, OWNER)
    assert _through(guard, f"Bearer {secret}".encode()) == (200, Caller("ci", True, key=digest(secret)))
    for odd in (None, b"", b"Bearer ", b"Bearer \xff\xfe\x00", b"Bearer " + digest(secret).encode(), b"Bearer " + b"A" * 8000,
                f"Bearer {secret}\x00".encode(), f"Bearer {secret[:-1]}".encode(), f"Basic {secret}".encode(),
                "Bearer é".encode(), b"Bearer\t" + secret.encode()):
        assert _through(guard, odd) == (401, None), odd
