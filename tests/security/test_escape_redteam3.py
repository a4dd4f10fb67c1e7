"""Third red-team round: the mro refusal, exception attributes, the scratch tmpfs and the
per-frame deadline attacked again.

The first tests replay the holes this round found, now fixed (the guard judges an alias's
lookup on its origin and a super object's on its subject; replies are sent with a deadline):

* ``types.GenericAlias`` forwards every non-dunder attribute to its origin class, and the
  guarded getattr's class checks (``isinstance(obj, type)``) do not see through it:
  ``type(list[int])(re.RegexFlag, ()).mro()`` hands out ``enum.Enum`` again, and
  ``type(list[int])(type(context), ()).close`` the handle's ``close`` (refused on the class);
* the host sends a host function's reply with a blocking ``sendall`` and no deadline: an
  escaped worker that asks for a large value and never reads it holds ``execute()`` forever.

The rest are payloads refused from the start, kept as regression tests.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from _timing import SLACK_S
from hostile import Attacker

from rlm_runtime.sandbox import CellLimits, Sandbox

CONTEXT_TEXT = "the only text this worker may read\n"
# types.GenericAlias, reached as the type of a subscripted builtin.
ALIAS = "GA = type(list[int])\n"


# --------------------------------------------------------------------------- holes (fail today)


def test_generic_alias_does_not_forward_mro_to_a_library_class(attacker: Attacker) -> None:
    """It denies enum.Enum through GenericAlias(re.RegexFlag, ()).mro(), and with it dunder methods from data."""
    code = (
        "import re\n" + ALIAS +
        "Enum = [c for c in GA(re.RegexFlag, ()).mro() if repr(c) == \"<enum 'Enum'>\"][0]\n"
        "E = Enum('E', [('A', 1), ('__repr__', lambda self: 'dunder defined by user code')])\n"
        "print(repr(E.A))"
    )
    r = attacker.run(code)
    assert "dunder defined by user code" not in r.stdout, r
    assert "<enum 'Enum'>" not in r.stdout, r
    attacker.still_works()


def test_generic_alias_does_not_forward_the_context_handle_close(secret: dict[str, str]) -> None:
    """It denies the handle class's close() through GenericAlias(type(context), ()): later cells lose their context."""
    limits = CellLimits(cell_timeout_s=5, kill_grace_s=0.5, memory_mb=256)
    with Sandbox("default", limits, contexts=[CONTEXT_TEXT]) as sb:
        attacker = Attacker(sb, secret)
        attacker.run(ALIAS + "GA(type(context), ()).close(context)")
        r = attacker.run("print(peek(100))")
        assert r.error is None and "the only text" in r.stdout, r


# An escaped worker asks for a host function's (large) value and never reads the reply:
# the host's sendall has no timeout, so it blocks once the socket buffers are full.
NEVER_READS = """\
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
body = b'\\x85\\xa2op\\xa4call\\xa3seq' + bytes([{seq}]) + b'\\xa4name\\xa3big\\xa4args\\x90\\xa6kwargs\\x80'
os.write(chan, len(body).to_bytes(4, 'big') + body)
for i in range(30):
    libc.usleep(1000000)
"""


def test_unread_host_reply_cannot_hold_the_host_past_its_deadline(escaped_policy: Path, secret: dict[str, str]) -> None:
    """It denies a worker that never reads a host function's reply holding execute() beyond timeout + grace."""
    limits = CellLimits(cell_timeout_s=1, kill_grace_s=0.5, memory_mb=256)
    with Sandbox(escaped_policy, limits, host_functions={"big": lambda: "y" * (4 << 20)}) as sb:
        attacker = Attacker(sb, secret)
        attacker.run("1")
        code = NEVER_READS.format(seq=sb._seq + 1)
        done: list[object] = []
        runner = threading.Thread(target=lambda: done.append(attacker.run(code)), daemon=True)
        began = time.monotonic()
        runner.start()
        runner.join(1 + 0.5 + SLACK_S + 1.0)
        took = time.monotonic() - began
        if runner.is_alive():  # unblock the host before failing, so the fixture can close
            worker = sb._worker
            if worker is not None:
                os.kill(worker.pid, signal.SIGKILL)
            runner.join(10)
        assert done and took < 1 + 0.5 + SLACK_S, f"execute() was still blocked after {took:.1f}s, the limit is 1.5s"
        attacker.still_works()


