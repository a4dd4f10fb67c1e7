"""``local:NAME``: an embedded model served by llama.cpp on a loopback port.

The first call starts llama.cpp's OpenAI-compatible server (the engine: xllamacpp's
prebuilt one, or a ``llama-server`` binary, see ``engines.py``) for the verified GGUF file
on a free 127.0.0.1 port, in a process of its own, sized for the machine; later calls and
later runs in the same process reuse it, and it is stopped at exit (and by its launcher when
this process dies). A server that crashed or stopped answering is restarted once; if that
fails the error says why (with the end of the server's log). Every start gets a fresh random
API key, so other local users cannot use the server or read what it serves.

The server's log goes to ``$RLM_HOME/logs`` (a 0700 folder), not to a predictable name in the
shared temp folder, where another user could plant a symlink to redirect the write; the file
is created fresh, never opened through a link (``open_log``).

Root and sub-calls share one server with several slots (continuous batching): the batched
sub-calls of ``llm_query_batched`` run at once, each in a slot, as many as the governor
allows. All slots share one KV pool; when a sub-call needs the cells of the idle root
conversation, the server saves the root's state to a RAM prompt cache and restores it on the
root's next turn instead of prefilling its whole history again.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import secrets
import signal
import socket
import stat
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO, Any

from rlm_runtime import private
from rlm_runtime.config import local_engine_choice, paths_from_env
from rlm_runtime.errors import ConfigError, ModelUnavailable
from rlm_runtime.governor import Governor
from rlm_runtime.llm.base import Completion, Message
from rlm_runtime.llm.engines import Engine, ServerSettings, find_engine
from rlm_runtime.llm.models import ModelError, ModelSpec, spec, verify
from rlm_runtime.llm.tokens import count_tokens

START_TIMEOUT_S = 180.0
_MIB = 1024 * 1024
#: How much of the end of a server log an error message reads, and how much of each line it shows.
_TAIL_BYTES = 64 * 1024
_TAIL_LINE_CHARS = 300
#: KV cells each slot beyond the first adds to the pool: a small model's sub-call prompt is cut
#: to 6,000 characters (about 1,500 tokens), plus its reply, with room to spare.
SLOT_TOKENS = 4096
#: Where a loop turn's reply ends, asked of the server itself: the closing fence of its code
#: block, on a line of its own. The client stops reading there too, but a stream cut from the
#: client's side leaves the server a moment to generate on, and how many of those tokens it
#: keeps in the slot then varies from run to run: the next turn reuses one cached token more
#: or fewer, prefills a batch of another size, and a greedy reply can change (seen: 3 of 73
#: tasks in one sitting). Stopped by the server, the slot holds the same tokens every time.
#: The server leaves the stop text out of the reply; ``_closed`` puts the fence back. A bare
#: opening fence after prose would end a reply there too: the embedded models open theirs with
#: a language (507 of 507 replies of two development runs).
BLOCK_END = "\n```\n"


def server_settings(available_bytes: int, cpu_count: int, model: ModelSpec, *, slots: int | None = None) -> ServerSettings:
    """Threads, KV pool, slots and prompt-cache size for this machine.

    Every CPU computes (llama.cpp is compute-bound on CPUs). The root conversation gets a
    window as large as memory comfortably allows, capped by what the model was trained on;
    each further slot adds ``SLOT_TOKENS`` to the shared KV pool, and the governor chooses
    how many slots the memory and CPUs take (``slots`` overrides it, for benches).
    """
    free_mb = available_bytes // _MIB
    root_ctx = min(32768 if free_mb > 12_000 else 16384 if free_mb > 6_000 else 8192, model.context_window)
    if slots is None:
        gov = Governor(available_bytes, cpu_count)
        slots = gov.local_model_slots(model_bytes=model.size, kv_bytes_per_token=model.kv_bytes_per_token,
                                      root_tokens=root_ctx, slot_tokens=SLOT_TOKENS)
    cache_mb = 1024 if free_mb > 8_000 else 512
    return ServerSettings(n_threads=max(1, cpu_count), n_ctx=root_ctx + (slots - 1) * SLOT_TOKENS, slots=slots,
                          cache_mb=cache_mb)


def _sampling(slot: int | None, temperature: float = 0.0, *, turn: bool = False) -> dict[str, Any]:
    """What a request asks of the server: its sampler (see ``LocalModelClient._client``), its
    slot when pinned to one, and for a loop turn the end of its reply (``BLOCK_END``)."""
    body: dict[str, Any] = {"repeat_penalty": 1.1, "repeat_last_n": 64}
    if slot is not None:
        body["id_slot"] = slot
    if turn:
        body["stop"] = [BLOCK_END]
    return {"temperature": temperature, "extra_body": body}


def _closed(reply: Completion) -> Completion:
    """``reply`` with the closing fence the server's stop left out put back, when it ends
    inside a code block (an odd count of fences): the conversation shows the block closed, as
    the model wrote it. A reply the model ended itself inside a block gets the same fence,
    which the reply parser supplies anyway."""
    if reply.finish_reason == "stop" and reply.text.count("```") % 2:
        reply.text += BLOCK_END.rstrip("\n")
        reply.finish_reason = "code_block_closed"
    return reply


def open_log(path: Path) -> IO[bytes]:
    """Create ``path`` afresh for writing (mode 0600) in a folder made 0700 if missing.

    Whatever is at ``path`` is removed first, a symlink or a hard link to someone's file
    included (unlinking removes the name, never the target), and the file is then created
    with ``O_EXCL | O_NOFOLLOW``: if anything reappears there in between, the open fails
    instead of writing through it.
    """
    try:
        private.make_dir(path.parent)  # its parents 0700 too (mkdir -p would make them 0755)
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
    """One llama.cpp server process for one model file.

    Args:
        name: the model's name (the server's model alias).
        model_path: the GGUF file (verified before every start).
        settings: threads, KV pool, slots, prompt cache.
        engine: what runs the server (default: xllamacpp in this interpreter).
        log_dir: where the server's log goes (default ``$RLM_HOME/logs``).
        verify_model: check the file's size and SHA-256 before every start (off only for
            files the model list does not know, in tests and benches).
    """

    def __init__(self, name: str, model_path: Path, settings: ServerSettings, *, engine: Engine | None = None,
                 log_dir: Path | None = None, verify_model: bool = True) -> None:
        self.name = name
        self.model_path = model_path
        self.settings = settings
        self.engine = engine or Engine("xllamacpp")
        self.port = 0
        self.api_key = ""
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = (log_dir or paths_from_env().logs) / f"local-{name}-{os.getpid()}.log"
        self.verify_model = verify_model
        self.starts = 0

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        """Start (or restart) the server and wait until it answers; ModelUnavailable if it does not."""
        self.stop()
        if self.verify_model:
            # The file may have changed since the last start: check it every time.
            try:
                verify(self.name, self.model_path.parent)
            except ModelError as e:
                raise ConfigError(str(e)) from e
        self.port = _free_port()
        self.api_key = secrets.token_urlsafe(24)
        cmd = self.engine.command(parent_pid=os.getpid(), model=self.model_path, alias=self.name, port=self.port,
                                  settings=self.settings)
        log = open_log(self.log_path)
        try:
            self.process = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        except OSError as e:
            raise ModelUnavailable(f"cannot start the llama.cpp server: {e}") from e
        finally:
            log.close()
        try:
            assert self.process.stdin is not None
            self.process.stdin.write(self.api_key.encode() + b"\n")
            self.process.stdin.close()
        except OSError:
            pass  # it died already: reported below, with its log
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
        request = urllib.request.Request(f"{self.api_base}/models", headers={"Authorization": f"Bearer {self.api_key}"})
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def log_tail(self, lines: int = 5) -> str:
        return read_log_tail(self.log_path, lines)

    def stop(self) -> None:
        """End the server's whole process group (the launcher and a binary it started)."""
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            _signal_group(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                _signal_group(process.pid, signal.SIGKILL)
                process.wait()
        _signal_group(process.pid, signal.SIGKILL)  # anything of the group still there


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)  # started with start_new_session: the group's id is the launcher's pid
    except (ProcessLookupError, PermissionError):
        pass


