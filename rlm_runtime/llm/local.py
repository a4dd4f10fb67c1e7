"""``local:NAME``: an embedded model served by llama.cpp on a loopback port.

The first call starts ``llama_cpp.server`` (llama-cpp-python's OpenAI-compatible server) for
the verified GGUF file on a free 127.0.0.1 port, with threads and context size chosen for
the machine; later calls and later runs in the same process reuse it, and it is stopped at
exit. A server that crashed or stopped answering is restarted once; if that fails the error
says why (with the end of the server's log).

The server's log goes to ``$RLM_HOME/logs`` (a 0700 folder), not to a predictable name in the
shared temp folder, where another user could plant a symlink to redirect the write; the file
is created fresh, never opened through a link (``open_log``).

Root and sub-calls share one server. llama.cpp serves one request at a time here, and a
sub-call's prompt would evict the root conversation's cached prefix, so the server keeps a
RAM prompt cache (``--cache``): after a sub-call the root's prefix is restored from it
instead of being prefilled again.
"""

from __future__ import annotations

import atexit
import os
import socket
import stat
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO, Any

from rlm_runtime.config import paths_from_env
from rlm_runtime.errors import ConfigError, ModelUnavailable
from rlm_runtime.llm.base import Completion, Message
from rlm_runtime.llm.models import ModelError, spec, verify

START_TIMEOUT_S = 180.0
_MIB = 1024 * 1024
#: How much of the end of a server log an error message reads, and how much of each line it shows.
_TAIL_BYTES = 64 * 1024
_TAIL_LINE_CHARS = 300


def engine_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("llama_cpp") is not None


def server_settings(available_bytes: int, cpu_count: int, context_window: int) -> dict[str, int]:
    """Threads, context size and prompt-cache size for this machine.

    Every CPU generates (llama.cpp is compute-bound on CPUs); the context is as large as
    memory comfortably allows (the KV cache of a 1.5B model is ~28 KB a token), capped by
    what the model was trained on.
    """
    free_mb = available_bytes // _MIB
    n_ctx = 32768 if free_mb > 12_000 else 16384 if free_mb > 6_000 else 8192
    n_ctx = min(n_ctx, context_window)
    cache_mb = 1024 if free_mb > 8_000 else 512
    return {"n_threads": max(1, cpu_count), "n_ctx": n_ctx, "cache_size": cache_mb * _MIB}


def open_log(path: Path) -> IO[bytes]:
    """Create ``path`` afresh for writing (mode 0600) in a folder made 0700 if missing.

    Whatever is at ``path`` is removed first, a symlink or a hard link to someone's file
    included (unlinking removes the name, never the target), and the file is then created
    with ``O_EXCL | O_NOFOLLOW``: if anything reappears there in between, the open fails
    instead of writing through it.
    """
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(path, flags, 0o600)
    except OSError as e:
        raise ConfigError(f"cannot create the local model server's log {path}: {e.strerror or e}") from e
    return os.fdopen(fd, "wb")


