"""Live contexts and access statistics against a hostile worker.

``add_context`` hands a locked-down worker new descriptors (SCM_RIGHTS, hence recvmsg in
its seccomp allow-list) and ``context_stats`` reads counters from it, both between cells.
The worker is assumed to have escaped the Python guards: under the ESCAPED policy a cell
reaches ``ctypes``, and through ``PyRun_SimpleString`` it replaces the worker's own
``attach`` and ``stats`` with code that lies, stalls, floods or dies. Whatever it does,
the host never hangs past its deadline, never crashes, never allocates what a frame claims
before checking it, replaces the worker (and says so in the next cell's result), and keeps
its own list of contexts right. And a worker can take no descriptor but the host's.
"""

from __future__ import annotations

import ast
import signal
import threading
import time
from pathlib import Path

import msgpack
import pytest
from hostile import Attacker

from rlm_runtime.errors import ContextError, SandboxError
from rlm_runtime.sandbox import CellLimits, Sandbox, cleanup, supervisor
from rlm_runtime.sandbox.frames import STAT_COUNTERS
from rlm_runtime.sandbox.pool import WorkerPool

#: Run ``SRC`` as unrestricted Python inside the worker (an escaped cell can).
ESCAPE = """\
import ctypes
ctypes.pythonapi.PyRun_SimpleString({src!r}.encode())
print('patched')
"""

#: Prelude of every patch: the worker's class, its protocol module, the raw channel.
PRELUDE = """\
import os, struct, sys, time
W = sys.modules['rlm_runtime.sandbox.worker'].Worker
ORIGINAL = W.attach
protocol = sys.modules['rlm_runtime.sandbox.protocol']
def drain(self, msg):
    n = 0
    while n < msg['fds']:
        frame, fds, _truncated = protocol.recv_fds_frame(self.sock, 8)
        for fd in fds:
            os.close(fd)
        n += frame['n']
import msgpack
def raw(self, message):
    body = msgpack.packb(message, use_bin_type=True)
    os.write(self.sock.fileno(), struct.pack('>I', len(body)) + body)
"""

#: name -> body of a replacement ``attach(self, msg)``.
ATTACH_LIES = {
    "wrong-count": "return {'op': 'attached', 'seq': msg['seq'], 'count': 99}",
    "old-seq": "return {'op': 'attached', 'seq': msg['seq'] - 1, 'count': len(self.handles) + 1}",
    "extra-field": "return {'op': 'attached', 'seq': msg['seq'], 'count': len(self.handles) + 1, 'more': 1}",
    "bool-count": "return {'op': 'attached', 'seq': msg['seq'], 'count': True}",
    "other-op": "return {'op': 'done', 'seq': msg['seq'], 'stdout': '', 'truncated': False, 'error': None, "
                "'error_type': None, 'duration_s': 0.0, 'notes': [], 'empty_greps': []}",
    "long-failure": "return {'op': 'attach_failed', 'seq': msg['seq'], 'message': 'x' * 100000}",
    "huge-frame": "os.write(self.sock.fileno(), struct.pack('>I', 60_000_000)); time.sleep(3600)",
    "silent": "time.sleep(3600)",
    "dribble": "os.write(self.sock.fileno(), b'\\x00\\x00'); time.sleep(3600)",
    "flood": "[raw(self, {'op': 'junk', 'pad': 'y' * 4000}) for _ in range(10000)]",
    "dies": "os._exit(0)",
}