# ------------------------------------------------------------------- refused today (regressions)

REFUSED = ("SandboxPermissionError", "PolicyViolation", "TypeError", "AttributeError", "ValueError")


@pytest.mark.parametrize(
    "code",
    [
        # The functional API called on an enum that has members: "cannot extend".
        "import re\nE = re.RegexFlag('X', [('__repr__', lambda self: 'dunder defined by user code')])\nprint(repr(E))",
        # Subclassing an enum with members is refused by the enum metaclass itself.
        "import re\nclass X(re.RegexFlag):\n    pass\nprint(X)",
        # An explicit metaclass keyword on a class statement.
        "import string\nclass T(string.Template, metaclass=type):\n    pass\nprint(T)",
        # namedtuple refuses dunder field names (rename=False).
        "import collections\nP = collections.namedtuple('P', ['a', '__repr__'])\nprint(P)",
        # A namedtuple claiming the user module is user-owned, but setattr still refuses '_' names.
        "import collections\nP = collections.namedtuple('P', 'a', module='__rlm__')\n"
        "setattr(P, '__repr__', lambda self: 'dunder defined by user code')\nprint(repr(P(1)))",
        # super() of a class does not find type.mro.
        "import re\nprint(super(re.RegexFlag, re.RegexFlag).mro())",
        # mro on the type of an enum member, and on the type of a GenericAlias.
        "import re\nprint(type(re.I).mro())",
        "import collections\nprint(type(collections.UserDict[int]).mro())",
        # The type() stand-in of a user class has no mro.
        "class C:\n    pass\nprint(type(C).mro())",
        # Enum internals by name.
        "import re\nprint(type(re.I)._member_type_)",
    ],
    ids=["enum-functional-api-on-members", "subclass-enum-with-members", "metaclass-keyword",
         "namedtuple-dunder-field", "namedtuple-module-setattr-dunder", "super-class-mro", "enum-member-type-mro",
         "generic-alias-type-mro", "user-class-metaclass-mro", "enum-member-type-internal"],
)
def test_python_layer_payload_is_refused(attacker: Attacker, code: str) -> None:
    """It denies enum, namedtuple, super and metaclass routes to class factories and dunder methods."""
    r = attacker.refused(code, *REFUSED)
    assert "dunder defined by user code" not in r.stdout and "<enum 'Enum'>" not in r.stdout, r


def test_worker_function_errors_carry_only_text(attacker: Attacker) -> None:
    """It denies worker internals in the args of errors raised by FINAL_VAR, SHOW_VARS and FINAL."""
    code = (
        "got = []\n"
        "for call in (lambda: FINAL_VAR('nope'), lambda: FINAL_VAR(1), lambda: SHOW_VARS(1), lambda: FINAL()):\n"
        "    try:\n"
        "        call()\n"
        "    except Exception as e:\n"
        "        got.append(all(isinstance(a, str) for a in e.args) and len(e.args) > 0)\n"
        "print(got)"
    )
    r = attacker.run(code)
    assert r.error is None, r
    assert r.stdout == "[True, True, True, True]\n", r
    attacker.still_works()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mount namespaces, tmpfs")
def test_escaped_worker_cannot_touch_mounts(escaped: Attacker) -> None:
    """It denies umount2, mount, unshare, open_tree and fsopen to an escaped worker, and leaves the host's mounts alone."""
    if os.uname().machine != "x86_64":
        pytest.skip("x86_64 syscall numbers")
    before = Path("/proc/self/mountinfo").read_text()
    code = (
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\ncwd = ctypes.c_char_p(os.getcwd().encode())\n"
        "out = []\n"
        "for nr, args in [(166, (cwd, 2)), (165, (0, cwd, 0, 33, 0)), (272, (0x20000,)), (428, (-100, 0, 0)), (430, (0, 0))]:\n"
        "    ctypes.set_errno(0)\n"
        "    r = libc.syscall(ctypes.c_long(nr), *[a if isinstance(a, ctypes.c_char_p) else ctypes.c_long(a) for a in args])\n"
        "    out.append([r, ctypes.get_errno()])\n"
        "print(out)"
    )
    r = escaped.run(code)
    assert r.error is None and r.stdout.strip() == "[[-1, 1], [-1, 1], [-1, 1], [-1, 1], [-1, 1]]", r
    assert Path("/proc/self/mountinfo").read_text() == before
    escaped.still_works()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Landlock")
