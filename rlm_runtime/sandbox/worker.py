"""The worker: a forked child that locks itself down, then runs cells in one namespace.

Lifecycle (driven by the zygote and the host):

1. ``spare_main`` runs right after the zygote forks: own session and process group, every
   inherited descriptor closed but the channel, stdio on /dev/null, network namespace left.
   The spare then waits for its ``init`` frame.
2. ``init`` carries the session's limits and guards. The worker moves into its private temp
   dir, applies rlimits, Landlock, privilege drop and seccomp, and answers ``ready`` with
   the layers that took effect.
3. ``exec`` frames run cells; ``call`` frames go up to the host for host functions; ``done``
   ends each cell. Every frame sent for a cell echoes the ``seq`` of its ``exec``, and every
   field stays within the sizes the host checks (``frames``). EOF on the channel ends the
   worker.
4. Between cells the host may ask three more things, each answered by one frame echoing its
   ``seq``: ``attach`` (contexts added to a live session: their descriptors follow in
   ``fds`` frames, SCM_RIGHTS, which the worker maps and closes) is answered by
   ``attached`` or ``attach_failed``; ``stats`` by the access counters of every context;
   ``lookup`` (the host's own reading of the main context by a registered reader, for an assist) by
   ``looked_up``, leaving the namespace and the access counters alone.
"""

from __future__ import annotations

import difflib
import gc
import itertools
import linecache
import marshal
import os
import reprlib
import signal
import socket
import sysconfig
import time
import traceback
from collections.abc import Iterable
from typing import Any

from rlm_runtime.errors import ContextError, HostCallError
from rlm_runtime.sandbox import frames, protocol
from rlm_runtime.sandbox.guards import SHOW_NAME, USER_MODULE, make_globals

RESERVED_BASE = ("FINAL", "FINAL_VAR", "SHOW_VARS")
_CELL_PREFIX = "<cell"
_LINECACHE_KEEP = 200



#: Seconds a cell's empty-grep notes may take to compute (each counts over the context).
_HINT_S = 2.0

class CellTimeout(BaseException):
    """Raised inside user code when the cell's time is up (catchable, hence the hard kill)."""


class CellInterrupted(BaseException):
    """Raised inside user code when the host interrupts the cell (SIGUSR1: a person pressed
    Ctrl-C). Catchable like CellTimeout, hence the host's kill after its grace period."""


class Output:
    """Printed text of one cell, capped: the head and the tail are kept, the middle counted."""

    def __init__(self) -> None:
        self.reset(20_000)

    def reset(self, cap: int) -> None:
        self.cap = cap
        self.head_cap = cap * 3 // 4
        self.tail_cap = cap - self.head_cap
        self.head: list[str] = []
        self.head_len = 0
        self.tail: list[str] = []
        self.tail_len = 0
        self.total = 0

    def write(self, text: str) -> int:
        if type(text) is not str:
            text = str(text)
        n = len(text)
        self.total += n
        if self.head_len < self.head_cap:
            take = text[: self.head_cap - self.head_len]
            self.head.append(take)
            self.head_len += len(take)
            text = text[len(take):]
            if not text:
                return n
        piece = text[-self.tail_cap:]
        self.tail.append(piece)
        self.tail_len += len(piece)
        if self.tail_len > 2 * self.tail_cap:
            joined = "".join(self.tail)[-self.tail_cap:]
            self.tail = [joined]
            self.tail_len = len(joined)
        return n

    def value(self) -> tuple[str, bool]:
        head = "".join(self.head)
        tail = "".join(self.tail)
        if self.total <= self.cap:
            return head + tail, False
        tail = tail[-self.tail_cap:]
        cut = self.total - len(head) - len(tail)
        marker = f"\n... [output truncated: {cut} of {self.total} characters cut] ...\n"
        return head + marker + tail, True


