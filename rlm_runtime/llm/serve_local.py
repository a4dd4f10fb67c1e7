"""Run a llama.cpp server, and stop it when the process that started it is gone.

    python serve_local.py PARENT_PID xllamacpp OPTIONS_JSON       (llama.cpp's server from the xllamacpp wheel)
    python serve_local.py PARENT_PID exec BINARY [ARGS...]         (a llama-server binary)
    python serve_local.py PARENT_PID MODULE [ARGS...]              (a Python module run as __main__)

The first line of standard input is the server's API key (a command line is readable by
every local user; this keeps the key off it). With ``exec`` the binary gets it as
``LLAMA_API_KEY``.

``local.py`` stops its servers at exit, but a parent killed with SIGKILL (or by the OOM
killer) runs no exit handler, and an orphaned server would keep 1-3 GB of memory. So the
server runs under this launcher, started by path (it imports nothing of rlm_runtime, so the
server process stays small): a daemon thread checks once a second whether the parent is
still its parent, and ends the process (and a binary it started) when it is not. Works on
Linux and macOS.
"""

from __future__ import annotations

import json
import os
import runpy
import signal
import subprocess
import sys
import threading
import time
from typing import Any

_child: subprocess.Popen[bytes] | None = None


def _end() -> None:
    if _child is not None and _child.poll() is None:
        _child.kill()
    os._exit(0)  # nothing to flush, nobody to answer


def _watch(parent: int) -> None:
    while True:
        if os.getppid() != parent:
            _end()
        time.sleep(1.0)


def _serve_xllamacpp(options: dict[str, Any], api_key: str) -> None:
    import xllamacpp as xlc

    p = xlc.CommonParams()
    p.model.path = options["model"]
    p.model_alias = {options["alias"]}
    p.hostnames = ["127.0.0.1"]
    p.port = int(options["port"])
    p.n_ctx = int(options["n_ctx"])
    p.n_parallel = int(options["n_parallel"])
    # One KV pool for every slot: a lone long request (the root conversation) may use all of
    # it, and an idle slot's cells are freed (saved to the RAM cache) when a new request needs them.
    p.kv_unified = True
    p.cpuparams.n_threads = p.cpuparams_batch.n_threads = int(options["n_threads"])
    p.n_batch = int(options.get("n_batch", p.n_batch))
    p.cache_ram_mib = int(options["cache_ram_mib"])
    p.api_keys = [api_key]
    p.endpoint_slots = False  # /slots shows every slot's prompt: the user's data
    p.ui = False
    server = xlc.Server(p)  # loads the model, then serves HTTP from its own threads
    print(f"rlm: xllamacpp serving at {server.listening_address}", flush=True)
    threading.Event().wait()


def _exec(argv: list[str], api_key: str) -> None:
    global _child

    _child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, env={**os.environ, "LLAMA_API_KEY": api_key})
    signal.signal(signal.SIGTERM, lambda *_: _end())
    sys.exit(_child.wait())


def main() -> None:
    parent = int(sys.argv[1])
    threading.Thread(target=_watch, args=(parent,), name="parent-watch", daemon=True).start()
    api_key = sys.stdin.readline().strip() if not sys.stdin.closed else ""
    mode, rest = sys.argv[2], sys.argv[3:]
    if mode == "xllamacpp":
        _serve_xllamacpp(json.loads(rest[0]), api_key)
    elif mode == "exec":
        _exec(rest, api_key)
    else:
        sys.argv = [mode, *rest]
        runpy.run_module(mode, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
