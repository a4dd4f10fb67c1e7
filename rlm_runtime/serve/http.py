"""``rlm serve --http``: the REST API (and MCP at ``/mcp``) on uvicorn, started and stopped cleanly.

``run_http`` serves until SIGINT, SIGTERM or SIGHUP. The socket is bound first (port 0 picks a free
one), so the app accepts exactly the ``Host`` values of the address it listens on. On a
stop signal the running questions are cancelled at once (their requests then end within
the graceful window, ``GRACE_S``), and when the server is down the service is closed:
every session's worker is gone before ``run_http`` returns. ``start_in_thread`` runs the
same server on a background thread (tests, programs embedding a server).
"""

from __future__ import annotations

import signal
import socket
import threading
from collections.abc import Callable, Collection, Mapping
from types import FrameType
from typing import Any

import anyio.to_thread
import uvicorn

from rlm_runtime.errors import ConfigError
from rlm_runtime.serve.auth import local_hosts
from rlm_runtime.serve.rest import build_app
from rlm_runtime.serve.service import Service
from rlm_runtime.serve.tokens import Caller

#: Seconds the server waits, once told to stop, for open requests (an MCP stream, an answer
#: being sent) before it cancels them.
GRACE_S = 5
#: Seconds ``start_in_thread`` waits for the server to listen.
START_S = 30.0


def run_http(service: Service, *, host: str = "127.0.0.1", port: int = 8765, token: str | Callable[[], str | None],
             mcp: bool = True, ready: Callable[[str], None] | None = None, extra_hosts: Collection[str] = (),
             stopped: Callable[[], None] | None = None, hello_key: str | None = None,
             tokens: Callable[[], Mapping[str, Caller]] | None = None) -> None:
    """Serve ``service`` over HTTP until SIGINT or SIGTERM, then close it.

    Args:
        service: the server's operations; closed when the server stops.
        host: the address to listen on (loopback by default: the API reads files).
        port: the port (0: a free one, told through ``ready``).
        token: the bearer token clients must send (``auth.load_or_create_token``), or an
            ``auth.TokenFile`` (a token rotated while the server runs is taken).
        tokens: the named tokens (``tokens.TokensFile``: each with its scope and store); None: none.
        mcp: also serve MCP over streamable HTTP at ``/mcp``.
        ready: called with the server's URL (``http://127.0.0.1:PORT``) once it listens.
        stopped: called once the server no longer answers, however it stops (SIGINT,
            SIGTERM, ``stop``, a failed start): before ``run_http`` returns, and before a
            caught SIGTERM ends the process (uvicorn raises it again once it is down).
        hello_key: the key of the server's record (``running.new_key``), proven at ``/api/hello``.
        extra_hosts: more ``Host`` header values to accept (``name:port``), besides the bound
            address and the loopback names: the name a proxy in front forwards, the machine's
            address when bound to ``0.0.0.0``.

    Raises:
        ConfigError: the address cannot be listened on, or the server could not start.
    """
    try:
        server = HttpServer(service, host=host, port=port, token=token, mcp=mcp, extra_hosts=extra_hosts,
                            stopped=stopped, hello_key=hello_key, tokens=tokens)
    except BaseException:
        if stopped is not None:
            stopped()
        raise
    server.run(ready)


def start_in_thread(service: Service, *, host: str = "127.0.0.1", port: int = 0, token: str, mcp: bool = True,
                    extra_hosts: Collection[str] = (), tokens: Callable[[], Mapping[str, Caller]] | None = None) -> HttpServer:
    """An ``HttpServer`` serving on a background thread, listening when this returns;
    ``stop()`` ends it (and closes ``service``)."""
    server = HttpServer(service, host=host, port=port, token=token, mcp=mcp, extra_hosts=extra_hosts, tokens=tokens)
    listening = threading.Event()
    failed: list[BaseException] = []

    def serve() -> None:
        try:
            server.run(lambda url: listening.set())
        except BaseException as e:  # noqa: BLE001 - told to the caller below
            failed.append(e)
            listening.set()

    server.thread = threading.Thread(target=serve, name="rlm-serve-http", daemon=True)
    server.thread.start()
    if not listening.wait(START_S) or failed:
        server.stop()
        if failed:
            raise ConfigError(f"the HTTP server did not start: {failed[0]}") from failed[0]
        raise ConfigError(f"the HTTP server did not start within {START_S:.0f} s")
    return server


