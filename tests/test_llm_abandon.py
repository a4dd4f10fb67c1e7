"""A model call still waiting for its first token stops when its run is cancelled.

A server that accepts the request and never answers stands for a local model prefilling a
long prompt (no token yet, so a stream has nothing to stop at) or a hung provider."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from rlm_runtime.errors import Cancelled
from rlm_runtime.eval.methods import Cancel, Job, MethodSettings, _one_call
from rlm_runtime.llm.base import abandonable, stoppable, wait_abandoned
from rlm_runtime.llm.litellm_client import LiteLLMClient
from tests._timing import SLACK_S


@pytest.fixture
def silent_server() -> Iterator[str]:
    """An HTTP address on loopback that reads requests and never replies; stopped after."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        listener.close()
        # The abandoned calls see the connection close and end (as at exit, after a local
        # server is stopped); none may be left to wake during interpreter shutdown.
        assert wait_abandoned(10)


def _cancel_after(event: threading.Event, delay: float) -> None:
    threading.Timer(delay, event.set).start()


def test_a_call_before_its_first_token_is_abandoned_on_cancel(silent_server: str) -> None:
    """It returns an empty, cancelled completion soon after the stop event, counting what was sent."""
    client = LiteLLMClient("openai/silent", api_base=silent_server, timeout_s=60, retries=0)
    for streamed in (False, True):
        event = threading.Event()
        _cancel_after(event, 0.3)
        began = time.monotonic()
        with stoppable(event):
            out = client.complete([{"role": "user", "content": "a long prompt " * 50}], max_tokens=5,
                                  stop_after_code_block=streamed)
        assert time.monotonic() - began < 0.3 + SLACK_S
        assert out.finish_reason == "cancelled" and out.text == ""
        assert out.usage.calls == 1 and out.usage.input_tokens > 50 and out.usage.output_tokens == 0


def test_abandonable_runs_inline_without_a_stop_event_and_passes_errors_on() -> None:
    """It calls in this thread outside ``stoppable``; inside, it returns the value or raises the error."""
    me = threading.get_ident()
    assert abandonable(threading.get_ident, lambda: -1) == me
    with stoppable(threading.Event()):
        assert abandonable(threading.get_ident, lambda: -1) != me
        with pytest.raises(KeyError):
            abandonable(lambda: {}["missing"], lambda: -1)
    done = threading.Event()
    done.set()
    with stoppable(done):  # already cancelled: the call is not even started
        assert abandonable(lambda: pytest.fail("called"), lambda: -1) == -1


def test_a_direct_eval_job_cancelled_mid_call_raises_cancelled(silent_server: str, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """It gives the runner Cancelled (a job it does not record) instead of waiting for the server."""
    from rlm_runtime import llm
    from rlm_runtime.budget import RunLimits
    from rlm_runtime.config import paths_from_env

    monkeypatch.setattr(llm, "make_client", lambda name, **kw: LiteLLMClient("openai/silent", api_base=silent_server,
                                                                              timeout_s=60, retries=0))
    cancel = Cancel()
    job = Job("t", "q?", ["text"], None, None, None, cancel)
    settings = MethodSettings("openai/silent", None, RunLimits(), None, "default", 8192, 8, tmp_path,
                              paths_from_env())
    threading.Timer(0.3, cancel.cancel).start()
    began = time.monotonic()
    with pytest.raises(Cancelled):
        _one_call(job, settings, "a prompt")
    assert time.monotonic() - began < 0.3 + SLACK_S
