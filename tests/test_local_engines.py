"""The engines behind ``local:`` models: which one is chosen, how it is started and stopped,
and the client's guarantees (API key, parallel calls, one restart), checked against a stand-in
``llama-server`` binary, so no model is needed."""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from _timing import SLACK_S

import rlm_runtime.llm.engines as engines
import rlm_runtime.llm.local as local
from rlm_runtime.budget import Governor
from rlm_runtime.config import local_engine_choice
from rlm_runtime.errors import ConfigError
from rlm_runtime.llm.engines import Engine, ServerSettings, find_engine
from rlm_runtime.llm.models import spec

FAKE = Path(__file__).with_name("fake_llama_server.py")
MODEL = "qwen2.5-coder-0.5b"
GB = 1 << 30


@pytest.fixture
def fake_binary(tmp_path: Path) -> Path:
    """An executable named llama-server that runs the stand-in server."""
    path = tmp_path / "bin" / "llama-server"
    path.parent.mkdir()
    path.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE} \"$@\"\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def fake_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A models folder holding a placeholder file for MODEL (its check is stubbed out)."""
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / spec(MODEL).filename).write_bytes(b"GGUF")
    checked: list[str] = []
    monkeypatch.setattr(local, "verify", lambda name, models_dir: checked.append(name) or models_dir / spec(name).filename)
    monkeypatch.setattr(local, "_servers", {})
    return folder


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _ends(pid: int, within_s: float = 5.0) -> bool:
    """Whether ``pid`` is gone within a few seconds (a signalled process dies asynchronously)."""
    deadline = time.monotonic() + within_s
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _gone(pid)


# ------------------------------------------------------------------ choosing an engine


def test_the_default_engine_is_xllamacpp() -> None:
    """It serves local models with xllamacpp when RLM_LOCAL_ENGINE is unset."""
    assert local_engine_choice({}) is None
    if engines.importlib.util.find_spec("xllamacpp") is None:
        pytest.skip("xllamacpp is not installed")
    assert find_engine(None).kind == "xllamacpp"
    assert "xllamacpp" in find_engine(None).describe()


def test_the_engine_never_loads_into_the_host() -> None:
    """It finds and describes the engine without importing it: native code stays out of the host, which forks workers."""
    import subprocess

    code = ("import sys; from rlm_runtime.llm.engines import find_engine; from rlm_runtime.llm import local; "
            "find_engine(None).describe(); print('xllamacpp' in sys.modules)")
    if engines.importlib.util.find_spec("xllamacpp") is None:
        pytest.skip("xllamacpp is not installed")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_a_missing_engine_says_what_to_install(monkeypatch: pytest.MonkeyPatch, fake_binary: Path) -> None:
    """It names the extra to install, and points at a llama-server found on PATH."""
    monkeypatch.setattr(engines.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setenv("PATH", str(fake_binary.parent))
    with pytest.raises(ConfigError, match=r"pip install 'rlm_runtime\[local\]'.*RLM_LOCAL_ENGINE=llama-server"):
        find_engine(None)


def test_llama_server_is_found_on_path_or_by_path(monkeypatch: pytest.MonkeyPatch, fake_binary: Path) -> None:
    """It uses a llama-server binary when asked for by name (on PATH) or by path."""
    monkeypatch.setenv("PATH", str(fake_binary.parent))
    assert local_engine_choice({"RLM_LOCAL_ENGINE": " llama-server "}) == "llama-server"
    assert find_engine("llama-server") == Engine("llama-server", binary=str(fake_binary))
    assert find_engine(str(fake_binary)).binary == str(fake_binary.resolve())
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ConfigError, match="no llama-server is on PATH"):
        find_engine("llama-server")


@pytest.mark.parametrize("choice", ["/no/such/llama-server", "vllm"])
def test_an_unusable_engine_choice_is_a_clear_error(choice: str) -> None:
    """It refuses a path with no executable and a name it does not know, saying what works."""
    with pytest.raises(ConfigError, match="RLM_LOCAL_ENGINE"):
        find_engine(choice)