#: name -> body of a replacement ``stats(self, msg)``.
STATS_LIES = {
    "one-too-many": "return {'op': 'stats', 'seq': msg['seq'], 'contexts': [ROW] * (len(self.handles) + 1)}",
    "none": "return {'op': 'stats', 'seq': msg['seq'], 'contexts': []}",
    "negative": "return {'op': 'stats', 'seq': msg['seq'], 'contexts': [dict(ROW, peeks=-1)] * len(self.handles)}",
    "too-big": "return {'op': 'stats', 'seq': msg['seq'], 'contexts': [dict(ROW, peeks=2**64 - 1)] * len(self.handles)}",
    "bool": "return {'op': 'stats', 'seq': msg['seq'], 'contexts': [dict(ROW, greps=True)] * len(self.handles)}",
    "float": "return {'op': 'stats', 'seq': msg['seq'], 'contexts': [dict(ROW, greps=1.0)] * len(self.handles)}",
    "str": "return {'op': 'stats', 'seq': msg['seq'], 'contexts': [dict(ROW, greps='1')] * len(self.handles)}",
    "extra-key": "return {'op': 'stats', 'seq': msg['seq'], 'contexts': [dict(ROW, name='x')] * len(self.handles)}",
    "missing-key": "return {'op': 'stats', 'seq': msg['seq'], 'contexts': [{'peeks': 0}] * len(self.handles)}",
    "map-not-list": "return {'op': 'stats', 'seq': msg['seq'], 'contexts': {'a': ROW}}",
    "wrong-seq": "return {'op': 'stats', 'seq': msg['seq'] + 7, 'contexts': [ROW] * len(self.handles)}",
    "padded": "return {'op': 'stats', 'seq': msg['seq'], 'contexts': [ROW] * len(self.handles), 'pad': 'z' * 200000}",
    "huge-frame": "os.write(self.sock.fileno(), struct.pack('>I', 50_000_000)); time.sleep(3600)",
    "silent": "time.sleep(3600)",
    "dies": "os._exit(0)",
}
ROW = "ROW = {" + ", ".join(f"'{name}': 0" for name in STAT_COUNTERS) + "}\n"

_OK = "{'op': 'looked_up', 'seq': msg['seq'], 'reply': {'lines': [], 'count': 0}, 'error': ''}"


def _reply(**fields: str) -> str:
    """A ``looked_up`` frame whose reply to a ``lines`` lookup holds ``fields`` (source text)."""
    shown = ", ".join(f"{k!r}: {v}" for k, v in {"lines": "[]", "count": "0", **fields}.items())
    return f"return dict({_OK}, reply={{{shown}}})"


#: name -> body of a replacement ``lookup(self, msg)``.
LOOKUP_LIES = {
    "wrong-seq": f"return dict({_OK}, seq=msg['seq'] + 1)",
    "extra-field": f"return dict({_OK}, more=1)",
    "no-reply": "return {'op': 'looked_up', 'seq': msg['seq'], 'error': ''}",
    "reply-list": f"return dict({_OK}, reply=[1, 2])",
    "reply-other-field": _reply(hop="{'start': 'a'}"),
    "reply-missing-field": f"return dict({_OK}, reply={{'lines': []}})",
    "pair-not-triple": _reply(lines="[['', 1]]"),
    "line-zero": _reply(lines="[['', 0, 'x']]"),
    "long-line": _reply(lines="[['', 1, 'x' * 100000]]"),
    "too-many-lines": _reply(lines="[['', 1, 'x']] * 51"),
    "bool-count": _reply(count="True"),
    "negative-count": _reply(count="-1"),
    "float-count": _reply(count="1.5"),
    "deep-reply": _reply(lines="[[[[[[['x']]]]]]]"),
    "many-items": _reply(lines="[0] * 30000"),
    "long-error": f"return dict({_OK}, error='e' * 5000)",
    "other-op": "return {'op': 'done', 'seq': msg['seq'], 'stdout': '', 'truncated': False, 'error': None, "
                "'error_type': None, 'duration_s': 0.0, 'notes': [], 'empty_greps': []}",
    "long-failure": "return {'op': 'attach_failed', 'seq': msg['seq'], 'message': 'x' * 100000}",
    "huge-frame": "os.write(self.sock.fileno(), struct.pack('>I', 60_000_000)); time.sleep(3600)",
    "silent": "time.sleep(3600)",
    "dribble": "os.write(self.sock.fileno(), b'\\x00\\x00'); time.sleep(3600)",
    "flood": "[raw(self, {'op': 'junk', 'pad': 'y' * 4000}) for _ in range(10000)]",
    "dies": "os._exit(0)",
}