_servers: dict[str, LocalServer] = {}
_servers_lock = threading.Lock()


@atexit.register
def stop_all() -> None:
    """Stop every local server this process started."""
    with _servers_lock:
        for server in _servers.values():
            server.stop()
        _servers.clear()


def running() -> list[tuple[str, int]]:
    """(model name, process id) of each local server this process runs now."""
    with _servers_lock:
        return [(name, server.process.pid) for name, server in _servers.items()
                if server.process is not None and server.alive()]


def _server(name: str, models_dir: Path, settings: ServerSettings, engine: Engine) -> LocalServer:
    """The running server for ``name``, started (with ``settings``) if there is none."""
    with _servers_lock:
        server = _servers.get(name)
        if server is None:
            server = LocalServer(name, models_dir / spec(name).filename, settings, engine=engine)
            _servers[name] = server
        if not server.alive():
            server.start()
        return server


def _restart(server: LocalServer, seen_starts: int) -> None:
    """Restart a server that failed a request, unless another thread already did."""
    with _servers_lock:
        if server.starts == seen_starts or not server.alive():
            server.start()


class LocalModelClient:
    """A client for ``local:NAME``. Usable from many threads at once: the server serves
    ``parallel`` requests together and queues the rest.

    Args:
        name: a model of ``rlm model list``.
        models_dir: where the models are (default ``$RLM_HOME/models``).
        engine: what runs the server (default: ``RLM_LOCAL_ENGINE``, else xllamacpp).
        slots: requests served at once (default: the governor's choice for this machine).
        timeout_s: per request.
        temperature: the sampler's (default 0: see ``_client``).
    """

    def __init__(self, name: str, *, models_dir: Path | None = None, engine: Engine | None = None,
                 slots: int | None = None, timeout_s: float = 600.0, temperature: float = 0.0, **_: Any) -> None:
        s = spec(name)  # unknown names fail here, before anything starts
        self.name = name
        self.temperature = temperature
        self.model = f"local:{name}"
        self.models_dir = models_dir or paths_from_env().models
        self.engine = engine or find_engine(local_engine_choice())
        if not (self.models_dir / s.filename).is_file():
            raise ConfigError(f"local model {name} is not installed; install it with: rlm model install {name}")
        with _servers_lock:
            running = _servers.get(name)
        if running is not None:
            self.settings = running.settings
        else:
            gov = Governor.from_system()
            self.settings = server_settings(gov.available_bytes, gov.cpu_count, s, slots=slots)
        #: How many calls the server serves at once (the orchestrator sizes its sub-call pool by it).
        self.parallel = self.settings.slots
        self.timeout_s = timeout_s

    def _slot_for(self, messages: list[Message]) -> int | None:
        """The slot of the conversation these messages continue (None: any slot).

        A loop turn's stream is cut once its code block closes, and the server frees the slot
        only when it notices, a moment later; the next turn, sent at once, would then land in
        another slot and prefill the whole conversation cold. Pinned to its own slot (chosen
        by the conversation's opening messages), the turn waits that moment instead and finds
        its prefix there.
        """
        if self.parallel < 2 or len(messages) < 2:
            return None
        opening = f"{messages[0].get('content', '')}\x00{messages[1].get('content', '')}".encode()
        return int.from_bytes(hashlib.blake2b(opening, digest_size=4).digest(), "big") % self.parallel

    def _client(self, server: LocalServer, slot: int | None = None, *, turn: bool = False) -> Any:
        from rlm_runtime.llm.litellm_client import LiteLLMClient

        # temperature 0: a small model samples itself into nonsense more often than not, and
        # runs become reproducible. A repeat penalty over the last 64 tokens (llama-cpp-python's
        # default, which llama.cpp's server leaves off): without it the 1.5B model fell into
        # repeating the same grep and the same prose turn after turn. progress: llama.cpp's
        # server says how far it has read a long prompt, which takes a minute on a small machine.
        return LiteLLMClient(f"openai/{self.name}", api_base=server.api_base, api_key=server.api_key,
                             timeout_s=self.timeout_s, retries=1, backoff_s=0.5,
                             extra=_sampling(slot, self.temperature, turn=turn), progress=True)

    def complete(self, messages: list[Message], *, max_tokens: int | None = None,
                 stop_after_code_block: bool = False, timeout_s: float | None = None) -> Completion:
        server = _server(self.name, self.models_dir, self.settings, self.engine)
        seen = server.starts
        slot = self._slot_for(messages) if stop_after_code_block else None

        def call() -> Completion:
            client = self._client(server, slot, turn=stop_after_code_block)
            return client.complete(messages, max_tokens=max_tokens, stop_after_code_block=stop_after_code_block,
                                   timeout_s=timeout_s)

        try:
            result = call()
        except ModelUnavailable:
            # Crashed or hung: one restart, then the caller hears about it.
            _restart(server, seen)
            result = call()
        result.model = self.model
        return _closed(result) if stop_after_code_block else result

    def count_tokens(self, text: str) -> int:
        return count_tokens(text)

    def close(self) -> None:
        pass  # the server is shared by every client in the process; stop_all() runs at exit