def test_the_api_key_is_never_on_a_command_line() -> None:
    """It keeps the API key off the server's command line (every local user can read it)."""
    settings = ServerSettings(n_threads=2, n_ctx=8192, slots=3, cache_mb=512)
    model = Path("/models/m.gguf")
    for engine in (Engine("xllamacpp"), Engine("llama-server", binary="/usr/bin/llama-server")):
        cmd = engine.command(parent_pid=1, model=model, alias="m", port=1234, settings=settings)
        assert not any("key" in part.lower() for part in cmd)
    binary = Engine("llama-server", binary="/usr/bin/llama-server").command(
        parent_pid=1, model=model, alias="m", port=1234, settings=settings)
    assert binary[binary.index("--parallel") + 1] == "3" and "--kv-unified" in binary and "--no-slots" in binary
    options = json.loads(Engine("xllamacpp").command(parent_pid=1, model=model, alias="m", port=1234, settings=settings)[-1])
    assert options["n_parallel"] == 3 and options["n_ctx"] == 8192 and options["cache_ram_mib"] == 512
    # Both read the prompt in steps of PREFILL_BATCH tokens, reporting their progress after each.
    assert options["n_batch"] == engines.PREFILL_BATCH == int(binary[binary.index("--batch-size") + 1])


def test_model_list_names_the_engine(fake_binary: Path, _rlm_home: Path) -> None:
    """It says in `rlm model list` which engine serves the models, with its version."""
    import subprocess

    env = {**os.environ, "RLM_LOCAL_ENGINE": str(fake_binary)}
    proc = subprocess.run([sys.executable, "-m", "rlm_runtime.cli", "model", "list"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert f"served by: llama-server at {fake_binary.resolve()} (version: 0 (fake); chosen by RLM_LOCAL_ENGINE)" in proc.stdout
    env["RLM_LOCAL_ENGINE"] = "vllm"
    proc = subprocess.run([sys.executable, "-m", "rlm_runtime.cli", "model", "list"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0 and "served by: no engine: RLM_LOCAL_ENGINE='vllm' is not an engine" in proc.stdout


# ------------------------------------------------------------------ sizing the server


def test_slots_are_capped_by_cpus_and_memory() -> None:
    """It gives a roomy machine several slots, a 1-CPU one fewer, and a machine short of memory one."""
    kv = spec("qwen2.5-coder-1.5b").kv_bytes_per_token
    args = {"model_bytes": spec("qwen2.5-coder-1.5b").size, "kv_bytes_per_token": kv, "root_tokens": 8192, "slot_tokens": 4096}
    roomy = Governor(available_bytes=16 * GB, cpu_count=8).local_model_slots(**args)
    one_cpu = Governor(available_bytes=16 * GB, cpu_count=1).local_model_slots(**args)
    short = Governor(available_bytes=2 * GB, cpu_count=8).local_model_slots(**args)
    assert roomy > one_cpu >= 1 and short == 1
    assert roomy <= Governor(available_bytes=16 * GB, cpu_count=8).ceiling


def test_each_slot_adds_to_the_kv_pool() -> None:
    """It sizes the shared KV pool as the root's window plus a share for every further slot."""
    one = local.server_settings(16 * GB, 2, spec(MODEL), slots=1)
    four = local.server_settings(16 * GB, 2, spec(MODEL), slots=4)
    assert one.n_ctx == spec(MODEL).context_window
    assert four.n_ctx == one.n_ctx + 3 * local.SLOT_TOKENS and four.slots == 4
    small = local.server_settings(3 * GB, 2, spec(MODEL))
    assert small.n_ctx >= 8192 and small.cache_mb == 512 and small.n_threads == 2


# ------------------------------------------------------- a llama-server binary, end to end


def test_a_llama_server_binary_serves_with_a_key(fake_binary: Path, fake_model: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch, _rlm_home: Path) -> None:
    """It starts the binary on a loopback port with a fresh key (not on its command line), and answers through it."""
    record = tmp_path / "record.json"
    monkeypatch.setenv("FAKE_LLAMA_RECORD", str(record))
    client = local.LocalModelClient(MODEL, models_dir=fake_model, engine=Engine("llama-server", binary=str(fake_binary)),
                                    slots=2)
    try:
        reply = client.complete([{"role": "user", "content": "ping"}], max_tokens=8)
        assert reply.text.startswith(f"pong {MODEL}") and reply.model == f"local:{MODEL}"
        seen = json.loads(record.read_text())
        assert seen["has_key"] and not any("key" in a.lower() for a in seen["argv"])
        server = local._servers[MODEL]
        assert server.log_path.parent == _rlm_home / "logs"
        stranger = local.urllib.request.Request(f"{server.api_base}/models")
        with pytest.raises(local.urllib.error.HTTPError, match="401"):
            local.urllib.request.urlopen(stranger, timeout=5)
    finally:
        local.stop_all()
    assert _ends(seen["pid"]), "stopping the server must end the binary, not only its launcher"


def test_calls_run_in_parallel_up_to_the_slots(fake_binary: Path, fake_model: Path) -> None:
    """It sends concurrent calls at once (no client-side lock), and says how many the server serves."""
    client = local.LocalModelClient(MODEL, models_dir=fake_model, engine=Engine("llama-server", binary=str(fake_binary)),
                                    slots=4)
    assert client.parallel == 4
    replies: list[str] = []
    try:
        client.complete([{"role": "user", "content": "warm up"}], max_tokens=8)
        threads = [threading.Thread(target=lambda: replies.append(
            client.complete([{"role": "user", "content": "slow"}], max_tokens=8).text)) for _ in range(4)]
        began = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - began
    finally:
        local.stop_all()
    assert len(replies) == 4
    # The server saw two or more of them in flight at once: no client-side lock. (That, not
    # the time, is the proof: a loaded machine may start the threads late.)
    assert max(int(r.split()[2]) for r in replies) >= 2, replies
    assert elapsed < 3.5 + SLACK_S, "four 1-second calls must overlap"


def test_a_conversation_keeps_its_slot(fake_binary: Path, fake_model: Path) -> None:
    """It pins every turn of one conversation to one slot (its prefix stays there), leaves plain
    calls to any slot, and asks for greedy sampling with a repeat penalty."""
    client = local.LocalModelClient(MODEL, models_dir=fake_model, engine=Engine("llama-server", binary=str(fake_binary)),
                                    slots=4)
    opening = [{"role": "system", "content": "You write code."}, {"role": "user", "content": "Find the needle."}]
    try:
        turns = [json.loads(client.complete(opening + [{"role": "assistant", "content": "x"}] * k,
                                            stop_after_code_block=True).text.split(" ", 3)[3]) for k in range(3)]
        plain = json.loads(client.complete([{"role": "user", "content": "Summarise."}]).text.split(" ", 3)[3])
    finally:
        local.stop_all()
    assert turns[0]["id_slot"] in range(4) and all(t["id_slot"] == turns[0]["id_slot"] for t in turns)
    assert plain["id_slot"] is None
    assert [t["stops"] for t in turns] == [1, 1, 1] and plain["stops"] == 0
    assert plain["temperature"] == 0.0 and plain["repeat_penalty"] == 1.1


def test_the_server_ends_a_turn_where_its_block_closes(fake_binary: Path, fake_model: Path) -> None:
    """A loop turn asks the server to stop at its block's closing fence (so what the slot keeps
    does not depend on when the client stopped reading) and gets the block back closed; a
    plain call asks for no stop and gets the whole text."""
    client = local.LocalModelClient(MODEL, models_dir=fake_model, engine=Engine("llama-server", binary=str(fake_binary)),
                                    slots=2)
    opening = [{"role": "system", "content": "You write code."}, {"role": "user", "content": "Count the block."}]
    try:
        turn = client.complete(opening, stop_after_code_block=True)
        alone = client.complete(opening[1:], stop_after_code_block=True)
        plain = client.complete(opening)
    finally:
        local.stop_all()
    assert turn.text == alone.text == "Counting.\n```python\nprint(len(text))\n```"
    assert turn.finish_reason == "code_block_closed"
    assert plain.text.endswith("```\nOutput: 12 (invented)\n") and plain.finish_reason == "stop"


def test_only_a_reply_that_ends_inside_a_block_stopped_by_the_server_gets_its_fence() -> None:
    from rlm_runtime.llm.base import Completion, Usage

    for text in ("FINAL(3)", "```python\nprint(1)\n```", "Counting.\n```python\nprint(1)"):
        reply = local._closed(Completion(text, "m", Usage(1, 1, 1, 0.0), "stop", 0.0))
        assert reply.text == (text + "\n```" if text.count("```") == 1 else text)
    cut = local._closed(Completion("```python\nx = 1", "m", Usage(1, 1, 1, 0.0), "length", 0.0))
    assert cut.text == "```python\nx = 1" and cut.finish_reason == "length"


def test_a_turn_reports_the_servers_prefill_before_its_text(fake_binary: Path, fake_model: Path) -> None:
    """It asks llama.cpp's server for its prefill progress on a streamed turn and hands the reports,
    which litellm drops, to the listener before the first text; a plain call asks for none."""
    from fake_llama_server import PROGRESS

    from rlm_runtime.llm.base import Prefill, listening

    client = local.LocalModelClient(MODEL, models_dir=fake_model, engine=Engine("llama-server", binary=str(fake_binary)))
    heard: list[object] = []
    try:
        with listening(heard.append, heard.append):
            reply = client.complete([{"role": "user", "content": "Find the needle."}], stop_after_code_block=True)
            plain = client.complete([{"role": "user", "content": "Summarise."}])
    finally:
        local.stop_all()
    reports = [h for h in heard if isinstance(h, Prefill)]
    # The fake sends its four reports at once: the first and the last pass, those between are thinned out.
    assert [r.processed for r in reports] == [0, PROGRESS[-1]["processed"]] and reports[0].total == PROGRESS[0]["total"]
    assert heard.index(reports[-1]) < heard.index(reply.text) and reports[-1].rate == 1200 / 24
    assert reply.text.startswith("pong") and plain.text.startswith("pong") and len(heard) == len(reports) + 2


def test_a_crashed_server_is_restarted_once(fake_binary: Path, fake_model: Path) -> None:
    """It restarts a server that died under a call, once, on a new port with a new key; the next call works."""
    client = local.LocalModelClient(MODEL, models_dir=fake_model, engine=Engine("llama-server", binary=str(fake_binary)),
                                    slots=1)
    try:
        client.complete([{"role": "user", "content": "ping"}], max_tokens=8)
        server = local._servers[MODEL]
        first_key, starts = server.api_key, server.starts
        with pytest.raises(local.ModelUnavailable):
            client.complete([{"role": "user", "content": "crash"}], max_tokens=8)  # kills the restarted one too
        assert server.starts == starts + 1 and server.api_key != first_key
        assert client.complete([{"role": "user", "content": "ping"}], max_tokens=8).text.startswith("pong")
    finally:
        local.stop_all()


def test_a_failing_engine_reports_the_log_tail(tmp_path: Path, fake_model: Path) -> None:
    """It says the server exited while starting, with the end of its log."""
    broken = tmp_path / "llama-server"
    broken.write_text("#!/bin/sh\necho 'error: unknown argument: --kv-unified' >&2\nexit 1\n")
    broken.chmod(0o755)
    client = local.LocalModelClient(MODEL, models_dir=fake_model, engine=Engine("llama-server", binary=str(broken)))
    try:
        with pytest.raises(local.ModelUnavailable, match="exited while starting.*unknown argument: --kv-unified"):
            client.complete([{"role": "user", "content": "ping"}], max_tokens=8)
    finally:
        local.stop_all()


def test_the_model_is_verified_on_every_start(fake_binary: Path, fake_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It checks the model file before each start, restarts included."""
    checked: list[str] = []
    monkeypatch.setattr(local, "verify", lambda name, models_dir: checked.append(name))
    client = local.LocalModelClient(MODEL, models_dir=fake_model, engine=Engine("llama-server", binary=str(fake_binary)))
    try:
        client.complete([{"role": "user", "content": "ping"}], max_tokens=8)
        local._servers[MODEL].start()
    finally:
        local.stop_all()
    assert checked == [MODEL, MODEL]


def test_no_server_outlives_the_test_process() -> None:
    """It leaves no stand-in server running after the tests above."""
    mine = []
    for p in psutil.Process(os.getpid()).children(recursive=True):
        try:
            if "fake_llama_server" in " ".join(p.cmdline()) and p.status() != psutil.STATUS_ZOMBIE:
                mine.append(p)
        except psutil.Error:
            pass  # gone, or a zombie: not running
    assert mine == []


#: A parent that starts the launcher around a llama-server binary, then waits to be killed.
PARENT = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, sys.argv[1], str(os.getpid()), "exec", sys.argv[2], "--port", sys.argv[3]],
                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
child.stdin.write(b"k\\n"); child.stdin.close()
print(child.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.slow
def test_a_binary_ends_when_the_parent_is_killed(fake_binary: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It ends a llama-server binary (not only its launcher) within a few seconds of a SIGKILL of the parent."""
    import signal
    import subprocess

    record = tmp_path / "record.json"
    monkeypatch.setenv("FAKE_LLAMA_RECORD", str(record))
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(engines.LAUNCHER), str(fake_binary), str(local._free_port())],
                              stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    launcher = int(parent.stdout.readline())
    deadline = time.monotonic() + 10
    while not record.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.3)
    binary = json.loads(record.read_text())["pid"]
    try:
        assert not _gone(binary)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 10
        while not (_gone(binary) and _gone(launcher)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _gone(binary) and _gone(launcher)
    finally:
        for pid in (binary, launcher):
            if not _gone(pid):
                os.kill(pid, signal.SIGKILL)
