"""describe(): what the first prompt says about each context, acting on its probe; question keywords; [probe] settings."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from rlm_runtime.context import (
    ContextBrief,
    CorpusHandle,
    LazyHandle,
    ProbeConfig,
    TextHandle,
    describe,
    keywords_from_question,
    load_probe_config,
    open_context,
)
from rlm_runtime.context.grep import re2_escape
from rlm_runtime.context.probe import probe_corpus
from rlm_runtime.context.relevance import MAX_QUESTION_KEYWORDS, keyword_hits, merge_keywords
from rlm_runtime.errors import ConfigError

# ------------------------------------------------------------------ keywords


@pytest.mark.parametrize(("question", "expected"), [
    ("Where does the person Casey reports to work?", ("Casey", "person", "report", "work")),
    ("What does load_probe_config return in rlm.toml?", ("load_probe_config", "rlm.toml", "return")),
    ("How many employees did ACME Corp have in 1984?", ("ACME", "Corp", "1984", "employee")),
    ('Which document mentions "blue whale" and the iPhone?', ("blue whale", "iPhone")),
    ("What is Paris's population? Don't guess.", ("Paris", "population", "guess")),
    ("What is it?", ()),
    ("", ()),
])
def test_keywords_from_question(question: str, expected: tuple[str, ...]) -> None:
    """It keeps quoted phrases, identifiers, numbers, names and content words, most distinctive first; it drops stopwords."""
    assert keywords_from_question(question) == expected


def test_keywords_are_capped_and_unique() -> None:
    """It keeps at most MAX_QUESTION_KEYWORDS keywords, without repeats ignoring case."""
    words = keywords_from_question(" ".join(f"Name{i} name{i}" for i in range(30)))
    assert len(words) == MAX_QUESTION_KEYWORDS and len({w.lower() for w in words}) == len(words)
    assert merge_keywords(("Invoice", "refund"), ("invoice", "Casey")) == ("Invoice", "refund", "Casey")


def test_keyword_hits_equal_grep_counts() -> None:
    """It counts, in one pass, the lines grep would find for each keyword (ignoring case), up to the cap."""
    text = "Alpha beta\nALPHA again\nc++ rocks, alpha\nnothing\n\u212aelvin and Stra\u00dfe\n" + "beta\n" * 80
    h = TextHandle(text)
    words = ("alpha", "c++", "beta", "zeta", "ALPHA", "kelvin", "straße")
    hits = keyword_hits(h._buf(), words, cap=50)
    assert hits == {w: len(h.grep(re2_escape(w), ignore_case=True, max_matches=50)) for w in words}
    assert hits == {"alpha": 3, "c++": 1, "beta": 50, "zeta": 0, "ALPHA": 3, "kelvin": 1, "straße": 1}
    assert keyword_hits(h._buf(), words, caps={"beta": 10})["beta"] == 10


# ------------------------------------------------------------------ describe


@pytest.fixture
def staff(tmp_path: Path) -> Path:
    """A two-hop corpus: the second fact shares no word with the question."""
    root = tmp_path / "staff"
    root.mkdir()
    (root / "a_notes.txt").write_text("Staff note: Casey reports to Quinn.\n")
    (root / "b_quinn.txt").write_text("Quinn - building 7, desk 12.\n")
    (root / "c_misc.txt").write_text("The canteen opens at noon.\n")
    return root


QUESTION = "In which office is the person Casey reports to?"


def test_question_keywords_rank_but_never_skip(staff: Path) -> None:
    """It ranks documents by the question's keywords and skips none of them, though one shares no word with the question."""
    corpus = open_context(staff)
    (brief,) = describe([corpus], question=QUESTION, inline_max_chars=0)
    assert brief.relevant_documents[0] == "a_notes.txt"
    assert "most relevant first: 'a_notes.txt'" in brief.summary
    assert brief.skipped_documents == () and corpus.skipped == {}
    assert [m.doc for m in corpus.grep("Quinn")] == ["a_notes.txt", "b_quinn.txt"]  # the second hop is searched
    assert "Casey" in brief.keywords


