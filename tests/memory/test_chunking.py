"""The chunking engine: natural boundaries by format, token bounds, exact spans, kinds, and
windowed reading that gives the same pieces as the whole text."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import rlm_runtime.memory.chunking as chunking
from rlm_runtime.errors import ConfigError
from rlm_runtime.memory.chunking import ChunkingConfig, Piece, chunk_file, chunk_stream, chunk_text, detect_kind

SMALL = ChunkingConfig(min_tokens=5, max_tokens=60)


def check_spans(text: str, pieces: list[Piece]) -> None:
    """Every span decodes to its piece's text, in order, without overlap, and what lies
    between pieces is whitespace only; line numbers match the spans."""
    data = text.encode()
    pos = 0
    for p in pieces:
        assert p.start_byte >= pos
        assert not data[pos : p.start_byte].strip()
        assert data[p.start_byte : p.end_byte].decode() == p.text
        assert p.text.strip()
        assert p.start_line == data[: p.start_byte].count(b"\n") + 1
        assert p.end_line == data[: p.end_byte].count(b"\n") + 1
        pos = p.end_byte
    assert not data[pos:].strip()


def sentences(n: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    words = "river stone lamp orbit cedar harbor signal meadow copper lantern".split()
    return " ".join(" ".join(rng.choice(words) for _ in range(12)).capitalize() + "." for _ in range(n))


def test_markdown_headings_start_pieces() -> None:
    """It starts a piece at each heading and keeps the heading with its body."""
    text = "# Intro\n\n" + sentences(4) + "\n\n## Install\n\n" + sentences(4, 1) + "\n\nSetext title\n======\n\n" + sentences(4, 2)
    pieces = chunk_text(text, path="notes.md", config=ChunkingConfig(min_tokens=20, max_tokens=400))
    check_spans(text, pieces)
    assert [p.text.splitlines()[0] for p in pieces] == ["# Intro", "## Install", "Setext title"]
    assert all(p.kind == "markdown" for p in pieces)


def test_markdown_small_sections_merge() -> None:
    """It merges sections under min_tokens with the ones after them."""
    text = "# A\n\nshort.\n\n## B\n\nshort too.\n\n## C\n\nand this."
    pieces = chunk_text(text, path="a.md")
    assert len(pieces) == 1
    assert pieces[0].text == text


def test_markdown_fence_kept_whole() -> None:
    """It never cuts inside a fenced code block that fits, even across its blank lines."""
    fence = "```python\n" + "\n\n".join(f"x{i} = {i}" for i in range(12)) + "\n```"
    text = "# Code\n\n" + sentences(3) + "\n\n" + fence + "\n\n" + sentences(3, 1)
    pieces = chunk_text(text, path="a.md", config=ChunkingConfig(min_tokens=5, max_tokens=120))
    check_spans(text, pieces)
    assert any(fence in p.text for p in pieces)


def test_markdown_fence_over_max_cut_at_lines() -> None:
    """It cuts a fenced block larger than max_tokens at line ends only."""
    fence = "```\n" + "\n".join(f"value_{i} = compute({i}, {i * 7})" for i in range(200)) + "\n```"
    pieces = chunk_text(fence, path="a.md", config=ChunkingConfig(min_tokens=10, max_tokens=100))
    check_spans(fence, pieces)
    assert len(pieces) > 3
    assert all(p.tokens <= 100 for p in pieces)
    assert all(p.end_byte == len(fence.encode()) or fence.encode()[p.end_byte : p.end_byte + 1] == b"\n" for p in pieces)


def test_python_definitions_with_decorators_and_comments() -> None:
    """It cuts Python at top-level def/class, the decorators and comments above going with them."""
    text = (
        '"""Module."""\nimport os\n\n\n'
        "# The helper.\n@cache\n@other(1)\ndef helper(x):\n    return x\n\n\n"
        "class Thing:\n    def method(self):\n        return 1\n"
        "VALUE = 1\n# leading comment, no blank line above\ndef tail():\n    pass\n"
    )
    pieces = chunk_text(text, path="m.py", config=ChunkingConfig(min_tokens=1, max_tokens=200))
    check_spans(text, pieces)
    starts = [p.text.splitlines()[0] for p in pieces]
    assert starts == ['"""Module."""', "# The helper.", "class Thing:", "# leading comment, no blank line above"]
    assert all(p.kind == "code" for p in pieces)


def test_code_other_languages_and_broken_code() -> None:
    """It finds top-level definitions of JS, Go and Rust by a light scan, on code that does not parse."""
    text = (
        "function a() {\n  return 1;\n}\nexport async function b() {\n  if (\n}\n"
        "func c() int {\n\treturn 2\n}\npub fn d() -> u8 {\n    3\n}\ndef broken(:\n"
    )
    pieces = chunk_text(text, kind="code", config=ChunkingConfig(min_tokens=1, max_tokens=200))
    check_spans(text, pieces)
    assert [p.text.splitlines()[0] for p in pieces] == [
        "function a() {", "export async function b() {", "func c() int {", "pub fn d() -> u8 {", "def broken(:"
    ]


def test_code_unit_over_max_cut_at_blank_lines_then_lines() -> None:
    """It cuts a definition over max_tokens at its blank-line groups, then lines."""
    body = "\n\n".join("\n".join(f"    step_{g}_{i} = run({g}, {i})" for i in range(6)) for g in range(20))
    text = "def big():\n" + body + "\n"
    pieces = chunk_text(text, path="x.py", config=ChunkingConfig(min_tokens=30, max_tokens=120))
    check_spans(text, pieces)
    assert len(pieces) > 2 and all(p.tokens <= 120 for p in pieces)
    assert all(p.text.startswith(("def big", "    ")) for p in pieces)  # whole lines, indentation kept


def test_csv_rows_and_header() -> None:
    """It cuts CSV between rows (a quoted newline stays inside its row) and gives later pieces the header."""
    rows = ["id,name,comment"] + [f'{i},name{i},"line one\nline two of row {i}"' for i in range(60)]
    text = "\n".join(rows) + "\n"
    pieces = chunk_text(text, path="t.csv", config=ChunkingConfig(min_tokens=20, max_tokens=80))
    check_spans(text, pieces)
    assert len(pieces) > 2
    assert pieces[0].text.startswith("id,name,comment") and pieces[0].header == ""
    for p in pieces[1:]:
        assert p.header == "id,name,comment"
        assert p.text.count('"') % 2 == 0  # no row split inside its quoted field
        assert p.text.split(",", 1)[0].isdigit()
    assert all(p.kind == "csv" for p in pieces)


def test_jsonl_whole_lines() -> None:
    """It cuts JSON lines between lines and detects the format without a path."""
    text = "\n".join(f'{{"id": {i}, "text": "record number {i}"}}' for i in range(100))
    assert detect_kind(text) == "jsonl"
    pieces = chunk_text(text, config=ChunkingConfig(min_tokens=30, max_tokens=100))
    check_spans(text, pieces)
    assert len(pieces) > 3
    for p in pieces:
        assert all(line.startswith("{") and line.endswith("}") for line in p.text.split("\n"))
        assert p.kind == "jsonl"


def test_prose_merges_small_paragraphs() -> None:
    """It merges paragraphs under min_tokens and keeps paragraphs that fit whole."""
    paragraphs = [sentences(1, i) for i in range(30)]
    text = "\n\n".join(paragraphs)
    pieces = chunk_text(text, config=ChunkingConfig(min_tokens=40, max_tokens=300))
    check_spans(text, pieces)
    assert len(pieces) < len(paragraphs)
    assert all(p.tokens >= 40 for p in pieces[:-1])
    for para in paragraphs:
        assert any(para in p.text for p in pieces)


def test_prose_splits_long_paragraph_at_sentences() -> None:
    """It cuts a paragraph over max_tokens at sentence ends, each piece within the bound."""
    text = sentences(80)
    pieces = chunk_text(text, config=ChunkingConfig(min_tokens=20, max_tokens=100))
    check_spans(text, pieces)
    assert len(pieces) > 3
    assert all(p.tokens <= 100 for p in pieces)
    assert all(p.text.endswith(".") for p in pieces)


def test_sentence_longer_than_max_cut_at_whitespace() -> None:
    """It cuts a single sentence over max_tokens at whitespace, and a run without any at a character boundary."""
    text = " ".join(f"word{i}" for i in range(600)) + "\n\n" + "é日🎉" * 400
    pieces = chunk_text(text, config=ChunkingConfig(min_tokens=10, max_tokens=50))
    check_spans(text, pieces)
    assert all(p.tokens <= 50 for p in pieces)
    words = [p for p in pieces if p.text.startswith("word")]
    assert len(words) > 5 and all(p.text.split()[-1].startswith("word") for p in words)


def test_non_ascii_spans() -> None:
    """It reports byte spans, not character offsets, for non-ASCII text."""
    text = "Ünïcödé first paragraph. 日本語の文です。\n\n" + "Zweiter Absatz über Köln. 🎉 Emoji here.\n\n" * 30 + "Лев Толстой. Конец."
    pieces = chunk_text(text, config=ChunkingConfig(min_tokens=5, max_tokens=40))
    check_spans(text, pieces)
    assert len(pieces) > 2
    assert pieces[-1].text.endswith("Конец.")
    assert pieces[-1].end_byte == len(text.encode())


def test_empty_text() -> None:
    """It returns no piece for an empty text."""
    assert chunk_text("") == []
    assert list(chunk_stream([])) == []


def test_whitespace_only() -> None:
    """It returns no piece for a text of whitespace only."""
    assert chunk_text(" \n\n\t \n  ") == []


def test_windowed_file_equals_whole_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It gives the same pieces from a file read in small windows, or a text given in parts, as from the whole text."""
    monkeypatch.setattr(chunking, "LINE_CAP", 300)  # make long lines cut into fragments too
    rng = random.Random(7)
    parts = []
    for i in range(60):
        choice = rng.random()
        if choice < 0.2:
            parts.append("## Heading " + str(i))
        elif choice < 0.3:
            parts.append("```\n" + "\n".join(f"code {j}" for j in range(rng.randint(1, 40))) + "\n```")
        elif choice < 0.4:
            parts.append("x" * rng.randint(100, 900) + " über 日本 " + "y" * 500)
        else:
            parts.append(sentences(rng.randint(1, 20), i).replace("Lamp", "Lämp"))
    text = "\n\n".join(parts)
    path = tmp_path / "doc.md"
    path.write_bytes(text.encode())
    for config in (SMALL, ChunkingConfig(min_tokens=50, max_tokens=200)):
        whole = chunk_text(text, path=str(path), config=config)
        check_spans(text, whole)
        for window in (1, 3, 17, 256, 4096):
            assert list(chunk_file(path, window_bytes=window, config=config)) == whole
        cuts = sorted({0, len(text), *(rng.randrange(len(text)) for _ in range(20))})
        assert list(chunk_stream((text[a:b] for a, b in zip(cuts, cuts[1:], strict=False)), path=str(path), config=config)) == whole


