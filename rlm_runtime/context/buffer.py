"""UTF-8 text over a bytes-like buffer (bytes or a read-only mmap), addressed by character.

A context may be far larger than memory is comfortable with, so nothing here decodes the
whole buffer. A sparse index, built lazily in one linear pass, records for every block of
``BLOCK`` bytes how many characters and newlines come before it; a character offset or a
line number is then found by bisection plus decoding at most one block.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterator
from typing import Any

BLOCK = 64 * 1024
# Bytes that start a character (every byte except UTF-8 continuation bytes 0x80-0xBF).
_STARTERS = bytes(b for b in range(256) if not 0x80 <= b <= 0xBF)
# Control bytes other than tab, newline, vertical tab, form feed and carriage return.
_CONTROL_BYTES = bytes(b for b in range(32) if b < 9 or 13 < b)


#: Byte order marks of the wide UTF encodings, UTF-32 first (UTF-32 LE's begins with UTF-16 LE's).
_BOMS = ((b"\xff\xfe\x00\x00", "utf-32-le"), (b"\x00\x00\xfe\xff", "utf-32-be"), (b"\xff\xfe", "utf-16-le"),
         (b"\xfe\xff", "utf-16-be"))


def wide_encoding(head: bytes) -> tuple[str, int] | None:
    """The UTF-16 or UTF-32 encoding a byte order mark at the start of ``head`` names, and the
    mark's length; None for any other text (UTF-8 is the default, its mark is text)."""
    for bom, name in _BOMS:
        if head.startswith(bom):
            return name, len(bom)
    return None


def looks_binary(head: bytes) -> bool:
    """Whether the first bytes of a file say it is not text: a NUL, or over 10 % control bytes."""
    if b"\x00" in head:
        return True
    if not head:
        return False
    control = len(head) - len(head.translate(None, _CONTROL_BYTES))  # counted in C: a byte loop costs ~1 ms per file
    return control / len(head) > 0.1