def test_configured_keywords_gate(staff: Path) -> None:
    """It skips documents below min_relevance when keywords are configured in [probe], and lists why."""
    corpus = open_context(staff)
    config = ProbeConfig(keywords=("canteen",), min_relevance=0.5)
    (brief,) = describe([corpus], question=QUESTION, config=config, inline_max_chars=0)
    assert brief.skipped_documents == ("a_notes.txt", "b_quinn.txt")
    assert brief.skip_reason == "relevance below 0.5 for keywords canteen"
    assert corpus.names() == ["a_notes.txt", "b_quinn.txt", "c_misc.txt"]
    assert [m.doc for m in corpus.grep("e")] == ["c_misc.txt"]
    # Describing again without keywords searches everything again.
    describe([corpus], question=QUESTION, inline_max_chars=0)
    assert corpus.skipped == {}


def test_binary_and_empty_documents_are_skipped(staff: Path) -> None:
    """It marks binary and empty documents skipped, whatever the keywords."""
    (staff / "blob.dat").write_bytes(b"\x00\x01needle")
    (staff / "empty.txt").write_text("")
    corpus = open_context(staff)
    (brief,) = describe([corpus], question="anything", inline_max_chars=0)
    assert brief.skipped_documents == ("blob.dat", "empty.txt")
    assert brief.skip_reason == "binary content; empty"
    assert corpus.skipped == {"blob.dat": "binary content", "empty.txt": "empty"}


def test_small_contexts_are_inline(staff: Path, tmp_path: Path) -> None:
    """It gives the whole text of a context the probe says to load, when it fits inline_max_chars."""
    text = TextHandle("short text\n", name="t")
    big = tmp_path / "big.txt"
    big.write_text("word " * 30_000)
    briefs = describe([text, open_context(staff), open_context(big)], question="q", inline_max_chars=1000)
    assert briefs[0].decision == "load" and briefs[0].inline == "short text\n"
    assert briefs[1].inline is not None and briefs[1].inline.startswith("=== a_notes.txt ===\nStaff note")
    assert briefs[2].decision == "excerpt" and briefs[2].inline is None
    assert describe([text], question="q", inline_max_chars=5)[0].inline is None  # loadable, but longer than the limit
    assert describe([text], question="q", inline_max_chars=0)[0].inline is None
    assert describe([text], question="q", config=ProbeConfig(load_max_tokens=1), inline_max_chars=1000)[0].inline is None


def test_inline_corpus_leaves_out_skipped_documents(staff: Path) -> None:
    """It inlines a small corpus without its skipped documents."""
    (staff / "blob.dat").write_bytes(b"\x00secret-ish bytes")
    (brief,) = describe([open_context(staff)], question="q", inline_max_chars=10_000)
    assert brief.inline is not None and "blob.dat" not in brief.inline and "canteen" in brief.inline


def test_summary_is_the_brief_probe_summary() -> None:
    """It uses the probe's brief summary, the text the system prompt showed before."""
    h = TextHandle("# Title\n\n## Part\n", name="guide.md")
    (brief,) = describe([h], question="q", inline_max_chars=0)
    assert brief.summary == h.probe().summary(brief=True)
    assert brief.decision == "load" and "load limit" in brief.reason


def test_unprobeable_context_is_described_not_raised() -> None:
    """It describes a context whose probe fails as 'could not be probed', and goes on with the others."""
    broken = LazyHandle(lambda: 3, name="broken")  # type: ignore[arg-type, return-value]
    briefs = describe([broken, TextHandle("ok")], question="q", inline_max_chars=100)
    assert briefs[0].summary.startswith("'broken': could not be probed (") and "not str" in briefs[0].summary
    assert briefs[0].decision == "excerpt" and briefs[0].inline is None
    assert briefs[1].inline == "ok"


