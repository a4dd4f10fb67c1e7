"""The rlm probe / peek / grep / chunk commands, through the real entry point."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rlm_runtime.cli import main


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "guide.md").write_text("# Guide\n\nsome needle text\n## Part two\nmore text\n")
    (tmp_path / "data.csv").write_text("name,age\nann,31\nbob,42\n")
    lines = "".join(f"row {i}\n" for i in range(1, 51))
    (tmp_path / "rows.txt").write_text(lines)
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "a.txt").write_text("alpha\nneedle in a\n")
    (folder / "b.txt").write_text("needle in b\n")
    (tmp_path / "blob.bin.txt").write_bytes(b"\x00\x01\x02\x03")
    monkeypatch.chdir(tmp_path)  # no settings file up the tree unless a test writes one
    return tmp_path


def _one_line_error(err: str) -> None:
    assert err.startswith("rlm: error: ")
    assert err.count("\n") == 1, err
    assert "Traceback" not in err


def test_probe_prints_a_summary(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It prints the probe summary of a file and exits 0."""
    assert main(["probe", "guide.md"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("'guide.md': markdown,")
    assert "headings" in out and "1: # Guide" in out and "decision: load" in out


def test_probe_json_is_one_object(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It prints exactly one JSON object with --json."""
    assert main(["probe", "data.csv", "--json"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    data = json.loads(out)
    assert data["type"] == "csv" and data["structure"]["columns"] == ["name", "age"] and data["lines"] == 3


def test_probe_folder_json(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It inventories a folder, as text or as JSON."""
    assert main(["probe", "kb"]) == 0
    assert capsys.readouterr().out.startswith("'kb': 2 documents")
    assert main(["probe", "kb", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["files"] == 2 and [d["name"] for d in data["documents"]] == ["a.txt", "b.txt"]


def test_probe_keywords_option(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It scores relevance with -k keywords and skips an irrelevant file."""
    assert main(["probe", "guide.md", "-k", "needle", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["keyword_hits"] == {"needle": 1}
    assert main(["probe", "guide.md", "-k", "absent", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["decision"]["action"] == "skip"


def test_probe_uses_rlm_toml(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It reads thresholds and keywords from [probe] in rlm.toml; -k adds to the keywords."""
    (files / "rlm.toml").write_text('[probe]\nload_max_tokens = 3\nkeywords = ["guide"]\n')
    assert main(["probe", "guide.md", "--json", "-k", "needle"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["decision"]["action"] == "excerpt"
    assert data["decision"]["thresholds"]["load_max_tokens"] == 3
    assert data["keyword_hits"] == {"guide": 1, "needle": 1}


def test_probe_uses_pyproject(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It reads [tool.rlm.probe] from pyproject.toml."""
    (files / "pyproject.toml").write_text("[tool.rlm.probe]\nload_max_tokens = 2\nexcerpt_max_tokens = 4\n")
    assert main(["probe", "rows.txt", "--json"]) == 0
    decision = json.loads(capsys.readouterr().out)["decision"]
    assert decision["action"] == "excerpt" and "huge" in decision["reason"]


@pytest.mark.parametrize("body", ['load_max_tokens = "lots"', "bogus = 1", "min_relevance = 3"])
def test_probe_invalid_settings_exit_2(files: Path, capsys: pytest.CaptureFixture[str], body: str) -> None:
    """It exits 2 with an error naming the settings file when a setting is invalid."""
    (files / "rlm.toml").write_text(f"[probe]\n{body}\n")
    assert main(["probe", "guide.md"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("rlm: error: invalid probe settings in ") and "rlm.toml" in captured.err
    assert "Traceback" not in captured.err


def test_probe_invalid_settings_error_is_one_line(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It reports an invalid setting on one line."""
    (files / "rlm.toml").write_text('[probe]\nload_max_tokens = "lots"\n')
    assert main(["probe", "guide.md"]) == 2
    _one_line_error(capsys.readouterr().err)


def test_probe_broken_toml_exit_2(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It exits 2 with a one-line error when the settings file is not TOML."""
    (files / "rlm.toml").write_text("[probe\n")
    assert main(["probe", "guide.md"]) == 2
    err = capsys.readouterr().err
    _one_line_error(err)
    assert "rlm.toml" in err


def test_probe_missing_path_exit_2(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It exits 2 with a one-line error for a missing path."""
    assert main(["probe", "nope.md"]) == 2
    captured = capsys.readouterr()
    _one_line_error(captured.err)
    assert "nope.md" in captured.err and captured.out == ""


def test_peek(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It prints the first characters with a size hint, or a folder's inventory."""
    assert main(["peek", "rows.txt", "-n", "12"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("row 1\nrow 2\n\n... [") and "more bytes" in out
    assert main(["peek", "guide.md"]) == 0
    assert capsys.readouterr().out == (files / "guide.md").read_text() + "\n"
    assert main(["peek", "kb"]) == 0
    assert "corpus kb: 2 documents" in capsys.readouterr().out


def test_peek_missing_file_exit_2(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It exits 2 with a one-line error naming the missing file."""
    assert main(["peek", "missing.txt"]) == 2
    captured = capsys.readouterr()
    _one_line_error(captured.err)
    assert "missing.txt" in captured.err


def test_peek_binary_file_exit_2(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It refuses a binary file with a one-line error."""
    assert main(["peek", "blob.bin.txt"]) == 2
    err = capsys.readouterr().err
    _one_line_error(err)
    assert "binary" in err


def test_grep_prints_matches(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It prints 'N: text' per matching line and exits 0."""
    assert main(["grep", "^row 1[0-2]$", "rows.txt"]) == 0
    assert capsys.readouterr().out == "10: row 10\n11: row 11\n12: row 12\n"


def test_grep_options(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It honours -C, -m, -i and -c."""
    assert main(["grep", "-C", "1", "^row 5$", "rows.txt"]) == 0
    assert capsys.readouterr().out == "4- row 4\n5: row 5\n6- row 6\n"
    assert main(["grep", "-m", "2", "row", "rows.txt"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("1: row 1\n2: row 2\n... (stopped after 2")
    assert main(["grep", "-i", "NEEDLE", "guide.md"]) == 0
    assert capsys.readouterr().out == "3: some needle text\n"
    assert main(["grep", "-c", "row", "rows.txt"]) == 0
    assert capsys.readouterr().out == "50\n"


def test_grep_folder_names_documents(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It greps a folder, naming the document of each match."""
    assert main(["grep", "needle", "kb"]) == 0
    assert capsys.readouterr().out == "a.txt:2: needle in a\nb.txt:1: needle in b\n"


def test_grep_no_match_exit_1(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It exits 1 when nothing matches, saying so."""
    assert main(["grep", "zzz", "rows.txt"]) == 1
    assert "no lines match" in capsys.readouterr().out


def test_grep_missing_file_exit_2(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It exits 2 with a one-line error for a missing file."""
    assert main(["grep", "x", "missing.txt"]) == 2
    captured = capsys.readouterr()
    _one_line_error(captured.err)
    assert "missing.txt" in captured.err and captured.out == ""


@pytest.mark.parametrize(("pattern", "words"), [("(a)\\1", "backreferences"), ("(?<=a)b", "lookbehind"), ("(", "invalid")])
def test_grep_bad_pattern_exit_2(files: Path, capsys: pytest.CaptureFixture[str], pattern: str, words: str) -> None:
    """It exits 2 with a one-line error naming the unsupported feature or the invalid pattern."""
    assert main(["grep", pattern, "rows.txt"]) == 2
    err = capsys.readouterr().err
    _one_line_error(err)
    assert words in err


def test_chunk(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It prints a chunk under its navigation line."""
    assert main(["chunk", "rows.txt", "1", "--size", "20"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("[chunk 1 of 3 (0-based), 20 lines each; prev=0 next=2]\nrow 21\n")
    assert out.endswith("row 40\n")
    assert main(["chunk", "rows.txt", "0", "--unit", "chars", "--size", "6"]) == 0
    assert capsys.readouterr().out == "[chunk 0 of 57 (0-based), 6 chars each; prev=None next=1]\nrow 1\n\n"


def test_chunk_out_of_range_exit_2(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It exits 2 with a one-line error for an index past the end."""
    assert main(["chunk", "rows.txt", "5", "--size", "20"]) == 2
    err = capsys.readouterr().err
    _one_line_error(err)
    assert "out of range" in err


def test_chunk_missing_file_and_bad_arguments(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It exits 2 for a missing file, and argparse exits 2 for a bad unit or index."""
    assert main(["chunk", "missing.txt", "0"]) == 2
    _one_line_error(capsys.readouterr().err)
    for argv in (["chunk", "rows.txt", "0", "--unit", "words"], ["chunk", "rows.txt", "first"]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2
    capsys.readouterr()


# ------------------------------------------------------- terminal escapes in files

#: Raw controls that would act on a terminal (C0 but newline and tab, DEL, C1, bidi controls).
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
FORGED = "FAILED 3 tests\x1b[1A\x1b[2K\rall tests passed \x1b]0;pwned\x07 \x9b31m \u202eevil"
FORGED_SHOWN = "FAILED 3 tests\\x1b[1A\\x1b[2K\\x0dall tests passed \\x1b]0;pwned\\x07 \\x9b31m \\u202eevil"


@pytest.fixture
def hostile(files: Path) -> Path:
    """A text file (and a folder with a hostile file name) whose content drives a terminal."""
    body = "".join(f"plain line {i}\n" for i in range(1, 40)) + f"needle {FORGED}\n" + "tail line\n"
    (files / "hostile.txt").write_text(body)
    (files / "head.txt").write_text(f"title\n{FORGED}\nend\n")
    folder = files / "hkb"
    folder.mkdir()
    (folder / "name\x1b]0;pwned\x07.txt").write_text(f"needle {FORGED}\n")
    return files


HOSTILE_NAME_SHOWN = "name\\x1b]0;pwned\\x07.txt"


@pytest.mark.parametrize(("argv", "shown"), [
    (["peek", "hostile.txt", "-n", "5000"], FORGED_SHOWN),
    (["grep", "needle", "hostile.txt"], FORGED_SHOWN),
    (["grep", "-C", "1", "needle", "hkb"], f"{HOSTILE_NAME_SHOWN}:1: needle {FORGED_SHOWN}"),
    (["chunk", "hostile.txt", "0"], FORGED_SHOWN),
    (["peek", "hkb"], HOSTILE_NAME_SHOWN),
    (["probe", "head.txt"], "\\x1b]0;pwned\\x07 \\x9b31m \\u202eevil"),
    (["probe", "hkb"], HOSTILE_NAME_SHOWN),
], ids=["peek", "grep", "grep-folder", "chunk", "peek-folder", "probe", "probe-folder"])
def test_file_content_reaches_the_terminal_escaped(argv: list[str], shown: str, hostile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It shows a file's terminal controls escaped (content and file names), never raw."""
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert not RAW_CONTROL.search(out + err), out
    assert shown in out


def test_probe_json_keeps_the_original_text(hostile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It leaves --json output to JSON's own escapes: no raw control, and parsing gives the original name back."""
    assert main(["probe", "hkb", "--json"]) == 0
    out = capsys.readouterr().out
    assert not RAW_CONTROL.search(out)
    assert json.loads(out)["documents"][0]["name"] == "name\x1b]0;pwned\x07.txt"


def test_an_error_naming_a_hostile_path_is_escaped(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It escapes the controls of a path quoted in an error message, on one line."""
    assert main(["peek", "missing\x1b]0;pwned\x07\n.txt"]) == 2
    err = capsys.readouterr().err
    _one_line_error(err)
    assert not RAW_CONTROL.search(err)
    assert "missing\\x1b]0;pwned\\x07" in err


def test_a_warning_is_one_escaped_line(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It shows a warning about a hostile file as one escaped "rlm: warning:" line, without Python's source line."""
    (files / "bad\x1b]0;pwned\x07.txt").write_bytes(b"caf\xe9 needle\n")
    assert main(["grep", "needle", "bad\x1b]0;pwned\x07.txt"]) == 0
    err = capsys.readouterr().err
    assert err == "rlm: warning: bad\\x1b]0;pwned\\x07.txt: invalid UTF-8 was decoded with replacement characters\n"


POLICY = "\n\n".join(
    ["Opening hours are nine to five on weekdays.", "Refunds are accepted within thirty days of purchase.",
     "Parking behind the building is for staff only.", "Pets are welcome in the garden."]) + "\n"


@pytest.mark.skipif(not __import__("rlm_runtime.embeddings", fromlist=["installed"]).installed(), reason="no embedding model")
def test_grep_meaning_ranks_paragraphs_with_line_numbers(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It prints the paragraphs closest in meaning to the query, with their line numbers, best first; --json too."""
    (files / "policy.md").write_text(POLICY)
    assert main(["grep", "--meaning", "when can I get my money back", "policy.md", "-k", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("--- lines 3-3  score ") and out[1] == "3: Refunds are accepted within thirty days of purchase."
    assert len([line for line in out if line.startswith("--- lines")]) == 2
    assert main(["grep", "--meaning", "money back", "policy.md", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["hits"][0]["lines"] == "3-3" and len(data["hits"]) == 4
    (files / "shop").mkdir()
    (files / "shop" / "intro.md").write_text("Welcome.\n\nWe sell tea.\n")
    (files / "shop" / "policy.md").write_text(POLICY)
    assert main(["grep", "--meaning", "when can I get my money back", "shop", "-k", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("--- policy.md:3-3  score ") and out[1] == "3: Refunds are accepted within thirty days of purchase."


@pytest.mark.parametrize("argv, says", [
    (["grep", "--meaning", "x", "a.md", "b.md"], "takes one PATH"),
    (["grep", "--meaning", "  ", "guide.md"], "needs a query"),
    (["grep", "--meaning", "x", "guide.md", "-k", "0"], "-k must be"),
    (["grep", "--meaning", "x", "guide.md", "-c"], "for patterns"),
    (["grep", "needle"], "takes a PATTERN and a PATH"),
])
def test_grep_meaning_bad_usage_exits_2(files: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str) -> None:
    """It refuses a meaning search with a pattern as well, an empty query, a bad -k or pattern options, in one line."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    _one_line_error(err)
    assert says in err
