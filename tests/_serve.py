"""A real ``rlm serve --http`` for the tests: uvicorn on 127.0.0.1, a free port, a background
thread, driven with httpx. ``Served`` stops what it started (the server, the service's
sessions and their workers). Import it as ``from _serve import serve``."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from rlm_runtime.llm.scripted import ScriptedClient
from rlm_runtime.serve.http import HttpServer, start_in_thread
from rlm_runtime.serve.limits import ServeLimits
from rlm_runtime.serve.service import Service

TOKEN = "t" * 20 + "0123456789-_abcdefghijklmn"


class RecordingService(Service):
    """A service that keeps every ``ask`` outcome (the answer a client that left never saw)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.asked: list[dict[str, Any]] = []
        self.asked_event = threading.Event()

    def ask(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        result = super().ask(*args, **kwargs)
        self.asked.append(result)
        self.asked_event.set()
        return result


class Served:
    """A running server and an httpx client carrying its token. Every body read through
    ``get``/``post`` is checked for a Python traceback."""

    def __init__(self, server: HttpServer, service: RecordingService) -> None:
        self.server = server
        self.service = service
        self.url = server.url
        self.client = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
        self.bodies: list[str] = []

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        response = self.client.request(method, path, **kwargs)
        self.bodies.append(response.text)
        assert "Traceback" not in response.text
        return response

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("POST", path, **kwargs)

    def as_token(self, token: str) -> httpx.Client:
        """A client of this server sending ``token`` instead (a named one); the caller closes it."""
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=60)

    def register(self, path: Path, name: str) -> dict[str, Any]:
        response = self.post("/api/context/register", json={"path": str(path), "name": name})
        assert response.status_code == 200, response.text
        return dict(response.json())


@contextmanager
def serve(responder: Callable[[Any], str] | Sequence[str], roots: Sequence[Path], *, delay_s: float = 0.0,
          limits: ServeLimits | None = None, session_options: dict[str, Any] | None = None,
          mcp: bool = False, extra_hosts: Sequence[str] = (),
          tokens: Callable[[], Mapping[str, Any]] | None = None) -> Iterator[Served]:
    """A server over ``roots`` whose model answers with ``responder``; stopped on exit.
    ``tokens``: its named tokens (a ``tokens.TokensFile``)."""
    model = ScriptedClient(responder if callable(responder) else list(responder), delay_s=delay_s)
    service = RecordingService(model, roots=list(roots), limits=limits or ServeLimits(sessions=2, wait_s=5),
                               session_options={"memory": False, **(session_options or {})})
    server = start_in_thread(service, token=TOKEN, mcp=mcp, extra_hosts=extra_hosts, tokens=tokens)
    served = Served(server, service)
    try:
        yield served
    finally:
        served.client.close()
        server.stop()
        assert server.thread is not None and not server.thread.is_alive()
        assert len(service.sessions) == 0


def stop_server(process: Any) -> None:
    """Stop an ``rlm serve`` subprocess as Ctrl-C does (SIGINT), killing it after 20 s."""
    import signal
    import subprocess

    if process.poll() is not None:
        return
    process.send_signal(signal.SIGINT)
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


#: The served folder's one file, as the serve tests write it.
NOTES = "alpha\nthe launch code is 4711\nomega\n"


def notes_root(tmp_path: Path, text: str = NOTES) -> Path:
    """A folder ``root`` under ``tmp_path`` holding ``notes.txt`` (the roots a test server serves)."""
    folder = tmp_path / "root"
    folder.mkdir()
    (folder / "notes.txt").write_text(text)
    return folder

