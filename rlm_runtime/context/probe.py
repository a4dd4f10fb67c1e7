"""Probe before load: the shape of a context, and whether it is worth loading.

A probe reads little: the size, the first lines, a sample for the token estimate, and RE2
scans for structure (headings, definitions) that stop after a bounded number of hits. It
ends in a decision, ``load`` / ``excerpt`` / ``skip``, with the reason and the thresholds.
Thresholds and keywords come from ``ProbeConfig`` (``rlm_runtime.context.settings``).

A folder probe also judges each document: one that is empty, binary or unreadable is
marked skipped, and so is one scoring below ``min_relevance`` when keywords were configured
explicitly. Keywords of a question (``rank_keywords``) only order the documents, most
relevant first; the scan for them stops after ``SCAN_MAX_BYTES``.

The probes read through a TextBuffer (one text) or the small ``ProbedCorpus`` protocol, so
this module imports no handle class: handles.py and corpus.py import it.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections import Counter
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from rlm_runtime.context import grep as _grep
from rlm_runtime.context import records as _records
from rlm_runtime.context.buffer import TextBuffer
from rlm_runtime.context.plan import Plan
from rlm_runtime.context.plan import plan as make_plan
from rlm_runtime.context.protocol import Decision
from rlm_runtime.context.relevance import keyword_hits, merge_keywords, relevance, unique
from rlm_runtime.context.settings import ProbeConfig
from rlm_runtime.context.tokens import TokenCount
from rlm_runtime.errors import ContextError
from rlm_runtime.quoting import quoted

#: The start of a text a probe decodes for its type, first lines and CSV/JSONL shape.
HEAD_BYTES = 64 * 1024
#: A folder probe reads at most this much text to score documents against keywords
#: (smallest documents first); the rest are ranked by their names only.
SCAN_MAX_BYTES = 256 * 1024 * 1024
#: Documents named in a folder probe's ranking, at most.
RANKING_SIZE = 50
#: A keyword found in a document's name counts like this many matching lines.
NAME_HIT = 10
#: Matching lines counted per keyword and document: enough for relevance() to rank by;
#: configured keywords up to GATE_HITS_CAP (their corpus-wide count is reported).
RANK_HITS_CAP = 10
GATE_HITS_CAP = 50

_CODE_DEFS = {
    "python": r"^\s*(?:async\s+)?(?:def|class)\s+\w+",
    "javascript": r"^\s*(?:export\s+)?(?:async\s+)?(?:function\s+\w+|class\s+\w+|const\s+\w+\s*=\s*(?:async\s*)?\()",
    "go": r"^func\s+|^type\s+\w+\s+(?:struct|interface)",
    "rust": r"^\s*(?:pub\s+)?(?:fn|struct|enum|trait|impl)\s+",
    "java": r"^\s*(?:public|private|protected)?\s*(?:static\s+)?(?:class|interface|enum|[\w<>\[\]]+\s+\w+\s*\()",
    "c": r"^[A-Za-z_][\w\s\*]*\s+\**\w+\s*\([^;]*$",
}
_TYPES = {
    ".md": "markdown", ".markdown": "markdown", ".rst": "restructuredtext", ".txt": "text", ".log": "log",
    ".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".tsv": "tsv", ".py": "python",
    ".js": "javascript", ".ts": "javascript", ".tsx": "javascript", ".jsx": "javascript", ".go": "go", ".rs": "rust",
    ".java": "java", ".c": "c", ".h": "c", ".cpp": "c", ".cc": "c", ".hpp": "c", ".html": "html", ".xml": "xml",
    ".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".ini": "ini", ".sh": "shell",
}

__all__ = ["Decision", "FileProbe", "FolderProbe", "ProbeConfig", "decide", "detect_type", "probe_corpus", "probe_text"]


class ProbedDocument(Protocol):
    """What a folder probe reads of a document (``corpus.Document`` is one)."""

    id: int
    name: str
    size: int

    def check(self) -> str | None:
        """Why the document cannot be searched (empty, binary, unreadable), or None; reads a few KB."""

    def read(self) -> AbstractContextManager[TextBuffer]:
        """The document's text for the length of a ``with`` block (ContextError if it cannot be read)."""


