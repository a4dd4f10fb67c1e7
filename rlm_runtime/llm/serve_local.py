"""Run llama.cpp's OpenAI-compatible server, and stop it when the process that started it is gone.

    python serve_local.py PARENT_PID MODULE [options...]      (MODULE: llama_cpp.server)

``local.py`` stops its servers at exit, but a parent killed with SIGKILL (or by the OOM
killer) runs no exit handler, and an orphaned server would keep 1-3 GB of memory. So the
server runs under this launcher, started by path (it imports nothing of rlm_runtime, so the
server process stays small): a daemon thread checks once a second whether the parent is
still its parent, and ends the process when it is not. Works on Linux and macOS.
"""

from __future__ import annotations

import os
import runpy
import sys
import threading
import time


def _watch(parent: int) -> None:
    while True:
        if os.getppid() != parent:
            os._exit(0)  # the parent is gone: nothing to flush, nobody to answer
        time.sleep(1.0)


def main() -> None:
    parent = int(sys.argv[1])
    threading.Thread(target=_watch, args=(parent,), name="parent-watch", daemon=True).start()
    module = sys.argv[2]
    sys.argv = [module, *sys.argv[3:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
