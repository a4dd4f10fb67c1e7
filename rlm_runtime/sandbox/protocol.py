"""Length-prefixed msgpack frames on a dedicated socket, and the plain-data rule.

Every message between the host, the zygote and a worker is one frame: a 4-byte big-endian
length, then a msgpack map. Only this socket carries frames; whatever user code prints goes
to an in-memory buffer, so printed text can never be taken for a frame.

Values crossing the boundary are *plain data*: None, bool, int, float, str, list and dict
with str keys. ``check_plain`` enforces that (and bounds size and depth) on the host, where
the worker's word is not trusted; ``frames`` checks the rest of each frame the worker sends.
Decoding refuses msgpack extension types outright, so no frame can carry anything but
msgpack's own types.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from typing import Any

import msgpack

from rlm_runtime.errors import HostCallError, ProtocolError

HEADER = struct.Struct(">I")
#: Largest frame either side accepts. A cell's output is capped far below this; a worker
#: that sends more is broken or hostile.
MAX_FRAME = 64 * 1024 * 1024

PLAIN_MAX_DEPTH = 32
PLAIN_MAX_ITEMS = 1_000_000


def encode(message: dict[str, Any]) -> bytes:
    # surrogatepass: a lone surrogate (from a bad decode, say) must not break the channel.
    body = msgpack.packb(message, use_bin_type=True, unicode_errors="surrogatepass")
    if len(body) > MAX_FRAME:
        raise ProtocolError(f"message of {len(body)} bytes exceeds the {MAX_FRAME}-byte frame limit")
    return HEADER.pack(len(body)) + body


def send(sock: socket.socket, message: dict[str, Any], deadline: float | None = None) -> None:
    """Write one frame. With ``deadline`` (a ``time.monotonic()`` value) the whole frame must
    be taken by then, or TimeoutError: a peer that stops reading cannot hold the sender."""
    data = encode(message)
    if deadline is None:
        sock.sendall(data)
        return
    _send_rest(sock, memoryview(data), deadline, len(data))


def send_with_fds(sock: socket.socket, message: dict[str, Any], fds: list[int], deadline: float | None = None) -> None:
    """Send one frame with file descriptors attached (SCM_RIGHTS) to its first byte.

    With ``deadline`` the whole frame must be taken by then, or TimeoutError (see ``send``).
    """
    data = encode(message)
    if deadline is None:
        sent = socket.send_fds(sock, [data], fds)
        if sent < len(data):
            sock.sendall(data[sent:])
        return
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the deadline passed before the descriptors were sent")
    try:
        sock.settimeout(left)
        sent = socket.send_fds(sock, [data], fds)
    finally:
        sock.settimeout(None)
    if sent < len(data):
        _send_rest(sock, memoryview(data)[sent:], deadline, len(data))


def _send_rest(sock: socket.socket, view: memoryview, deadline: float, total: int) -> None:
    try:
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"the peer took {total - len(view)} of {total} bytes by the deadline")
            sock.settimeout(left)
            view = view[sock.send(view):]
    finally:
        sock.settimeout(None)


def _recv_exact(sock: socket.socket, n: int, deadline: float | None = None) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        if deadline is not None:
            # One deadline for the whole frame: a peer that dribbles a byte at a time must
            # not get a fresh timeout for every read.
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"frame not complete by its deadline ({got} of {n} bytes)")
            sock.settimeout(left)
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise EOFError("peer closed the channel")
        got += k
    return bytes(buf)


def _refuse_ext(code: int, data: bytes) -> Any:
    # No side sends extension types; one on the channel is forged. ValueError ends the decode.
    raise ValueError(f"msgpack extension type {code} is not allowed")


def _decode(header: bytes, sock: socket.socket, deadline: float | None = None, max_bytes: int = MAX_FRAME) -> dict[str, Any]:
    (length,) = HEADER.unpack(header)
    if length > max_bytes:
        # Refused before the body is read: a peer cannot make the reader allocate it.
        raise ProtocolError(f"frame of {length} bytes exceeds the {max_bytes}-byte limit")
    body = _recv_exact(sock, length, deadline)
    try:
        message = msgpack.unpackb(body, raw=False, strict_map_key=True, unicode_errors="surrogatepass", ext_hook=_refuse_ext)
    except (ValueError, TypeError, msgpack.UnpackException) as e:
        raise ProtocolError(f"undecodable frame: {e}") from e
    if not isinstance(message, dict) or not isinstance(message.get("op"), str):
        raise ProtocolError("frame is not a map with an 'op' field")
    return message


def recv(sock: socket.socket, deadline: float | None = None, max_bytes: int = MAX_FRAME) -> dict[str, Any]:
    """Read one frame. Raises EOFError when the peer is gone, ProtocolError when malformed
    or longer than ``max_bytes``, TimeoutError when ``deadline`` (a ``time.monotonic()``
    value) passes before the whole frame is in; the socket's timeout is left changed then
    (callers reset it)."""
    return _decode(_recv_exact(sock, HEADER.size, deadline), sock, deadline, max_bytes)


def recv_with_fds(sock: socket.socket, max_fds: int = 8) -> tuple[dict[str, Any], list[int]]:
    """Read one frame whose first byte may carry file descriptors."""
    message, fds, _truncated = recv_fds_frame(sock, max_fds)
    return message, fds


def recv_fds_frame(sock: socket.socket, max_fds: int) -> tuple[dict[str, Any], list[int], bool]:
    """Read one frame whose first byte may carry up to ``max_fds`` descriptors.

    Returns (frame, descriptors received, truncated): truncated is True when the kernel
    dropped descriptors (more were attached than ``max_fds``, or the reader's RLIMIT_NOFILE
    was reached); the dropped ones are closed by the kernel. The caller owns (and closes)
    the descriptors returned, also when decoding the frame fails: they are closed here then.
    """
    data, fds, flags, _addr = socket.recv_fds(sock, HEADER.size, max_fds)
    fds = list(fds)
    try:
        if not data:
            raise EOFError("peer closed the channel")
        if len(data) < HEADER.size:
            data += _recv_exact(sock, HEADER.size - len(data))
        message = _decode(data, sock)
    except BaseException:
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass
        raise
    return message, fds, bool(flags & socket.MSG_CTRUNC)


def check_plain(value: Any, what: str = "value") -> Any:
    """Return ``value`` if it is plain data, else raise HostCallError naming the problem.

    Tuples are accepted and become lists (msgpack does the same).
    """
    problem = plain_problem(value, what)
    if problem:
        raise HostCallError(problem)
    return value


def plain_problem(value: Any, what: str = "value", max_depth: int = PLAIN_MAX_DEPTH, max_items: int = PLAIN_MAX_ITEMS) -> str | None:
    """What makes ``value`` not plain data (a sentence naming ``what``), or None if it is.

    The walk is iterative so a deeply nested value cannot exhaust the caller's stack.
    """
    items = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        items += 1
        if items > max_items:
            return f"{what} has more than {max_items} items"
        if depth > max_depth:
            return f"{what} is nested deeper than {max_depth} levels"
        t = type(v)
        if t is int and not -(2**63) <= v < 2**64:
            return f"{what} has an int too large to cross the sandbox boundary (64 bits at most)"
        if v is None or t is str or t is int or t is float or t is bool:
            continue
        if t is list or t is tuple:
            stack.extend((x, depth + 1) for x in v)
        elif t is dict:
            for k, x in v.items():
                if type(k) is not str:
                    return f"{what} has a dict key of type {type(k).__name__}; keys must be str"
                stack.append((x, depth + 1))
        else:
            return (f"{what} contains a {t.__name__}; only None, bool, int, float, str, "
                    "list and dict cross the sandbox boundary")
    return None
