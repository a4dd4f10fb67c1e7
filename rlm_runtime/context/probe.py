"""Probe before load: the shape of a context, and whether it is worth loading.

A probe reads little: the size, the first lines, a sample for the token estimate, and RE2
scans for structure (headings, definitions) that stop after a bounded number of hits. It
ends in a decision, ``load`` / ``excerpt`` / ``skip``, with the reason and the thresholds.
Thresholds and keywords come from ``ProbeConfig`` (``[tool.rlm.probe]`` in pyproject.toml,
or ``[probe]`` in rlm.toml; see ``rlm_runtime.config.load_probe_config``).
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rlm_runtime.context import grep as _grep
from rlm_runtime.context.corpus import DEFAULT_EXCLUDES, CorpusHandle
from rlm_runtime.context.handles import ContextHandle

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


class ProbeConfig(BaseModel):
    """How probes judge relevance and decide what to load.

    Args:
        keywords: words that make a context relevant (case-insensitive).
        load_max_tokens: load whole contexts up to this size.
        excerpt_max_tokens: above ``load_max_tokens`` and up to this, hand out excerpts;
            beyond it, still excerpt (never load) but say the context is huge.
        min_relevance: with keywords set, skip contexts scoring below this (0..1).
        excludes: folder and file names (globs) left out of folder inventories.
        extensions: when set, only files with these extensions are inventoried.
        max_depth: folder depth limit (None: no limit).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    keywords: tuple[str, ...] = ()
    load_max_tokens: int = Field(20_000, ge=0)
    excerpt_max_tokens: int = Field(2_000_000, ge=0)
    min_relevance: float = Field(0.05, ge=0, le=1)
    excludes: tuple[str, ...] = DEFAULT_EXCLUDES
    extensions: tuple[str, ...] | None = None
    max_depth: int | None = Field(None, ge=0)


@dataclass
class Decision:
    action: str  # load | excerpt | skip
    reason: str
    thresholds: dict[str, Any]


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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self, brief: bool = False) -> str:
        """A few lines for a person, or (``brief``) for a model's first prompt."""
        rows = [f"{self.name}: {self.type}, {self.size_bytes} bytes, {self.lines} lines, ~{self.est_tokens} tokens, {self.encoding}"]
        for key, value in self.structure.items():
            rows.append(f"  {key}: {_short(value)}")
        if self.first_lines:
            rows.append("  first lines: " + " | ".join(line[:80] for line in self.first_lines[:3]))
        if not brief:
            rows.append(f"  decision: {self.decision.action} ({self.decision.reason})")
        return "\n".join(rows)

    def __repr__(self) -> str:
        return self.summary()


@dataclass
class FolderProbe:
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self, brief: bool = False) -> str:
        rows = [f"{self.name}: {self.files} documents, {self.size_bytes} bytes, ~{self.est_tokens} tokens"]
        rows.append("  types: " + ", ".join(f"{t} {n}" for t, n in sorted(self.by_type.items(), key=lambda x: -x[1])[:8]))
        rows.append("  largest: " + ", ".join(f"{n} ({s} B)" for n, s in self.largest[:5]))
        if not brief:
            rows.append(f"  decision: {self.decision.action} ({self.decision.reason})")
        return "\n".join(rows)

    def __repr__(self) -> str:
        return self.summary()


def _short(value: Any) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else value
    return text if len(text) <= 200 else text[:197] + "..."


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


def _keyword_hits(handle: ContextHandle, keywords: tuple[str, ...]) -> dict[str, int]:
    hits = {}
    for word in keywords:
        res = handle.grep(_grep.re2_escape(word), max_matches=50, ignore_case=True)
        hits[word] = len(res)
    return hits


def _relevance(hits: dict[str, int]) -> float:
    if not hits:
        return 1.0
    present = sum(1 for n in hits.values() if n)
    density = sum(min(n, 10) for n in hits.values()) / (10 * len(hits))
    return round(0.7 * present / len(hits) + 0.3 * density, 3)


def decide(tokens: int, relevance: float, config: ProbeConfig, *, binary: bool = False, empty: bool = False) -> Decision:
    thresholds = {"load_max_tokens": config.load_max_tokens, "excerpt_max_tokens": config.excerpt_max_tokens,
                  "min_relevance": config.min_relevance, "keywords": list(config.keywords)}
    if binary:
        return Decision("skip", "binary content", thresholds)
    if empty:
        return Decision("skip", "empty", thresholds)
    if config.keywords and relevance < config.min_relevance:
        return Decision("skip", f"relevance {relevance} below {config.min_relevance}", thresholds)
    if tokens <= config.load_max_tokens:
        return Decision("load", f"~{tokens} tokens fits the {config.load_max_tokens}-token load limit", thresholds)
    if tokens <= config.excerpt_max_tokens:
        return Decision("excerpt", f"~{tokens} tokens is over the {config.load_max_tokens}-token load limit: peek, grep and chunk",
                        thresholds)
    return Decision("excerpt", f"~{tokens} tokens is huge (over {config.excerpt_max_tokens}): grep first, read only matches",
                    thresholds)