class TextBuffer:
    """Read-only UTF-8 text with O(log n) access by character offset and by line.

    ``data`` is bytes or a mapping; the text may be the ``nbytes`` of it from byte ``start``
    on (one document of several packed in one mapping), searched in place, never copied."""

    def __init__(self, data: Any, start: int = 0, nbytes: int | None = None) -> None:
        self._data = data
        self._start = start
        self._view = memoryview(data)[start : None if nbytes is None else start + nbytes]
        self.nbytes = len(self._view)
        self._starts: array[int] | None = None  # byte offset of each block
        self._chars: array[int] | None = None  # characters before each block
        self._lines: array[int] | None = None  # newlines before each block
        self._total_chars = 0
        self._total_newlines = 0
        self.invalid_utf8 = False
        #: Called once, the first time invalid UTF-8 is seen (by the index or a decode).
        self.on_invalid: Any = None

    # ------------------------------------------------------------------ the index

    def _build(self) -> None:
        if self._starts is not None:
            return
        starts, chars, lines = array("q"), array("q"), array("q")
        view, n = self._view, self.nbytes
        pos = nchars = nlines = 0
        while pos < n:
            end = min(pos + BLOCK, n)
            while end < n and 0x80 <= view[end] <= 0xBF:  # never split a character
                end += 1
            starts.append(pos)
            chars.append(nchars)
            lines.append(nlines)
            block = view[pos:end].tobytes()
            if block.isascii():
                nchars += len(block)
            else:
                try:
                    # One C pass validates and counts: in valid UTF-8 each character has one starter byte.
                    nchars += len(block.decode("utf-8"))
                except UnicodeDecodeError:
                    self._mark_invalid()
                    nchars += len(block) - len(block.translate(None, _STARTERS))
            nlines += block.count(b"\n")
            pos = end
        self._starts, self._chars, self._lines = starts, chars, lines
        self._total_chars, self._total_newlines = nchars, nlines

    @property
    def n_chars(self) -> int:
        self._build()
        return self._total_chars

    @property
    def n_lines(self) -> int:
        """Lines as a reader counts them: a final line without a newline still counts."""
        self._build()
        if self.nbytes == 0:
            return 0
        ends_with_newline = self._view[self.nbytes - 1] == 0x0A
        return self._total_newlines + (0 if ends_with_newline else 1)

    # ------------------------------------------------------------- characters

    def byte_offset(self, char_offset: int) -> int:
        """Byte offset of character ``char_offset`` (0 <= offset <= n_chars)."""
        self._build()
        assert self._starts is not None and self._chars is not None
        if char_offset <= 0:
            return 0
        if char_offset >= self._total_chars:
            return self.nbytes
        i = bisect.bisect_right(self._chars, char_offset) - 1
        start = self._starts[i]
        end = self._starts[i + 1] if i + 1 < len(self._starts) else self.nbytes
        block = self._view[start:end].tobytes()
        want = char_offset - self._chars[i]
        if block.isascii():
            return start + want
        try:
            # Valid UTF-8: characters and starter bytes agree, so C code can do the count.
            return start + len(block.decode("utf-8")[:want].encode("utf-8"))
        except UnicodeDecodeError:
            pass
        seen = 0
        for j, b in enumerate(block):
            if not 0x80 <= b <= 0xBF:
                if seen == want:
                    return start + j
                seen += 1
        return end

    def _mark_invalid(self) -> None:
        if not self.invalid_utf8:
            self.invalid_utf8 = True
            if self.on_invalid is not None:
                self.on_invalid()

    def decode(self, start_byte: int, end_byte: int) -> str:
        """Text of a byte range; invalid UTF-8 becomes U+FFFD and is reported once."""
        raw = self._view[start_byte:end_byte].tobytes()
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            if e.reason == "unexpected end of data" and e.end == len(raw):
                # The range ends inside a character (peek cuts by size): drop the stub.
                try:
                    return raw[: e.start].decode("utf-8")
                except UnicodeDecodeError:
                    pass
            self._mark_invalid()
            return raw.decode("utf-8", "replace")

    def slice(self, start: int, stop: int) -> str:
        """Characters ``start:stop`` (clamped like str slicing with non-negative bounds)."""
        if stop <= start:
            return ""
        return self.decode(self.byte_offset(start), self.byte_offset(stop))

    def head_bytes(self, n: int) -> bytes:
        return self._view[: min(n, self.nbytes)].tobytes()

    # ------------------------------------------------------------------- lines

    def line_start(self, line_no: int) -> int:
        """Byte offset where 1-based line ``line_no`` starts (``nbytes`` past the end)."""
        self._build()
        assert self._starts is not None and self._lines is not None
        if line_no <= 1:
            return 0
        target = line_no - 1  # newlines before the line
        if target > self._total_newlines:
            return self.nbytes
        i = bisect.bisect_left(self._lines, target) - 1
        i = max(i, 0)
        pos, seen = self._starts[i], self._lines[i]
        while seen < target:
            nl = self.find(b"\n", pos)
            if nl < 0:
                return self.nbytes
            pos, seen = nl + 1, seen + 1
        return pos

    def line_of(self, byte_offset: int, hint: tuple[int, int] | None = None) -> int:
        """1-based line of ``byte_offset``; ``hint`` = (offset, line) known before it."""
        self._build()
        assert self._starts is not None and self._lines is not None
        if hint is not None and 0 <= byte_offset - hint[0] <= 4 * BLOCK:
            base, line = hint
        else:
            i = max(bisect.bisect_right(self._starts, byte_offset) - 1, 0)
            base, line = self._starts[i], self._lines[i] + 1
        return line + self.count(b"\n", base, byte_offset)

    def lines(self, first: int, last: int) -> list[str]:
        """1-based inclusive range of lines, without their newlines."""
        first = max(first, 1)
        if last < first:
            return []
        start = self.line_start(first)
        out = []
        pos = start
        for _ in range(last - first + 1):
            if pos >= self.nbytes:
                break
            nl = self.find(b"\n", pos)
            end = self.nbytes if nl < 0 else nl
            out.append(self.decode(pos, end).rstrip("\r"))
            pos = end + 1
        return out

    def iter_lines(self) -> Iterator[str]:
        pos = 0
        while pos < self.nbytes:
            nl = self.find(b"\n", pos)
            end = self.nbytes if nl < 0 else nl
            yield self.decode(pos, end).rstrip("\r")
            pos = end + 1

    def line_span(self, byte_offset: int) -> tuple[int, int]:
        """Byte span of the line holding ``byte_offset``, newline excluded."""
        start = self.rfind(b"\n", 0, byte_offset) + 1
        nl = self.find(b"\n", byte_offset)
        return start, self.nbytes if nl < 0 else nl

    # ----------------------------------------------------------- raw helpers

    def _window(self, start: int, end: int | None) -> tuple[int, int]:
        """``start:end`` clamped to the text, as offsets into ``_data``: the text may be one
        window of a mapping that holds other documents, and a search never leaves it."""
        start = min(max(int(start), 0), self.nbytes)
        end = self.nbytes if end is None else min(max(int(end), 0), self.nbytes)
        return self._start + start, self._start + max(end, start)

    def find(self, sub: bytes, start: int = 0, end: int | None = None) -> int:
        # bytes and mmap both search in C without copying.
        a, b = self._window(start, end)
        found = int(self._data.find(sub, a, b))
        return found - self._start if found >= 0 else -1

    def rfind(self, sub: bytes, start: int, end: int) -> int:
        a, b = self._window(start, end)
        found = int(self._data.rfind(sub, a, b))
        return found - self._start if found >= 0 else -1

    def count(self, sub: bytes, start: int, end: int) -> int:
        a, b = self._window(start, end)
        if b <= a:
            return 0
        if isinstance(self._data, bytes):
            return self._data.count(sub, a, b)
        return self._view[a - self._start : b - self._start].tobytes().count(sub)

    @property
    def view(self) -> memoryview:
        return self._view

    def release(self) -> None:
        self._view.release()
