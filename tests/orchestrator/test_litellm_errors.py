"""The litellm client without the network: litellm's failures become the runtime's errors
(UnknownModel, MissingAPIKey, ModelUnavailable, LLMCallError), checked against an unused
local port and a small OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import inspect
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from _timing import SLACK_S

from rlm_runtime import RLM
from rlm_runtime.errors import LLMCallError, MissingAPIKey, ModelUnavailable, UnknownModel
from rlm_runtime.llm import make_client
from rlm_runtime.llm.litellm_client import LiteLLMClient, _lib, _quiet

from .support import fast

pytestmark = pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")  # litellm's types, on first use

UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing listens, connections are refused
HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture(scope="module", autouse=True)
def litellm_loaded() -> None:
    """Import litellm once for the module (it takes seconds)."""
    _lib()


#: Error bodies as OpenAI sends them (litellm looks at the text as well as the status).
ERRORS: dict[int, dict[str, str]] = {
    401: {"message": "Incorrect API key provided: no-key-r*****ired.", "code": "invalid_api_key"},
    404: {"message": "The model `status-404` does not exist or you do not have access to it.", "code": "model_not_found"},
    400: {"message": "Invalid 'temperature': decimal above maximum value.", "code": "decimal_above_max_value"},
}


class _FakeOpenAI(BaseHTTPRequestHandler):
    """/chat/completions of an OpenAI-compatible server; the model name picks the behaviour:
    ``status-N`` answers HTTP N, anything else answers (streamed when asked) with ``reply``."""

    reply = "Let me look.\n```python\nFINAL('from the local server')\n```\nAnd then I would ramble on."
    glued = "```python\nFINAL('glued')```\nAnd then I would ramble on."  # model "glued": the fence ends a code line

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        model = str(body.get("model", ""))
        type(self).requests.append(body)  # type: ignore[attr-defined]
        if model.startswith("status-"):
            status = int(model.removeprefix("status-"))
            self._send(status, {"error": {**ERRORS[status], "type": "invalid_request_error", "param": None}})
        elif body.get("stream"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            reply = self.glued if model == "glued" else self.reply
            for k, piece in enumerate(reply.splitlines(keepends=True)):
                chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": model,
                         "choices": [{"index": 0, "delta": {"role": "assistant", "content": piece} if k == 0 else {"content": piece},
                                      "finish_reason": None}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
        else:
            self._send(200, {"id": "c1", "object": "chat.completion", "created": 0, "model": model,
                             "choices": [{"index": 0, "message": {"role": "assistant", "content": "plain reply"}, "finish_reason": "stop"}],
                             "usage": {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13}})

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A local OpenAI-compatible server: its base URL and the request bodies it received."""
    requests: list[dict[str, Any]] = []
    handler = type("Handler", (_FakeOpenAI,), {"requests": requests})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", requests
    finally:
        httpd.shutdown()
        httpd.server_close()


# ------------------------------------------------------- before any request


def test_an_unknown_model_is_refused_with_examples() -> None:
    """It raises UnknownModel for a name no provider claims, suggesting valid names."""
    client = make_client("nonsense-model")
    with pytest.raises(UnknownModel, match="nonsense-model") as info:
        client.complete(HELLO)
    assert "openai/gpt-4o-mini" in str(info.value) and "scripted:PATH" in str(info.value)


@pytest.mark.parametrize(("name", "meant"), [("gpt4o", "gpt-4o"), ("gpt-4o-mni", "gpt-4o-mini")])
def test_an_unknown_model_names_the_nearest_known_one(name: str, meant: str) -> None:
    """It ends the UnknownModel message with the closest name litellm knows."""
    with pytest.raises(UnknownModel) as info:
        LiteLLMClient(name).check()
    assert str(info.value).startswith(f"unknown model {name!r}:") and str(info.value).endswith(f"did you mean {meant!r}?")


def test_an_unknown_model_far_from_any_has_no_suggestion() -> None:
    """It suggests nothing when no known name is close."""
    with pytest.raises(UnknownModel) as info:
        LiteLLMClient("nosuch/model").check()
    assert "did you mean" not in str(info.value)