def test_file_spans_are_file_bytes_with_invalid_utf8(tmp_path: Path) -> None:
    """It reads invalid UTF-8 from a file with replacement characters, spans still in the file's bytes."""
    data = b"First paragraph.\n\nBad \xff\xfe bytes here.\n\nLast one."
    path = tmp_path / "bad.txt"
    path.write_bytes(data)
    pieces = list(chunk_file(path, config=ChunkingConfig(min_tokens=1, max_tokens=20)))
    assert [p.text for p in pieces] == ["First paragraph.", "Bad \ufffd\ufffd bytes here.", "Last one."]
    assert data[pieces[2].start_byte : pieces[2].end_byte] == b"Last one."


def test_kind_detection() -> None:
    """It detects formats from paths and content, and kinds from how a text begins."""
    assert detect_kind("anything", "a.py") == "code"
    assert detect_kind("anything", "a.md") == "markdown"
    assert detect_kind("a,b,c\n1,2,3\n4,5,6\n", "t.csv") == "csv"
    assert detect_kind("import os\n\ndef f():\n    return os.sep\n") == "code"
    assert detect_kind("# Title\n\nSome text.\n") == "markdown"
    assert detect_kind("Just a plain paragraph of prose.") == "prose"
    assert detect_kind("Decision: we store memory in SQLite.") == "decision"
    assert detect_kind("We decided to use WAL mode.") == "decision"
    assert detect_kind("TODO: add a migration test") == "note"
    assert detect_kind("Note: the store is the only writer.") == "note"
    assert detect_kind("I prefer tabs over spaces.") == "preference"
    assert detect_kind("Always run ruff before committing.") == "preference"
    assert detect_kind("- Fact: the box has 8 GB of memory.") == "fact"
    assert detect_kind("Pattern: encode once, grep the bytes.") == "pattern"
    assert detect_kind("## Context\n\nDecision: keep FTS5.") == "decision"
    assert detect_kind("Note that this is ordinary prose.") == "prose"  # conservative
    assert detect_kind("Never " + "had he seen such a thing. " * 20) == "prose"  # long texts: no always/never


