"""``rlm ask --server``: a question sent to a running ``rlm serve --http``.

The server has its worker started and its model loaded (for the local model, its prompt
cache warm too), so the question skips both. What the command shows is what the server
streams: a line per iteration of the root run, then the answer. The contexts must be ones
the server may read: registered (``ctx:ID``) or under its roots; a path is sent absolute.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rlm_runtime.cli.common import EXIT_FAILED, EXIT_OK, EXIT_SANDBOX, EXIT_UNAVAILABLE, EXIT_USAGE, UsageError, print_json, say
from rlm_runtime.termsafe import one_line

#: What a server's refusal becomes here, by HTTP status.
_EXIT_BY_STATUS = {400: EXIT_USAGE, 401: EXIT_USAGE, 403: EXIT_USAGE, 404: EXIT_USAGE, 409: EXIT_USAGE, 413: EXIT_USAGE,
                   422: EXIT_USAGE, 502: EXIT_UNAVAILABLE, 503: EXIT_SANDBOX}


def ask_through_server(args: argparse.Namespace, contexts: list[str]) -> int:
    """Send ``args.question`` over ``contexts`` to the running server; the exit status."""
    import httpx

    from rlm_runtime.config import paths_from_env
    from rlm_runtime.registry import is_ref
    from rlm_runtime.serve import auth, running

    paths = paths_from_env()
    server = running.find(paths)
    if server is None:
        raise UsageError("--server: no rlm serve --http is running for this $RLM_HOME (start one, or leave out --server)")
    if args.model and args.model != server.model:
        raise UsageError(f"--server: the running server answers with {server.model}, not {args.model} "
                         "(leave out -m, or start a server with that model)")
    _prove(server)
    token = auth.load_or_create_token(paths)[0]
    sent = [c if is_ref(c) else str(Path(c).resolve()) for c in contexts]
    body = {"question": args.question, "contexts": sent, "stream": True}
    result: dict[str, Any] | None = None
    try:
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=None) as http, \
                http.stream("POST", "/api/ask", json=body) as response:
            if response.status_code != 200:
                return _refused(args, response.status_code, response.read())
            for kind, data in _events(response.iter_lines()):
                if kind == "model" and not args.quiet and not args.json:
                    tokens = data.get("prompt_tokens")
                    say(f"--- iteration {data.get('iteration')}: the model reads "
                        + (f"{tokens:,} tokens of prompt" if isinstance(tokens, int) else "its prompt"), err=True)
                elif kind == "iteration" and not args.quiet and not args.json:
                    say(f"--- iteration {data.get('iteration')}: {data.get('cells')} cell(s), "
                        f"{data.get('seconds') or 0:.1f}s (on {server.url})", err=True)
                elif kind == "result":
                    result = data
                elif kind == "error":
                    return _refused(args, int(data.get("status") or 500), json.dumps(data).encode())
    except httpx.HTTPError as e:
        raise UsageError(f"--server: the server at {server.url} did not answer: {one_line(str(e))}") from e
    if result is None:
        say("rlm: the server ended the answer early", err=True)
        return EXIT_FAILED
    if args.json:
        print_json(args, result)
    elif result.get("answer") is not None:
        say(result["answer"])
    if result.get("answer") is None:
        if not args.json:
            say(f"rlm: no answer: {one_line(str(result.get('error')))}", err=True)
        return EXIT_FAILED
    return EXIT_OK


#: How long, and how many bytes, ``/api/hello``'s answer may take (a proof is ~80 bytes).
_HELLO_S = 10.0
_HELLO_BYTES = 4096


def _prove(server: Any) -> None:
    """Refuse to go on unless the process at the record's URL proves it holds the record's
    key (``running.py``): a record left by a server that died names a port another program
    may listen on now, and the token, the question and the paths must not go to it."""
    import json
    import threading
    import time

    import httpx

    from rlm_runtime.serve import running

    challenge = running.challenge()
    deadline = time.monotonic() + _HELLO_S
    body = b""
    ok = False
    http = httpx.Client(base_url=server.url, timeout=_HELLO_S)
    # Bounded in bytes and in time as a whole (headers trickled a byte at a time included):
    # what answers may not be the server. The watchdog closes the client at the deadline.
    watchdog = threading.Timer(_HELLO_S, http.close)
    watchdog.daemon = True
    watchdog.start()
    try:
        with http, http.stream("GET", "/api/hello", params={"challenge": challenge}) as response:
            for piece in response.iter_bytes():
                body += piece
                if len(body) > _HELLO_BYTES or time.monotonic() > deadline:
                    break
            ok = response.status_code == 200 and len(body) <= _HELLO_BYTES and time.monotonic() <= deadline
    except Exception as e:  # noqa: BLE001 - a refused, closed or garbled exchange: not proven, nothing sent
        if time.monotonic() <= deadline:
            raise UsageError(f"--server: the server at {server.url} did not answer: {one_line(str(e))}") from e
        ok = False
    finally:
        watchdog.cancel()
    try:
        answer = json.loads(body) if ok else None
    except (ValueError, RecursionError):
        answer = None
    if not running.proven(server, challenge, answer):
        raise UsageError(f"--server: what listens at {server.url} is not the server that wrote $RLM_HOME/serve/server.json "
                         "(it may have stopped): nothing was sent; start rlm serve --http again, or leave out --server")


def _events(lines: Any) -> Any:
    """(event name, JSON data) of a server-sent event stream, comments skipped."""
    kind: str | None = None
    data: list[str] = []
    for line in lines:
        if line.startswith(":"):
            continue
        if not line:
            if kind is not None and data:
                try:
                    yield kind, json.loads("\n".join(data))
                except ValueError:
                    pass
            kind, data = None, []
        elif line.startswith("event:"):
            kind = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())


def _refused(args: argparse.Namespace, status: int, body: bytes) -> int:
    try:
        error = json.loads(body).get("error") or body.decode(errors="replace")
    except (ValueError, AttributeError):
        error = body.decode(errors="replace")
    if args.json:
        print_json(args, {"error": error, "error_type": "ServerRefused", "status": status})
    else:
        say(f"rlm: error: the server refused the question ({status}): {one_line(str(error))[:500]}", err=True)
    return _EXIT_BY_STATUS.get(status, EXIT_FAILED)
