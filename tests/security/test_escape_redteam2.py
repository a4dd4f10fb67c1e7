"""Second red-team round: the rebuilt layers attacked with payloads not in the other files.

The first tests replay the holes this round found, now fixed:

* the enum functional API (``Enum`` was reachable as ``re.RegexFlag.mro()``; ``mro`` is now
  refused) built a class from (name, value) pairs, dunder names included;
* with that, ``__reduce_ex__`` on an enum member plus ``collections.UserDict.copy`` called
  unbound ran ``copy._reconstruct``, whose real ``setattr`` wrote to a module view or the
  context handle's class for every later cell;
* ``AttributeError.obj`` raised inside library code handed out the worker's functions;
* a worker that wrote a frame header and then dribbled the body kept the host in
  ``protocol.recv`` far beyond timeout + grace (now one deadline per frame);
* RLIMIT_FSIZE caps each file, not the total: the temp dir is now a tmpfs of ``scratch_mb``.

The rest are payloads refused from the start, kept as regression tests: each plants or
names the secret, must not leak it, and the sandbox must still work afterwards.
"""

from __future__ import annotations

import errno
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _timing import SLACK_S
from hostile import Attacker

from rlm_runtime.sandbox import CellLimits, Sandbox

CONTEXT_TEXT = "the only text this worker may read\n"
HOST_PID = os.getpid()
LINUX_X86_64 = sys.platform.startswith("linux") and os.uname().machine == "x86_64"

# The Enum base class, reached without any underscore: re.RegexFlag's MRO holds it.
ENUM = "import re\nEnum = [c for c in re.RegexFlag.mro() if repr(c) == \"<enum 'Enum'>\"][0]\n"


@pytest.fixture
def with_context(secret: dict[str, str]) -> Iterator[Attacker]:
    with Sandbox("default", CellLimits(cell_timeout_s=5, kill_grace_s=0.5, memory_mb=256), contexts=[CONTEXT_TEXT]) as sb:
        yield Attacker(sb, secret)


# --------------------------------------------------------------------------- holes (fail today)


def test_enum_functional_api_cannot_define_dunder_methods(attacker: Attacker) -> None:
    """It denies dunder methods (here __repr__) on a class built by Enum('E', [(name, value), ...])."""
    code = ENUM + "E = Enum('E', [('A', 1), ('__repr__', lambda self: 'dunder defined by user code')])\nprint(repr(E.A))"
    r = attacker.run(code)
    assert "dunder defined by user code" not in r.stdout, r
    attacker.still_works()


def test_enum_reduce_ex_cannot_setattr_on_a_module_view(attacker: Attacker) -> None:
    """It denies copy's real setattr (an enum member's __reduce_ex__ + UserDict.copy unbound) rewriting json.loads for later cells."""
    code = (
        ENUM + "import collections, json\n"
        "D = Enum('D', [('A', 1), ('__copy__', None),\n"
        "               ('__reduce_ex__', lambda self, proto: (lambda: json, (), (None, {'loads': 'pwned'})))])\n"
        "member = D.A\n"
        "member.data = {}\n"
        "try:\n"
        "    collections.UserDict.copy(member)\n"
        "except Exception:\n"
        "    pass\n"
    )
    attacker.run(code)
    r = attacker.run("import json\nprint(json.loads('[1]'))")
    assert r.error is None and r.stdout == "[1]\n", r


def test_enum_reduce_ex_cannot_rewrite_the_context_class(with_context: Attacker) -> None:
    """It denies the same gadget replacing the context handle class's peek(): later cells read attacker text."""
    code = (
        ENUM + "import collections\n"
        "fake = {'peek': lambda self, n=2000: 'attacker text'}\n"
        "D = Enum('D', [('A', 1), ('__copy__', None),\n"
        "               ('__reduce_ex__', lambda self, proto: (lambda: type(context), (), (None, fake)))])\n"
        "member = D.A\n"
        "member.data = {}\n"
        "try:\n"
        "    collections.UserDict.copy(member)\n"
        "except Exception:\n"
        "    pass\n"
    )
    with_context.run(code)
    r = with_context.run("print(peek(100))")
    assert "attacker text" not in r.stdout and "the only text" in r.stdout, r


