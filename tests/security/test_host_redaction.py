"""Issue 22, class 3: credentials the host holds never reach sandboxed code or a file through
an error. A key planted in a model spec, in the environment and in an ``api_base``'s
``user:password@`` is made to surface in a failed sub-call (a refused connection, a provider
whose error body echoes the key) or a tool's error; neither the cell nor the trajectory may
hold it."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from rlm_runtime import Session
from rlm_runtime.budget import RunLimits
from rlm_runtime.llm import ScriptedClient
from rlm_runtime.llm.litellm_client import LiteLLMClient, _lib
from rlm_runtime.redact import MASK, redact, redact_clipped

pytestmark = pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")  # litellm's types, on first use

SPEC_KEY = "sk-spec-planted-KEY-0a9b8c7d6e5f"
ENV_KEY = "envtoken-planted-3c4d5e6f7a8b"
URL_PASSWORD = "urlpass-planted-9f8e7d6c"


def code(src: str) -> str:
    return f"```python\n{src}\n```"


def limits() -> RunLimits:
    return RunLimits(max_iterations=3, max_wall_s=120.0)


def refused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _EchoingProvider(BaseHTTPRequestHandler):
    """An OpenAI-compatible server that refuses every call and quotes what it was sent
    (the Authorization header, the URL) in its error body, as some providers and proxies do."""

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = json.dumps({"error": {"message": f"Incorrect API key provided: {self.headers.get('Authorization')} "
                                                f"for {self.path}", "code": "invalid_request"}}).encode()
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def echoing() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoingProvider)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module", autouse=True)
def litellm_loaded() -> None:
    _lib()


def _run(sub: Any, cell: str, tmp_path: Path, tools: tuple[Any, ...] = ()) -> tuple[str, str]:
    """Run ``cell`` as the root model's code; return (everything the root model was shown, the trace file)."""
    root = ScriptedClient([code(cell), code("FINAL('done')")])
    trace = tmp_path / "t.jsonl"
    began = time.monotonic()
    with Session(root, sub, contexts=["some text"], limits=limits(), trace=trace, tools=tools) as s:
        result = s.ask("q")
    assert time.monotonic() - began < 90
    assert result.answer == "done", result.error
    shown = "\n".join(m["content"] for prompt in root.prompts for m in prompt)
    return shown, trace.read_text(encoding="utf-8")


def _assert_clean(*texts: str) -> None:
    for text in texts:
        for secret in (SPEC_KEY, ENV_KEY, URL_PASSWORD):
            assert secret not in text


def test_a_refused_api_base_with_a_password_does_not_reach_the_cell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It hands the cell an llm_query error that names the server without its user:password@ or the spec's key."""
    monkeypatch.setenv("MY_SERVICE_TOKEN", ENV_KEY)
    sub = LiteLLMClient("openai/any", api_base=f"http://alice:{URL_PASSWORD}@127.0.0.1:{refused_port()}/v1",
                        api_key=SPEC_KEY, timeout_s=5, retries=0, backoff_s=0.01)
    shown, trace = _run(sub, "try:\n    llm_query('hi')\nexcept Exception as e:\n    print('ERR', e)", tmp_path)
    assert "ERR" in shown and "127.0.0.1" in shown
    _assert_clean(shown, trace)
    assert MASK in shown


def test_a_provider_echoing_the_key_does_not_hand_it_to_the_cell(tmp_path: Path, echoing: str) -> None:
    """It masks the key a provider's error body quotes, in llm_query's error, llm_query_batched's items and the trace."""
    sub = LiteLLMClient("openai/any", api_base=echoing, api_key=SPEC_KEY, timeout_s=5, retries=0, backoff_s=0.01)
    cell = ("try:\n    llm_query('hi')\nexcept Exception as e:\n    print('ERR', e)\n"
            "print('BATCH', llm_query_batched(['a', 'b']))")
    shown, trace = _run(sub, cell, tmp_path)
    assert "ERR" in shown and "BATCH" in shown and "Incorrect API key" in shown
    _assert_clean(shown, trace)


def test_a_tool_error_quoting_an_env_key_is_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It masks an environment key a program's tool quotes in its error, in the cell and the trace."""
    monkeypatch.setenv("MY_SERVICE_TOKEN", ENV_KEY)

    def fetch_orders() -> str:
        """Fetch the orders."""
        raise RuntimeError(f"GET https://bob:{URL_PASSWORD}@orders.internal/api failed; header X-Token: {ENV_KEY}")

    shown, trace = _run(ScriptedClient([]), "try:\n    fetch_orders()\nexcept Exception as e:\n    print('ERR', e)",
                        tmp_path, tools=(fetch_orders,))
    assert "ERR" in shown and "orders.internal" in shown
    _assert_clean(shown, trace)


def test_a_sub_model_reply_quoting_a_known_key_is_masked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It masks a known key in a value crossing into the worker (a sub-model's reply that quotes it)."""
    monkeypatch.setenv("MY_SERVICE_TOKEN", ENV_KEY)
    sub = ScriptedClient(lambda messages: f"the proxy said: token {ENV_KEY}")
    shown, trace = _run(sub, "print('REPLY', llm_query('hi'))", tmp_path)
    assert "REPLY the proxy said" in shown
    _assert_clean(shown, trace)


def test_redact_masks_each_credential_shape() -> None:
    """It masks URL userinfo, Authorization and Bearer values, key=value pairs and provider key shapes, and keeps the rest."""
    text = redact("POST https://u:pw-9f8e7d@api.example.com/v1 Authorization: Bearer abc.def-ghi "
                  "api_key='k-123456789' sk-proj-AbCdEf0123456789 ghp_0123456789abcdefghij0123 max_tokens=4096")
    assert "pw-9f8e7d" not in text and "abc.def-ghi" not in text and "k-123456789" not in text
    assert "sk-proj" not in text and "ghp_" not in text
    assert "https://[REDACTED]@api.example.com/v1" in text and "max_tokens=4096" in text


def test_redact_is_linear_and_clipping_reads_a_bounded_prefix() -> None:
    """It redacts 4 MB dense with credential shapes in bounded time, and a clipped 50 MB text reads only its head."""
    dense = "http://a:b@h sk-abcdefghijklmnop Bearer xyzxyzxyz " * 80_000
    began = time.monotonic()
    out = redact(dense)
    assert time.monotonic() - began < 30 and "sk-abcdefghijklmnop" not in out
    began = time.monotonic()
    assert len(redact_clipped("x" * 50_000_000 + SPEC_KEY, 1000, "...")) == 1003
    assert time.monotonic() - began < 5


def test_a_secret_straddling_the_clip_leaves_no_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    """It removes a known secret cut by the clipping limit whole, not leaving its first characters."""
    monkeypatch.setenv("MY_SERVICE_TOKEN", ENV_KEY)
    text = "x" * 995 + ENV_KEY + "y" * 100
    assert ENV_KEY[:5] not in redact_clipped(text, 1000)


def test_a_lone_surrogate_is_kept() -> None:
    """It redacts text holding a lone surrogate (a cell can print one) without an error."""
    assert redact("a\ud800 Bearer abcdefghij") == "a\ud800 Bearer " + MASK