def read_log_tail(path: Path, lines: int = 5) -> str:
    """The last ``lines`` lines of a log, joined by " / ", for an error message.

    Reads at most the last 64 KB, only of a regular file reached without a symlink (a FIFO or
    a device there would block or never end), and never raises.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return "(no server log)"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return "(no server log)"
        os.lseek(fd, max(0, info.st_size - _TAIL_BYTES), os.SEEK_SET)
        data = os.read(fd, _TAIL_BYTES)
    except OSError:
        return "(no server log)"
    finally:
        os.close(fd)
    rows = [row.strip() for row in data.decode("utf-8", errors="replace").splitlines() if row.strip()]
    rows = [row if len(row) <= _TAIL_LINE_CHARS else row[:_TAIL_LINE_CHARS] + "..." for row in rows[-max(1, lines):]]
    return " / ".join(rows) or "(empty server log)"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalServer:
    """One llama.cpp server process for one model file."""

    def __init__(self, name: str, model_path: Path, settings: dict[str, int], *, log_dir: Path | None = None) -> None:
        self.name = name
        self.model_path = model_path
        self.settings = settings
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = (log_dir or paths_from_env().logs) / f"local-{name}-{os.getpid()}.log"
        self.starts = 0

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        self.stop()
        self.port = _free_port()
        launcher = Path(__file__).with_name("serve_local.py")  # ends the server if this process dies
        cmd = [sys.executable, str(launcher), str(os.getpid()), "llama_cpp.server", "--model", str(self.model_path), "--model_alias", self.name,
               "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(self.settings["n_ctx"]),
               "--n_threads", str(self.settings["n_threads"]), "--n_threads_batch", str(self.settings["n_threads"]),
               "--logits_all", "False", "--verbose", "False"]
        if self.settings["cache_size"] > 0:  # 0 turns the prompt cache off (bench/local_sharing.py)
            cmd += ["--cache", "True", "--cache_type", "ram", "--cache_size", str(self.settings["cache_size"])]
        log = open_log(self.log_path)
        try:
            self.process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        except OSError as e:
            raise ModelUnavailable(f"cannot start the llama.cpp server: {e}") from e
        finally:
            log.close()
        self.starts += 1
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if not self.alive():
                raise ModelUnavailable(f"the llama.cpp server for {self.name} exited while starting: {self.log_tail()}")
            if self.healthy(timeout_s=2):
                return
            time.sleep(0.25)
        self.stop()
        raise ModelUnavailable(f"the llama.cpp server for {self.name} did not answer within {START_TIMEOUT_S:g}s: {self.log_tail()}")

    def healthy(self, timeout_s: float = 5) -> bool:
        try:
            with urllib.request.urlopen(f"{self.api_base}/models", timeout=timeout_s) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def log_tail(self, lines: int = 5) -> str:
        return read_log_tail(self.log_path, lines)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


_servers: dict[str, LocalServer] = {}
_servers_lock = threading.Lock()


@atexit.register
def stop_all() -> None:
    """Stop every local server this process started."""
    with _servers_lock:
        for server in _servers.values():
            server.stop()
        _servers.clear()


def _server(name: str, models_dir: Path) -> LocalServer:
    with _servers_lock:
        server = _servers.get(name)
        if server is None:
            if not engine_available():
                raise ConfigError("the local model engine is not installed; install it with: pip install 'rlm_runtime[local]'")
            try:
                path = verify(name, models_dir)
            except ModelError as e:
                raise ConfigError(str(e)) from e
            from rlm_runtime.budget import Governor

            gov = Governor.from_system()
            server = LocalServer(name, path, server_settings(gov.available_bytes, gov.cpu_count, spec(name).context_window))
            _servers[name] = server
        if not server.alive():
            server.start()
        return server


class LocalModelClient:
    """A client for ``local:NAME``; requests are serialised (the server has one slot)."""

    def __init__(self, name: str, *, models_dir: Path | None = None, timeout_s: float = 600.0, **_: Any) -> None:
        s = spec(name)  # unknown names fail here, before anything starts
        self.name = name
        self.model = f"local:{name}"
        self.models_dir = models_dir or paths_from_env().models
        if not engine_available():
            raise ConfigError("the local model engine (llama-cpp-python) is not installed; "
                              "install it with: pip install 'rlm_runtime[local]'")
        if not (self.models_dir / s.filename).is_file():
            raise ConfigError(f"local model {name} is not installed; install it with: rlm model install {name}")
        self.timeout_s = timeout_s
        self._lock = threading.Lock()

    def _client(self, server: LocalServer) -> Any:
        from rlm_runtime.llm.litellm_client import LiteLLMClient

        # temperature 0: a small model samples itself into nonsense more often than not, and
        # runs become reproducible.
        return LiteLLMClient(f"openai/{self.name}", api_base=server.api_base, timeout_s=self.timeout_s, retries=1,
                             backoff_s=0.5, extra={"temperature": 0.0})

    def complete(self, messages: list[Message], *, max_tokens: int | None = None,
                 stop_after_code_block: bool = False, timeout_s: float | None = None) -> Completion:
        with self._lock:
            server = _server(self.name, self.models_dir)
            try:
                result = self._client(server).complete(messages, max_tokens=max_tokens,
                                                       stop_after_code_block=stop_after_code_block, timeout_s=timeout_s)
            except ModelUnavailable:
                # Crashed or hung: one restart, then the caller hears about it.
                server.start()
                result = self._client(server).complete(messages, max_tokens=max_tokens,
                                                       stop_after_code_block=stop_after_code_block, timeout_s=timeout_s)
        result.model = self.model
        return result

    def count_tokens(self, text: str) -> int:
        from rlm_runtime.context.tokens import count_text

        n = count_text(text)
        return (len(text) + 3) // 4 if n is None else n

    def close(self) -> None:
        pass  # the server is shared by every client in the process; stop_all() runs at exit