def _structure(handle: ContextHandle, kind: str, head: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if kind == "markdown":
        heads = handle.grep(r"^#{1,6}\s+\S", max_matches=40)
        out["headings"] = [f"{m.line_no}: {m.line.strip()}" for m in heads]
    elif kind in _CODE_DEFS:
        defs = handle.grep(_CODE_DEFS[kind], max_matches=60)
        out["definitions"] = [f"{m.line_no}: {m.line.strip()[:100]}" for m in defs]
    elif kind == "json":
        out.update(_json_shape(handle))
    elif kind == "jsonl":
        first = head.split("\n", 1)[0]
        try:
            obj = json.loads(first)
            out["record_keys"] = list(obj)[:30] if isinstance(obj, dict) else type(obj).__name__
        except ValueError:
            out["record_keys"] = "first line is not JSON"
        out["records"] = handle.n_lines
    elif kind in ("csv", "tsv"):
        out.update(_csv_shape(head, handle.n_lines, "\t" if kind == "tsv" else None))
    return out


def _json_shape(handle: ContextHandle) -> dict[str, Any]:
    if handle.n_bytes > 5_000_000:
        return {"json": "too large to parse in a probe; grep for keys"}
    try:
        obj = json.loads(handle._buf().decode(0, handle.n_bytes))
    except ValueError as e:
        return {"json": f"invalid JSON: {e}"}
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


def probe_handle(handle: ContextHandle, config: ProbeConfig | None = None) -> FileProbe:
    config = config or ProbeConfig()
    buf = handle._buf()
    head = buf.decode(0, min(buf.nbytes, 64 * 1024))
    first_lines = head.splitlines()[:10]
    path = getattr(handle, "path", None)
    kind = detect_type(path or handle.name, head)
    tokens = handle.n_tokens
    hits = _keyword_hits(handle, config.keywords) if config.keywords else {}
    relevance = _relevance(hits)
    n_lines = buf.n_lines  # builds the index, which also finds invalid UTF-8 past the head
    if buf.nbytes and head.isascii() and not buf.invalid_utf8:
        encoding = "ascii"
    else:
        encoding = "utf-8 (invalid bytes replaced)" if buf.invalid_utf8 else "utf-8"
    return FileProbe(
        name=handle.name, path=path, kind=handle.kind, size_bytes=buf.nbytes, lines=n_lines, type=kind,
        encoding=encoding, extension=os.path.splitext(path or handle.name)[1].lower(), est_tokens=tokens.value,
        token_method=repr(tokens), first_lines=first_lines, structure=_structure(handle, kind, head),
        relevance=relevance, keyword_hits=hits, decision=decide(tokens.value, relevance, config, empty=buf.nbytes == 0),
    )


def probe_corpus(corpus: CorpusHandle, config: ProbeConfig | None = None, excluded: list[str] | None = None) -> FolderProbe:
    """An inventory of the corpus. Token counts are bytes/4 estimates (no file is read)."""
    config = config or ProbeConfig()
    by_type: Counter[str] = Counter()
    by_ext: Counter[str] = Counter()
    docs = []
    for d in corpus.documents:
        ext = os.path.splitext(d.name)[1].lower()
        kind = _TYPES.get(ext, "text")
        by_type[kind] += 1
        by_ext[ext or "(none)"] += 1
        docs.append({"id": d.id, "name": d.name, "size": d.size, "type": kind})
    hits: dict[str, int] = {}
    if config.keywords:
        for word in config.keywords:
            hits[word] = len(corpus.grep(_grep.re2_escape(word), max_matches=50, ignore_case=True))
    relevance = _relevance(hits)
    size = corpus.n_bytes
    largest = sorted(((d.name, d.size) for d in corpus.documents), key=lambda x: -x[1])[:10]
    return FolderProbe(
        name=corpus.name, root=corpus.root, files=len(corpus.documents), size_bytes=size, est_tokens=size // 4,
        by_type=dict(by_type), by_extension=dict(by_ext), largest=largest, excluded=excluded or [],
        relevance=relevance, keyword_hits=hits,
        decision=decide(size // 4, relevance, config, empty=not corpus.documents), documents=docs,
    )


def probe_path(path: str | Path, config: ProbeConfig | None = None) -> FileProbe | FolderProbe:
    """Probe a file or a folder on disk."""
    from rlm_runtime.context.handles import FileHandle

    config = config or ProbeConfig()
    p = Path(path)
    if p.is_dir():
        corpus = CorpusHandle.from_folder(p, extensions=config.extensions, max_depth=config.max_depth,
                                          excludes=config.excludes)
        return probe_corpus(corpus, config, excluded=list(config.excludes))
    return probe_handle(FileHandle(p), config)