def test_library_attributeerror_does_not_hand_out_the_worker_function(attacker: Attacker) -> None:
    """It denies AttributeError.obj from a library lookup on FINAL (SequenceMatcher.set_seq1 unbound): Worker._final."""
    code = (
        "import difflib\n"
        "got = []\n"
        "for target in (FINAL, FINAL_VAR, SHOW_VARS):\n"
        "    try:\n"
        "        difflib.SequenceMatcher.set_seq1(target, 'x')\n"
        "    except AttributeError as e:\n"
        "        got.append(e.obj)\n"
        "print(got)"
    )
    r = attacker.run(code)
    assert "function Worker." not in r.stdout, r
    attacker.still_works()


# A worker past the Python guards finds its channel (the only socket) and writes a frame
# header announcing 64 bytes, then one byte every 0.7 s: each recv() of the host waits for one
# byte with the whole cell's timeout, so the host never reaches its hard deadline check. The
# 40 bytes last 28 s, well past the test's bound (timeout + grace + SLACK_S): a host that
# waits for the whole frame fails the test however much slack it gets.
DRIBBLE = """\
import ctypes, os, signal
signal.signal(signal.SIGALRM, signal.SIG_IGN)
libc = ctypes.CDLL(None)
chan = None
for fd in range(3, 64):
    try:
        if os.fstat(fd).st_mode & 0o170000 == 0o140000:
            chan = fd
            break
    except OSError:
        pass
os.write(chan, b'\\x00\\x00\\x00\\x40')
for i in range(40):
    libc.usleep(700000)
    os.write(chan, b'\\x90')
"""


def test_dribbled_frame_cannot_hold_the_host_past_its_deadline(escaped_policy: Path, secret: dict[str, str]) -> None:
    """It denies a worker that dribbles one frame byte by byte holding execute() beyond timeout + grace."""
    with Sandbox(escaped_policy, CellLimits(cell_timeout_s=1, kill_grace_s=0.5, memory_mb=256)) as sb:
        attacker = Attacker(sb, secret)
        began = time.monotonic()
        r = attacker.run(DRIBBLE)
        took = time.monotonic() - began
        assert r.error_type in ("TimeoutError", "ProtocolError"), r
        assert took < 1 + 0.5 + SLACK_S, f"execute() returned after {took:.1f}s, the limit is 1.5s"
        attacker.still_works()


def test_many_files_cannot_fill_the_disk(escaped_policy: Path, secret: dict[str, str]) -> None:
    """It denies a worker more disk than scratch_mb, however many files it writes (RLIMIT_FSIZE is per file)."""
    limits = CellLimits(cell_timeout_s=10, kill_grace_s=0.5, memory_mb=256, file_size_mb=1, scratch_mb=4)
    with Sandbox(escaped_policy, limits) as sb:
        attacker = Attacker(sb, secret)
        code = (
            "import os\n"
            "total = 0\n"
            "for i in range(32):\n"
            "    try:\n"
            "        fd = os.open('fill%d' % i, os.O_WRONLY | os.O_CREAT, 0o600)\n"
            "        total += os.write(fd, b'x' * (1 << 20))\n"
            "        os.close(fd)\n"
            "    except OSError:\n"
            "        break\n"
            "print(total >> 20)"
        )
        r = attacker.run(code)
        written = int(r.stdout.strip() or 0)
        assert written <= 4, f"the worker wrote {written} MiB to disk with scratch_mb=4"
        files = attacker.run(
            "import os\nn = 0\nfor i in range(20000):\n    try:\n        os.close(os.open('e%d' % i, os.O_WRONLY | os.O_CREAT, 0o600))\n"
            "        n += 1\n    except OSError:\n        break\nprint(n)")
        assert int(files.stdout.strip() or 0) <= 4 * 64, files
        assert sb.layers["scratch_quota"]["active"], sb.layers
        attacker.still_works()


# ------------------------------------------------------------------- refused today (regressions)