class ProbedCorpus(Protocol):
    """What a folder probe reads of a corpus (``CorpusHandle`` is one)."""

    name: str
    root: str | None

    @property
    def documents(self) -> Sequence[ProbedDocument]: ...


@dataclass
class FileProbe:
    name: str
    path: str | None
    kind: str
    size_bytes: int
    lines: int
    type: str
    encoding: str
    extension: str
    est_tokens: int
    token_method: str
    first_lines: list[str]
    structure: dict[str, Any]
    relevance: float
    keyword_hits: dict[str, int]
    decision: Decision
    #: What ``records()`` makes of the text (``records.SHAPE_TEXT``'s keys; "" for code and JSON).
    shape: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self, brief: bool = False) -> str:
        """A few lines for a person, or (``brief``) for a model's first prompt. The text's
        own strings (its name, keys, columns, headings, first lines) are ``quoted``."""
        rows = [f"{quoted(self.name)}: {self.type}, {self.size_bytes} bytes, {self.lines} lines, ~{self.est_tokens} tokens, "
                f"{self.encoding}"]
        for key, value in self.structure.items():
            rows.append(f"  {key}: {_short(key, value)}")
        # A model's brief of a text records() reads shows its fields, not its first lines: a
        # small model answered with a value it saw there instead of the one its code found.
        if self.first_lines and not (brief and self.shape in _records.FIELDED_SHAPES):
            rows.append("  first lines: " + " | ".join(quoted(line) for line in self.first_lines[:3]))
        if not brief:
            rows.append(f"  decision: {self.decision.action} ({self.decision.reason})")
        return "\n".join(rows)

    def __repr__(self) -> str:
        return self.summary()


@dataclass
class FolderProbe:
    """An inventory. ``documents`` holds one row per document: id, name, size, type, ``skip``
    (the reason it is left out of searches, or None) and ``relevance`` (None when not scored)."""

    name: str
    root: str | None
    files: int
    size_bytes: int
    est_tokens: int
    by_type: dict[str, int]
    by_extension: dict[str, int]
    largest: list[tuple[str, int]]
    excluded: list[str]
    relevance: float
    keyword_hits: dict[str, int]
    decision: Decision
    documents: list[dict[str, Any]] = field(default_factory=list)
    #: Names of the searched documents that match the keywords, most relevant first.
    ranking: list[str] = field(default_factory=list)
    rank_keywords: list[str] = field(default_factory=list)
    scanned_bytes: int = 0
    #: False when SCAN_MAX_BYTES stopped the keyword scan before every document was read.
    scan_complete: bool = True
    #: Lines of the searchable documents whose lines were counted (smallest first, within
    #: SCAN_MAX_BYTES), and whether that is all of them.
    lines: int = 0
    lines_complete: bool = True
    #: The loading plan (``plan.py``): read whole within the load budget, excerpt, skip.
    plan: dict[str, Any] = field(default_factory=dict)

    @property
    def skipped(self) -> dict[str, str]:
        """Documents left out of searches by default: name -> reason."""
        return {d["name"]: d["skip"] for d in self.documents if d.get("skip")}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self, brief: bool = False) -> str:
        """A few lines for a person, or (``brief``) for a model's first prompt; a document's
        name is ``quoted``."""
        counted = f"{self.lines} lines" if self.lines_complete else f"{self.lines} lines in the smaller documents"
        rows = [f"{quoted(self.name)}: {self.files} documents, {self.size_bytes} bytes, {counted}, ~{self.est_tokens} tokens"]
        rows.append("  types: " + ", ".join(f"{t} {n}" for t, n in sorted(self.by_type.items(), key=lambda x: -x[1])[:8]))
        rows.append("  largest: " + ", ".join(f"{quoted(n)} ({s} B)" for n, s in self.largest[:5]))
        if self.ranking:
            more = f" (and {len(self.ranking) - 10} more)" if len(self.ranking) > 10 else ""
            rows.append("  most relevant first: " + ", ".join(map(quoted, self.ranking[:10])) + more)
        if self.plan:
            rows += ["  " + line.strip() for line in Plan(
                self.plan["budget"], [(x["name"], x["tokens"]) for x in self.plan["load"]],
                [(x["name"], x["tokens"]) for x in self.plan["excerpt"]],
                [(x["name"], x["reason"]) for x in self.plan["skip"]]).lines(quoted)[: 2 if brief else 3]]
        skipped = self.skipped
        if skipped and not brief:
            shown = ", ".join(f"{quoted(n)} ({r})" for n, r in list(skipped.items())[:10])
            rows.append(f"  skipped, listed but not searched by default: {shown}" + (" ..." if len(skipped) > 10 else ""))
        if not brief:
            rows.append(f"  decision: {self.decision.action} ({self.decision.reason})")
        return "\n".join(rows)

    def __repr__(self) -> str:
        return self.summary()


