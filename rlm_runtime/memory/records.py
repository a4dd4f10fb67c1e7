"""What the memory store hands back: search hits, chunk views, statistics and the reports of
ingest and of the lifecycle operations. Plain frozen dataclasses; ``to_dict`` gives the plain
data a sandbox RPC or ``--json`` output carries.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


def _plain(obj: Any) -> dict[str, Any]:
    return dataclasses.asdict(obj)


@dataclass(frozen=True)
class ScoreParts:
    """The terms of a ``recall`` score before weighting, each in [0, 1] (see ``RecallConfig``)."""

    text: float = 0.0
    link: float = 0.0
    recency: float = 0.0
    reinforcement: float = 0.0


@dataclass(frozen=True)
class Hit:
    """One ranked chunk. ``score`` is higher for better hits (BM25 for ``search``, the
    weighted sum for ``recall``, whose terms are in ``parts``); ``snippet`` marks the
    matched terms with « and ». ``by`` is ``words`` when the chunk holds a word of the query,
    ``meaning`` when it holds none and was found by its vector alone."""

    chunk_id: int
    score: float
    source: str
    start_line: int
    end_line: int
    snippet: str
    kind: str
    tags: tuple[str, ...] = ()
    parts: ScoreParts | None = None
    by: str = "words"
    #: What a person said of the chunk (``MemoryStore.edit``): a summary, a confidence in [0, 1].
    summary: str | None = None
    confidence: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)


class Hits(list[Hit]):
    """The hits of a search or recall, best first, and how the query was run: ``terms`` are
    the terms searched, ``dropped`` the stop words and too-common words left out, ``capped``
    says that the hits are the ``scanned`` newest chunks holding all the terms (``all_of``)
    or any of them, unranked (a query of common words only). ``recorded``: the hits were counted as
    recalled (False when not asked, or when another writer held the store past the busy
    timeout: the hits are still right). ``mode`` is how they were ranked (``bm25``,
    ``vector`` or ``hybrid``); ``fallback`` why a hybrid search ranked by words only (no
    model, or no vectors of it). ``note`` says all this in a sentence, for a model.

    ``strength`` says how well the best hit matches the query, from 0 to 1, on a scale that
    does not depend on the store: the share of the query's word weight it holds (a hit by
    words), or its cosine to the query (a hit by meaning alone). Scores of one store's
    ranking are not comparable with another's (BM25 of a store of one chunk is a
    millionth of a large one's); ``relative`` puts them on this scale, to merge stores."""

    def __init__(self, hits: Iterable[Hit] = (), *, terms: tuple[str, ...] = (), dropped: tuple[str, ...] = (),
                 capped: bool = False, scanned: int = 0, all_of: bool = False, mode: str = "bm25",
                 fallback: str | None = None) -> None:
        super().__init__(hits)
        self.mode = mode
        self.fallback = fallback
        self.terms = terms
        self.dropped = dropped
        self.capped = capped
        self.scanned = scanned
        self.all_of = all_of
        self.recorded = False
        self.strength = 0.0
        #: The cosine to the query of the hits ranked by meaning (and of more chunks), by id.
        self.cosines: dict[int, float] = {}

    def relative(self, hit: Hit) -> float:
        """``hit``'s score on the scale merged lists share: ``strength`` times its score over
        the best score of this list (a list of equal scores, or an unranked one: ``strength``)."""
        top = max((h.score for h in self), default=0.0)
        return self.strength * (hit.score / top if top > 0 else 1.0)

    @property
    def note(self) -> str:
        parts = []
        if self.dropped:
            parts.append(f"left out (stop words, or in too many chunks): {', '.join(self.dropped)}")
        if self.capped:
            which = "all" if self.all_of else "any"
            parts.append(f"every word is common: these are the newest chunks holding {which} of: {', '.join(self.terms)}, unranked")
        if self.fallback:
            parts.append(f"ranked by words only: {self.fallback}")
        if self and all(h.by == "meaning" for h in self):
            parts.append("no chunk holds the query's words: these are the nearest in meaning")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"hits": [h.to_dict() for h in self], "terms": list(self.terms), "dropped": list(self.dropped),
                "capped": self.capped, "scanned": self.scanned, "all_of": self.all_of, "recorded": self.recorded,
                "mode": self.mode, "fallback": self.fallback, "strength": round(self.strength, 4), "note": self.note}


@dataclass(frozen=True)
class ChunkView:
    """A chunk's text and where it came from; ``before`` / ``after`` hold up to ``around``
    neighbours in the same source (the chunks linked by ``follows``), nearest last / first."""

    chunk_id: int
    text: str
    source: str
    source_kind: str
    seq: int
    start_byte: int
    end_byte: int
    start_line: int
    end_line: int
    tokens: int
    kind: str
    tags: tuple[str, ...]
    created: float
    run_id: str | None = None
    meta: dict[str, Any] | None = None
    before: tuple[ChunkView, ...] = ()
    after: tuple[ChunkView, ...] = ()
    #: What a person said of the chunk (``MemoryStore.edit``; the neighbours leave it out).
    summary: str | None = None
    confidence: float | None = None

    @property
    def full_text(self) -> str:
        """The neighbours before, this chunk and the neighbours after, joined by newlines."""
        return "\n".join([*(c.text for c in self.before), self.text, *(c.text for c in self.after)])

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)


