"""Standard input as a text context of ``rlm ask``.

``-c -`` reads standard input whatever it is. Without it, standard input is read when it is
a pipe or a regular file (``cat notes.txt | rlm ask q``, ``rlm ask q < notes.txt``), never
when it is a terminal, a character device such as ``/dev/null``, a socket, or a stream
without a descriptor of its own (a test runner's stand-in): nothing there was meant as
input, and reading a terminal would wait for a person who is not typing.

The bytes are text: UTF-8 (a UTF-8 byte-order mark dropped), or UTF-16 / UTF-32 when they
start with that encoding's byte-order mark. Bytes that look binary (a NUL, or over a tenth
control bytes: the test a context file gets) are a usage error; what does not decode is
replaced, with a warning, as in a file. At most ``MAX_BYTES`` are read; an
empty or blank standard input adds no context.
"""

from __future__ import annotations

import codecs
import os
import stat
import sys
import warnings

from rlm_runtime.cli.common import UsageError

#: The context's name (``context.name`` in a cell, and in the prompt's list of contexts).
NAME = "stdin"
#: The most standard input may hold: beyond it, a file passed with ``-c PATH`` is mapped, not read.
MAX_BYTES = 256 * 1024 * 1024


def stdin_is_input() -> bool:
    """Whether standard input is a pipe or a regular file. A stream without a usable
    descriptor (closed, or replaced by a test runner) is not."""
    stream = sys.stdin
    if stream is None:
        return False
    try:
        mode = os.fstat(stream.fileno()).st_mode
    except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation is both an OSError and a ValueError
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode)


def read_stdin(limit: int | None = None) -> str:
    """Standard input, decoded (see the module docstring).

    Args:
        limit: the most bytes it may hold (default ``MAX_BYTES``).

    Raises:
        UsageError: no standard input, unreadable, more than ``limit`` bytes, or not text.
    """
    limit = MAX_BYTES if limit is None else limit
    most = f"{limit >> 20} MB" if limit >= 1 << 20 else f"{limit:,} bytes"
    data = read_bytes(limit, command="-c -", too_long=f"more than {most}: save it to a file and pass it with -c PATH")
    return decode_text(data, NAME)


def read_bytes(limit: int, *, command: str, too_long: str) -> bytes:
    """At most ``limit`` bytes of standard input, read once (``limit + 1`` asked, so one more
    says it is too long). ``command`` names what reads it, ``too_long`` ends the error.

    Raises:
        UsageError: no standard input, unreadable, not bytes, or more than ``limit`` bytes.
    """
    source = getattr(sys.stdin, "buffer", None)
    if source is None:
        raise UsageError(f"there is no standard input to read ({command})")
    try:
        data = source.read(limit + 1)
    except (OSError, ValueError) as e:
        raise UsageError(f"cannot read standard input: {getattr(e, 'strerror', None) or e}") from e
    if not isinstance(data, bytes):
        raise UsageError("cannot read standard input: it gives no bytes")
    if len(data) > limit:
        raise UsageError(f"standard input holds {too_long}")
    return data


def decode_text(data: bytes, name: str) -> str:
    """``data`` as text (see the module docstring); ``name`` is said in errors and warnings.

    Raises:
        UsageError: binary data (its bytes, or the text a UTF-16 or UTF-32 mark decodes them to).
    """
    from rlm_runtime.context.buffer import looks_binary, wide_encoding
    from rlm_runtime.context.protocol import BINARY_SNIFF_BYTES

    wide = wide_encoding(data[:4])  # the mark a file's text is decoded by too
    if wide is not None:
        encoding, mark = wide
        data = data[mark:]
    else:
        data = data.removeprefix(codecs.BOM_UTF8)
        if looks_binary(data[:BINARY_SNIFF_BYTES]):
            raise UsageError(f"{name} looks like binary data (NUL or control bytes): only text can be a context")
        encoding = "utf-8"
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError:
        warnings.warn(f"{name}: invalid {encoding.upper()} was decoded with replacement characters", stacklevel=2)
        text = data.decode(encoding, "replace")
    if wide is not None and looks_binary(text[:BINARY_SNIFF_BYTES].encode("utf-8", "replace")):
        raise UsageError(f"{name} looks like binary data (NUL or control characters): only text can be a context")
    return text
