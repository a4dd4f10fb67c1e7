"""The background fill of the quality tier (``memory.idlefill``): it starts only after a
quiet spell with no request running, stops between batches when a request comes, goes on
after, and stops when the server closes."""

from __future__ import annotations

import threading
import time
from typing import Any

from rlm_runtime.memory.idlefill import IdleFill
from rlm_runtime.memory.store import StoreError


class FakeStore:
    """A store whose fill runs ``batches`` batches, calling ``stop`` before each, and records them."""

    def __init__(self, log: list[str], batches: int = 1000, error: Exception | None = None) -> None:
        self.log = log
        self.batches = batches
        self.error = error
        self.closed = False

    def fill_quality(self, *, stop: Any, progress: Any = None) -> Any:
        if self.error is not None:
            raise self.error
        done = 0
        for _ in range(self.batches):
            stop()
            done += 1
            self.log.append("batch")
            if progress is not None:
                progress(type("Progress", (), {"done": done})())
            time.sleep(0.005)
        return type("Report", (), {"embedded": done})()

    def close(self) -> None:
        self.closed = True


def wait_for(check: Any, seconds: float = 10.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.01)
    return False


def test_it_fills_only_while_no_request_runs_and_stops_for_one() -> None:
    """It runs no batch while a request is running, fills once the server has been quiet,
    stops between batches when a request comes, and goes on when it is quiet again."""
    log: list[str] = []
    stores: list[FakeStore] = []

    def open_store() -> FakeStore:
        stores.append(FakeStore(log))
        return stores[-1]

    fill = IdleFill(lambda: [("store", open_store)], idle_s=0.2, recheck_s=0.2)
    in_request = threading.Event()
    release = threading.Event()

    def request() -> None:
        with fill.request():
            in_request.set()
            release.wait(10)

    worker = threading.Thread(target=request)
    worker.start()
    in_request.wait(5)
    fill.start()
    try:
        time.sleep(0.6)
        assert log == []  # a request is running: nothing filled
        release.set()
        worker.join(5)
        assert wait_for(lambda: len(log) >= 5)
        with fill.request():
            seen = len(log)
            time.sleep(0.1)
            assert len(log) <= seen + 1  # at most the batch under way when the request came
        assert all(s.closed for s in stores[:-1])
        assert wait_for(lambda: len(stores) >= 2 and len(log) > seen + 5)  # quiet again: a new fill goes on
    finally:
        fill.close()
    assert stores[-1].closed


def test_a_fill_that_fails_is_said_and_tried_again_later() -> None:
    """It keeps the error of a fill that failed (health shows it) and does not stop for good."""
    tries: list[int] = []

    def open_store() -> FakeStore:
        tries.append(1)
        return FakeStore([], error=StoreError("the memory store is busy"))

    fill = IdleFill(lambda: [("store", open_store)], idle_s=0.05, recheck_s=0.05)
    fill.start()
    try:
        assert wait_for(lambda: len(tries) >= 2)
        assert fill.errors == {"store": "the memory store is busy"}
    finally:
        fill.close()


def test_health_of_a_store_that_cannot_be_read_and_after_close(tmp_path: Any) -> None:
    """It answers the health's meaning of a store changed into garbage under the server with a
    sentence, not an error and not the store's path, and after close without reopening it."""
    from rlm_runtime.config import paths_from_env
    from rlm_runtime.llm import ScriptedClient
    from rlm_runtime.memory.store import default_store_path
    from rlm_runtime.serve.limits import ServeLimits
    from rlm_runtime.serve.service import Service

    root = tmp_path / "root"
    root.mkdir()
    service = Service(ScriptedClient([]), roots=[root], limits=ServeLimits(), session_options={"memory": True})
    try:
        service.remember("the drill is on tuesday")
        assert service.meaning()["chunks"] == 1
        path = default_store_path(paths_from_env())
        service._stores.pop(path).close()
        path.write_bytes(b"not a database at all" * 100)
        meaning = service.meaning()
        assert set(meaning) == {"error"} and str(path) not in meaning["error"] and str(tmp_path) not in meaning["error"]
    finally:
        service.close()
    assert service.meaning() == {"memory": "closed"} and not service._stores


