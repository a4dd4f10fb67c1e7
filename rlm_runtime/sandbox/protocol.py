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
    view = memoryview(data)
    try:
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"the peer took {len(data) - len(view)} of {len(data)} bytes by the deadline")
            sock.settimeout(left)
            view = view[sock.send(view):]
    finally:
        sock.settimeout(None)


def send_with_fds(sock: socket.socket, message: dict[str, Any], fds: list[int]) -> None:
    """Send one frame with file descriptors attached (SCM_RIGHTS) to its first byte."""
    data = encode(message)
    sent = socket.send_fds(sock, [data], fds)
    if sent < len(data):
        sock.sendall(data[sent:])


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


def _decode(header: bytes, sock: socket.socket, deadline: float | None = None) -> dict[str, Any]:
    (length,) = HEADER.unpack(header)
    if length > MAX_FRAME:
        raise ProtocolError(f"frame of {length} bytes exceeds the {MAX_FRAME}-byte limit")
    body = _recv_exact(sock, length, deadline)
    try:
        message = msgpack.unpackb(body, raw=False, strict_map_key=True, unicode_errors="surrogatepass", ext_hook=_refuse_ext)
    except (ValueError, TypeError, msgpack.UnpackException) as e:
        raise ProtocolError(f"undecodable frame: {e}") from e
    if not isinstance(message, dict) or not isinstance(message.get("op"), str):
        raise ProtocolError("frame is not a map with an 'op' field")
    return message


def recv(sock: socket.socket, deadline: float | None = None) -> dict[str, Any]:
    """Read one frame. Raises EOFError when the peer is gone, ProtocolError when malformed,
    TimeoutError when ``deadline`` (a ``time.monotonic()`` value) passes before the whole
    frame is in; the socket's timeout is left changed then (callers reset it)."""
    return _decode(_recv_exact(sock, HEADER.size, deadline), sock, deadline)


def recv_with_fds(sock: socket.socket, max_fds: int = 8) -> tuple[dict[str, Any], list[int]]:
    """Read one frame whose first byte may carry file descriptors."""
    data, fds, _flags, _addr = socket.recv_fds(sock, HEADER.size, max_fds)
    if not data:
        raise EOFError("peer closed the channel")
    if len(data) < HEADER.size:
        data += _recv_exact(sock, HEADER.size - len(data))
    return _decode(data, sock), list(fds)


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