REFUSED = ("SandboxPermissionError", "PolicyViolation", "TypeError", "AttributeError", "NotImplementedError", "ValueError")


@pytest.mark.parametrize(
    "code",
    [
        # The enum metaclass, reached as type(Enum): three arguments are refused like type's.
        ENUM + "M = type(Enum)\nX = M('X', (), {'__module__': 'anything'})\nprint(X)",
        # singledispatch keyed on the enum metaclass would hand it out from its registry.
        ENUM + "import functools\nd = functools.singledispatch(repr)\nd.register(type(Enum), repr)\nprint(list(d.registry))",
        # An enum whose mixin is the type stand-in: a metaclass made by the functional API.
        ENUM + "M = Enum('M', 'A', type=type)\nprint(M.mro())",
        # A str-mixin enum member is still a str: its format walks attributes.
        ENUM + "S = Enum('S', [('A', '{0.__func__.__globals__}')], type=str)\nprint(S.A.format(FINAL))",
        ENUM + "S = Enum('S', [('A', '{x.__self__}')], type=str)\nprint(S.A.format_map({'x': FINAL}))",
        # Enum internals (members map, reduce helper) are underscore names.
        ENUM + "print(getattr(Enum, '_member_map_'), getattr(Enum, '_missing_'))",
        # UserDict.copy unbound on a module view (no enum dunder): no 'data', nothing written.
        "import collections, json\ncollections.UserDict.copy(json)\nprint(json.loads)",
        # SequenceMatcher's setters called unbound on a module view: they read before they write.
        "import difflib, json\ndifflib.SequenceMatcher.set_seqs(json, 'a', 'b')\nprint(json.a)",
        "import random, json\nrandom.Random.seed(json, 1)\nprint(json.gauss_next)",
        # total_ordering on a library class: it would add comparison methods to it.
        "import functools, json\nfunctools.total_ordering(json.JSONDecoder)\nprint(json.JSONDecoder.mro())",
        # The guarded getattr's own AttributeError carries no target (e.obj), even in a lambda.
        "import functools\ntry:\n    functools.reduce(lambda a, b: a.nothing, [FINAL, 1])\nexcept AttributeError as e:\n"
        "    print(getattr(getattr(e.obj, 'nothing_either'), 'x'))",
        # type(type) from the stand-in, then its three-argument call.
        "T = type(type)\nprint(T('X', (object,), {'__init_subclass__': print}))",
    ],
    ids=["enum-metaclass-3-args", "singledispatch-enum-metaclass", "enum-type-mixin", "str-enum-format",
         "str-enum-format-map", "enum-internals", "userdict-copy-module", "sequencematcher-module",
         "random-seed-module", "total-ordering-library-class", "attributeerror-obj-guarded", "type-of-type"],
)
def test_python_layer_payload_is_refused(attacker: Attacker, code: str) -> None:
    """It denies enum, copy and unbound-method routes to metaclasses, formatters and library writes."""
    r = attacker.refused(code, *REFUSED)
    assert "__rlm__" not in r.stdout and "globals" not in r.stdout.lower()
    r = attacker.run("import json, difflib\nprint(json.loads('[1]'), hasattr(json, 'a'), hasattr(json, 'gauss_next'))")
    assert r.stdout == "[1] False False\n", r


def test_enum_str_of_a_reserved_name_does_not_rebind_it(attacker: Attacker) -> None:
    """It denies an enum member named FINAL standing in for the runtime's FINAL in a later cell."""
    attacker.run(ENUM + "FINAL = Enum('FINAL', 'A').A")
    r = attacker.run("FINAL('the honest answer')")
    assert r.has_final and r.final == "the honest answer", r


# --- already escaped: syscalls the OS layers refuse with EPERM (x86_64 numbers)