def test_a_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """It raises MissingAPIKey naming OPENAI_API_KEY when it is not set."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(MissingAPIKey, match="OPENAI_API_KEY"):
        LiteLLMClient("openai/gpt-4o-mini").complete(HELLO)


def test_an_unreachable_server_is_model_unavailable() -> None:
    """It raises ModelUnavailable when the server refuses the connection."""
    with pytest.raises(ModelUnavailable, match="openai/x"):
        LiteLLMClient("openai/x", api_base=UNREACHABLE, retries=0, backoff_s=0.001).complete(HELLO, stop_after_code_block=True)


def test_an_unreachable_server_is_named_without_retries() -> None:
    """It says which server was unreachable, and does not retry when retries=0."""
    client = LiteLLMClient("openai/x", api_base=UNREACHABLE, retries=0, backoff_s=0.001, extra={"max_retries": 0})
    with pytest.raises(ModelUnavailable, match="unreachable at http://127.0.0.1:9"):
        client.complete(HELLO)


def test_retries_zero_fails_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    """It reports a refused connection within a second when retries=0, after one connection attempt."""
    attempts: list[object] = []
    connect = socket.create_connection

    def counted(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        attempts.append(address)
        return connect(address, *args, **kwargs)

    _lib()  # imported before the clock starts: the import alone takes seconds
    monkeypatch.setattr(socket, "create_connection", counted)  # what httpx's transport connects with
    began = time.monotonic()
    with pytest.raises(ModelUnavailable):
        LiteLLMClient("openai/x", api_base=UNREACHABLE, retries=0, backoff_s=0.001).complete(HELLO, stop_after_code_block=True)
    # One attempt proves no retry here or in the provider's SDK (whose default retries would
    # make three, with back-off); the time bound only catches a hang.
    assert attempts == [("127.0.0.1", 9)]
    assert time.monotonic() - began < 1.0 + SLACK_S


# ---------------------------------------------------------- a local server


@pytest.mark.parametrize(("status", "error"), [(401, MissingAPIKey), (404, UnknownModel), (400, LLMCallError)])
def test_http_errors_become_runtime_errors(server: tuple[str, list[dict[str, Any]]], status: int, error: type[Exception]) -> None:
    """It turns 401 into MissingAPIKey, 404 into UnknownModel and 400 into LLMCallError, keeping the cause."""
    url, _ = server
    with pytest.raises(error, match=f"openai/status-{status}") as info:
        LiteLLMClient(f"openai/status-{status}", api_base=url, retries=0, backoff_s=0.001).complete(HELLO)
    assert info.value.__cause__ is not None


def test_a_reply_carries_text_and_usage(server: tuple[str, list[dict[str, Any]]]) -> None:
    """It returns the reply's text, the server's token counts, and sends max_tokens and no real key."""
    url, requests = server
    completion = LiteLLMClient("openai/ok", api_base=url).complete(HELLO, max_tokens=50)
    assert completion.text == "plain reply"
    assert (completion.usage.calls, completion.usage.input_tokens, completion.usage.output_tokens) == (1, 11, 2)
    assert completion.model == "openai/ok"
    assert requests[-1]["max_tokens"] == 50 and requests[-1]["messages"] == HELLO


def test_streaming_stops_once_a_code_block_closes(server: tuple[str, list[dict[str, Any]]]) -> None:
    """It stops reading a streamed reply once its first code block has closed."""
    url, requests = server
    completion = LiteLLMClient("openai/ok", api_base=url).complete(HELLO, stop_after_code_block=True)
    assert completion.text == "Let me look.\n```python\nFINAL('from the local server')\n```\n"
    assert completion.finish_reason == "code_block_closed"
    assert requests[-1]["stream"] is True
    assert completion.usage.calls == 1 and completion.usage.output_tokens > 0


def test_a_stream_stopped_early_is_closed_at_once(server: tuple[str, list[dict[str, Any]]],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """It closes the provider's stream and its generator when it stops reading early.

    Left to the garbage collector, the generator closes its response inside a later request
    that holds the connection pool's lock, and the process deadlocks (seen with llama.cpp)."""
    url, _ = server
    lib = _lib()
    streams: list[Any] = []  # the provider's stream of each call (litellm's own close() drops it)
    real = lib.completion

    def recording(**kwargs: Any) -> Any:
        result = real(**kwargs)
        streams.append(result.completion_stream)
        return result

    monkeypatch.setattr(lib, "completion", recording)
    completion = LiteLLMClient("openai/ok", api_base=url).complete(HELLO, stop_after_code_block=True)
    assert completion.finish_reason == "code_block_closed"
    inner = streams[0]
    assert inspect.getgeneratorstate(inner._iterator) == inspect.GEN_CLOSED
    assert inner.response.is_closed


