"""probe(): shape, structure hints, relevance and the load/excerpt/skip decision; its settings."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError

from rlm_runtime.config import load_probe_settings
from rlm_runtime.context import FileHandle, FileProbe, FolderProbe, ProbeConfig, TextHandle, open_context, probe_path
from rlm_runtime.context.probe import decide, detect_type
from rlm_runtime.errors import ConfigError, ContextError

MARKDOWN = "# Title\n\nIntro text.\n\n## Install\n\npip install x\n\n### Details\nmore\n"
PYTHON = "import os\n\n\nclass Store:\n    def get(self):\n        pass\n\n\nasync def fetch():\n    pass\n\n\ndef main():\n    pass\n"


def test_probe_of_markdown_file(write_file: Callable[..., Path]) -> None:
    """It reports size, lines, type, encoding, extension, tokens, first lines and headings."""
    path = write_file("guide.md", MARKDOWN)
    probe = probe_path(path)
    assert isinstance(probe, FileProbe)
    assert probe.name == "guide.md" and probe.path == str(path) and probe.kind == "file"
    assert (probe.size_bytes, probe.lines, probe.type, probe.encoding, probe.extension) == (
        len(MARKDOWN), 10, "markdown", "ascii", ".md")
    assert probe.est_tokens == FileHandle(path).n_tokens.value > 0
    assert probe.first_lines == MARKDOWN.splitlines()[:10]
    assert probe.structure["headings"] == ["1: # Title", "5: ## Install", "9: ### Details"]
    assert probe.structure["shape"].startswith("no fields it could read")
    assert probe.decision.action == "load"
    assert "headings" in probe.summary() and "decision: load" in repr(probe)


def test_a_brief_of_a_text_with_fields_names_them_without_its_first_lines(write_file: Callable[..., Path]) -> None:
    """It shows a model the fields of a text records() reads, not its first lines (values a
    small model answered with instead of the one its code found); a person's summary, and a
    text without fields, keep them."""
    rows = "".join(f"crate=C{i} | harbour=Port {chr(65 + i % 20)} | seal=S{i * 3}\n" for i in range(200))
    probe = probe_path(write_file("crates.log", rows))
    assert isinstance(probe, FileProbe) and probe.shape
    brief = probe.summary(brief=True)
    assert "'crate', 'harbour', 'seal'" in brief and "first lines" not in brief and "Port A" not in brief
    assert "first lines: 'crate=C0" in probe.summary()
    assert "first lines: '# Title'" in probe_path(write_file("guide.md", MARKDOWN)).summary(brief=True)  # type: ignore[union-attr]


def test_probe_of_python_file_lists_definitions(write_file: Callable[..., Path]) -> None:
    """It lists classes and functions (async and methods too) with their line numbers."""
    probe = probe_path(write_file("mod.py", PYTHON))
    assert probe.type == "python"
    assert probe.structure["definitions"] == ["4: class Store:", "5: def get(self):", "9: async def fetch():", "13: def main():"]


#: How a probe describes a JSON document's records (``records.SHAPE_TEXT["json"]``), before its fields.
JSON_DOC = ("a JSON document: a record an object that holds values, its key first; the objects it holds are its children "
            "(recs.children_of(name), recs.parent_of(name)); fields: ")


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("obj.json", '{"name": "x", "items": [1, 2], "n": 3}', {"json_top": "object", "keys": ["name", "items", "n"], "n_keys": 3,
                                                               "shape": JSON_DOC + "'name', 'items', 'n' (reads 100% of lines)"}),
        ("arr.json", '[{"id": 1, "title": "a"}, {"id": 2}]', {"json_top": "array", "length": 2, "item_keys": ["id", "title"],
                                                               "shape": JSON_DOC + "'id', 'title' (reads 100% of lines)"}),
        ("num.json", "42", {"json_top": "int"}),
        ("rows.jsonl", '{"id": 1, "text": "a"}\n{"id": 2, "text": "b"}\n{"id": 3, "text": "c"}\n',
         {"record_keys": ["id", "text"], "records": 3, "shape": JSON_DOC + "'id', 'text' (reads 100% of lines)"}),
        ("t.csv", "name,age,city\nann,31,Paris\nbob,42,Oslo\n",
         {"columns": ["name", "age", "city"], "n_columns": 3, "rows": 2, "delimiter": ",",
          "shape": "a table with a header row; fields: 'name', 'age', 'city' (reads 100% of lines)"}),
        ("t.tsv", "a\tb\n1\t2\n", {"columns": ["a", "b"], "n_columns": 2, "rows": 1, "delimiter": "\t",
                                   "shape": "a table with a header row; fields: 'a', 'b' (reads 100% of lines)"}),
        ("semi.csv", "a;b;c\n1;2;3\n4;5;6\n", {"columns": ["a", "b", "c"], "n_columns": 3, "rows": 2, "delimiter": ";",
                                                "shape": "a table with a header row; fields: 'a', 'b', 'c' (reads 100% of lines)"}),
    ],
)
def test_probe_structure_of_data_files(write_file: Callable[..., Path], name: str, content: str, expected: dict) -> None:
    """It describes JSON, JSONL and CSV/TSV shapes."""
    assert probe_path(write_file(name, content)).structure == expected


def test_probe_of_invalid_json_says_so(write_file: Callable[..., Path]) -> None:
    """It reports invalid JSON instead of failing."""
    assert probe_path(write_file("bad.json", '{"a": ')).structure["json"].startswith("invalid JSON")


def test_detect_type_without_extension() -> None:
    """It guesses JSON, a python script and markdown from the content when the extension says nothing."""
    assert detect_type("data", '  {"a": 1}') == "json"
    assert detect_type("script", "#!/usr/bin/env python3\nprint(1)\n") == "python"
    assert detect_type("notes", "# Title\n\n## Part\n") == "markdown"
    assert detect_type("notes", "plain words\n") == "text"
    assert detect_type("x.RS", "") == "rust"


def test_probe_of_text_handle_and_utf8_encoding() -> None:
    """It probes an in-memory handle, saying utf-8 for non-ASCII text."""
    probe = TextHandle("héllo\nwörld\n", name="mem").probe()
    assert probe.name == "mem" and probe.path is None and probe.kind == "text"
    assert probe.encoding == "utf-8" and probe.lines == 2 and probe.extension == ""


def test_probe_of_empty_file_is_skip(write_file: Callable[..., Path]) -> None:
    """It decides to skip an empty file."""
    probe = probe_path(write_file("empty.txt", ""))
    assert probe.decision.action == "skip" and "empty" in probe.decision.reason


def test_probe_missing_path_is_a_context_error(tmp_path: Path) -> None:
    """It raises a ContextError for a missing path."""
    with pytest.raises(ContextError):
        probe_path(tmp_path / "missing.txt")


def test_probe_to_dict_is_json(write_file: Callable[..., Path]) -> None:
    """It turns into plain data that json can dump."""
    data = json.loads(json.dumps(probe_path(write_file("g.md", MARKDOWN)).to_dict()))
    assert data["type"] == "markdown" and data["decision"]["action"] == "load"
    assert set(data["decision"]["thresholds"]) == {"load_max_tokens", "excerpt_max_tokens", "min_relevance", "keywords"}


# ------------------------------------------------------------------ relevance, decision


def test_keyword_relevance_and_hits(write_file: Callable[..., Path]) -> None:
    """It counts matching lines per keyword (case-insensitive, literal) and scores relevance in 0..1."""
    path = write_file("k.txt", "Alpha beta\nALPHA again\nc++ rocks\nnothing\n")
    probe = probe_path(path, ProbeConfig(keywords=("alpha", "c++", "zeta")))
    assert probe.keyword_hits == {"alpha": 2, "c++": 1, "zeta": 0}
    assert 0 < probe.relevance < 1
    none = probe_path(path, ProbeConfig(keywords=("zeta",)))
    assert none.relevance == 0 and none.decision.action == "skip" and "relevance" in none.decision.reason
    assert probe_path(path).relevance == 1.0  # no keywords: everything is relevant
    full = probe_path(path, ProbeConfig(keywords=("alpha",)))
    assert full.relevance > probe.relevance


def test_decision_thresholds() -> None:
    """It loads small contexts, excerpts big ones, says when huge, and skips irrelevant, binary or empty ones."""
    config = ProbeConfig(load_max_tokens=100, excerpt_max_tokens=1000)
    assert decide(100, 1.0, config).action == "load"
    assert decide(101, 1.0, config).action == "excerpt"
    huge = decide(1001, 1.0, config)
    assert huge.action == "excerpt" and "huge" in huge.reason
    assert decide(5, 1.0, config, binary=True).action == "skip"
    assert decide(0, 1.0, config, empty=True).action == "skip"
    kw = ProbeConfig(keywords=("x",), min_relevance=0.5)
    assert decide(5, 0.4, kw).action == "skip"
    assert decide(5, 0.5, kw).action == "load"
    assert decide(5, 0.0, ProbeConfig()).action == "load"  # without keywords relevance does not gate
    d = decide(500, 1.0, config)
    assert d.thresholds == {"load_max_tokens": 100, "excerpt_max_tokens": 1000, "min_relevance": 0.05, "keywords": []}
    assert "100" in d.reason


def test_probe_config_validation() -> None:
    """It refuses unknown settings and out-of-range values."""
    with pytest.raises(ValidationError):
        ProbeConfig(bogus=1)  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        ProbeConfig(min_relevance=2)
    with pytest.raises(ValidationError):
        ProbeConfig(load_max_tokens=-1)
    with pytest.raises(ValidationError):
        ProbeConfig(max_depth=-1)


# ----------------------------------------------------------------------------- folder


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    for rel, text in {
        "a.md": "# A\nneedle\n", "b.md": "# B\n", "code/x.py": "def x():\n    pass\n", "code/deep/y.py": "needle = 1\n",
        "data.csv": "a,b\n1,2\n", ".git/HEAD": "ref\n", "node_modules/m.js": "x\n",
    }.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    (root / "pic.png").write_bytes(b"\x89PNG\x00\x00")
    return root


def test_folder_probe_inventory(folder: Path) -> None:
    """It inventories a folder: totals, counts by type and extension, the largest files, the exclusions."""
    probe = probe_path(folder)
    assert isinstance(probe, FolderProbe)
    assert probe.files == 5
    names = [d["name"] for d in probe.documents]
    assert names == ["a.md", "b.md", "code/deep/y.py", "code/x.py", "data.csv"]
    assert probe.size_bytes == sum((folder / n).stat().st_size for n in names)
    assert probe.est_tokens == probe.size_bytes // 4
    assert probe.by_type == {"markdown": 2, "python": 2, "csv": 1}
    assert probe.by_extension == {".md": 2, ".py": 2, ".csv": 1}
    assert probe.largest[0] == ("code/x.py", 18)
    assert ".git" in probe.excluded and "node_modules" in probe.excluded
    assert probe.decision.action == "load"
    assert "5 documents" in probe.summary()
    json.dumps(probe.to_dict())


def test_folder_probe_extensions_depth_and_keywords(folder: Path) -> None:
    """It applies the configured extensions and depth, and scores keywords across documents."""
    probe = probe_path(folder, ProbeConfig(extensions=(".py",), max_depth=1))
    assert [d["name"] for d in probe.documents] == ["code/x.py"]
    kw = probe_path(folder, ProbeConfig(keywords=("needle", "absent")))
    assert kw.keyword_hits == {"needle": 2, "absent": 0} and 0 < kw.relevance < 1


def test_corpus_probe_method(folder: Path) -> None:
    """It probes an open corpus the same way as a folder path."""
    probe = open_context(folder).probe()
    assert isinstance(probe, FolderProbe) and probe.files == 5


def test_empty_folder_probe_is_skip(tmp_path: Path) -> None:
    """It decides to skip an empty folder."""
    probe = probe_path(tmp_path)
    assert probe.files == 0 and probe.decision.action == "skip"


# ----------------------------------------------------------------------------- settings


def test_settings_from_rlm_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It reads [probe] from rlm.toml in the working directory."""
    (tmp_path / "rlm.toml").write_text('[probe]\nkeywords = ["needle"]\nload_max_tokens = 7\n')
    monkeypatch.chdir(tmp_path)
    settings, source = load_probe_settings()
    assert settings == {"keywords": ["needle"], "load_max_tokens": 7}
    assert source == str(tmp_path / "rlm.toml")
    config = ProbeConfig(**settings)
    assert config.keywords == ("needle",) and config.load_max_tokens == 7


