"""Where a running ``rlm serve --http`` says it is: ``$RLM_HOME/serve/server.json``.

The server writes its URL, process id, model, roots and a key of its own there once it
listens (0600, like the token beside it) and removes the file however it stops (SIGINT,
SIGTERM, a failed start: ``run_http``'s ``stopped``). ``rlm ask --server`` reads it to send
its question to the warm server instead of starting a worker and a model of its own.

A record can still outlive its server (SIGKILL, a crash), and another program may listen on
its port since. So before it sends the token, a question or a path, the client asks the
port to prove it holds the record's key: ``GET /api/hello?challenge=C`` (answered without
the token) must return ``proof(key, C)``, an HMAC of the client's fresh random challenge.
Only the process that wrote the record knows the key.

The file is read as untrusted (bounded, strict JSON, checked field by field), and a record
whose process is gone, or is not an ``rlm serve``, is ignored.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from rlm_runtime import private
from rlm_runtime.config import Paths

#: The record is a few hundred bytes; anything much larger was not written by a server.
MAX_BYTES = 64 * 1024


@dataclass(frozen=True)
class Running:
    """A running server: its URL, its process, the model it answers with, its roots."""

    url: str
    pid: int
    model: str
    roots: tuple[str, ...]
    #: The server's own secret (``new_key``): it proves with it that it wrote the record.
    key: str = ""


def new_key() -> str:
    """A fresh key for one server's record."""
    return secrets.token_urlsafe(32)


def proof(key: str, challenge: str) -> str:
    """What the server holding ``key`` answers to ``challenge`` (``/api/hello``)."""
    return hmac.new(key.encode(), b"rlm-serve-hello\x00" + challenge.encode(), hashlib.sha256).hexdigest()


def challenge() -> str:
    """A fresh random challenge for ``/api/hello``."""
    return secrets.token_urlsafe(24)


def proven(running: Running, challenge: str, answer: object) -> bool:
    """Whether ``answer`` (the JSON ``/api/hello`` returned) proves the record's key."""
    got = answer.get("proof") if isinstance(answer, dict) else None
    # compare_digest takes ASCII str only (anything else raises): a proof is 64 hex digits.
    if not (running.key and isinstance(got, str) and len(got) == 64 and got.isascii()):
        return False
    return hmac.compare_digest(got, proof(running.key, challenge))


def record_path(paths: Paths) -> Path:
    return paths.home / "serve" / "server.json"


def announce(paths: Paths, running: Running) -> Path:
    """Write the record of this server (replacing any other's)."""
    path = record_path(paths)
    private.make_dir(path.parent)
    private.write_text(path, json.dumps({"url": running.url, "pid": running.pid, "model": running.model,
                                         "roots": list(running.roots), "key": running.key}))
    return path


def withdraw(paths: Paths, pid: int | None = None) -> None:
    """Remove the record if it is this process's (``pid``, default: this one)."""
    found = _read(record_path(paths))
    if found is not None and found.pid == (os.getpid() if pid is None else pid):
        try:
            record_path(paths).unlink()
        except OSError:
            pass


def find(paths: Paths) -> Running | None:
    """The running server's record, or None (no record, a bad one, or its process is gone)."""
    found = _read(record_path(paths))
    if found is None or not _serving(found.pid):
        return None
    return found


def _read(path: Path) -> Running | None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        data = os.read(fd, MAX_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        return None
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(raw, dict):
        return None
    url, pid, model, roots, key = raw.get("url"), raw.get("pid"), raw.get("model"), raw.get("roots"), raw.get("key")
    if not (isinstance(url, str) and url.startswith("http://") and len(url) < 300 and isinstance(pid, int)
            and not isinstance(pid, bool) and pid > 0 and isinstance(model, str) and len(model) < 500
            and isinstance(roots, list) and all(isinstance(r, str) for r in roots)
            and isinstance(key, str) and 32 <= len(key) <= 128):
        return None
    return Running(url, pid, model, tuple(roots), key)


def _serving(pid: int) -> bool:
    """Whether ``pid`` is alive and runs ``rlm serve`` (a pid reused by another program is not)."""
    try:
        import psutil

        return "serve" in psutil.Process(pid).cmdline()
    except Exception:  # noqa: BLE001 - gone, a zombie, not ours to read: not a server to attach to
        return False