#: Characters of one row of a probe's structure (a list's items stop there).
_ROW_CHARS = 200


def _short(key: str, value: Any) -> str:
    """One value of a probe's structure for its summary: a list (the text's keys, columns,
    headings) as its items ``quoted``, up to ``_ROW_CHARS``; the text's delimiter ``quoted``;
    the shape as ``describe`` bounds it; the probe's own words and numbers as they are."""
    if isinstance(value, list):
        items: list[str] = []
        for item in value:
            shown = quoted(item)
            if items and sum(len(i) + 2 for i in items) + len(shown) > _ROW_CHARS:
                items.append("...")
                break
            items.append(shown)
        return "[" + ", ".join(items) + "]"
    if key == "delimiter":
        return quoted(value)
    if key == "shape":  # bounded by ``Shape.describe``, which cuts only between quoted names
        return str(value)
    text = json.dumps(value, default=str) if not isinstance(value, str) else value
    return text if len(text) <= _ROW_CHARS else text[:_ROW_CHARS - 3] + "..."


def detect_type(name: str, head: str) -> str:
    ext = os.path.splitext(name)[1].lower()
    if ext in _TYPES:
        return _TYPES[ext]
    stripped = head.lstrip()
    if stripped.startswith(("{", "[")):
        return "json"
    if stripped.startswith("#!") and "python" in stripped.split("\n", 1)[0]:
        return "python"
    if any(line.startswith("#") for line in head.splitlines()[:20]) and "\n## " in head:
        return "markdown"
    return "text"


def _thresholds(config: ProbeConfig) -> dict[str, Any]:
    return {"load_max_tokens": config.load_max_tokens, "excerpt_max_tokens": config.excerpt_max_tokens,
            "min_relevance": config.min_relevance, "keywords": list(config.keywords)}


def decide(tokens: int, relevance: float | None, config: ProbeConfig, *, binary: bool = False, empty: bool = False) -> Decision:
    """The verdict for ``tokens`` of text scoring ``relevance`` (None: not known, so it does not gate)."""
    thresholds = _thresholds(config)
    if binary:
        return Decision("skip", "binary content", thresholds)
    if empty:
        return Decision("skip", "empty", thresholds)
    if config.keywords and relevance is not None and relevance < config.min_relevance:
        return Decision("skip", f"relevance {relevance} below {config.min_relevance}", thresholds)
    if tokens <= config.load_max_tokens:
        return Decision("load", f"~{tokens} tokens fits the {config.load_max_tokens}-token load limit", thresholds)
    if tokens <= config.excerpt_max_tokens:
        return Decision("excerpt", f"~{tokens} tokens is over the {config.load_max_tokens}-token load limit: peek, grep and chunk",
                        thresholds)
    return Decision("excerpt", f"~{tokens} tokens is huge (over {config.excerpt_max_tokens}): grep first, read only matches",
                    thresholds)