def test_to_dict_is_json_without_the_inline_text(staff: Path) -> None:
    """It turns a brief into plain data with the inline text's length, not the text."""
    (staff / "empty.txt").write_text("")
    briefs = describe([TextHandle("inline me"), open_context(staff)], question=QUESTION, inline_max_chars=1000)
    data = json.loads(json.dumps([b.to_dict() for b in briefs]))
    assert data[0]["inline_chars"] == 9 and "inline" not in data[0]
    assert data[1]["skipped_documents"] == ["empty.txt"] and data[1]["relevant_documents"][0] == "a_notes.txt"
    assert set(data[0]) == {"name", "summary", "decision", "reason", "inline_chars", "skipped_documents", "skip_reason",
                            "relevant_documents", "keywords", "shape"}
    with pytest.raises(AttributeError):
        briefs[0].name = "x"  # type: ignore[misc]
    assert isinstance(briefs[0], ContextBrief)


def test_unscanned_documents_are_not_gated(staff: Path) -> None:
    """It never skips a document for relevance when the scan budget stopped before reading it."""
    corpus = open_context(staff)
    config = ProbeConfig(keywords=("canteen",), min_relevance=0.5)
    probe = probe_corpus(corpus, config, scan_max_bytes=30)
    assert not probe.scan_complete and probe.scanned_bytes <= 30
    assert probe.skipped == {}  # c_misc.txt (27 bytes) scored and kept; the others were not read
    assert probe.decision.action != "skip"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts /proc/self/fd")
def test_describe_keeps_no_file_open(tmp_path: Path) -> None:
    """It reads a folder of many files without keeping a descriptor per document (each map holds one)."""
    for i in range(300):
        (tmp_path / f"f{i:03}.txt").write_text(f"document {i} about topic{i % 7}\n")
    corpus = open_context(tmp_path)
    before = len(os.listdir("/proc/self/fd"))
    (brief,) = describe([corpus], question="Which documents are about topic3?", inline_max_chars=0)
    assert len(os.listdir("/proc/self/fd")) <= before + 2
    assert brief.relevant_documents[0] == "f003.txt"


# ------------------------------------------------------------------ settings


def test_load_probe_config_reads_rlm_toml(tmp_path: Path) -> None:
    """It turns [probe] of rlm.toml into a ProbeConfig, found from a subfolder upwards."""
    (tmp_path / "rlm.toml").write_text('[probe]\nkeywords = ["invoice"]\nload_max_tokens = 7\n')
    (tmp_path / "sub").mkdir()
    config = load_probe_config(tmp_path / "sub")
    assert config.keywords == ("invoice",) and config.load_max_tokens == 7


def test_load_probe_config_defaults_without_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It gives the defaults when no settings file has probe settings."""
    monkeypatch.chdir(tmp_path)
    assert load_probe_config() == ProbeConfig()


@pytest.mark.parametrize("body", ["load_max_tokens = -1", 'load_max_tokens = "lots"', "bogus = 1", "min_relevance = 2"])
def test_load_probe_config_bad_settings_are_a_config_error(tmp_path: Path, body: str) -> None:
    """It raises a ConfigError naming the file and the setting for invalid probe settings."""
    (tmp_path / "rlm.toml").write_text(f"[probe]\n{body}\n")
    with pytest.raises(ConfigError, match=r"invalid probe settings in .*rlm\.toml: " + body.split()[0]):
        load_probe_config(tmp_path)


def test_load_probe_config_broken_toml_is_a_config_error(tmp_path: Path) -> None:
    """It raises a ConfigError naming a settings file that is not TOML."""
    (tmp_path / "rlm.toml").write_text("[probe\n")
    with pytest.raises(ConfigError, match="rlm.toml"):
        load_probe_config(tmp_path)


def test_corpus_of_handles_is_described(staff: Path) -> None:
    """It describes a list corpus (in-memory documents) like a folder."""
    corpus = CorpusHandle.from_items(["Casey reports to Quinn.\n", "Quinn: building 4.\n", ""])
    (brief,) = describe([corpus], question=QUESTION, inline_max_chars=0)
    assert brief.relevant_documents == ("doc0",) and brief.skipped_documents == ("doc2",)
