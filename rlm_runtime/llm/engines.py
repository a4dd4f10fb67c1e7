"""Which llama.cpp engine serves ``local:`` models, and the command line that starts it.

Every engine is llama.cpp behind the same OpenAI-compatible HTTP API on a loopback port,
started by ``serve_local.py`` (which ends it when the process that started it dies):

* ``xllamacpp`` (the default; the ``local`` extra): llama.cpp's own C++ server from a
  prebuilt wheel (Linux x86_64 and aarch64 portable CPU builds, macOS with Metal), so
  installing it compiles nothing. Parallel slots, continuous batching, a RAM prompt cache.
  It runs in the launcher's process, never in the host's: a crash in native code cannot
  take the host down, and the host stays safe to fork workers from.
* ``llama-server``: a llama.cpp server binary already on the machine (Homebrew installs
  one), used when asked for: ``RLM_LOCAL_ENGINE=llama-server`` (looked up on PATH) or
  ``RLM_LOCAL_ENGINE=/path/to/llama-server``. Same server, same flags.

The choice is read from the environment in ``config.py`` and passed here.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from rlm_runtime.errors import ConfigError

#: Started by path, so that the server's process imports nothing of rlm_runtime.
LAUNCHER = Path(__file__).with_name("serve_local.py")

INSTALL_HINT = "install it with: pip install 'rlm_runtime[local]'"

#: Prompt tokens the server reads per step (llama.cpp's n_batch, 2048 by default). It reports
#: its progress after each step (``progress.py``): 512 tokens take 10-25 s on 2 cores, where
#: 2048 left the status line without news for a minute. Reading is no slower: llama.cpp
#: computes in micro-batches of 512 (n_ubatch) either way.
PREFILL_BATCH = 512


@dataclass(frozen=True)
class ServerSettings:
    """How one server is sized: chosen for the machine by ``local.server_settings``.

    Args:
        n_threads: CPU threads for prefill and generation.
        n_ctx: tokens of KV cache, one pool shared by every slot (a lone request may use
            all of it).
        slots: requests served at once (continuous batching).
        cache_mb: the RAM prompt cache, where a slot's state waits while another request
            uses the slot (0: off).
    """

    n_threads: int
    n_ctx: int
    slots: int = 1
    cache_mb: int = 0


@dataclass(frozen=True)
class Engine:
    """One way of running llama.cpp's server.

    Args:
        kind: ``xllamacpp`` or ``llama-server``.
        python: the interpreter that runs the launcher (and, for xllamacpp, the engine).
        binary: the ``llama-server`` executable (that kind only).
    """

    kind: str
    python: str = sys.executable
    binary: str | None = None

    def command(self, *, parent_pid: int, model: Path, alias: str, port: int, settings: ServerSettings) -> list[str]:
        """The launcher's command line. The API key is not on it (any local user can read a
        command line): the launcher reads it from its standard input."""
        head = [self.python, str(LAUNCHER), str(parent_pid)]
        if self.kind == "xllamacpp":
            options = {"model": str(model), "alias": alias, "port": port, "n_ctx": settings.n_ctx,
                       "n_threads": settings.n_threads, "n_parallel": settings.slots, "cache_ram_mib": settings.cache_mb,
                       "n_batch": PREFILL_BATCH}
            return [*head, "xllamacpp", json.dumps(options)]
        assert self.binary is not None
        return [*head, "exec", self.binary, "--model", str(model), "--alias", alias, "--host", "127.0.0.1",
                "--port", str(port), "--ctx-size", str(settings.n_ctx), "--threads", str(settings.n_threads),
                "--threads-batch", str(settings.n_threads), "--batch-size", str(PREFILL_BATCH),
                "--parallel", str(settings.slots), "--kv-unified",
                "--cache-ram", str(settings.cache_mb), "--no-slots", "--no-webui"]

    def describe(self) -> str:
        """One line for ``rlm model list``: what serves the models, and its version."""
        if self.kind == "xllamacpp":
            return f"xllamacpp {engine_version(self)} (llama.cpp's C++ server, prebuilt wheel; the default)"
        return f"llama-server at {self.binary} ({engine_version(self)}; chosen by RLM_LOCAL_ENGINE)"


def engine_version(engine: Engine) -> str:
    """The engine's version, or why it cannot be told."""
    if engine.kind == "xllamacpp":
        if engine.python == sys.executable:
            try:
                return importlib.metadata.version("xllamacpp")
            except importlib.metadata.PackageNotFoundError:
                return "not installed"
        code = "import importlib.metadata as m; print(m.version('xllamacpp'))"
        cmd = [engine.python, "-c", code]
    else:
        cmd = [str(engine.binary), "--version"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"version unknown: {e}"
    # llama-server prints "version: 6789 (abcdef0)" on stderr, after its backend lines.
    lines = [ln.strip() for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    found = [ln for ln in lines if ln.startswith("version")] or lines[-1:]
    return found[0] if found else "version unknown"


def find_engine(choice: str | None) -> Engine:
    """The engine for ``choice`` (``RLM_LOCAL_ENGINE``; None or empty: xllamacpp).

    Raises ConfigError, with what to install or set, when it is not there.
    """
    choice = (choice or "").strip()
    if choice in ("", "xllamacpp"):
        if importlib.util.find_spec("xllamacpp") is None:
            hint = ""
            on_path = shutil.which("llama-server")
            if on_path and not choice:
                hint = f", or use the llama-server at {on_path} with RLM_LOCAL_ENGINE=llama-server"
            raise ConfigError(f"the local model engine (xllamacpp) is not installed; {INSTALL_HINT}{hint}")
        return Engine("xllamacpp")
    if choice == "llama-server":
        found = shutil.which("llama-server")
        if found is None:
            raise ConfigError("RLM_LOCAL_ENGINE=llama-server but no llama-server is on PATH; "
                              "give its path instead, or unset RLM_LOCAL_ENGINE to use xllamacpp")
        return Engine("llama-server", binary=found)
    path = Path(choice).expanduser()
    if "/" in choice or path.name.startswith("llama-server"):
        if not (path.is_file() and shutil.which(str(path))):
            raise ConfigError(f"RLM_LOCAL_ENGINE={choice}: no executable llama-server there")
        return Engine("llama-server", binary=str(path.resolve()))
    raise ConfigError(f"RLM_LOCAL_ENGINE={choice!r} is not an engine: use xllamacpp (the default), "
                      "llama-server (found on PATH) or the path of a llama-server binary")