def test_settings_from_pyproject(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It reads [tool.rlm.probe] from pyproject.toml, found from a subfolder upwards."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.rlm.probe]\nexcerpt_max_tokens = 99\n')
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    assert load_probe_settings() == ({"excerpt_max_tokens": 99}, str(tmp_path / "pyproject.toml"))


def test_rlm_toml_wins_over_pyproject_in_the_same_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It prefers rlm.toml when both files have probe settings."""
    (tmp_path / "pyproject.toml").write_text("[tool.rlm.probe]\nload_max_tokens = 1\n")
    (tmp_path / "rlm.toml").write_text("[probe]\nload_max_tokens = 2\n")
    monkeypatch.chdir(tmp_path)
    assert load_probe_settings()[0] == {"load_max_tokens": 2}


def test_pyproject_without_probe_table_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It skips a pyproject.toml that has no [tool.rlm.probe] table."""
    root = tmp_path / "outer"
    inner = root / "inner"
    inner.mkdir(parents=True)
    (inner / "pyproject.toml").write_text('[project]\nname = "x"\n')
    (root / "rlm.toml").write_text("[probe]\nmin_relevance = 0.5\n")
    assert load_probe_settings(inner) == ({"min_relevance": 0.5}, str(root / "rlm.toml"))


def test_unreadable_settings_file_is_a_config_error(tmp_path: Path) -> None:
    """It raises a ConfigError naming a settings file that is not valid TOML."""
    (tmp_path / "rlm.toml").write_text("[probe\n")
    with pytest.raises(ConfigError, match="rlm.toml"):
        load_probe_settings(tmp_path)


def test_json_lines_too_large_to_parse_in_a_probe_are_described_from_their_head(
        write_file: Callable[..., Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """It describes JSON lines larger than a probe parses whole by the whole lines of their head,
    as records() reads them (JSON), not as lines of text; so too a large JSON document, by the
    window of it that its head is."""
    from rlm_runtime.context import probe as probe_module

    monkeypatch.setattr(probe_module, "_JSON_PARSED_BYTES", 2_000)
    rows = "".join(json.dumps({"crate": f"c{i}", "port": f"P{i % 7}", "seal": i * 3}) + "\n" for i in range(3_000))
    found = probe_path(write_file("crates.jsonl", rows))
    assert isinstance(found, FileProbe) and found.shape == "json"
    assert "fields: 'crate', 'port', 'seal'" in found.structure["shape"]
    assert open_context(rows).records().shape == "json"
    doc = json.dumps({"crates": [{"crate": f"c{i}", "notes": "x" * 3_000} for i in range(40)]}, indent=2)
    big = probe_path(write_file("crates.json", doc))
    assert isinstance(big, FileProbe) and big.shape == "json" and "fields: 'crate', 'notes'" in big.structure["shape"]