def test_a_fill_that_fails_outside_the_runtime_keeps_the_thread() -> None:
    """It keeps going after a fill fails with an error that is not the runtime's (the model's
    engine failing), and says which."""
    tries: list[int] = []

    def open_store() -> FakeStore:
        tries.append(1)
        return FakeStore([], error=RuntimeError("the engine failed"))

    fill = IdleFill(lambda: [("store", open_store)], idle_s=0.05, recheck_s=0.05)
    fill.start()
    try:
        assert wait_for(lambda: len(tries) >= 2)
        assert fill.errors == {"store": "RuntimeError: the engine failed"}
    finally:
        fill.close()


def test_a_server_with_the_quality_model_fills_its_store_while_idle(tmp_path: Any, monkeypatch: Any) -> None:
    """It starts the fill with the server when the memory store is on and the quality model is
    there, and a note remembered gets its quality vector once the server is quiet."""
    from conftest_models import tiny_quality

    from rlm_runtime import contextual
    from rlm_runtime.llm import ScriptedClient
    from rlm_runtime.serve.limits import ServeLimits
    from rlm_runtime.serve.service import Service

    monkeypatch.setattr(contextual, "installed", lambda folder: True)
    monkeypatch.setattr(contextual, "factory", lambda folder: tiny_quality)
    root = tmp_path / "root"
    root.mkdir()
    service = Service(ScriptedClient([]), roots=[root], limits=ServeLimits(fill_idle_s=0.1), session_options={"memory": True})
    try:
        assert service.filler is not None
        with service.request():
            service.remember("the drill is on tuesday")
        assert wait_for(lambda: service.meaning()["quality_vectors"] == 1)
        assert service.meaning()["quality_model"] == "tiny-quality-64"
    finally:
        service.close()


def test_a_store_that_fails_does_not_keep_the_next_from_its_fill() -> None:
    """It fills every store it is given, in order, keeps the error of the one that failed
    under its label, and clears it once that store's fill ends well."""
    log: list[str] = []
    broken = [True]

    def failing() -> FakeStore:
        return FakeStore([], error=StoreError("the first store is busy") if broken[0] else None, batches=1)

    fill = IdleFill(lambda: [("first", failing), ("second", lambda: FakeStore(log, batches=3))], idle_s=0.05, recheck_s=0.05)
    fill.start()
    try:
        assert wait_for(lambda: len(log) >= 3)
        assert wait_for(lambda: fill.errors == {"first": "the first store is busy"})
        broken[0] = False
        assert wait_for(lambda: fill.errors == {})
    finally:
        fill.close()


def test_a_server_fills_the_store_of_a_named_token_too(tmp_path: Any, monkeypatch: Any) -> None:
    """It fills the quality tier of a named token's own store (not only the default store),
    and the token's health says how far its own store is filled."""
    from conftest_models import tiny_quality

    from rlm_runtime import contextual
    from rlm_runtime.config import paths_from_env
    from rlm_runtime.llm import ScriptedClient
    from rlm_runtime.serve.limits import ServeLimits
    from rlm_runtime.serve.service import Service
    from rlm_runtime.serve.tokens import add_token

    monkeypatch.setattr(contextual, "installed", lambda folder: True)
    monkeypatch.setattr(contextual, "factory", lambda folder: tiny_quality)
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "stores").mkdir(mode=0o700)
    _secret, token = add_token(paths_from_env(), "bot", store=tmp_path / "stores" / "bot.db")
    service = Service(ScriptedClient([]), roots=[root], limits=ServeLimits(fill_idle_s=0.1), session_options={"memory": True})
    try:
        with service.request():
            service.remember("the bot's drill is on friday", caller=token.caller)
        assert wait_for(lambda: service.meaning(token.caller)["quality_vectors"] == 1)
        assert service.meaning(token.caller)["quality_installed"] is True
        assert service.meaning(token.caller)["fill_error"] is None
        assert service.meaning()["chunks"] == 0
    finally:
        service.close()