def patch(attacker: Attacker, method: str, body: str) -> None:
    """Replace ``Worker.<method>`` in the live worker with ``def <method>(self, msg): <body>``."""
    indented = "\n".join("    " + line for line in body.splitlines())
    src = PRELUDE + ROW + f"def evil(self, msg):\n{indented}\nW.{method} = evil\n"
    result = attacker.run(ESCAPE.format(src=src))
    assert result.stdout == "patched\n", result


def worker_pid(sandbox: Sandbox) -> int:
    sandbox.start()
    assert sandbox._worker is not None
    return sandbox._worker.pid


def assert_replaced(attacker: Attacker, old_pid: int, contexts: int) -> None:
    """A new worker runs, maps every context, and the next cell says the variables were lost."""
    sandbox = attacker.sandbox
    assert sandbox._worker is not None and sandbox._worker.pid != old_pid
    result = attacker.run("print(len(contexts))")
    assert result.worker_restarted, result
    assert any("replaced before this cell" in w and "lost" in w for w in result.warnings), result
    assert result.stdout == f"{contexts}\n", result
    attacker.still_works()


@pytest.fixture(autouse=True)
def short_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Deadlines of 1.5 s instead of 10, so the silent cases stay quick."""
    monkeypatch.setattr(supervisor, "_CONTROL_TIMEOUT_S", 1.5)


# --------------------------------------------------------------------- attach


@pytest.mark.parametrize("case", list(ATTACH_LIES))
def test_lying_attach_reply_replaces_the_worker(escaped: Attacker, case: str) -> None:
    """It denies a lying, stalling, flooding or dying worker any effect on add_context: a new worker maps the context."""
    sandbox = escaped.sandbox
    sandbox.add_context("first context")
    pid = worker_pid(sandbox)
    patch(escaped, "attach", ATTACH_LIES[case])
    began = time.monotonic()
    assert sandbox.add_context("second context") == 1
    assert time.monotonic() - began < 1.5 + 3.0  # the deadline, and a kill
    assert [h.name for h in sandbox.contexts] == ["text", "text"]
    assert_replaced(escaped, pid, 2)


def test_close_during_a_stalled_attach_ends_it_at_once(escaped: Attacker, monkeypatch: pytest.MonkeyPatch) -> None:
    """It ends add_context with SandboxError as soon as another thread closes the sandbox, and context_stats with []."""
    monkeypatch.setattr(supervisor, "_CONTROL_TIMEOUT_S", 30.0)  # only the close can end it soon
    sandbox = escaped.sandbox
    worker_pid(sandbox)
    patch(escaped, "attach", ATTACH_LIES["silent"])
    timer = threading.Timer(0.3, sandbox.close)
    timer.start()
    began = time.monotonic()
    with pytest.raises(SandboxError, match="closed"):
        sandbox.add_context("never")
    timer.join()
    assert time.monotonic() - began < 5.0
    assert sandbox.context_stats() == [] and sandbox._owned == set()


def test_ctrl_c_during_an_attach_drops_the_worker_and_its_slot(escaped_policy: Path) -> None:
    """It discards the worker and gives its pool slot back when Ctrl-C lands while a worker stalls an attach."""
    p = WorkerPool(1)
    with Sandbox(escaped_policy, CellLimits(cell_timeout_s=5, kill_grace_s=0.5, memory_mb=256), pool=p) as sandbox:
        attacker = Attacker(sandbox, {"value": "no secret planted here"})
        pid = worker_pid(sandbox)
        patch(attacker, "attach", ATTACH_LIES["silent"])
        main = threading.main_thread().ident
        assert main is not None
        timer = threading.Timer(0.3, signal.pthread_kill, (main, signal.SIGINT))  # a real signal: ends the wait
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            sandbox.add_context("interrupted")
        timer.join()
        assert p.in_use == 0 and sandbox._worker is None and cleanup.wait_gone(pid, 0.01)
        assert sandbox.contexts == []
        result = sandbox.execute("print('after')")
        assert result.stdout == "after\n" and result.worker_restarted, result
        assert p.in_use == 1
    assert p.in_use == 0


def test_huge_attach_frame_is_refused_before_reading_it(escaped: Attacker, monkeypatch: pytest.MonkeyPatch) -> None:
    """It refuses an answer that claims 60 MB at once, from its header, without waiting for the deadline."""
    monkeypatch.setattr(supervisor, "_CONTROL_TIMEOUT_S", 30.0)
    sandbox = escaped.sandbox
    pid = worker_pid(sandbox)
    patch(escaped, "attach", ATTACH_LIES["huge-frame"])
    began = time.monotonic()
    sandbox.add_context("text")
    assert time.monotonic() - began < 5.0
    assert_replaced(escaped, pid, 1)


def test_attach_failed_keeps_the_worker(escaped: Attacker) -> None:
    """It raises ContextError for a well-formed attach_failed, adds nothing, and keeps the worker and its variables."""
    sandbox = escaped.sandbox
    pid = worker_pid(sandbox)
    escaped.run("keep = 'kept'")
    patch(escaped, "attach", "drain(self, msg)\nreturn {'op': 'attach_failed', 'seq': msg['seq'], 'message': 'no room'}")
    with pytest.raises(ContextError, match="no room"):
        sandbox.add_context("refused")
    assert sandbox.contexts == []
    assert sandbox._worker is not None and sandbox._worker.pid == pid
    assert escaped.run("print(keep)").stdout == "kept\n"


def test_forged_attach_reply_between_cells_is_caught(escaped: Attacker) -> None:
    """It kills a worker that left a forged 'attached' frame on the channel before add_context asked anything."""
    sandbox = escaped.sandbox
    pid = worker_pid(sandbox)
    # A forged done ends the cell for the host, so the forged 'attached' after it waits on
    # the channel. Right sequence number and count: only its timing gives it away.
    cell = sandbox._seq + 1
    done = {"op": "done", "seq": cell, "stdout": "forged\n", "truncated": False, "error": None, "error_type": None,
            "duration_s": 0.0, "notes": [], "empty_greps": []}
    attached = {"op": "attached", "seq": cell + 1, "count": 1}
    assert escaped.run(_forge_cell(msgpack.packb(done), msgpack.packb(attached))).stdout == "forged\n"
    sandbox.add_context("text")
    assert_replaced(escaped, pid, 1)


def test_extra_frame_after_a_good_attach_is_caught_by_the_next_cell(escaped: Attacker) -> None:
    """It accepts a real attach and then reports the extra frame the worker sent after it, at the next cell."""
    sandbox = escaped.sandbox
    pid = worker_pid(sandbox)
    patch(escaped, "attach", "reply = ORIGINAL(self, msg); raw(self, reply); return reply")
    sandbox.add_context("text")
    assert len(sandbox.contexts) == 1
    result = escaped.run("print('innocent')")
    assert result.error_type == "ProtocolError" and result.worker_restarted, result
    assert sandbox._worker is not None and sandbox._worker.pid != pid
    assert escaped.run("print(len(contexts))").stdout == "1\n"


def test_reply_without_reading_the_descriptors_is_caught(escaped: Attacker) -> None:
    """It accepts an early 'attached' (the worker's own loss) and catches the unread descriptor frames at the next cell."""
    sandbox = escaped.sandbox
    worker_pid(sandbox)
    patch(escaped, "attach", "return {'op': 'attached', 'seq': msg['seq'], 'count': len(self.handles) + 1}")
    sandbox.add_context("text")
    result = escaped.run("print('next')")
    assert result.error_type == "ProtocolError" and result.worker_restarted, result
    assert escaped.run("print(contexts[0][:4])").stdout == "text\n"


# ---------------------------------------------------------------------- stats


@pytest.mark.parametrize("case", list(STATS_LIES))
def test_lying_stats_reply_replaces_the_worker(escaped: Attacker, case: str) -> None:
    """It denies a lying, oversized, stalling or dying stats answer any effect: [] and a new worker."""
    sandbox = escaped.sandbox
    sandbox.add_context("one")
    sandbox.add_context("two")
    pid = worker_pid(sandbox)
    assert len(sandbox.context_stats()) == 2
    patch(escaped, "stats", STATS_LIES[case])
    began = time.monotonic()
    assert sandbox.context_stats() == []
    assert time.monotonic() - began < 1.5 + 3.0
    assert_replaced(escaped, pid, 2)
    assert [row["peeks"] for row in sandbox.context_stats()] == [0, 0]


@pytest.mark.parametrize("case", list(LOOKUP_LIES))
def test_lying_lookup_reply_replaces_the_worker(escaped: Attacker, case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """It denies a lying, oversized, stalling or dying lookup answer any effect: an error, no data, and a new worker."""
    monkeypatch.setattr(supervisor, "_LOOKUP_TIMEOUT_S", 1.5)
    sandbox = escaped.sandbox
    sandbox.add_context("a needle\nno\nneedle two\n")
    pid = worker_pid(sandbox)
    assert sandbox.lookup("count", pattern="needle")["count"] == 2
    patch(escaped, "lookup", LOOKUP_LIES[case])
    began = time.monotonic()
    got = sandbox.lookup("lines", pattern="needle")
    assert time.monotonic() - began < 1.5 + 3.0
    assert got["error"] and got["lines"] == [] and got["count"] == 0 and set(got) == {"lines", "count", "error"}
    assert_replaced(escaped, pid, 1)
    assert sandbox.lookup("lines", pattern="needle")["lines"] == [("", 1, "a needle"), ("", 3, "needle two")]


def test_a_lookup_leaves_the_namespace_and_the_counts_alone(tmp_path: Path) -> None:
    """It greps, counts and tallies for the host without touching the model's variables or access counts."""
    text = "".join(f"bin {i}: {'full' if i % 4 == 0 else 'empty'}\n" for i in range(1, 41))
    with Sandbox("default", CellLimits(cell_timeout_s=10, kill_grace_s=0.5, memory_mb=256), contexts=[text]) as sandbox:
        assert sandbox.execute("hits = grep('full')").ok
        before = sandbox.context_stats()
        assert sandbox.lookup("lines", pattern="full", max_lines=2) == {
            "lines": [("", 4, "bin 4: full"), ("", 8, "bin 8: full")], "count": 10, "error": ""}
        assert sandbox.lookup("count", pattern="FULL", ignore_case=True)["count"] == 10
        assert dict(sandbox.lookup("tally", pattern=r"bin \d+: (\w+)")["tally"]) == {"empty": 30, "full": 10}
        assert "lookahead" in sandbox.lookup("lines", pattern="(?=x)")["error"]
        assert sandbox.lookup("read", question="which bin?", text="bin 4")["hop"] is None  # no records read yet
        with pytest.raises(ValueError, match="no reader named 'shell'"):
            sandbox.lookup("shell", pattern="x")
        with pytest.raises(ValueError, match="max_lines"):
            sandbox.lookup("lines", pattern="full", max_lines=10**6)
        assert sandbox.context_stats() == before
        assert sandbox.execute("print(len(hits))").stdout == "10\n"
        assert sandbox.execute("SHOW_VARS()").stdout.startswith("hits: GrepResult")


def test_stats_frame_cap_is_small() -> None:
    """It reads at most a few hundred bytes per context from a stats answer."""
    from rlm_runtime.sandbox import frames

    assert frames.stats_reply_max(2) < 1024
    assert frames.stats_reply_max(1000) < 300_000


# ------------------------------------------------------------ descriptors


FD_CENSUS = """\
import os
def census():
    kinds = {}
    for n in range(0, 64):
        try:
            mode = os.fstat(n).st_mode
        except OSError:
            continue
        kinds[n] = {0o140000: 'sock', 0o100000: 'reg'}.get(mode & 0o170000, 'other')
    return kinds
print(sorted(census().items()))
"""


def test_attached_descriptors_are_only_the_maps(escaped: Attacker, tmp_path: Path) -> None:
    """It leaves the worker one read-only file descriptor per mapped file (the one CPython's mmap keeps), and nothing else."""
    before = escaped.run(FD_CENSUS).stdout
    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(20):
        (folder / f"d{i}.txt").write_text(f"document {i}\n")
    (tmp_path / "f.txt").write_text("a file\n")
    escaped.sandbox.add_context(tmp_path / "f.txt")
    escaped.sandbox.add_context(folder)
    escaped.sandbox.add_context("in memory")
    after = escaped.run(FD_CENSUS + "print(len(contexts), len(contexts[1]))")
    assert not after.worker_restarted, after
    census_before, census_after = ast.literal_eval(before), ast.literal_eval(after.stdout.splitlines()[0])
    assert after.stdout.splitlines()[1] == "3 20"
    new = [kind for fd, kind in census_after if (fd, kind) not in census_before]
    assert new == ["reg"] * 22, (before, after)  # the file, 20 documents, the in-memory text
    assert [k for k in census_after if k[1] == "sock"] == [k for k in census_before if k[1] == "sock"]


def test_worker_can_take_no_descriptor_but_the_hosts(escaped: Attacker) -> None:
    """It allows recvmsg on the channel only to find nothing there, and denies every way to a socket of its own."""
    sandbox = escaped.sandbox
    worker_pid(sandbox)
    if not sandbox.layers.get("seccomp", {}).get("active"):
        pytest.skip("no seccomp here")
    result = escaped.run("""\
import os, socket
def is_sock(n):
    try:
        return os.fstat(n).st_mode & 0o170000 == 0o140000
    except OSError:
        return False
chan = [n for n in range(3, 64) if is_sock(n)][0]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, fileno=os.dup(chan))
def attempt(f):
    try:
        f()
        return 'ok'
    except OSError as e:
        return {11: 'EAGAIN', 1: 'EPERM', 88: 'ENOTSOCK'}.get(e.errno, str(e.errno))
print('recvmsg', attempt(lambda: s.recvmsg(4, socket.CMSG_LEN(32), socket.MSG_DONTWAIT | socket.MSG_PEEK)))
print('socketpair', attempt(lambda: socket.socketpair()))
print('socket', attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)))
r, w = os.pipe()
p = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, fileno=r)
print('pipe', attempt(lambda: p.recvmsg(4, socket.CMSG_LEN(32), socket.MSG_DONTWAIT)))
""")
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    # recvmsg works, and finds nothing: only the host ever writes on the channel.
    assert lines == {"recvmsg": "EAGAIN", "socketpair": "EPERM", "socket": "EPERM", "pipe": "ENOTSOCK"}, result


def _forge_cell(*bodies: bytes) -> str:
    """A cell that writes frames (4-byte length, msgpack body) on its channel and ends normally."""
    import struct

    frame = b"".join(struct.pack(">I", len(body)) + body for body in bodies)
    return f"""\
import os
def is_sock(n):
    try:
        return os.fstat(n).st_mode & 0o170000 == 0o140000
    except OSError:
        return False
os.write([n for n in range(3, 64) if is_sock(n)][0], bytes.fromhex({frame.hex()!r}))
print('forged')
"""


def test_seccomp_allows_recvmsg_but_not_sendmsg_on_both_tables() -> None:
    """It allows recvmsg (descriptors in, from the host) and denies sendmsg (descriptors out) on x86_64 and aarch64."""
    from rlm_runtime.sandbox import seccomp

    for machine, number in (("x86_64", 47), ("aarch64", 212)):
        names = seccomp.allowed_names(machine)
        assert "recvmsg" in names and "sendmsg" not in names and "socketpair" not in names
        assert seccomp._TABLES[machine]["recvmsg"] == number
        assert "recvmsg" not in seccomp._ARG_RULES
