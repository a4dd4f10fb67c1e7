"""A stand-in for a ``llama-server`` binary: takes its flags, serves its OpenAI-compatible API.

Used by the tests of the ``llama-server`` engine (``RLM_LOCAL_ENGINE``), which need no model.
Like llama-server it reads its API key from ``LLAMA_API_KEY`` and refuses requests without
it (``/health`` excepted). A chat request answers ``pong <alias> <in-flight> <what it asked>`` after a short
wait when the prompt says "slow", a code block with an invented output after it when it says
"block" (cut before the first of the request's ``stop`` texts, which is left out, as
llama.cpp does), and kills the server when it says "crash". A streamed request
with ``return_progress`` first gets llama.cpp's ``prompt_progress`` chunks (``PROGRESS``). If
``FAKE_LLAMA_RECORD`` names a file, its command line, pid and whether it got a key are
written there as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_lock = threading.Lock()
_in_flight = 0
#: The prefill reports a streamed request with ``return_progress`` gets, as llama.cpp sends them.
PROGRESS = [{"total": 1200, "cache": 0, "processed": n, "time_ms": n * 20} for n in (0, 512, 1024, 1200)]


def asked(body: dict[str, object]) -> str:
    """What the request asked of the sampler and the slots, as the reply shows it."""
    shown = {k: body.get(k) for k in ("id_slot", "repeat_penalty", "temperature")}
    return json.dumps({**shown, "stops": len(body.get("stop") or ())}, sort_keys=True)


def main() -> None:
    if "--version" in sys.argv:
        print("version: 0 (fake)", file=sys.stderr)
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--alias", default="model")
    ap.add_argument("--host", default="127.0.0.1")
    args, _ = ap.parse_known_args()
    key = os.environ.get("LLAMA_API_KEY", "")
    record = os.environ.get("FAKE_LLAMA_RECORD")
    if record:
        with open(record, "w", encoding="utf-8") as f:
            json.dump({"argv": sys.argv, "pid": os.getpid(), "has_key": bool(key)}, f)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def _send(self, status: int, body: dict[str, object]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, text: str, progress: bool = False) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            head = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": args.alias}
            for report in PROGRESS if progress else ():
                chunk = {**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": None}, "finish_reason": None}],
                         "prompt_progress": report}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            for delta, finish in (({"role": "assistant", "content": text}, None), ({}, "stop")):
                chunk = {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

        def _authorised(self) -> bool:
            if key and self.headers.get("Authorization") != f"Bearer {key}":
                self._send(401, {"error": {"message": "Invalid API Key", "type": "authentication_error"}})
                return False
            return True

        def do_GET(self) -> None:
            if self.path == "/health":
                self._send(200, {"status": "ok"})
            elif self._authorised():
                self._send(200, {"object": "list", "data": [{"id": args.alias, "object": "model"}]})

        def do_POST(self) -> None:
            global _in_flight
            if not self._authorised():
                return
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            prompt = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
            if "crash" in prompt:
                os._exit(1)
            with _lock:
                _in_flight += 1
                seen = _in_flight
            try:
                if "slow" in prompt:
                    time.sleep(1.0)
                with _lock:
                    seen = max(seen, _in_flight)
                text = f"pong {args.alias} {seen} {asked(body)}"
                if "block" in prompt:
                    text = "Counting.\n```python\nprint(len(text))\n```\nOutput: 12 (invented)\n"
                    cuts = [text.find(s) for s in body.get("stop") or () if s in text]
                    text = text[:min(cuts)] if cuts else text
                if body.get("stream"):
                    self._stream(text, progress=bool(body.get("return_progress")))
                    return
                self._send(200, {"id": "x", "object": "chat.completion", "created": 0, "model": args.alias,
                                 "choices": [{"index": 0, "finish_reason": "stop",
                                              "message": {"role": "assistant", "content": text}}],
                                 "usage": {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}})
            finally:
                with _lock:
                    _in_flight -= 1

    ThreadingHTTPServer((args.host, args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