SYSCALLS = {
    "prlimit64-pid-in-high-bits": "call(302, (1 << 32) | HOST, 0, 0, 0)",
    "prlimit64-self-in-high-bits": "call(302, (1 << 32) | os.getpid(), 0, 0, 0)",
    "kill-minus-one": "call(62, -1, 0)",
    "kill-own-group": "call(62, -os.getpid(), 0)",
    "tgkill-self-tgid-host-tid": "call(234, os.getpid(), HOST, 0)",
    "rt_tgsigqueueinfo-host-tid": "call(297, os.getpid(), HOST, 10, 0)",
    "io_uring_setup": "call(425, 8, 0)",
    "memfd_create": "call(319, 0, 0)",
    "userfaultfd": "call(323, 0)",
    "perf_event_open-host": "call(298, 0, HOST, -1, -1, 0)",
    "bpf": "call(321, 0, 0, 0)",
    "keyctl": "call(250, 0, 0)",
    "shmget": "call(29, 0, 4096, 0o1666)",
    "msgget": "call(68, 0, 0o1666)",
    "semget": "call(64, 0, 1, 0o1666)",
    "clone3": "call(435, 0, 0)",
    "sched_setattr-host": "call(314, HOST, 0, 0)",
    "set_mempolicy": "call(238, 0, 0, 0)",
    "mbind": "call(237, 0, 4096, 0, 0, 0, 0)",
    "fcntl-F_SETOWN": "call(72, 0, 8, HOST)",
    "fcntl-F_SETSIG": "call(72, 0, 10, 9)",
    "fcntl-F_SETLEASE": "call(72, 0, 1024, 1)",
    "ioctl-TIOCSTI": "call(16, 0, 0x5412, 0)",
    "ioctl-FIOSETOWN": "call(16, 0, 0x8901, 0)",
    "socketpair": "call(53, 1, 1, 0, 0)",
    "kcmp-host": "call(312, os.getpid(), HOST, 0, 0, 0)",
    "open_by_handle_at": "call(304, -100, 0, 0)",
    "process_madvise": "call(440, 0, 0, 0, 0, 0)",
    "getsid-host": "call(124, HOST)",
    "clock_gettime-host-cpu-clock": "call(228, ((~HOST) << 3) | 2, 0)",
    "setns": "call(308, 0, 0)",
    "signalfd": "call(289, -1, 0, 8, 0)",
}

SYSCALL_PRELUDE = """\
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
HOST = {host}
def call(nr, *args):
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return [result, ctypes.get_errno()]
print(repr({call}))
"""


@pytest.mark.skipif(not LINUX_X86_64, reason="x86_64 syscall numbers")
@pytest.mark.parametrize("name", list(SYSCALLS))
def test_escaped_syscall_is_refused(escaped: Attacker, name: str) -> None:
    """It denies odd-argument and cross-process syscalls (io_uring, memfd, bpf, SysV IPC, F_SETOWN, TIOCSTI...) with EPERM."""
    r = escaped.run(SYSCALL_PRELUDE.format(host=HOST_PID, call=SYSCALLS[name]))
    assert r.error is None, r
    assert r.stdout.strip() == f"[-1, {errno.EPERM}]", f"{name}: {r.stdout}"
    os.kill(HOST_PID, 0)
    escaped.still_works()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Landlock, uids")
@pytest.mark.parametrize(
    "code",
    [
        "import os\nprint(os.stat({path!r}))",
        "import os\nprint(os.readlink('/proc/{host}/cwd'))",
        "import os\nprint(os.readlink('/proc/{host}/exe'))",
        "import os\nprint(os.listdir('/proc/{host}/fd'))",
        "import os\nos.symlink({path!r}, 'link')\nprint(os.read(os.open('link', os.O_RDONLY), 100))",
        "import os\nos.link({path!r}, 'hard')\nprint(os.read(os.open('hard', os.O_RDONLY), 100))",
    ],
    ids=["stat-secret", "readlink-host-cwd", "readlink-host-exe", "host-fds", "symlink-secret", "hardlink-secret"],
)
def test_escaped_file_probe_is_refused(escaped: Attacker, code: str) -> None:
    """It denies the secret file's metadata, links to it, and the host's /proc links."""
    r = escaped.run(code.format(path=escaped.secret["path"], host=HOST_PID))
    assert r.error_type in ("PermissionError", "FileNotFoundError", "OSError"), r
    escaped.still_works()