def test_piece_kinds_and_override() -> None:
    """It gives each prose piece its detected kind, and an explicit kind to every piece."""
    text = "Decision: use SQLite for the store.\n\nTODO: write the migration.\n\nA plain paragraph."
    config = ChunkingConfig(min_tokens=1, max_tokens=50)
    assert [p.kind for p in chunk_text(text, config=config)] == ["decision", "note", "prose"]
    assert [p.kind for p in chunk_text(text, kind="fact", config=config)] == ["fact"] * 3
    code = "def f():\n    return 1\n\n\ndef g():\n    return 2\n"
    as_prose = chunk_text(code, kind="prose", config=config)
    assert [p.kind for p in as_prose] == ["prose", "prose"]
    assert len(chunk_text(code, kind="markdown", config=config)) == 2


def test_config_bounds_validated() -> None:
    """It refuses bounds that are not positive integers or where min is not below max."""
    assert ChunkingConfig().min_tokens == 100 and ChunkingConfig().max_tokens == 800
    for bad in ({"min_tokens": 0}, {"max_tokens": -5}, {"min_tokens": 800, "max_tokens": 800}, {"min_tokens": 900}, {"min_tokens": 1.5}):
        with pytest.raises(ConfigError):
            ChunkingConfig(**bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        list(chunk_file("missing.txt", window_bytes=0))


def test_estimated_tokens_mode() -> None:
    """It skips the exact count when asked, keeping the same cut rules."""
    text = sentences(200)
    pieces = chunk_text(text, config=ChunkingConfig(min_tokens=20, max_tokens=100, exact_tokens=False))
    check_spans(text, pieces)
    assert len(pieces) > 5 and all(p.tokens <= 100 for p in pieces)


def test_byte_windows_keep_file_offsets() -> None:
    """It chunks bytes cut inside characters and invalid UTF-8 with spans in the given bytes."""
    data = "Grüße aus Köln.\n\n日本語の段落。\n\n".encode() + b"bad \xff byte.\n\nEnd."
    whole = list(chunking.chunk_bytes([data], config=ChunkingConfig(min_tokens=1, max_tokens=20)))
    split = list(chunking.chunk_bytes((data[i : i + 1] for i in range(len(data))), config=ChunkingConfig(min_tokens=1, max_tokens=20)))
    assert split == whole
    assert [p.text for p in whole] == ["Grüße aus Köln.", "日本語の段落。", "bad \ufffd byte.", "End."]
    assert all(data[p.start_byte : p.end_byte].decode("utf-8", "replace") == p.text for p in whole)