# ------------------------------------------------------------------------ one text


def _shape(buf: TextBuffer, kind: str, head: str) -> _records.Shape | None:
    """What ``records()`` will make of the text, from its head (whose last line may be cut), a
    structure found there measured on the whole text up to ``_WHOLE_CHECKED_BYTES``; or from
    the whole of JSON up to ``_JSON_PARSED_BYTES`` (past it, from the head's whole lines);
    None for source code and a JSON document its head does not show."""
    if kind in _CODE_DEFS or not buf.nbytes:
        return None
    lines = head.split("\n")
    if head.lstrip()[:1] in ("{", "[", '"'):
        # JSON (a document, JSON lines): its objects are the records. A larger text is judged by
        # its head's whole lines, as records() will read it.
        whole = buf.nbytes <= _JSON_PARSED_BYTES
        try:
            found = _records.json_shape(buf.decode(0, buf.nbytes) if whole else "\n".join(lines[:-1]))
        except ContextError:
            found = None
        if found is not None and (whole or found.kind == "json"):
            return found
    if kind == "json":
        return None
    shape = _records.sniff(lines[:-1] if buf.nbytes > HEAD_BYTES and len(lines) > 1 else lines)
    if shape.kind in ("structure", "blocks") and buf.nbytes <= _WHOLE_CHECKED_BYTES:  # what records() offers: seen whole
        shape = _records.whole(buf.decode(0, buf.nbytes).split("\n"), shape)
    return shape