class HttpServer:
    """One HTTP server over a service: bound at construction, served by ``run``, ended by ``stop``.

    Args: as ``run_http``'s.
    """

    def __init__(self, service: Service, *, host: str, port: int, token: str | Callable[[], str | None], mcp: bool,
                 extra_hosts: Collection[str] = (), stopped: Callable[[], None] | None = None,
                 hello_key: str | None = None, tokens: Callable[[], Mapping[str, Caller]] | None = None) -> None:
        self.service = service
        self.thread: threading.Thread | None = None
        self._stopped = stopped
        self._finished = threading.Lock()
        self._done = False
        self._ready: Callable[[str], None] | None = None
        self._stopper: threading.Thread | None = None
        self._socket = _bind(host, port)
        self.port = int(self._socket.getsockname()[1])
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{self.port}"
        try:
            mcp_server = None
            if mcp:
                from rlm_runtime.serve.mcp import build_server

                mcp_server = build_server(service, http=True)
            app = build_app(service, token=token, mcp_server=mcp_server, hosts=local_hosts(host, self.port) | set(extra_hosts),
                            hello_key=hello_key, tokens=tokens)
            config = uvicorn.Config(app, host=host, port=self.port, log_level="warning", lifespan="on", ws="none",
                                    proxy_headers=False, server_header=False, timeout_graceful_shutdown=GRACE_S)
            self._server = _Uvicorn(config, self)
        except BaseException:
            self._socket.close()
            raise

    def run(self, ready: Callable[[str], None] | None = None) -> None:
        """Serve until ``stop`` (or, on the main thread, SIGINT / SIGTERM); the service is closed after."""
        self._ready = ready
        hangup = _on_hangup(lambda: self._server.handle_exit(signal.SIGTERM, None))
        try:
            self._server.run(sockets=[self._socket])
        except SystemExit as e:  # uvicorn's way of saying the app's startup failed
            raise ConfigError("the HTTP server could not start (its log says why)") from e
        finally:
            hangup()
            self._socket.close()
            self.finish()

    def stop(self, timeout: float | None = 30.0) -> None:
        """Stop serving (from any thread) and wait for ``run`` to return, up to ``timeout`` seconds."""
        self.stopping()
        self._server.should_exit = True
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout)

    def started(self) -> None:
        """Tell ``run``'s caller the server listens (called by uvicorn's server once it does)."""
        if self._ready is not None:
            self._ready(self.url)

    def stopping(self) -> None:
        """Cancel the running questions now, so that their requests end before the grace runs out."""
        if self._stopper is None:
            self._stopper = threading.Thread(target=self.service.sessions.close_all, name="rlm-serve-stop", daemon=True)
            self._stopper.start()

    def finish(self) -> None:
        """Say the server stopped (``stopped``), then close the service once the sessions
        ``stopping`` began closing are closed (idempotent)."""
        with self._finished:
            first, self._done = not self._done, True
        if first and self._stopped is not None:
            try:
                self._stopped()
            except Exception:  # noqa: BLE001 - the service must close whatever the hook did
                pass
        if self._stopper is not None:
            self._stopper.join()
        self.service.close()


class _Uvicorn(uvicorn.Server):
    """uvicorn's server, telling its ``HttpServer`` when it listens, is told to stop, and has stopped."""

    def __init__(self, config: uvicorn.Config, owner: HttpServer) -> None:
        super().__init__(config)
        self._owner = owner

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self._owner.started()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        first = not self.should_exit
        super().handle_exit(sig, frame)
        if first:
            self._owner.stopping()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().shutdown(sockets=sockets)
        finally:
            # Before run() returns: uvicorn re-raises a caught SIGTERM then, which ends the process.
            await anyio.to_thread.run_sync(self._owner.finish)


def _on_hangup(stop: Callable[[], None]) -> Callable[[], None]:
    """Stop on SIGHUP (a closed terminal, a dropped SSH session) as on SIGTERM, where this
    is the main thread, the platform has the signal and nothing set its handler (``nohup``
    ignores it: then it stays ignored); returns what puts the old handler back.
    uvicorn itself handles SIGINT and SIGTERM only: SIGHUP's default ended the process with
    its record left behind."""
    hup = getattr(signal, "SIGHUP", None)
    if hup is None or threading.current_thread() is not threading.main_thread():
        return lambda: None
    if signal.getsignal(hup) is not signal.SIG_DFL:  # nohup, or a program's own handler: theirs
        return lambda: None
    old = signal.signal(hup, lambda signum, frame: stop())

    def restore() -> None:
        signal.signal(hup, old)
    return restore


def _bind(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` (not yet listening: uvicorn listens on it)."""
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
        raise ConfigError(f"a port is a number from 0 to 65535, not {port!r}")
    try:
        found: list[Any] = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError) as e:
        raise ConfigError(f"cannot listen on {host}: {getattr(e, 'strerror', None) or e}") from e
    family, kind, proto, _, address = found[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as e:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {e.strerror or e}") from e
    return sock