class Printer:
    """RestrictedPython's ``_print_`` protocol, writing into the cell's Output."""

    output: Output

    def __init__(self, _getattr_: Any = None) -> None:
        self._getattr = _getattr_

    def write(self, text: str) -> int:
        return Printer.output.write(text)

    def flush(self) -> None:
        pass

    def __call__(self) -> str:
        return ""

    def _call_print(self, *objects: Any, **kwargs: Any) -> None:
        target = kwargs.get("file")
        if target is None:
            kwargs["file"] = self
        elif self._getattr is not None:
            self._getattr(target, "write")
        print(*objects, **kwargs)


class Worker:
    """The state of one worker process: its channel, namespace and cell timer."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.output = Output()
        Printer.output = self.output
        self.ns: dict[str, Any] = {}
        self.reserved: dict[str, Any] = {}
        self.in_user_code = False
        #: An interrupt that came while the worker was not running user code (a host call in
        #: flight): raised as soon as user code resumes.
        self.interrupt_pending = False
        self.cells = 0
        self.seq = 0  # of the cell running now, echoed in every frame sent for it
        #: The context handles, in the host's order: ``contexts`` in the namespace.
        self.handles: list[Any] = []
        self._reserve = _make_reserve()

    # ------------------------------------------------------------------ set-up

    def init(self, msg: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        from rlm_runtime.sandbox import contexts, lockdown

        # Contexts are mapped before lock-down: afterwards the worker can open nothing.
        handles = self.handles = contexts.build(list(msg.get("contexts", [])), fds)
        layers = lockdown.lock_down(msg)
        self.limits = msg["limits"]
        self.ns = make_globals(set(msg["allowed_imports"]), set(msg["denied_attributes"]), Printer)
        self.reserved = {
            "FINAL": self._final,
            "FINAL_VAR": self._final_var,
            "SHOW_VARS": self._show_vars,
        }
        if handles:
            self.reserved.update(contexts.namespace(handles))
        self.bind(msg.get("host_functions", []))
        signal.signal(signal.SIGALRM, self._on_alarm)
        signal.signal(signal.SIGUSR1, self._on_interrupt)
        return layers

    def bind(self, names: list[str]) -> None:
        for name in names:
            self.reserved[name] = self._stub(name)
        self._restore_reserved()

    def _restore_reserved(self) -> list[str]:
        """Put the runtime's names back; return those the cell had rebound.

        The cell's own values are held until every name is back, then released: releasing
        one can run a finalizer of the cell's (a generator's ``finally``, say), and that code
        must find the runtime's names already in place. The policy check refuses code that
        could rebind them from such a finalizer (``global FINAL`` in a function); the second
        pass is the fail-safe if anything ever does.
        """
        ns = self.ns
        rebound: list[str] = []
        for _ in range(2):
            displaced = [(name, ns.get(name)) for name, value in self.reserved.items() if ns.get(name) is not value]
            if not displaced:
                break
            rebound += [name for name, _value in displaced if name not in rebound]
            ns.update(self.reserved)
            ns[SHOW_NAME] = self._show
            del displaced  # finalizers of the cell's values run here
        ns[SHOW_NAME] = self._show
        return rebound

    # ------------------------------------------------------- between cells

    def attach(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Map contexts added after lock-down; keep every variable. With ``at``, the one
        context sent takes the place of the context there (a file read again after it changed).

        The descriptors come in ``fds`` frames of at most ``frames.ATTACH_FDS_PER_FRAME``,
        read with recvmsg (allowed by seccomp for this; only the host is at the other end of
        the channel), then ``contexts.build`` maps them and closes them, as at start. Every
        announced frame is read, even after a failure, so the channel stays in step.

        Unlike contexts mapped before lock-down, these count against the worker's limits:
        the address-space cap (``memory_mb``), and ``open_files``, because the descriptors
        arrive under it and CPython's mmap keeps a duplicate of each for as long as the map
        lives (one per file or document). What does not fit is answered ``attach_failed``.
        """
        from rlm_runtime.sandbox import contexts
        from rlm_runtime.sandbox.lockdown import set_cell_cpu_limit

        seq = msg.get("seq", 0)
        total = int(msg.get("fds", 0))
        set_cell_cpu_limit(self.limits, time.process_time())  # a fresh CPU allowance, as for a cell
        fds: list[int] = []
        added: list[Any] = []
        problem: str | None = None
        try:
            n = 0
            while n < total:
                frame, got, truncated = protocol.recv_fds_frame(self.sock, frames.ATTACH_FDS_PER_FRAME)
                fds.extend(got)
                if frame.get("op") != "fds":
                    raise EOFError("the host broke the attach protocol")  # ends the worker
                if truncated and problem is None:
                    problem = (f"the worker has too many open files to take the context's descriptors "
                               f"(its limit is {self.limits.get('open_files')})")
                n += int(frame.get("n", len(got)))
            if problem is None and len(fds) != total:
                problem = f"{len(fds)} of {total} descriptors arrived"
            if problem is None:
                batch, fds = fds, []  # build closes every one of them, whatever happens
                try:
                    added = contexts.build(list(msg.get("contexts", [])), batch)
                except Exception as e:  # too big for the address-space cap, out of descriptors, binary
                    problem = f"{type(e).__name__}: {e}"
        finally:
            for fd in fds:
                try:
                    os.close(fd)
                except OSError:
                    pass
        at = msg.get("at")
        if problem is None and at is not None and not (type(at) is int and 0 <= at < len(self.handles) and len(added) == 1):
            problem = "a context to replace that this worker does not have"
        if problem is not None:
            return {"op": "attach_failed", "seq": seq, "message": problem[: frames.MESSAGE_MAX]}
        if at is not None:
            self.handles[at] = added[0]  # the same source read again: bound where the old one was
        else:
            self.handles.extend(added)
        self.reserved.update(contexts.namespace(self.handles))
        self._restore_reserved()
        return {"op": "attached", "seq": seq, "count": len(self.handles)}

    def stats(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The access counters of every context handle, in the host's order."""
        rows = []
        for handle in self.handles:
            counts = getattr(handle, "stats", None)
            rows.append({name: _counter(getattr(counts, name, 0)) for name in frames.STAT_COUNTERS})
        return {"op": "stats", "seq": msg.get("seq", 0), "contexts": rows}

    def lookup(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The host's lookup over the main context by a registered reader (``readers.py``),
        its arguments checked against the reader's declared shape first."""
        from rlm_runtime.sandbox import readers

        reply: dict[str, Any] = {"op": "looked_up", "seq": msg.get("seq", 0), "reply": {}, "error": ""}
        try:
            found = readers.reader(msg.get("reader"))  # type: ignore[arg-type]
            args = found.args.clean(msg.get("args"), "the arguments")
        except ValueError:
            return {**reply, "error": "a malformed lookup"}
        handle = self.handles[0] if self.handles else None
        try:
            return {**reply, "reply": found.read(handle, args)}
        except ContextError as e:
            return {**reply, "error": str(e)[: frames.MESSAGE_MAX]}

    # ------------------------------------------------------- namespace functions

    def _stub(self, name: str) -> Any:
        def call_host(*args: Any, **kwargs: Any) -> Any:
            return self.call(name, list(args), kwargs)

        call_host.__name__ = call_host.__qualname__ = name
        return call_host

    def call(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """Send a host-function call up the channel and wait for its answer.

        The cell timer is paused meanwhile: a slow model call is not the cell's fault.
        """
        protocol.check_plain(args, f"arguments of {name}()")
        protocol.check_plain(kwargs, f"keyword arguments of {name}()")
        self.in_user_code = False
        remaining = signal.setitimer(signal.ITIMER_REAL, 0)[0]
        try:
            protocol.send(self.sock, {"op": "call", "seq": self.seq, "name": name, "args": args, "kwargs": kwargs})
            reply = protocol.recv(self.sock)
        finally:
            if remaining > 0:
                signal.setitimer(signal.ITIMER_REAL, remaining)
            self.in_user_code = True
        if self.interrupt_pending:
            self.interrupt_pending = False
            raise CellInterrupted()
        if reply["op"] == "return":
            return reply.get("value")
        raise HostCallError(str(reply.get("message", f"{name}() failed")))

    def _final(self, answer: Any) -> None:
        try:
            value = protocol.check_plain(answer, "FINAL answer")
        except HostCallError:
            value = str(answer)
        self.in_user_code = False
        try:
            protocol.send(self.sock, {"op": "final", "seq": self.seq, "value": value})
        finally:
            self.in_user_code = True
        if self.interrupt_pending:
            self.interrupt_pending = False
            raise CellInterrupted()

    def _final_var(self, name: str) -> None:
        # type() and not isinstance(): a str subclass could lie in startswith().
        if type(name) is not str or name.startswith("_") or name not in self.ns:
            known = ", ".join(self._user_names()) or "none"
            raise NameError(f"FINAL_VAR: no variable named {name!r}; variables: {known}")
        self._final(self.ns[name])

    def _user_names(self) -> list[str]:
        return sorted(n for n in self.ns if not n.startswith("_") and n not in self.reserved)

    def _show_vars(self) -> None:
        rows = []
        for name in self._user_names():
            value = self.ns[name]
            try:
                text = _SHORT_REPR.repr(value)  # bounded: a list of a million lists shows its first few
            except Exception as e:  # a user object's __repr__ may fail
                text = f"<repr failed: {type(e).__name__}>"
            if len(text) > 80:
                text = text[:77] + "..."
            rows.append(f"{name}: {type(value).__name__} = {text}")
        self.output.write("\n".join(rows or ["(no variables)"]) + "\n")

    def _show(self, value: Any) -> None:
        if value is not None:
            self.output.write(repr(value) + "\n")

    # --------------------------------------------------------------- cells

    def _suggestion(self, exc: BaseException) -> str:
        """". Did you mean: 'FINAL'?" for a NameError of a name close to a defined one (Python
        3.12 says so; 3.11's traceback module does not). Only Python's own NameError, whose
        ``name`` is a plain string: a subclass's attributes would run the user's code."""
        name = exc.name if type(exc) is NameError else None
        if type(name) is not str or not 0 < len(name) <= 100:
            return ""
        builtins = self.ns.get("__builtins__")
        names = itertools.chain(self.ns, builtins if type(builtins) is dict else ())
        meant = _similar(name, (n for n in names if type(n) is str))
        return f". Did you mean: {meant!r}?" if meant else ""

    def _guarded_str(self, exc: BaseException) -> str:
        """str(exc) runs the user's own __str__: give it one second, like user code."""
        self.in_user_code = True
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        try:
            return str(exc)
        except CellTimeout:
            return "<the exception's message took too long to compute>"
        except BaseException:
            return "<unprintable message>"
        finally:
            self.in_user_code = False
            signal.setitimer(signal.ITIMER_REAL, 0)

    def _on_alarm(self, signum: int, frame: Any) -> None:
        if self.in_user_code:
            raise CellTimeout()

    def _on_interrupt(self, signum: int, frame: Any) -> None:
        if self.in_user_code:
            raise CellInterrupted()
        self.interrupt_pending = True

    def run_cell(self, msg: dict[str, Any]) -> dict[str, Any]:
        from rlm_runtime.context import records as _records
        from rlm_runtime.sandbox import contexts
        from rlm_runtime.sandbox.lockdown import set_cell_cpu_limit

        self.cells += 1
        self.seq = msg.get("seq", 0)
        filename = msg.get("filename", f"<cell-{self.cells}>")
        source = msg.get("source", "")
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        if len(linecache.cache) > _LINECACHE_KEEP:
            for key in [k for k in linecache.cache if k.startswith(_CELL_PREFIX)][: _LINECACHE_KEEP // 2]:
                linecache.cache.pop(key, None)
        self.output.reset(int(self.limits["output_chars"]))
        error = error_type = None
        failure: BaseException | None = None
        timeout = float(msg.get("timeout", self.limits["cell_timeout_s"]))
        set_cell_cpu_limit(self.limits, time.process_time())
        self._restore_reserved()  # whatever ran between cells (a collected cycle's finalizer) is undone
        start = time.perf_counter()
        self.interrupt_pending = False  # one meant for an earlier cell that had already ended
        contexts.EMPTY_GREPS.clear()
        _records.EMPTY_FINDS.clear()
        held_before = {name: id(value) for name, value in self.ns.items()}
        try:
            code = _retarget(marshal.loads(msg["code"]), filename)
            self.in_user_code = True
            signal.setitimer(signal.ITIMER_REAL, timeout)
            gc.enable()  # collection (and the cell's finalizers it runs) only under the cell's timer
            exec(code, self.ns)
        except CellTimeout:
            error_type = "TimeoutError"
            error = f"TimeoutError: the cell ran longer than {timeout:g}s and was stopped"
        except CellInterrupted:
            error_type = "KeyboardInterrupt"
            error = "KeyboardInterrupt: the cell was interrupted"
        except BaseException as e:  # user code may raise anything, SystemExit included
            failure = e
        finally:
            gc.disable()
            self.in_user_code = False
            signal.setitimer(signal.ITIMER_REAL, 0)
            duration = time.perf_counter() - start
            rebound = self._restore_reserved()
        if failure is not None:
            error_type = type(failure).__name__[: frames.TYPE_MAX]  # a user class may have any name
            error = _user_traceback(failure, self._guarded_str(failure) + self._suggestion(failure))
            if len(error) > frames.ERROR_MAX:
                error = error[: frames.ERROR_MAX] + "... [cut]"
        stdout, truncated = self.output.value()
        set_before = _set_before_error(self.ns, held_before) if failure is not None else ""
        notes = [set_before] if set_before else []
        notes += [f"'{name[:200]}' is a runtime name: it was restored after this cell, your value is gone"
                 for name in rebound[: frames.NOTES_MAX - 1 - len(contexts.EMPTY_GREPS) - len(_records.EMPTY_FINDS)]]
        grep_notes, empty_greps = self._empty_greps(stdout, error)
        notes += grep_notes
        return {"op": "done", "seq": self.seq, "stdout": stdout, "truncated": truncated, "error": error,
                "error_type": error_type, "duration_s": duration, "notes": notes, "empty_greps": empty_greps}

    def _empty_greps(self, stdout: str, error: str | None) -> tuple[list[str], list[dict[str, Any]]]:
        """The cell's empty greps: as notes saying why each found nothing (when the cell did
        not print it itself), and as data for the host (``pattern``, ``ignore_case``, and
        ``hint``: the pattern that would match, or ""). A hint counts lines over the whole
        context after the cell's own timer has stopped, so this runs under ``_HINT_S``
        seconds of its own: a cell must not buy itself time with empty greps; past the limit
        the hints left are empty and there are no more notes."""
        from rlm_runtime.context import records as _records
        from rlm_runtime.sandbox import contexts

        empties, shown = list(contexts.EMPTY_GREPS), stdout + (error or "")
        finds = list(_records.EMPTY_FINDS)
        contexts.EMPTY_GREPS.clear()
        _records.EMPTY_FINDS.clear()
        found = [{"pattern": str(r.pattern)[: frames.PATTERN_MAX], "ignore_case": bool(r._ignore_case), "hint": ""}
                 for r in empties]
        notes: list[str] = []
        if (error or "").startswith("TimeoutError"):
            empties = []  # the cell spent its time: no hint scans after it (the host's kill is near)
        self.in_user_code = True  # the alarm (and an interrupt) may now raise here
        signal.setitimer(signal.ITIMER_REAL, _HINT_S)
        try:
            for k, result in enumerate(empties):
                try:
                    hint = str(result)
                    found[k]["hint"] = str(result.suggestion() or "")[: frames.PATTERN_MAX]
                except (CellTimeout, CellInterrupted):
                    raise
                except Exception:  # a hint is a courtesy: never a cell's failure
                    continue
                if hint not in shown:
                    notes.append(("a grep in this code found nothing " + hint)[: frames.NOTE_MAX])
        except (CellTimeout, CellInterrupted):
            pass
        finally:
            self.in_user_code = False
            signal.setitimer(signal.ITIMER_REAL, 0)
        for why in finds:  # records().find / where that found nothing: why, unless the cell printed it
            if why not in shown and why.removeprefix("0 records: ") not in shown:
                notes.append(("a records lookup in this code found nothing: " + why)[: frames.NOTE_MAX])
        return notes, found

    def serve(self) -> None:
        # The cyclic collector runs only inside a cell (run_cell enables it under the cell's
        # timer): a collection between cells (a host's lookup allocating) would run the
        # finalizers of the model's garbage (a generator's ``finally`` in a cycle) untimed.
        gc.disable()
        while True:
            try:
                msg = protocol.recv(self.sock)
            except (EOFError, OSError):
                return
            op = msg["op"]
            if op == "bind":
                self.bind(list(msg.get("names", [])))
                continue
            if op == "shutdown":
                return
            try:
                if op == "exec":
                    reply = self.run_cell(msg)
                elif op == "attach":
                    reply = self.attach(msg)
                elif op == "stats":
                    reply = self.stats(msg)
                elif op == "lookup":
                    reply = self.lookup(msg)
                else:
                    reply = {"op": "protocol_error", "message": f"unknown op {op[:40]!r}"}
                protocol.send(self.sock, reply)
            except OSError:
                return
            except (MemoryError, protocol.ProtocolError) as e:
                # The cell's data fills memory (or the reply would not fit a frame): free the
                # reserve so a short answer can still be built and sent.
                self._reserve = b""
                protocol.send(self.sock, _fallback_reply(e, self.limits, self.seq))
                self._reserve = _make_reserve()


def _short_repr() -> reprlib.Repr:
    short = reprlib.Repr()
    short.maxlevel, short.maxlist, short.maxtuple, short.maxset, short.maxdict = 3, 8, 8, 8, 8
    short.maxstring, short.maxother, short.maxlong = 80, 80, 40
    return short


#: What ``SHOW_VARS`` shows of a value: a few items of each container, a few levels deep.
_SHORT_REPR = _short_repr()


#: Values a failing cell set that its error note shows, and each one's characters.
_SET_SHOWN = 6
_SET_CHARS = 80


def _set_before_error(ns: dict[str, Any], held_before: dict[str, int]) -> str:
    """The plain values (str, int, float, bool) a cell bound before it failed, as one note:
    a small model whose last line raised (an f-string's ``{RW-5644}``) has often found the
    answer a line earlier, and then guesses instead of reading it. Exact types only, so no
    code of the model's (a ``__repr__``) runs after the cell; a string is cut before its
    repr, an int shown only when small (the repr of a huge one is slow)."""
    shown: list[str] = []
    for name, value in ns.items():
        if len(shown) >= _SET_SHOWN:
            break
        if type(name) is not str or name.startswith("_") or held_before.get(name) == id(value):
            continue
        kind = type(value)
        if kind is str:
            text = repr(value[:_SET_CHARS]) + ("..." if len(value) > _SET_CHARS else "")
        elif kind is int and value.bit_length() <= 64 or kind in (float, bool):
            text = repr(value)
        else:
            continue
        shown.append(f"{name[:40]} = {text}")
    if not shown:
        return ""
    return f"before the error, this cell set: {', '.join(shown)}"[: frames.NOTE_MAX]


def _counter(value: Any) -> int:
    # type() and not isinstance(): a counter replaced by escaped code must not break the frame.
    return value if type(value) is int and 0 <= value < 2**63 else 0


def _make_reserve() -> bytes:
    """Memory held back for answering after user code has exhausted the rest."""
    try:
        return bytes(4 << 20)
    except MemoryError:
        return b""


def _fallback_reply(e: BaseException, limits: dict[str, Any], seq: int) -> dict[str, Any]:
    if isinstance(e, MemoryError):
        error = (f"MemoryError: the cell ran out of memory (the worker's cap is {limits.get('memory_mb')} MB). "
                 "Variables are kept; del large ones or work on smaller pieces.")
    else:
        error = f"OutputError: the cell's result could not be sent ({e}); print less."
    return {"op": "done", "seq": seq, "stdout": "", "truncated": False, "error": error, "error_type": type(e).__name__,
            "duration_s": 0.0, "notes": [], "empty_greps": []}


def _retarget(code: Any, filename: str) -> Any:
    """Give a cell's code (and the functions it defines) the cell's own file name.

    The host caches compiled cells by content, so the same code object may serve several
    cells; tracebacks must still point at the right cell's lines.
    """
    consts = tuple(_retarget(c, filename) if isinstance(c, type(code)) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


#: Names a NameError's suggestion is looked for among, at most (the cell's globals first); the
#: longest name compared (an identifier a model types), and the time the search may take: it
#: runs after the cell's timer, so it is bounded on its own (5,000 crafted names of 100
#: characters took difflib 5 s).
_SUGGESTED_AMONG = 5_000
_SUGGESTED_CHARS = 40
_SUGGEST_S = 0.05


def _similar(name: str, names: Iterable[str]) -> str | None:
    """The defined name ``name`` was most likely meant as: one differing only in case, else the
    closest by ``difflib`` (ratio 0.8 or more), as Python 3.12's "Did you mean" suggests.
    Names over ``_SUGGESTED_CHARS``, or more than two characters longer or shorter, are not
    compared, and the search stops after ``_SUGGEST_S``."""
    if len(name) > _SUGGESTED_CHARS:
        return None
    pool = [n for n in itertools.islice(names, _SUGGESTED_AMONG)
            if abs(len(n) - len(name)) <= 2 and not n.startswith("_") and n != name]
    folded = name.lower()
    same = [n for n in pool if n.lower() == folded]
    if same:
        return same[0]
    deadline = time.monotonic() + _SUGGEST_S
    best, score = None, 0.8
    matcher = difflib.SequenceMatcher(b=name)
    for n in pool:
        if time.monotonic() > deadline:
            break
        matcher.set_seq1(n)
        if matcher.real_quick_ratio() >= score and matcher.quick_ratio() >= score and (r := matcher.ratio()) >= score:
            best, score = n, r
    return best


def _user_traceback(exc: BaseException, message: str) -> str:
    """The exception with only the frames of the user's own cells."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith(_CELL_PREFIX)]
    lines = []
    if frames:
        lines.append("Traceback (your code):")
        for f in frames[-8:]:
            where = "" if f.name == "<module>" else f", in {f.name}"
            line = f.line.strip() if f.line else ""
            text = f": {line[:300]}{'...' if len(line) > 300 else ''}" if line else ""
            lines.append(f"  line {f.lineno}{where}{text}")
    if isinstance(exc, SyntaxError) and exc.lineno:
        message = f"{exc.msg} (line {exc.lineno})"
    if len(message) > 10_000:
        message = message[:10_000] + f"... [{len(message) - 10_000} more characters]"
    lines.append(f"{type(exc).__name__}: {message}" if message else type(exc).__name__)
    return "\n".join(lines)


def spare_main(sock: socket.socket) -> None:
    """Entry point of a freshly forked spare worker. Never returns: the process exits."""
    code = 0
    try:
        from rlm_runtime.sandbox import lockdown

        lockdown.detach(sock.fileno())
        fds: list[int] = []
        while True:  # "attach" frames carry context descriptors, then comes "init"
            msg, got = protocol.recv_with_fds(sock, max_fds=256)
            fds.extend(got)
            if msg.get("op") != "attach":
                break
        if msg.get("op") != "init":
            os._exit(3)
        worker = Worker(sock)
        try:
            layers = worker.init(msg, fds)
        except Exception as e:
            protocol.send(sock, {"op": "init_failed", "message": f"{type(e).__name__}: {e}"})
            os._exit(4)
        protocol.send(sock, {"op": "ready", "layers": layers, "pid": os.getpid(), "as_limit": lockdown.AS_LIMIT})
        worker.serve()
    except BaseException:
        code = 1
    finally:
        os._exit(code)


def stdlib_paths() -> list[str]:
    """Folders of the Python installation the worker may read (lazy stdlib imports)."""
    paths = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")}
    return sorted(p for p in paths if os.path.isdir(p))


__all__ = ["RESERVED_BASE", "USER_MODULE", "Worker", "spare_main", "stdlib_paths"]
