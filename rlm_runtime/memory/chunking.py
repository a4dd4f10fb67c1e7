"""Cutting text into pieces for the memory store, at natural boundaries, with their spans.

Every piece keeps its byte span (in the UTF-8 encoding of the input) and its 1-based line
span, so a search hit can be opened in place. Pieces cover the input in order without
overlap; only the whitespace between them (blank lines, the spaces after a sentence) belongs
to none: ``encoded[p.start_byte:p.end_byte].decode() == p.text`` for every piece. Whitespace
at either end of a piece is left out, except the indentation of its first line.

Where it cuts, by format (``detect_kind`` tells the format from the path or a sniff of the
first ``SNIFF_BYTES``; an explicit ``kind`` that names a format sets it):

* ``prose``: paragraphs (blank lines between them); ``markdown``: sections (an ATX ``#`` or
  setext heading starts one, and stays with its body), then blocks (paragraphs; a fenced code
  block is one block, so it is cut inside only when it alone is over the bound);
* ``code``: top-level definitions (Python ``def``/``class`` and the top-level definitions of
  JS/TS, Go, Rust, Java, C and the like, by a light line scan that works on broken code: a
  column-0 line after a blank line, or a definition line; the decorators and comments right
  above belong to it), then the blank-line separated groups inside;
* ``csv``: rows (a quoted field may span lines); ``jsonl``: lines.
  CSV pieces do not repeat the header in ``text`` (that would break the span rule); a piece
  that does not start with the header row carries it in ``Piece.header`` instead.

How big (``ChunkingConfig``, 100-800 tokens by default): a section or block that fits in
``max_tokens`` is never cut. Units under ``min_tokens`` are merged with the units after them
while the sum fits, and a piece still under ``min_tokens`` (before a unit that does not fit,
or at the end) joins the piece before it when the sum fits and less than 64 KB of whitespace
lies between them. A unit over ``max_tokens`` is cut into its blocks, and a block over it is
filled greedily (to 7/8 of ``max_tokens``) with sentences (prose, Markdown text) or lines
(code, fences, rows); a sentence or line over it is cut at whitespace, and a run without
whitespace at a character boundary. A heading never ends a piece. ``min_tokens`` is a target
(the last piece, or one before a unit that would not fit with it, may be smaller);
``max_tokens`` a bound, broken only by a single character that costs more tokens.

Tokens: decisions use an estimate, bytes divided by the bytes a token of this text costs (a
non-ASCII byte counts twice), which starts from the format's usual ratio and then follows the
exact counts of the pieces made so far (a moving average: the output still depends on the
text alone). ``Piece.tokens`` is the exact count (``rlm_runtime.llm.tokens.count_tokens``):
it is most of the cost, since the whole text is tokenised once; a piece the estimate let grow
over ``max_tokens`` is cut again by exact counts (greedy filling stops at 7/8 of the bound so
that this stays rare). ``ChunkingConfig(exact_tokens=False)`` skips the exact count.
Measured on a shared 2-core box (50 MB, best of 2, several runs): English prose (Paul Graham
essays) 6.4-7.6 MB/s exact, 28 MB/s estimated (tiktoken alone: 10-11 MB/s); token-dense help
text (vim docs) 4.2-5.2 and 21 MB/s (tiktoken alone: 8-9 MB/s); Python source (11 MB) 4.5
and 18 MB/s.

Kinds: ``Piece.kind`` is the format, or for prose and Markdown a kind told by how the piece
begins (after any heading or list marker; case-insensitive, cheap and conservative):
``decision`` ("Decision:", "Decided:", "We decided"), ``note`` ("TODO", "FIXME", "Note:",
"NB:"), ``preference`` ("Preference:", "I prefer", "I always", "I never", "I'd rather", and
"Always ..."/"Never ..." in a text under 280 characters), ``fact`` ("Fact:"), ``pattern``
("Pattern:", "Recipe:"). An explicit ``kind`` overrides: every piece gets it.

Memory: ``chunk_stream`` and ``chunk_file`` read windows and keep only a bounded look-ahead
(a line is cut into fragments past ``LINE_CAP`` bytes, at whitespace when it can be; a block
goes on in a new one past ``block_cap`` bytes, so a sentence that straddles that point is cut
at a line end), so a file of any size costs a few MB (200 MB: 48 MB RSS, interpreter
included); they return the same pieces as ``chunk_text`` of the whole text, whatever the
window size (windows cut bytes, never a character of the output). ``chunk_text`` itself
holds the input, the output, and one window of bytes.

Hostile text: time is linear in the input whatever its shape (a run of one punctuation
character, blank lines only, no whitespace at all, tiny paragraphs; tests/memory/
test_chunking_hostile.py): sentence ends are found with RE2, whitespace before the first block
is counted rather than kept, and whitespace after a held piece is kept as a list, up to 64 KB.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import re2

from rlm_runtime.errors import ConfigError
from rlm_runtime.llm.tokens import count_tokens

#: Source formats: how a text is cut. Any other kind names what a piece is about.
FORMATS = ("prose", "markdown", "code", "csv", "jsonl")
#: Bytes of the start of a text that ``detect_kind`` looks at.
SNIFF_BYTES = 16 * 1024
#: A line longer than this many bytes is cut into fragments (at whitespace when it can be).
LINE_CAP = 64 * 1024
#: Window size ``chunk_file`` reads, and ``chunk_text`` encodes, at a time.
WINDOW_BYTES = 1 << 20
#: A small piece joins the piece before it only across less whitespace than this (bytes).
_GAP_CAP = LINE_CAP

_BLANK, _SECTION, _BLOCK, _CONT = -1, 0, 1, 2
_TEXT, _LINES = 0, 1
_HIGH = bytes(range(128, 256))
#: Where the estimate starts, by format (cl100k on real text: English prose 4.3, Markdown
#: and Python 3.5-3.6, JS 3.0, CSV and JSON lines 2.3-2.5); then it follows the exact counts.
_BYTES_PER_TOKEN = {"prose": 4.0, "markdown": 3.6, "code": 3.4, "csv": 2.5, "jsonl": 2.4}


@dataclass(frozen=True)
class Piece:
    """A piece of a text: its text, where it lies in the source, its kind and its token count.

    ``start_byte``/``end_byte`` index the UTF-8 encoding of the whole input (the file's own
    bytes for ``chunk_file``); lines are 1-based and inclusive. ``header`` is the CSV header
    row for a CSV piece that does not start with it (not part of ``text`` or the span)."""

    text: str
    start_byte: int
    end_byte: int
    start_line: int
    end_line: int
    kind: str
    tokens: int
    header: str = ""


@dataclass(frozen=True)
class ChunkingConfig:
    """Bounds of a piece in tokens: merge under ``min_tokens``, cut over ``max_tokens``.

    ``exact_tokens=False`` skips the exact count (most of the cost): ``Piece.tokens`` is then
    the estimate, and ``max_tokens`` holds for the estimate only (token-dense text, such as
    code or CJK, may go over it by the estimate's error)."""

    min_tokens: int = 100
    max_tokens: int = 800
    exact_tokens: bool = True

    def __post_init__(self) -> None:
        for name in ("min_tokens", "max_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"ChunkingConfig.{name} must be a positive integer, not {value!r}")
        if self.min_tokens >= self.max_tokens:
            raise ConfigError(f"ChunkingConfig.min_tokens ({self.min_tokens}) must be below max_tokens ({self.max_tokens})")

    @property
    def block_cap(self) -> int:
        """Bytes after which a block is closed and goes on in the next (always over the bound)."""
        return max(1 << 20, 8 * self.max_tokens)


# --- kinds ---------------------------------------------------------------------------------

_EXTENSIONS = {
    "markdown": ".md .markdown .mdx .mkd".split(),
    "csv": ".csv .tsv".split(),
    "jsonl": ".jsonl .ndjson .jsonlines".split(),
    "code": (
        ".py .pyi .pyx .js .mjs .cjs .jsx .ts .tsx .go .rs .java .kt .kts .scala .c .h .cc .cpp .cxx .hpp .hh .cs .rb "
        ".php .swift .m .mm .sh .bash .zsh .lua .pl .pm .r .jl .sql .hs .ml .ex .exs .erl .clj .dart .zig .nim .vue .svelte"
    ).split(),
    "prose": ".txt .text .rst .org .log".split(),
}
_CODE_START = re.compile(
    r"\s*(?:def|class|import|from\s+\S+\s+import|function|const|let|var|package|func|fn|pub|impl|struct|"
    r"#include|#define|public|private|protected|return|if\s*\(|for\s*\(|while\s*\(|async\s+def|export|module)\b"
)
_MD_SIGNAL = re.compile(r"(?:#{1,6}\s+\S|```|~~~|[-*+]\s+\[[ xX]\]|\[[^\]]+\]\([^)]+\))")
_QUOTED = re.compile(r'"[^"]*"')
_MARKERS = re.compile(r"\s*(?:(?:#{1,6}|[-*+>]|\d{1,3}[.)])\s+)*(?:\*\*|__)?")
_COLON = r"\s*(?:\*\*|__)?\s*:"
_SEMANTIC = (
    ("decision", re.compile(rf"(?:decision|decided){_COLON}|we(?:\s+have|'ve)?\s+decided\b", re.I)),
    ("note", re.compile(rf"(?:todo|fixme)\b|(?:note|nb|n\.b\.){_COLON}", re.I)),
    ("preference", re.compile(rf"preference{_COLON}|i(?:\s+would|'d)\s+rather\b|i\s+(?:prefer|always|never|dislike)\b", re.I)),
    ("fact", re.compile(rf"fact{_COLON}", re.I)),
    ("pattern", re.compile(rf"(?:pattern|recipe){_COLON}", re.I)),
)
_ALWAYS_NEVER = re.compile(r"(?:always|never)\s+\w", re.I)
_SHORT = 280


def detect_kind(text: str, path: str | None = None) -> str:
    """The kind of ``text``: a kind told by how it begins (prose and Markdown only: decision,
    note, preference, fact, pattern), else its format (prose, markdown, code, csv, jsonl).

    Args:
        text: the text, or its beginning (only the first ``SNIFF_BYTES`` are looked at).
        path: its file name, if any: a known extension decides the format.
    """
    fmt = _detect_format(text[:SNIFF_BYTES].encode("utf-8", "surrogatepass")[:SNIFF_BYTES], path)
    return (_semantic_kind(text[:1000], len(text)) if fmt in ("prose", "markdown") else None) or fmt


def _detect_format(head: bytes, path: str | None) -> str:
    if path:
        suffix = Path(path).suffix.lower()
        for fmt, extensions in _EXTENSIONS.items():
            if suffix in extensions:
                return fmt
    lines = [line for line in head.decode("utf-8", "ignore").splitlines()[:200] if line.strip()]
    if len(head) == SNIFF_BYTES and len(lines) > 1:
        lines = lines[:-1]  # the last line may be cut short
    if not lines:
        return "prose"
    n = len(lines)
    if n >= 2 and sum(1 for line in lines if line.lstrip()[:1] in ("{", "[") and line.rstrip()[-1:] in ("}", "]")) >= 0.9 * n:
        return "jsonl"
    starts = sum(1 for line in lines if _CODE_START.match(line))
    ends = sum(1 for line in lines if line.rstrip()[-1:] in ("{", "}", ";"))
    if (starts >= 2 and starts >= 0.1 * n) or (n >= 3 and ends >= 0.3 * n):
        return "code"
    if any(_MD_SIGNAL.match(line) for line in lines):
        return "markdown"
    if n >= 3:
        rows = [_QUOTED.sub("", line) for line in lines[:20]]
        for sep in (",", "\t", ";", "|"):
            counts = {row.count(sep) for row in rows}
            if len(counts) == 1 and min(counts) >= (1 if sep == "\t" else 2):
                return "csv"
    return "prose"


def _semantic_kind(text: str, length: int) -> str | None:
    """The kind the first line says (or the line after it, when the first is a heading)."""
    lines = [line for line in text.split("\n", 8)[:8] if line.strip()][:2]
    if len(lines) == 2 and not lines[0].lstrip().startswith("#"):
        lines = lines[:1]
    for line in lines:
        start = line[_MARKERS.match(line).end() :]  # type: ignore[union-attr]  # the pattern matches ""
        for kind, pattern in _SEMANTIC:
            if pattern.match(start):
                return kind
        if length <= _SHORT and _ALWAYS_NEVER.match(start):
            return "preference"
    return None


# --- line scanners: the boundary before each line ------------------------------------------
#
# ``level(line, fragment)`` returns (level, back): a boundary of ``level`` goes ``back`` lines
# above this one (0: right before it). _SECTION starts a unit, _BLOCK a block, _CONT is no
# boundary, _BLANK a blank line. ``mode`` is how the block starting there is cut inside,
# ``heading`` whether that boundary is a Markdown heading.


class _Scanner:
    mode = _TEXT
    heading = False

    def __init__(self) -> None:
        self.after_blank = True

    def level(self, line: bytes, fragment: bool) -> tuple[int, int]:
        if fragment:
            return _CONT, 0
        if line.isspace():
            self.after_blank = True
            return _BLANK, 0
        if self.after_blank:
            self.after_blank = False
            return _BLOCK, 0
        return _CONT, 0


class _RowScanner(_Scanner):
    """A row per block; in CSV a quoted field that holds a newline keeps its row going."""

    mode = _LINES

    def __init__(self, quotes: bool) -> None:
        super().__init__()
        self.quotes = quotes
        self.in_quote = False

    def level(self, line: bytes, fragment: bool) -> tuple[int, int]:
        continued = fragment or self.in_quote
        if self.quotes and line.count(b'"') % 2:
            self.in_quote = not self.in_quote
        if continued:
            return _CONT, 0
        return (_BLANK, 0) if line.isspace() else (_BLOCK, 0)


_ATX = re.compile(rb" {0,3}#{1,6}(?:[ \t]|\r?\n|$)")
_FENCE = re.compile(rb" {0,3}(`{3,}|~{3,})")
_SETEXT = re.compile(rb" {0,3}(?:=+|-{2,})[ \t]*\r?\n?$")
_NOT_PLAIN = re.compile(rb"\s*(?:[-*+>|]|\d{1,3}[.)]\s)")


class _MarkdownScanner(_Scanner):
    def __init__(self) -> None:
        super().__init__()
        self.fence = b""
        self.new_block = False  # after a heading or a fence: the next line starts a block
        self.first_plain = False  # the last line started a block of plain text (a setext title?)

    def level(self, line: bytes, fragment: bool) -> tuple[int, int]:
        self.heading = False
        if fragment:
            self.first_plain = False
            return _CONT, 0
        if self.fence:
            stripped = line.strip()
            if stripped.startswith(self.fence) and not stripped.strip(self.fence[:1]):
                self.fence = b""
                self.new_block = True
            return _CONT, 0
        if line.isspace():
            self.after_blank = True
            self.first_plain = False
            return _BLANK, 0
        starts = self.after_blank or self.new_block
        self.after_blank = self.new_block = False
        first_plain, self.first_plain = self.first_plain, False
        if _ATX.match(line):
            self.mode, self.heading, self.new_block = _TEXT, True, True
            return _SECTION, 0
        fence = _FENCE.match(line)
        if fence:
            self.fence = fence.group(1)
            self.mode = _LINES
            return _BLOCK, 0
        if first_plain and _SETEXT.match(line):
            self.mode, self.heading, self.new_block = _TEXT, True, True
            return _SECTION, 1
        if starts:
            self.mode = _TEXT
            self.first_plain = not _NOT_PLAIN.match(line)
            return _BLOCK, 0
        return _CONT, 0


_CLOSER = re.compile(rb"(?:[}\])]|(?:end|else|elif|except|finally|catch|fi|done|esac)\b)")
_REMARK = re.compile(rb"(?:#|//|/\*|\*|@|--|;)")
_DEF = re.compile(
    rb"(?:(?:export|default|async|pub(?:\([\w:]+\))?|public|private|protected|internal|static|final|abstract|"
    rb"unsafe|extern|inline|virtual|override|open|data|sealed|const)\s+)*"
    rb"(?:def|class|function\*?|fn|func|interface|struct|enum|trait|impl|type|module|namespace|macro_rules!|"
    rb"object|record|union|sub)\b"
    rb"|(?:export\s+)?(?:const|let|var)\s+[\w$]+\s*=\s*(?:async\s*)?(?:function\b|\(|[\w$]+\s*=>)"
)


def _c_like_definition(line: bytes) -> bool:
    """``type name(args)`` or ``... ) {`` with no ``;`` or ``=`` before the parenthesis."""
    s = line[:300].rstrip()
    if not s.endswith((b")", b"{")) or b";" in s:
        return False
    head, paren, _ = s.partition(b"(")
    return bool(paren) and b"=" not in head and len(head.split()) >= 2


class _CodeScanner(_Scanner):
    mode = _LINES

    def __init__(self) -> None:
        super().__init__()
        self.remarks = 0  # column-0 comment or decorator lines right above

    def level(self, line: bytes, fragment: bool) -> tuple[int, int]:
        if fragment:
            return _CONT, 0
        if line.isspace():
            self.after_blank = True
            self.remarks = 0
            return _BLANK, 0
        after_blank, self.after_blank = self.after_blank, False
        if line[:1] in (b" ", b"\t"):
            self.remarks = 0
            return (_BLOCK, 0) if after_blank else (_CONT, 0)
        if _CLOSER.match(line):
            self.remarks = 0
            return _CONT, 0
        if _REMARK.match(line):
            self.remarks += 1
            return (_SECTION, 0) if after_blank else (_CONT, 0)
        remarks, self.remarks = self.remarks, 0
        if after_blank:
            return _SECTION, 0
        if _DEF.match(line) or _c_like_definition(line):
            return _SECTION, remarks
        return _CONT, 0


def _scanner(fmt: str) -> _Scanner:
    if fmt == "markdown":
        return _MarkdownScanner()
    if fmt == "code":
        return _CodeScanner()
    if fmt in ("csv", "jsonl"):
        return _RowScanner(quotes=fmt == "csv")
    return _Scanner()


def _latin1_options() -> re2.Options:
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1
    options.log_errors = False
    return options


# --- estimates and cut points ---------------------------------------------------------------


def _estimate(data: bytes, per_token: float) -> int:
    """Tokens ``data`` may cost at ``per_token`` bytes a token (a non-ASCII byte counts twice)."""
    size = len(data) if data.isascii() else 2 * len(data) - len(data.translate(None, _HIGH))
    return math.ceil(size / per_token)


# A sentence ends after [.!?] and closing quotes, then whitespace before anything but a
# lower-case letter; after a CJK full stop, ! or ? (and any whitespace); or at a newline before
# a list item, a quote or a table row. RE2 (linear time): Python's ``re`` took quadratic time
# on a long run of one of [.!?] (each start rescanned the run), and RE2 has no look-around, so
# the pattern takes the character after the end (or the list marker after the newline) and
# ``_atom_ends`` steps back: the first byte of a match says which kind it is. Bytes as Latin-1
# so that the UTF-8 sequences are matched byte by byte; ``[ \t\n\r\f\v]`` is ``re``'s ``\s``.
_SENTENCE_END = re2.compile(
    rb"[.!?]+(?:[\"')\]]|\xe2\x80[\x99\x9d])*[ \t\n\r\f\v]+[^ \t\n\r\f\va-z]"
    rb"|\xe3\x80\x82[ \t\n\r\f\v]*|\xef\xbc[\x81\x9f][ \t\n\r\f\v]*"
    rb"|\n[ \t]*(?:[-*+>|][ \t]|[0-9]{1,3}[.)][ \t])",
    _latin1_options(),
)


def _atom_ends(data: bytes, mode: int) -> list[int]:
    """Where sentences (text) or lines end in a block; the last end is ``len(data)``."""
    ends: list[int] = []
    if mode == _LINES:
        at = data.find(b"\n")
        while at >= 0:
            ends.append(at + 1)
            at = data.find(b"\n", at + 1)
    else:
        search, pos = _SENTENCE_END.search, 0
        while (m := search(data, pos)) is not None:
            start, end = m.span()
            first = data[start]
            if first == 0x0A:  # the newline alone: what follows starts the next sentence
                end = start + 1
            elif first < 0x80:  # [.!?]: the match took the first character of the next one
                end -= 1
            ends.append(end)
            pos = end
    if not ends or ends[-1] != len(data):
        ends.append(len(data))
    return ends


def _char_boundary(data: bytes, cut: int, low: int) -> int:
    while cut > low and cut < len(data) and 0x80 <= data[cut] < 0xC0:
        cut -= 1
    return cut


def _whitespace_cut(data: bytes, low: int, high: int, floor: int) -> int:
    """The end of the last whitespace in ``data[floor:high]``, else a character boundary."""
    ws = max(data.rfind(b" ", floor, high), data.rfind(b"\t", floor, high), data.rfind(b"\n", floor, high))
    if ws >= 0:
        return ws + 1
    return _char_boundary(data, high, low)


def _word_split(data: bytes, limit: int, per_token: float) -> list[bytes]:
    """``data`` (one sentence or line over ``limit`` estimated tokens) in parts that fit."""
    parts: list[bytes] = []
    pos, n = 0, len(data)
    while True:
        size = max(1, int(limit * per_token))
        while size > 1 and (est := _estimate(data[pos : pos + size], per_token)) > limit:
            size = max(1, size * limit // est)
        if pos + size >= n:
            parts.append(data[pos:])
            return parts
        cut = _whitespace_cut(data, pos, pos + size, pos + size // 4)
        if cut <= pos:  # a single character over the limit
            cut = pos + 1
            while cut < n and 0x80 <= data[cut] < 0xC0:
                cut += 1
        parts.append(data[pos:cut])
        pos = cut


# --- blocks and packing ---------------------------------------------------------------------


#: A finished piece before its kind: start, raw bytes, line of the start, text, offset of the
#: text in raw, tokens, end of the text in raw.
_Done = tuple[int, bytes, int, str, int, int, int]


@dataclass
class _Block:
    start: int
    data: bytes
    level: int
    mode: int
    heading: bool
    continued: bool
    est: int = 0


class _Chunker:
    """The pipeline, fed bytes in windows: lines -> levels -> blocks -> packed raw pieces ->
    finished pieces. Every decision depends on the bytes only, never on the windows."""

    def __init__(self, config: ChunkingConfig, path: str | None, kind: str | None, errors: str) -> None:
        self.config = config
        self.path = path
        self.kind = kind
        self.errors = errors
        self.block_cap = config.block_cap
        self.fmt = ""
        self.per_token = 4.0  # bytes a token, learnt from the exact counts
        self.scanner: _Scanner = _Scanner()
        self.waiting: list[bytes] = []  # windows not yet processed
        self.waiting_size = 0
        self.carry = b""  # the unfinished line
        self.fragment = False  # the next line goes on a line cut at LINE_CAP
        self.pos = 0  # byte offset of the next line
        # the open block
        self.lines: list[bytes] = []
        self.block_start = 0
        self.block_size = 0
        self.block_level = _BLOCK
        self.block_mode = _TEXT
        self.block_heading = False
        self.block_continued = False
        self.leading: list[bytes] = []  # the first block's indentation (the whitespace lines above are counted only)
        # packing
        self.queue: deque[_Block] = deque()
        self.unit_scan = (-1, 0, 0)  # (start of the head block, blocks summed, their estimate)
        self.cur: list[bytes] = []
        self.cur_start = 0
        self.cur_est = 0
        self.cur_heading = False  # the open piece ends with a heading
        # finishing
        self.line = 1  # line number where the next raw piece starts
        self.held: _Done | None = None  # start, raw, line, text, lead, tokens, end
        self.held_tail: list[bytes] = []  # whitespace after the held piece (a list: appending stays linear)
        self.held_tail_size = 0
        self.header = ""
        self.header_start = -1
        self.out: list[Piece] = []

    # input

    def feed(self, data: bytes, final: bool = False) -> list[Piece]:
        # Small windows wait until they outweigh the bytes held (the unfinished line, or the
        # start before the format is known), so that copying stays linear in the input.
        self.waiting.append(data)
        self.waiting_size += len(data)
        held = len(self.carry) if self.fmt else SNIFF_BYTES - 1
        if not final and self.waiting_size <= held:
            return []
        data = b"".join(self.waiting)
        self.waiting, self.waiting_size = [], 0
        if not self.fmt:
            self.fmt = self.kind if self.kind in FORMATS else _detect_format(data[:SNIFF_BYTES], self.path)
            self.per_token = _BYTES_PER_TOKEN[self.fmt]
            self.scanner = _scanner(self.fmt)
        buf = self.carry + data if self.carry else data
        pos, n, cap = 0, len(buf), LINE_CAP
        level, add, block_cap = self.scanner.level, self._add_line, self.block_cap
        while pos < n:
            nl = buf.find(b"\n", pos, pos + cap)
            if nl >= 0:
                line = buf[pos : nl + 1]
                pos = nl + 1
            elif n - pos > cap:
                cut = _whitespace_cut(buf, pos, pos + cap, pos + cap // 2)
                line = buf[pos:cut]
                pos = cut
            elif final:
                line = buf[pos:]
                pos = n
            else:
                break
            fragment = self.fragment
            self.fragment = not line.endswith(b"\n")
            lev, back = level(line, fragment)
            if (lev == _BLANK or lev == _CONT) and self.lines and self.block_size < block_cap:
                self.lines.append(line)  # the common case, inline: the block goes on
                self.block_size += len(line)
                self.pos += len(line)
            else:
                add(line, lev, back)
        self.carry = buf[pos:]
        if final:
            self._close_block()
            self._drain(final=True)
            self._flush()
            self._finish_held()
        return self._take()

    def _take(self) -> list[Piece]:
        out, self.out = self.out, []
        return out

    def _add_line(self, line: bytes, level: int, back: int) -> None:
        start = self.pos
        self.pos += len(line)
        if level == _BLANK or (level == _CONT and self.lines and self.block_size < self.block_cap):
            if self.lines:
                self.lines.append(line)
                self.block_size += len(line)
            elif line.endswith(b"\n"):  # whitespace before the first block: only counted (bounded memory)
                self.line += 1
                self.leading = []
            else:  # the start of the first block's indentation, cut at LINE_CAP
                self.leading.append(line)
            return
        if level == _CONT:  # the open block is at its cap, or there is none (cannot happen)
            continued = bool(self.lines)
            self._close_block()
            self._open_block(start, line, _CONT if continued else _BLOCK, continued=continued)
            return
        if back and self.lines:
            if back < len(self.lines):  # the boundary goes above the lines that lead into it
                moved = self.lines[-back:]
                del self.lines[-back:]
                moved_size = sum(len(m) for m in moved)
                self.block_size -= moved_size
                self._close_block()
                self._open_block(start - moved_size, moved[0], level, continued=False)
                for m in moved[1:]:
                    self.lines.append(m)
                    self.block_size += len(m)
            else:
                self.block_level = min(self.block_level, level)
                self.block_heading = self.block_heading or self.scanner.heading
            self.lines.append(line)
            self.block_size += len(line)
            return
        self._close_block()
        self._open_block(start, line, level, continued=False)

    def _open_block(self, start: int, line: bytes, level: int, continued: bool) -> None:
        self.lines = [line]
        self.block_start = start
        self.block_size = len(line)
        self.block_level = level
        self.block_mode = self.scanner.mode
        self.block_heading = self.scanner.heading and not continued
        self.block_continued = continued

    def _close_block(self) -> None:
        if not self.lines:
            return
        data = b"".join(self.lines)
        start = self.block_start
        if self.leading:
            lead = b"".join(self.leading)
            data = lead + data
            start -= len(lead)
            self.leading = []
        self.lines = []
        block = _Block(start, data, self.block_level, self.block_mode, self.block_heading, self.block_continued)
        block.est = _estimate(data, self.per_token)
        if self.fmt == "csv" and self.header_start < 0:
            self.header_start = start + len(data) - len(data.lstrip())
            self.header = data.decode("utf-8", self.errors).strip()
        self.queue.append(block)
        self._drain(final=False)

    # packing

    def _unit(self, final: bool) -> tuple[bool, int, int]:
        """(decided, blocks in the unit at the queue's head if it fits else 0, its estimate)."""
        limit = self.config.max_tokens
        head_start, count, total = self.unit_scan
        if head_start != self.queue[0].start:
            count, total = 0, 0
        while count < len(self.queue):
            block = self.queue[count]
            if count and block.level == _SECTION and not block.continued:
                return True, count, total
            total += block.est
            count += 1
            if total > limit:
                return True, 0, total
        self.unit_scan = (self.queue[0].start, count, total)
        return final, count, total

    def _drain(self, final: bool) -> None:
        low, high = self.config.min_tokens, self.config.max_tokens
        while self.queue:
            block = self.queue[0]
            if block.continued:
                self.queue.popleft()
                self._atoms(block)
                continue
            if block.level == _SECTION:
                decided, count, total = self._unit(final)
                if not decided:
                    return
                if self.cur and not self.cur_heading and (self.cur_est >= low or self.cur_est + total > high):
                    self._flush()
                if count and self.cur_est + total <= high:
                    for _ in range(count):
                        self._add(self.queue.popleft())
                    continue
            self.queue.popleft()
            if self.cur and not self.cur_heading and (self.cur_est >= low or self.cur_est + block.est > high):
                self._flush()
            if self.cur_est + block.est <= high:
                self._add(block)
            else:
                self._atoms(block)

    def _add(self, block: _Block) -> None:
        if not self.cur:
            self.cur_start = block.start
        self.cur.append(block.data)
        self.cur_est += block.est
        self.cur_heading = block.heading and block.level == _SECTION

    def _atoms(self, block: _Block) -> None:
        """Fill pieces greedily with the block's sentences or lines (cut further if need be)."""
        # Fill to 7/8 of the bound: the estimate is off by about that much either way, and a
        # piece over the bound costs a second exact count.
        high, per_token, data = self.config.max_tokens - self.config.max_tokens // 8, self.per_token, block.data
        begin = 0
        for end in _atom_ends(data, block.mode):
            atom = data[begin:end]
            est = _estimate(atom, per_token)
            parts = [atom] if est <= high else _word_split(atom, high, per_token)
            for part in parts:
                est = _estimate(part, per_token) if len(parts) > 1 else est
                if self.cur and self.cur_est + est > high:
                    self._flush()
                if not self.cur:
                    self.cur_start = block.start + begin
                self.cur.append(part)
                self.cur_est += est
                begin += len(part)
            self.cur_heading = False

    def _flush(self) -> None:
        if self.cur:
            raw = b"".join(self.cur)
            self.cur, self.cur_est, self.cur_heading = [], 0, False
            self._raw(self.cur_start, raw)

    # finishing

    def _raw(self, start: int, raw: bytes) -> None:
        line = self.line
        self.line += raw.count(b"\n")
        pieces = self._finish(start, raw, line)
        if not pieces and self.held is not None:  # whitespace only: the held piece's tail
            if self.held_tail_size + len(raw) <= _GAP_CAP:
                self.held_tail.append(raw)
                self.held_tail_size += len(raw)
            else:  # too far for a small piece after it to join it: a merge would copy the gap
                self._finish_held()
        for piece in pieces:
            self._hold(piece)

    def _finish(self, start: int, raw: bytes, line: int) -> list[_Done]:
        """Trim, decode and count ``raw``; cut it again if the exact count is over the bound."""
        first = len(raw) - len(raw.lstrip())
        if first == len(raw):
            return []
        lead = raw.rfind(b"\n", 0, first) + 1  # keep the first line's indentation
        end = len(raw.rstrip())
        text = raw[lead:end].decode("utf-8", self.errors)
        if not self.config.exact_tokens:
            return [(start, raw, line, text, lead, _estimate(raw[lead:end], self.per_token), end)]
        tokens = count_tokens(text)
        if tokens >= 32:  # learn the bytes a token of this text (a moving average)
            ratio = _estimate(raw[lead:end], 1.0) / tokens
            self.per_token = min(8.0, max(1.0, 0.8 * self.per_token + 0.2 * ratio))
        if tokens > self.config.max_tokens and len(text) > 1:
            cut = _cut_to_fit(raw, first, end, 0.95 * self.config.max_tokens / tokens)
            if first < cut < end:
                left, right = raw[:cut], raw[cut:]
                return self._finish(start, left, line) + self._finish(start + cut, right, line + left.count(b"\n"))
        return [(start, raw, line, text, lead, tokens, end)]

    def _hold(self, piece: _Done) -> None:
        """Keep the last piece back: a small one after it joins it when the sum fits."""
        held = self.held
        if held is not None:
            tokens = piece[5]
            adjacent = held[0] + len(held[1]) + self.held_tail_size == piece[0]
            if adjacent and tokens < self.config.min_tokens and held[5] + tokens <= self.config.max_tokens:
                merged = self._finish(held[0], b"".join([held[1], *self.held_tail, piece[1]]), held[2])
                if len(merged) == 1:
                    self.held = merged[0]
                    self.held_tail, self.held_tail_size = [], 0
                    return
            self._emit(held)
        self.held = piece
        self.held_tail, self.held_tail_size = [], 0

    def _finish_held(self) -> None:
        if self.held is not None:
            self._emit(self.held)
            self.held = None
        self.held_tail, self.held_tail_size = [], 0

    def _emit(self, piece: _Done) -> None:
        start, raw, line, text, lead, tokens, end = piece
        start_line = line + raw.count(b"\n", 0, lead)
        kind = self.kind or (_semantic_kind(text[:1000], len(text)) if self.fmt in ("prose", "markdown") else None) or self.fmt
        header = self.header if self.fmt == "csv" and start + lead > self.header_start else ""
        self.out.append(Piece(text, start + lead, start + end, start_line, start_line + raw.count(b"\n", lead, end), kind, tokens, header))


def _cut_to_fit(raw: bytes, first: int, end: int, share: float) -> int:
    """A cut in ``raw[first:end]`` that leaves about ``share`` of it on the left: at the last
    blank line, line end, sentence end or space in the half before that point, else at the
    character boundary there."""
    target = max(first + 1, first + int((end - first) * share))
    floor = first + (target - first) // 2
    for sep in (b"\n\n", b"\n", b". ", b" "):
        at = raw.rfind(sep, floor, target)
        if at > first:
            return at + len(sep)
    cut = _char_boundary(raw, target, first)
    if cut == first:  # inside the first character: cut after it
        cut += 1
        while cut < end and 0x80 <= raw[cut] < 0xC0:
            cut += 1
    return cut


# --- the public entry points ------------------------------------------------------------------


def chunk_text(text: str, *, path: str | None = None, kind: str | None = None, config: ChunkingConfig | None = None) -> list[Piece]:
    """Cut ``text`` into pieces at natural boundaries (see the module docstring).

    Args:
        text: the whole text; spans index ``text.encode()``.
        path: where it came from, if anywhere: its extension decides the format.
        kind: a format (prose, markdown, code, csv, jsonl) to cut by, or any other kind to give
            every piece (the format is then detected); None detects both.
        config: the token bounds (100-800 by default).

    Returns:
        The pieces in order; none for an empty or whitespace-only text.
    """
    windows = (text[i : i + WINDOW_BYTES] for i in range(0, len(text), WINDOW_BYTES))
    return list(chunk_stream(windows, path=path, kind=kind, config=config))


def chunk_stream(
    chunks_of_text: Iterable[str], *, path: str | None = None, kind: str | None = None, config: ChunkingConfig | None = None
) -> Iterator[Piece]:
    """Pieces of a text given in parts (any sizes), as they are found: the same pieces as
    ``chunk_text`` of the joined text, with global spans, in bounded memory.

    Args: as for ``chunk_text``; ``chunks_of_text`` are consecutive parts of one text.
    """
    return _chunk_bytes((part.encode("utf-8", "surrogatepass") for part in chunks_of_text), path, kind, config, "surrogatepass")


def chunk_bytes(
    windows: Iterable[bytes], *, path: str | None = None, kind: str | None = None, config: ChunkingConfig | None = None
) -> Iterator[Piece]:
    """Pieces of UTF-8 bytes given in windows of any size (cut anywhere, even inside a
    character), with spans in those bytes: for a caller that reads a file itself (to hash the
    same bytes, say). Invalid UTF-8 is decoded with U+FFFD in ``text``, the span still that of
    the original bytes.

    Args: as for ``chunk_text``; ``windows`` are consecutive parts of one byte string.
    """
    return _chunk_bytes(windows, path, kind, config, "replace")


def chunk_file(
    path: str | Path, *, kind: str | None = None, config: ChunkingConfig | None = None, window_bytes: int = WINDOW_BYTES
) -> Iterator[Piece]:
    """Pieces of a file read ``window_bytes`` at a time, for files too large to hold.

    Spans index the file's own bytes. Invalid UTF-8 is decoded with U+FFFD in ``text`` (that
    piece's text then no longer encodes to its span); the caller says so. The file is opened
    on the first ``next()``; OSError propagates.

    Args:
        path: the file; its extension decides the format unless ``kind`` names one.
        kind, config: as for ``chunk_text``.
        window_bytes: how much to read at a time (the output does not depend on it).
    """
    if window_bytes < 1:
        raise ConfigError(f"window_bytes must be positive, not {window_bytes}")

    def windows() -> Iterator[bytes]:
        with open(path, "rb") as f:
            while block := f.read(window_bytes):
                yield block

    return _chunk_bytes(windows(), str(path), kind, config, "replace")


def _chunk_bytes(
    windows: Iterable[bytes], path: str | None, kind: str | None, config: ChunkingConfig | None, errors: str
) -> Iterator[Piece]:
    chunker = _Chunker(config or ChunkingConfig(), path, kind, errors)
    for window in windows:
        if window:
            yield from chunker.feed(window)
    yield from chunker.feed(b"", final=True)