@dataclass(frozen=True)
class ChunkStats:
    """A chunk's lifecycle state; ``strength`` is decayed to the time it was read."""

    chunk_id: int
    recall_count: int
    last_recall: float | None
    strength: float
    tier: str
    pinned: bool
    expires_at: float | None

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)


@dataclass(frozen=True)
class Link:
    """An edge between two chunks. Symmetric types are stored once, smaller id first."""

    src: int
    dst: int
    type: str
    strength: float
    count: int
    created: float

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)


@dataclass(frozen=True)
class Skipped:
    """A path the ingest did not store, or stored with a caveat (``stored=True``)."""

    path: str
    reason: str
    stored: bool = False


@dataclass
class IngestReport:
    """What one ``ingest`` did. ``files`` counts files whose chunks were written or checked;
    ``unchanged`` those skipped by size and mtime or by hash; ``removed_files`` files gone
    from a re-ingested folder, whose chunks went with them."""

    files: int = 0
    unchanged: int = 0
    removed_files: int = 0
    chunks_added: int = 0
    chunks_kept: int = 0
    chunks_removed: int = 0
    bytes: int = 0
    seconds: float = 0.0
    skipped: list[Skipped] = field(default_factory=list)

    @property
    def mb_per_s(self) -> float:
        return self.bytes / 1e6 / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**_plain(self), "mb_per_s": self.mb_per_s}


@dataclass(frozen=True)
class IngestProgress:
    """Passed to an ingest's ``progress`` callback after each committed batch and at the end:
    the file being read, files done of those found, chunks committed, bytes of finished files."""

    path: str
    files_done: int
    files_total: int
    chunks: int
    bytes: int
    seconds: float


@dataclass(frozen=True)
class StoreStats:
    """The size and shape of a store."""

    path: str
    chunks: int
    sources: int
    tokens: int
    links_by_type: dict[str, int]
    tiers: dict[str, int]
    pinned: int
    traces: int
    size_bytes: int
    migrations: tuple[str, ...]
    #: Chunks with a vector, and the model that made them (None: no vectors yet).
    vectors: int = 0
    vector_model: str | None = None
    #: Chunks in the trash (``forget``): not in ``chunks`` nor ``tokens``, gone at ``purge``.
    deleted: int = 0
    #: Chunks with a vector of the quality tier and its model (None: none yet), and about how
    #: long the chunks without one would take to fill at the last fill's rate (None: never
    #: measured, or nothing left).
    quality_vectors: int = 0
    quality_model: str | None = None
    quality_eta_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)


@dataclass(frozen=True)
class ReindexProgress:
    """Passed to a reindex's ``progress`` callback after each committed batch: chunks given a
    vector so far (this run), chunks that had none when it started, seconds."""

    done: int
    total: int
    seconds: float


@dataclass(frozen=True)
class ReindexReport:
    """What ``reindex`` did: chunks embedded now, chunks that already had a vector, the model,
    whether the store's vectors of another model were dropped first, and the time taken."""

    embedded: int
    kept: int
    model: str
    rebuilt: bool
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)


@dataclass(frozen=True)
class LifecycleReport:
    """What ``decay_and_promote`` or ``prune`` did (or would do, with ``dry_run``): the ids
    promoted or removed, and why each removed id went."""

    dry_run: bool
    decayed: int = 0
    promoted: tuple[int, ...] = ()
    removed: tuple[int, ...] = ()
    reasons: dict[int, str] = field(default_factory=dict)
    traces_removed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)


@dataclass(frozen=True)
class Listed:
    """A chunk as ``MemoryStore.list`` shows it: where it is, its kind, tags and lifecycle
    state, and the start of its text."""

    chunk_id: int
    source: str
    start_line: int
    end_line: int
    kind: str
    tags: tuple[str, ...]
    created: float
    tier: str
    pinned: bool
    expires_at: float | None
    deleted_at: float | None
    preview: str

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)


@dataclass(frozen=True)
class Changed:
    """What a curation command did to the ids it was given: ``done`` changed, ``missing``
    named no chunk it applies to (unknown, or deleted when the command needs a live one)."""

    done: tuple[int, ...]
    missing: tuple[int, ...]

    def __bool__(self) -> bool:
        return bool(self.done)

    def to_dict(self) -> dict[str, Any]:
        return {"done": list(self.done), "missing": list(self.missing)}


@dataclass(frozen=True)
class Added:
    """What ``MemoryStore.store_text`` did: the chunk ids of the text, in order, and those of
    them it wrote now (the others held the same text already)."""

    ids: tuple[int, ...]
    new: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"ids": list(self.ids), "new": list(self.new)}