def test_escaped_worker_writes_nowhere_but_its_scratch(escaped: Attacker) -> None:
    """It denies writes to /tmp, /dev/shm, /var/tmp and the zygote's scratch dir (outside the quota)."""
    code = (
        "import os\ncwd = os.getcwd()\nout = []\n"
        "for d in ['/tmp', '/dev/shm', '/var/tmp', cwd.rsplit('/', 1)[0]]:\n"
        "    try:\n"
        "        os.close(os.open(d + '/rt3-leftover', os.O_WRONLY | os.O_CREAT, 0o600))\n"
        "        out.append('wrote ' + d)\n"
        "    except OSError:\n"
        "        pass\n"
        "print(out)"
    )
    r = escaped.run(code)
    assert r.error is None and r.stdout == "[]\n", r
    for d in ("/tmp", "/dev/shm", "/var/tmp"):
        assert not os.path.exists(os.path.join(d, "rt3-leftover"))
    escaped.still_works()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="tmpfs quota")
def test_mmap_cannot_write_past_the_scratch_quota(escaped_policy: Path, secret: dict[str, str]) -> None:
    """It denies more than scratch_mb through shared mmaps of two sparse files (SIGBUS), and the host removes the worker dir."""
    limits = CellLimits(cell_timeout_s=10, kill_grace_s=0.5, memory_mb=256, file_size_mb=8, scratch_mb=8)
    code = (
        "import ctypes, os\nlibc = ctypes.CDLL(None)\n"
        "proto = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)\n"
        "mm = proto(('mmap', libc))\nn = 0\n"
        "for name in ('a', 'b'):\n"
        "    fd = os.open(name, os.O_RDWR | os.O_CREAT, 0o600)\n"
        "    os.ftruncate(fd, 7 << 20)\n"
        "    p = mm(None, 7 << 20, 3, 1, fd, 0)\n"
        "    for i in range(7):\n"
        "        ctypes.memset(p + (i << 20), 1, 1 << 20)\n"
        "        n += 1\n"
        "print(n)"
    )
    with Sandbox(escaped_policy, limits) as sb:
        attacker = Attacker(sb, secret)
        r = attacker.run("import os\nprint(os.getcwd())")
        workdir = r.stdout.strip()
        r = attacker.run(code)
        assert r.error_type == "WorkerCrashed" and "SIGBUS" in (r.error or ""), r
        attacker.still_works()
    assert workdir and not os.path.exists(workdir), workdir


@pytest.mark.parametrize(
    "code",
    [
        "G = type(list[int])\nclass H(G):\n    pass\nprint(H(type(context), ()).close)",
        "G = type(list[int])\nprint(G(G(type(context), ()), ()).close)",
        "print(super(type(context), context).close)",
        "import functools\nclass Q(functools.partial):\n    pass\nprint(super(Q, Q(print)).func)",
        "import re\nprint(getattr(re.RegexFlag, 'mro')())",
    ],
    ids=["alias-subclass-close", "nested-alias-close", "super-close", "super-partial-func", "getattr-mro"],
)
def test_forwarding_objects_do_not_bypass_the_guards(secret: dict[str, str], code: str) -> None:
    """It denies alias subclasses, nested aliases and super() proxies reaching what the guards refuse."""
    with Sandbox("default", CellLimits(cell_timeout_s=5, kill_grace_s=0.5, memory_mb=256), contexts=["the context text\n"]) as sb:
        attacker = Attacker(sb, secret)
        attacker.refused(code, "SandboxPermissionError")
        assert attacker.run("print(peek(16))").stdout.startswith("the context text")