def test_a_run_against_a_local_server(server: tuple[str, list[dict[str, Any]]]) -> None:
    """It runs the whole loop against an OpenAI-compatible server through litellm."""
    url, _ = server
    rlm = RLM(make_client("openai/ok", api_base=url), limits=fast(), trace=False)
    result = rlm.run("q", "some text")
    assert result.answer == "from the local server"
    assert result.usage["openai/ok"]["calls"] == 1


def test_a_run_with_a_fence_glued_to_the_code(server: tuple[str, list[dict[str, Any]]]) -> None:
    """It runs a streamed block whose closing fence ends the last code line."""
    url, _ = server
    result = RLM(make_client("openai/glued", api_base=url), limits=fast(max_consecutive_errors=2), trace=False).run("q", "text")
    assert result.answer == "glued"


def test_a_run_against_an_unknown_model_reports_it() -> None:
    """It ends a run with error_type UnknownModel instead of raising."""
    result = RLM("nonsense-model", limits=fast(), trace=False).run("q", "text")
    assert result.answer is None
    assert result.error_type == "UnknownModel"


def test_concurrent_calls_leave_stdout_alone(server: tuple[str, list[dict[str, Any]]]) -> None:
    """It keeps sys.stdout as it was after calls on many threads at once (a batch), and mutes only the calling threads."""
    import io
    import sys

    url, _ = server
    client = LiteLLMClient("openai/ok", api_base=url, retries=0)
    before = sys.stdout
    seen = io.StringIO()
    sys.stdout = seen
    try:
        threads = [threading.Thread(target=client.complete, args=(HELLO,), kwargs={"stop_after_code_block": k % 2 == 0})
                   for k in range(16)]
        for t in threads:
            t.start()
        print("from the main thread")
        for t in threads:
            t.join()
        assert sys.stdout is seen, "a call left its stdout replacement behind"
    finally:
        sys.stdout = before
    assert "from the main thread" in seen.getvalue()


def test_a_model_without_a_price_prints_nothing(server: tuple[str, list[dict[str, Any]]],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """It keeps litellm's "Provider List" banner, printed by the cost lookup of a model it has
    no price for, off stdout: the lookup runs muted like the call."""
    url, _ = server
    completion = LiteLLMClient("openai/ok", api_base=url, retries=0).complete(HELLO)
    assert completion.text == "plain reply" and completion.usage.cost_usd == 0.0
    assert capsys.readouterr().out == ""


def test_the_stdout_a_call_installs_outlives_the_call() -> None:
    """It never frees the object that stood in for stdout during a call. ``print()`` holds only
    a borrowed reference to ``sys.stdout`` while it writes; a thread printing as the last call
    ended wrote through a freed object (a segmentation fault on CPython 3.11)."""
    import gc
    import sys
    import weakref

    before = sys.stdout
    with _quiet():
        proxy = weakref.ref(sys.stdout)  # what a print() in another thread holds: no reference
        assert sys.stdout is not before
    assert sys.stdout is before
    gc.collect()
    assert proxy() is not None
    with _quiet():
        assert sys.stdout is proxy(), "each call must reuse the one proxy"


PRINTING_AS_CALLS_END = """
import io, sys, threading, time
from rlm_runtime.llm.litellm_client import _quiet
sys.stdout = io.StringIO()
stop = time.monotonic() + 2.0
def call():
    while time.monotonic() < stop:
        with _quiet():
            pass
def show():
    while time.monotonic() < stop:
        print("a", "banner", "line")
threads = [threading.Thread(target=f) for f in (call, call, show, show)]
for t in threads:
    t.start()
for t in threads:
    t.join()
sys.__stdout__.write("survived")
"""


def test_threads_printing_while_calls_start_and_end_do_not_crash() -> None:
    """It survives threads that print (litellm's logging threads do) while calls on other
    threads install and remove the muting proxy, two seconds of it (this crashed the process
    within seconds, and the CI run with it)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", PRINTING_AS_CALLS_END], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == "survived" and "Exception in thread" not in done.stderr, done.stderr[-2000:]
