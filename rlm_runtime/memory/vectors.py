"""Chunk vectors in the store's SQLite file: written beside the chunks, searched by meaning.

Imported only when an embedder exists (it needs numpy, the ``embed`` extra).

**Storage** (measured in bench/SEARCH_MEANING.md): each chunk's vector, quantised to 2 bits a
dimension, 64 bytes at 256 dimensions, in ``chunk_vectors(chunk_id, bits)``: the first half
of ``bits`` holds the signs, the second which components are large (their magnitude above the
vector's median), so a component reads back as +-1 or +-3. One bit a dimension (32 bytes)
found the answer of 0.59 of topic questions where the float vectors found 0.79; two bits 0.76;
int8 (256 bytes, over the 64-byte budget) 0.79. ``vector_meta`` (one row) names the model and
its dimension: vectors of one model only, never compared with a query of another
(``rlm memory reindex`` re-embeds after a change of model); its ``version`` goes up with every
write of new vectors (new chunk ids, always above those stored), its ``epoch`` with any other
change (a reindex), so a process's copy in memory reloads only what it must.

**Search** (``VectorIndex``): the vectors of a store are held in memory as numpy arrays (80
bytes a chunk), loaded on first search and brought up to date from ``vector_meta``. A query
is a float vector; every chunk is first scored by its sign and magnitude bits against the
query's signs (two popcounts over 64 bytes: ~10 ms at 1M chunks), the best ``candidates``
are then re-scored exactly (the float query against the 2-bit vector, the asymmetric
distance), and the best k kept. Chunks deleted since the load are dropped when their rows
are read (ids are never reused).

**Fusion** (``SearchConfig.fusion``): ``blend`` (the default) adds each chunk's BM25 score,
over the best one's, and its cosine, scaled between the lowest and highest of the chunks
fused, each weighted by what the query makes it worth (``MemoryStore._by_meaning``); ``rrf``
is reciprocal-rank fusion of the two ranked lists, ``sum(w / (rrf_k + rank))``, which ranks a
list's tenth hit above the other's fifteenth whatever their scores say (bench/SEARCH_MEANING.md).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from rlm_runtime.memory.errors import StoreError
from rlm_runtime.memory.value_check import COUNT_LIMIT, read_meta, wrapped_increment

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from rlm_runtime.embeddings import Embedder

#: Chunks embedded and written per transaction by ``reindex``.
REINDEX_BATCH = 512
#: Chunks a batch of the quality tier's fill (``MemoryStore.fill_quality``): a few seconds of
#: the contextual model's time, so a stop is heard soon and a kill loses little.
QUALITY_BATCH = 32
#: The levels a component reads back as: small, large (their ratio is what matters).
SMALL, LARGE = 1.0, 3.0


def pack(vectors: NDArray[np.float32]) -> list[bytes]:
    """Each row as 2 bits a dimension: signs, then large-magnitude flags (see the docstring)."""
    v = np.asarray(vectors, dtype=np.float32)
    if v.ndim != 2 or v.shape[1] % 64:
        raise ValueError("vectors must be rows of a multiple of 64 dimensions")
    signs = np.packbits(v >= 0, axis=1, bitorder="little")
    mags = np.abs(v)
    large = np.packbits(mags > np.median(mags, axis=1, keepdims=True), axis=1, bitorder="little")
    both = np.concatenate([signs, large], axis=1)
    return [row.tobytes() for row in both]


def unpack(bits: NDArray[np.uint8], dim: int) -> NDArray[np.float32]:
    """``(n, dim / 4)`` packed rows back to ``(n, dim)`` unit vectors of +-1 / +-3 levels."""
    half = dim // 8
    signs = np.unpackbits(bits[:, :half], axis=1, bitorder="little").astype(np.float32) * 2 - 1
    large = np.unpackbits(bits[:, half:], axis=1, bitorder="little").astype(bool)
    levels = signs * np.where(large, LARGE, SMALL).astype(np.float32)
    norms = np.linalg.norm(levels, axis=1, keepdims=True)
    return levels / np.maximum(norms, 1e-9)


def vector_text(text: str, header: str | None) -> str:
    """What a chunk's vector is made from: its text, after the header line that gives it its
    meaning (a CSV header row), when it has one."""
    return f"{header}\n{text}" if header else text


@dataclass(frozen=True)
class Tier:
    """Where one model's vectors live: ``table`` (chunk id, bits) and ``meta_table`` (the one
    row naming the model). The fast tier is the static model's, written beside each chunk;
    the quality tier a contextual model's, filled afterwards (``contextual.py``). Each model's
    vectors are kept apart and never compared with a query of the other."""

    table: str
    meta_table: str


FAST = Tier("chunk_vectors", "vector_meta")
QUALITY = Tier("quality_vectors", "quality_meta")


def has_table(conn: sqlite3.Connection, tier: Tier = FAST) -> bool:
    """Whether the store has the tier's tables (a store opened read-only before their
    migration has not: it reads as a store without those vectors)."""
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (tier.table,)).fetchone() is not None


@dataclass(frozen=True)
class Meta:
    """The one row of ``vector_meta``."""

    model: str
    dim: int
    version: int
    epoch: int


def meta(conn: sqlite3.Connection, tier: Tier = FAST) -> Meta | None:
    if not has_table(conn, tier):
        return None
    row = conn.execute(f"SELECT model, dim, version, epoch FROM {tier.meta_table} WHERE id = 1").fetchone()
    return None if row is None else Meta(str(row[0]), int(row[1]), _counter(row[2]), _counter(row[3]))


def _counter(value: object) -> int:
    """A change counter as read: -1 (no value a write makes) for one out of range, which a
    read-only open leaves as it found it (a REAL an older version's overflow wrote, say)."""
    return value if isinstance(value, int) and 0 <= value < COUNT_LIMIT else -1


def counts(conn: sqlite3.Connection, tier: Tier = FAST) -> tuple[int, int]:
    """(chunks with a vector of the tier, chunks without one)."""
    total = int(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
    if not has_table(conn, tier):
        return 0, total
    with_vectors = int(conn.execute(f"SELECT count(*) FROM {tier.table}").fetchone()[0])
    return with_vectors, max(0, total - with_vectors)


def missing(conn: sqlite3.Connection, tier: Tier, before: int | None, limit: int) -> list[tuple[int, str]]:
    """Up to ``limit`` live chunks below id ``before`` (None: any) without a vector of the
    tier, newest first: (id, the text its vector is made from)."""
    rows = conn.execute(f"""SELECT c.id, c.text, c.meta FROM chunks c
                            WHERE c.id < ? AND c.deleted_at IS NULL
                              AND NOT EXISTS (SELECT 1 FROM {tier.table} v WHERE v.chunk_id = c.id)
                            ORDER BY c.id DESC LIMIT ?""", (COUNT_LIMIT if before is None else before, limit)).fetchall()
    return [(int(r[0]), vector_text(str(r[1]), (read_meta(r[2]) or {}).get("header"))) for r in rows]


def set_rate(conn: sqlite3.Connection, tier: Tier, rate: float) -> None:
    """Keep the characters a second the tier's last fill embedded (its meta table's ``rate``)."""
    if tier is QUALITY:
        conn.execute(f"UPDATE {tier.meta_table} SET rate = ? WHERE id = 1", (float(rate),))


class Vectors:
    """The vectors of one store under one embedder: writing and searching them. Every method
    runs on the connection it is given, inside the caller's transaction (``write``) or
    snapshot (``search``), under the store's lock."""

    def __init__(self, embedder: Embedder, tier: Tier = FAST) -> None:
        self.embedder = embedder
        self.tier = tier
        if embedder.dim % 64 or embedder.dim <= 0:
            raise StoreError(f"the embedding model {embedder.name} has {embedder.dim} dimensions: a multiple of 64 is needed")
        self.index = VectorIndex(embedder.dim, tier)
        self._lock = threading.Lock()

    @property
    def bytes_per_vector(self) -> int:
        return self.embedder.dim // 4

    def usable(self, conn: sqlite3.Connection) -> str | None:
        """None when the store's vectors are this model's; else why they cannot be searched."""
        m = meta(conn, self.tier)
        if m is None:
            command = "rlm memory reindex --quality" if self.tier is QUALITY else "rlm memory reindex"
            return f"the store has no vectors yet ({command} makes them)"
        if m.model != self.embedder.name or m.dim != self.embedder.dim:
            return f"the store's vectors were made by another model ({m.model}): rlm memory reindex makes them again"
        return None

    def _claim(self, conn: sqlite3.Connection) -> bool:
        """Whether vectors of this model may be written (the store has none yet, or this
        model's): an empty ``vector_meta`` is claimed for this model."""
        if not has_table(conn, self.tier):
            return False
        m = meta(conn, self.tier)
        if m is None:
            conn.execute(f"INSERT INTO {self.tier.meta_table} (id, model, dim, bytes) VALUES (1, ?, ?, ?)",
                         (self.embedder.name, self.embedder.dim, self.bytes_per_vector))
            return True
        return m.model == self.embedder.name and m.dim == self.embedder.dim

    def write(self, conn: sqlite3.Connection, rows: Sequence[tuple[int, str]], *, appended: bool = True) -> int:
        """Embed and store the vectors of ``rows`` (chunk id, text); return how many. Nothing
        is written when the store holds another model's vectors. ``appended``: the ids are
        new (above every id with a vector), else readers reload all (``epoch``)."""
        if not rows or not self._claim(conn):
            return 0
        return self.put(conn, [cid for cid, _ in rows], self.embedder.embed([t for _, t in rows]), appended=appended)

    def put(self, conn: sqlite3.Connection, ids: Sequence[int], vectors: NDArray[np.float32], *, appended: bool) -> int:
        """Store vectors already made (``ids`` in order, of chunks that still exist); return how
        many. Nothing is written when the store holds another model's vectors in this tier."""
        if not len(ids) or not self._claim(conn):
            return 0
        packed = pack(vectors)
        conn.executemany(f"INSERT OR REPLACE INTO {self.tier.table} (chunk_id, bits) SELECT ?, ? WHERE EXISTS "
                         "(SELECT 1 FROM chunks WHERE id = ?)",
                         [(cid, blob, cid) for cid, blob in zip(ids, packed, strict=True)])
        counter = "version" if appended else "epoch"
        conn.execute(f"UPDATE {self.tier.meta_table} SET {counter} = {wrapped_increment(counter)} WHERE id = 1")
        return len(ids)

    def write_new(self, conn: sqlite3.Connection, rows: Sequence[tuple[int, str, str | None]]) -> int:
        """The vectors of chunks just inserted: (id, text, header line or None)."""
        return self.write(conn, [(cid, vector_text(text, header)) for cid, text, header in rows])

    def fill(self, conn: sqlite3.Connection, *, after: int = 0, limit: int = REINDEX_BATCH) -> tuple[int, int]:
        """Embed up to ``limit`` chunks above id ``after`` that have no vector; return (how
        many, the last id looked at; 0 when none is left)."""
        rows = conn.execute(f"""SELECT c.id, c.text, c.meta FROM chunks c
                                WHERE c.id > ? AND NOT EXISTS (SELECT 1 FROM {self.tier.table} v WHERE v.chunk_id = c.id)
                                ORDER BY c.id LIMIT ?""", (after, limit)).fetchall()
        if not rows:
            return 0, 0
        batch = [(int(r[0]), vector_text(str(r[1]), (read_meta(r[2]) or {}).get("header"))) for r in rows]
        return self.write(conn, batch, appended=False), batch[-1][0]

    def reset(self, conn: sqlite3.Connection) -> None:
        """Drop every vector and claim the store for this model (a reindex after a change of model)."""
        conn.execute(f"DELETE FROM {self.tier.table}")
        conn.execute(f"""INSERT INTO {self.tier.meta_table} (id, model, dim, bytes) VALUES (1, ?, ?, ?)
                        ON CONFLICT (id) DO UPDATE SET model = excluded.model, dim = excluded.dim, bytes = excluded.bytes,
                                                       epoch = {wrapped_increment("epoch")}""",
                     (self.embedder.name, self.embedder.dim, self.bytes_per_vector))

    def search(self, conn: sqlite3.Connection, query: str, k: int, *, allowed: Callable[[Sequence[int]], list[int]],
               candidates: int) -> list[tuple[int, float]]:
        """(chunk id, cosine) of the ``k`` chunks nearest to ``query``, best first. ``allowed``
        keeps the ids that exist and pass the filters (in their order); when it keeps fewer
        than ``k`` of the candidates, more are taken."""
        if k <= 0 or self.usable(conn) is not None:
            return []
        m = meta(conn, self.tier)
        assert m is not None
        with self._lock:
            self.index.refresh(conn, m)
            q = self.embedder.embed([query])[0]
            if not q.any():
                return []
            want = k
            while True:
                ranked = self.index.nearest(q, want, max(candidates, 4 * want))
                keep = set(allowed([i for i, _ in ranked]))
                found = [(i, s) for i, s in ranked if i in keep]
                if len(found) >= k or want >= len(self.index):
                    return found[:k]
                want *= 8

    def similarity(self, conn: sqlite3.Connection, query: str, ids: Sequence[int]) -> dict[int, float]:
        """The cosine of ``query`` to each of ``ids`` that has a vector (its 2-bit vector, as
        ``search`` scores it); the others are left out."""
        if not ids or self.usable(conn) is not None:
            return {}
        m = meta(conn, self.tier)
        assert m is not None
        with self._lock:
            self.index.refresh(conn, m)
            q = self.embedder.embed([query])[0]
            return self.index.scores(q, ids) if q.any() else {}


class VectorIndex:
    """A store's vectors in memory (see the module docstring): the ids, and the sign and
    large-magnitude words stored column by column (``signs[j]`` is word j of every vector,
    contiguous), so each bit-count pass runs over contiguous memory."""

    def __init__(self, dim: int, tier: Tier = FAST) -> None:
        self.dim = dim
        self.tier = tier
        self.words = dim // 64
        self._clear()
        self.state: tuple[str, int, int] | None = None

    def _clear(self) -> None:
        self.ids = np.zeros(0, dtype=np.int64)
        self.signs = np.zeros((self.words, 0), dtype=np.uint64)
        self.large = np.zeros((self.words, 0), dtype=np.uint64)

    def __len__(self) -> int:
        return int(self.ids.size)

    def refresh(self, conn: sqlite3.Connection, m: Meta) -> None:
        """Bring the copy up to date: everything after a change of epoch (or model), else the
        vectors of ids above the largest held."""
        if self.state == (m.model, m.epoch, m.version):
            return
        if self.state is None or self.state[:2] != (m.model, m.epoch):
            self._clear()
        after = int(self.ids[-1]) if self.ids.size else 0
        size = self.dim // 4
        ids: list[int] = []
        blobs: list[bytes] = []
        for cid, bits in conn.execute(f"SELECT chunk_id, bits FROM {self.tier.table} WHERE chunk_id > ? ORDER BY chunk_id", (after,)):
            if isinstance(bits, bytes) and len(bits) == size:
                ids.append(int(cid))
                blobs.append(bits)
        if ids:
            raw = np.frombuffer(b"".join(blobs), dtype=np.uint8).reshape(len(ids), size)
            signs = np.ascontiguousarray(raw[:, : size // 2]).view(np.uint64).T
            large = np.ascontiguousarray(raw[:, size // 2:]).view(np.uint64).T
            self.ids = np.concatenate([self.ids, np.asarray(ids, dtype=np.int64)])
            self.signs = np.ascontiguousarray(np.concatenate([self.signs, signs], axis=1))
            self.large = np.ascontiguousarray(np.concatenate([self.large, large], axis=1))
        self.state = (m.model, m.epoch, m.version)

    def _cosines(self, q: NDArray[np.float32], pick: NDArray[np.intp]) -> NDArray[np.float32]:
        """The cosine of ``q`` to the 2-bit vectors at positions ``pick``: the float query
        against their levels (the asymmetric distance)."""
        packed = np.concatenate([self.signs[:, pick].T.copy().view(np.uint8), self.large[:, pick].T.copy().view(np.uint8)], axis=1)
        return unpack(packed, self.dim) @ q

    def scores(self, q: NDArray[np.float32], ids: Sequence[int]) -> dict[int, float]:
        """The cosine of ``q`` to the 2-bit vector of each of ``ids`` held (ids are held in
        ascending order: a binary search each)."""
        want = np.asarray(list(ids), dtype=np.int64)
        if not want.size or not self.ids.size:
            return {}
        at = np.minimum(np.searchsorted(self.ids, want), self.ids.size - 1)
        held = self.ids[at] == want
        pick = at[held]
        if not pick.size:
            return {}
        found = self._cosines(q, pick)
        return {int(i): float(v) for i, v in zip(want[held], found, strict=True)}

    def nearest(self, q: NDArray[np.float32], n: int, candidates: int) -> list[tuple[int, float]]:
        """The ``n`` nearest (id, cosine of the 2-bit vector), best first: a bit-count pass
        over all, then an exact pass over the best ``candidates``."""
        count = self.ids.size
        if not count:
            return []
        qsign = np.packbits(q >= 0, bitorder="little").view(np.uint64)
        # The query's signs against a stored vector's levels: each disagreement costs 1, or 3
        # where the component is large (a constant sum over all levels aside).
        cost = np.zeros(count, dtype=np.uint16)
        differ = np.empty(count, dtype=np.uint64)
        bits = np.empty(count, dtype=np.uint8)
        for j in range(self.words):
            np.bitwise_xor(self.signs[j], qsign[j], out=differ)
            cost += np.bitwise_count(differ, out=bits)
            np.bitwise_and(differ, self.large[j], out=differ)
            np.bitwise_count(differ, out=bits)
            cost += bits
            cost += bits
        c = min(count, max(candidates, n))
        if c < count:
            # The c cheapest: a histogram of the costs (at most 3 x dim) gives the cost the
            # c-th one has, in two passes over contiguous memory (argpartition took 4x longer).
            limit = int(np.searchsorted(np.cumsum(np.bincount(cost)), c))
            pick = np.flatnonzero(cost <= limit)
            if pick.size > c:
                pick = pick[np.argpartition(cost[pick], c - 1)[:c]]
        else:
            pick = np.arange(count)
        scores = self._cosines(q, pick)
        order = np.argsort(-scores)[:n]
        return [(int(self.ids[pick[i]]), float(scores[i])) for i in order]


def holds(ids: NDArray[np.int64], chunk_id: int) -> bool:
    """Whether the ascending ``ids`` hold ``chunk_id`` (a binary search)."""
    at = int(np.searchsorted(ids, chunk_id))
    return at < ids.size and int(ids[at]) == chunk_id


def blend(words: Sequence[tuple[int, float]], meaning: dict[int, float], w_words: float, w_meaning: float) -> list[tuple[int, float]]:
    """Score fusion: each chunk of the union of the two lists scores ``w_words * b / b_max +
    w_meaning * (v - v_min) / (v_max - v_min)``, best first, where ``b`` is its BM25 score
    (0 when the word list lacks it) and ``v`` its cosine (``meaning``: every chunk of the
    union that has a vector; one without scores as the lowest; when all have one cosine, each
    scores as the highest). Ties keep the word list's order, then the meaning list's."""
    order = list(dict.fromkeys([i for i, _ in words] + list(meaning)))
    if not order:
        return []
    bm25 = dict(words)
    top = max((b for b in bm25.values() if b > 0), default=0.0)
    low, high = min(meaning.values(), default=0.0), max(meaning.values(), default=0.0)
    span = high - low
    scored = []
    for cid in order:
        b = bm25.get(cid, 0.0) / top if top > 0 else 0.0
        # One chunk with a vector, or all at one cosine: each is as near as the nearest.
        v = 0.0 if cid not in meaning else (meaning[cid] - low) / span if span > 0 else 1.0
        scored.append((cid, w_words * max(b, 0.0) + w_meaning * v))
    return sorted(scored, key=lambda kv: -kv[1])


def keep_places(fused: Sequence[tuple[int, float]], head: Sequence[int]) -> list[tuple[int, float]]:
    """``fused`` with the ids of ``head`` first, in that order (``SearchConfig.word_places``),
    the others after in their order; a score is raised to the one after it where it is lower,
    so scores still fall down the list (``head`` ids not in ``fused`` are left out)."""
    score = dict(fused)
    first = [i for i in dict.fromkeys(head) if i in score]
    placed = set(first)
    order = first + [i for i, _ in fused if i not in placed]
    out: list[tuple[int, float]] = []
    floor = float("-inf")
    for cid in reversed(order):
        floor = max(floor, score[cid])
        out.append((cid, floor))
    return out[::-1]


def rrf(rankings: Sequence[tuple[Sequence[int], float]], rrf_k: float) -> list[tuple[int, float]]:
    """Reciprocal-rank fusion of ranked id lists, each with its weight: ``sum(w / (rrf_k +
    rank))`` over the lists an id is in (rank from 1), best first; ties keep first-seen order."""
    scores: dict[int, float] = {}
    for ids, weight in rankings:
        for rank, cid in enumerate(ids, 1):
            scores[cid] = scores.get(cid, 0.0) + weight / (rrf_k + rank)
    return sorted(scores.items(), key=lambda kv: -kv[1])


def index_bytes(index: VectorIndex) -> int:
    """Memory the in-memory copy holds (for stats)."""
    return int(index.ids.nbytes + index.signs.nbytes + index.large.nbytes)