def _structure(buf: TextBuffer, kind: str, head: str, shape: _records.Shape | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if kind == "markdown":
        heads = _grep.grep_buffer(buf, r"^#{1,6}\s+\S", max_matches=40)
        out["headings"] = [f"{m.line_no}: {m.line.strip()}" for m in heads]
    elif kind in _CODE_DEFS:
        defs = _grep.grep_buffer(buf, _CODE_DEFS[kind], max_matches=60)
        out["definitions"] = [f"{m.line_no}: {m.line.strip()[:100]}" for m in defs]
    elif kind == "json":
        out.update(_json_shape(buf))
    elif kind == "jsonl":
        first = head.split("\n", 1)[0]
        try:
            obj = json.loads(first)
            out["record_keys"] = list(obj)[:30] if isinstance(obj, dict) else type(obj).__name__
        except (ValueError, RecursionError):
            out["record_keys"] = "first line is not JSON"
        out["records"] = buf.n_lines
    elif kind in ("csv", "tsv"):
        out.update(_csv_shape(head, buf.n_lines, "\t" if kind == "tsv" else None))
    if shape is not None:
        out["shape"] = shape.describe()
    return out


#: The largest JSON document a probe parses for its shape.
_JSON_PARSED_BYTES = 5_000_000
#: The largest text whose structure found in the head a probe measures on the whole text (about a
#: second here), so that the brief offers what ``records()`` reads; a larger text's brief is the head's.
_WHOLE_CHECKED_BYTES = 4_000_000


def _json_shape(buf: TextBuffer) -> dict[str, Any]:
    if buf.nbytes > _JSON_PARSED_BYTES:
        return {"json": "too large to parse in a probe; grep for keys"}
    try:
        obj = json.loads(buf.decode(0, buf.nbytes))
    except ValueError as e:
        return {"json": f"invalid JSON: {e}"}
    except RecursionError:  # a document nested thousands deep: its shape is not worth the parse
        return {"json": "nested too deeply to parse in a probe; grep for keys"}
    if isinstance(obj, dict):
        return {"json_top": "object", "keys": list(obj)[:40], "n_keys": len(obj)}
    if isinstance(obj, list):
        first = obj[0] if obj else None
        shape: dict[str, Any] = {"json_top": "array", "length": len(obj)}
        if isinstance(first, dict):
            shape["item_keys"] = list(first)[:30]
        return shape
    return {"json_top": type(obj).__name__}


def _csv_shape(head: str, n_lines: int, delimiter: str | None) -> dict[str, Any]:
    sample = "\n".join(head.splitlines()[:50])
    try:
        dialect = csv.Sniffer().sniff(sample) if delimiter is None else None
        delim = delimiter or (dialect.delimiter if dialect else ",")
    except csv.Error:
        delim = ","
    rows = list(csv.reader(io.StringIO(sample), delimiter=delim))
    header = rows[0] if rows else []
    return {"columns": header[:50], "n_columns": len(header), "rows": max(n_lines - 1, 0), "delimiter": delim}


def probe_text(buf: TextBuffer, *, name: str, kind: str, path: str | None, tokens: TokenCount,
               config: ProbeConfig | None = None) -> FileProbe:
    """Probe one text (what ``BufferHandle.probe`` returns). Reads the head, the token sample,
    the line index and bounded structure scans; with keywords, one scan for all of them."""
    config = config or ProbeConfig()
    head = buf.decode(0, min(buf.nbytes, HEAD_BYTES))
    first_lines = head.splitlines()[:10]
    kind_of_text = detect_type(path or name, head)
    hits = keyword_hits(buf, config.keywords) if config.keywords else {}
    score = relevance(hits)
    n_lines = buf.n_lines  # builds the index, which also finds invalid UTF-8 past the head
    shape = _shape(buf, kind_of_text, head)
    if buf.nbytes and head.isascii() and not buf.invalid_utf8:
        encoding = "ascii"
    else:
        encoding = "utf-8 (invalid bytes replaced)" if buf.invalid_utf8 else "utf-8"
    return FileProbe(
        name=name, path=path, kind=kind, size_bytes=buf.nbytes, lines=n_lines, type=kind_of_text,
        encoding=encoding, extension=os.path.splitext(path or name)[1].lower(), est_tokens=tokens.value,
        token_method=repr(tokens), first_lines=first_lines, structure=_structure(buf, kind_of_text, head, shape),
        relevance=score, keyword_hits=hits, decision=decide(tokens.value, score, config, empty=buf.nbytes == 0),
        shape=shape.kind if shape is not None else "",
    )


# ---------------------------------------------------------------------- a corpus


def probe_corpus(corpus: ProbedCorpus, config: ProbeConfig | None = None, excluded: list[str] | None = None, *,
                 rank_keywords: Sequence[str] = (), scan_max_bytes: int = SCAN_MAX_BYTES) -> FolderProbe:
    """An inventory of ``corpus`` with a verdict per document and for the whole.

    Token counts are bytes/4 estimates. Every document's first few KB are read (binary or
    empty?); with keywords (configured or ``rank_keywords``), documents are scanned for them,
    smallest first, until ``scan_max_bytes`` were read.
    """
    config = config or ProbeConfig()
    gate = unique(config.keywords)  # configured explicitly: these may skip a document
    words = merge_keywords(gate, rank_keywords)
    docs = list(corpus.documents)
    skips: dict[int, str] = {}
    for d in docs:
        reason = d.check()
        if reason:
            skips[d.id] = reason
    # Ranking needs no more than relevance() counts (10 lines); a configured keyword is
    # counted up to 50 lines, as its corpus-wide hits always were.
    caps = {w: GATE_HITS_CAP if w in gate else RANK_HITS_CAP for w in words}
    scores, scanned, complete = _scan(docs, skips, words, caps, scan_max_bytes)

    rows: list[dict[str, Any]] = []
    by_type: Counter[str] = Counter()
    by_ext: Counter[str] = Counter()
    ranked: list[tuple[float, int, str]] = []
    for d in docs:
        ext = os.path.splitext(d.name)[1].lower()
        kind = _TYPES.get(ext, "text")
        by_type[kind] += 1
        by_ext[ext or "(none)"] += 1
        hits = scores.get(d.id)
        if hits is not None and gate and d.id not in skips:
            score = relevance({w: hits[w] for w in gate})
            if score < config.min_relevance:
                skips[d.id] = f"relevance below {config.min_relevance} for keywords {', '.join(gate)}"
        if words and d.id not in skips:
            named = {w: (hits or {}).get(w, 0) + (NAME_HIT if w.casefold() in d.name.casefold() else 0) for w in words}
            if any(named.values()):
                ranked.append((-relevance(named), d.id, d.name))
        rows.append({"id": d.id, "name": d.name, "size": d.size, "type": kind, "skip": skips.get(d.id),
                     "relevance": relevance(hits) if hits is not None else None})

    corpus_hits = {w: min(sum(h[w] for h in scores.values()), GATE_HITS_CAP) for w in gate}
    score_all: float | None = relevance(corpus_hits)
    if not complete and score_all is not None and score_all < config.min_relevance:
        score_all = None  # the documents not read may hold the keywords: no verdict by relevance
    searched = sum(d.size for d in docs if d.id not in skips)
    if docs and len(skips) == len(docs):
        decision = Decision("skip", f"none of the {len(docs)} documents can be searched (see skipped)", _thresholds(config))
    else:
        decision = decide(searched // 4, score_all, config, empty=not docs)
    size = sum(d.size for d in docs)
    counts, counted_all = _line_counts(docs, skips, scan_max_bytes)
    for row in rows:
        row["lines"] = counts.get(row["id"])
    found = FolderProbe(
        name=corpus.name, root=corpus.root, files=len(docs), size_bytes=size, est_tokens=size // 4,
        by_type=dict(by_type), by_extension=dict(by_ext),
        largest=sorted(((d.name, d.size) for d in docs), key=lambda x: -x[1])[:10], excluded=excluded or [],
        relevance=relevance(corpus_hits), keyword_hits=corpus_hits, decision=decision, documents=rows,
        ranking=[name for _, _, name in sorted(ranked)][:RANKING_SIZE], rank_keywords=list(words),
        scanned_bytes=scanned, scan_complete=complete, lines=sum(counts.values()), lines_complete=counted_all,
    )
    found.plan = make_plan(found).to_dict()
    return found


def _line_counts(docs: list[ProbedDocument], skips: dict[int, str], budget: int) -> tuple[dict[int, int], bool]:
    """Lines of the searchable documents, smallest first, within ``budget`` bytes read: (lines
    by document id, whether every one was counted)."""
    counts: dict[int, int] = {}
    read = 0
    for d in sorted((d for d in docs if d.id not in skips), key=lambda d: (d.size, d.id)):
        if read + d.size > budget:
            return counts, False
        try:
            with d.read() as buf:
                counts[d.id] = buf.n_lines
                read += buf.nbytes
        except ContextError:
            continue
    return counts, True


def _scan(docs: list[ProbedDocument], skips: dict[int, str], words: tuple[str, ...], caps: dict[str, int],
          budget: int) -> tuple[dict[int, dict[str, int]], int, bool]:
    """Keyword hits of the readable documents, smallest first, within ``budget`` bytes:
    (hits by document id, bytes read, whether every readable document was read)."""
    scores: dict[int, dict[str, int]] = {}
    scanned = 0
    if not words:
        return scores, scanned, True
    for d in sorted((d for d in docs if d.id not in skips), key=lambda d: (d.size, d.id)):
        if scanned + d.size > budget:
            return scores, scanned, False  # the rest are larger still
        try:
            with d.read() as buf:
                scores[d.id] = keyword_hits(buf, words, caps=caps)
                scanned += buf.nbytes
        except ContextError as e:
            skips[d.id] = f"unreadable: {e}"
    return scores, scanned, True
