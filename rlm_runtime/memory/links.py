"""Links between chunks: typed, weighted edges made on write and on recall.

Types are an open set; the store makes these itself:

* ``follows``: chunk A is followed by chunk B in the same source (directed, strength 1).
* ``context_of``: written in the same run (symmetric, 0.5), to at most
  ``LinkConfig.context_max`` earlier chunks of the run.
* ``related_to``: sharing rare key terms or rare tags (symmetric; strength grows with what
  is shared). Found through the ``chunk_terms`` and ``chunk_tags`` indexes: each lookup reads
  at most ``rare_df`` rows, so linking a chunk costs the same in a store of 1K or 1M chunks.
  Bounded: a new chunk makes at most ``related_max``, the strongest, ties to the nearest
  (by id: the order of writing), and no chunk takes part in more than ``related_cap``.
* ``co_recalled``: returned together by one search or recall, or read together for one
  remembered answer (symmetric; ``co_recall_step`` added each time, up to ``co_recall_max``).
* ``derived_from``: a remembered answer came from this chunk (directed, answer -> chunk).

Users add any other type (``supports``, ``contradicts``...) with ``MemoryStore.link``; a type
in ``SYMMETRIC_TYPES`` is stored once with the smaller id first.
"""

from __future__ import annotations

import math
import sqlite3
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rlm_runtime.memory.records import Link
from rlm_runtime.memory.terms import key_terms
from rlm_runtime.memory.value_check import capped_increment

if TYPE_CHECKING:
    from rlm_runtime.memory.settings import LinkConfig

SYMMETRIC_TYPES = frozenset({"related_to", "co_recalled", "context_of", "contradicts"})
#: The links the store makes by itself (order, runs, shared words, reads); any other type is one a
#: person or a program gave (``link``: ``contradicts``, ``supports``, ``supersedes``...).
AUTOMATIC_TYPES = frozenset({"follows", "related_to", "co_recalled", "context_of", "derived_from"})
CONTEXT_STRENGTH = 0.5


def _ends(a: int, b: int, type: str) -> tuple[int, int]:
    return (b, a) if type in SYMMETRIC_TYPES and a > b else (a, b)


def upsert(conn: sqlite3.Connection, a: int, b: int, type: str, strength: float, now: float, *,
           add: bool = False, cap: float | None = None) -> None:
    """Create the link, or update it: ``add`` adds ``strength`` to the old one (up to
    ``cap``), else the stronger of the two stays. Every update counts in ``count``."""
    if a == b:
        return
    src, dst = _ends(a, b, type)
    new = "links.strength + excluded.strength" if add else "max(links.strength, excluded.strength)"
    if cap is not None:
        new = f"min({float(cap)!r}, {new})"
    conn.execute(
        f"""INSERT INTO links (src, dst, type, strength, count, created, updated) VALUES (?, ?, ?, ?, 1, ?, ?)
            ON CONFLICT (src, type, dst) DO UPDATE SET strength = {new}, count = {capped_increment("links.count")},
                updated = excluded.updated""",
        (src, dst, type, strength, now, now))


def set_link(conn: sqlite3.Connection, a: int, b: int, type: str, strength: float, now: float) -> None:
    """Create the link or set its strength (a user's link says exactly how strong it is)."""
    if a == b:
        return
    src, dst = _ends(a, b, type)
    conn.execute(
        """INSERT INTO links (src, dst, type, strength, count, created, updated) VALUES (?, ?, ?, ?, 1, ?, ?)
           ON CONFLICT (src, type, dst) DO UPDATE SET strength = excluded.strength, updated = excluded.updated""",
        (src, dst, type, strength, now, now))


def unlink(conn: sqlite3.Connection, a: int, b: int, type: str) -> bool:
    src, dst = _ends(a, b, type)
    return conn.execute("DELETE FROM links WHERE src = ? AND type = ? AND dst = ?", (src, type, dst)).rowcount > 0


def link_new_chunks(conn: sqlite3.Connection, chunks: Sequence[tuple[int, str, int | None]], tags: Sequence[str],
                    run_id: str | None, cfg: LinkConfig, now: float, *, template: frozenset[str] = frozenset()) -> None:
    """The links of chunks just written together, each ``(id, text, id of the chunk before it
    in its source or None)``, in order: ``context_of`` the earlier chunks of their run,
    ``related_to`` earlier chunks sharing their rare key terms or rare tags. Records their
    rare key terms for the chunks to come. ``template``: words the store itself wrote into
    the texts (a remembered answer's "Question:" and "Answer:"), never key terms: every
    remembered answer has them, and they would link answers that share nothing else.

    Bounded whatever the size of the store: a term or tag counts as rare while fewer than
    ``rare_df`` chunks hold it, and a term's list of chunks stops growing there, so a new
    chunk costs at most ``(key_terms + tags) * rare_df`` index rows. Two statements per batch
    for the terms, one per tag, whatever the number of chunks."""
    if not chunks:
        return
    ids = [c[0] for c in chunks]
    if run_id is not None and cfg.context_max:
        earlier = [int(r[0]) for r in conn.execute("SELECT id FROM chunks WHERE run_id = ? AND id < ? ORDER BY id DESC LIMIT ?",
                                                     (run_id, ids[0], cfg.context_max))][::-1]
        pairs = []
        for cid in ids:
            pairs += [(cid, other) for other in earlier[-cfg.context_max:]]
            earlier.append(cid)
        upsert_many(conn, pairs, "context_of", CONTEXT_STRENGTH, now)
    limit = cfg.rare_df
    scores: dict[int, Counter[int]] = {cid: Counter() for cid in ids}
    new_terms = [(cid, [t for t in key_terms(text, cfg.key_terms + len(template)) if t not in template][:cfg.key_terms])
                 for cid, text, _ in chunks] if cfg.key_terms else []
    distinct = list(dict.fromkeys(t for _, terms in new_terms for t in terms))
    if distinct:
        by_term: dict[str, list[int]] = {t: [] for t in distinct}
        for start in range(0, len(distinct), 500):
            part = distinct[start:start + 500]
            for term, other in conn.execute(f"SELECT term, chunk_id FROM chunk_terms WHERE term IN ({','.join('?' * len(part))})", part):
                by_term[term].append(int(other))
        postings = []
        for cid, terms in new_terms:  # in order, as if written one by one: a term is rare while < limit chunks hold it
            score = scores[cid]
            for term in terms:
                held = by_term[term]
                if len(held) < limit:
                    score.update(held)
                    held.append(cid)
                    postings.append((term, cid))
        conn.executemany("INSERT OR IGNORE INTO chunk_terms (term, chunk_id) VALUES (?, ?)", postings)
    if cfg.related_max:
        for tag in dict.fromkeys(tags):
            holders = conn.execute("SELECT chunk_id FROM chunk_tags WHERE tag = ? AND chunk_id < ? LIMIT ?", (tag, ids[0], limit)).fetchall()
            if len(holders) < limit:  # tags shared within one batch say nothing (one ingest gives them all)
                for cid in ids:
                    for (other,) in holders:
                        scores[cid][int(other)] += 2
        related: list[tuple[int, int, float]] = []
        degree = _Degrees(conn)
        for cid, _, prev in chunks:
            score = scores[cid]
            score.pop(cid, None)
            if prev is not None:
                score.pop(prev, None)
            # The strongest first, ties to the nearest (ids follow the order of writing: the
            # next paragraphs of the file, the notes written just before): a tagged ingest
            # links each chunk to its neighbours, never each to every other.
            ranked = sorted((other for other, n in score.items() if n >= cfg.related_min_score),
                            key=lambda other: (-score[other], abs(cid - other), other))
            made = 0
            for other in ranked:
                if made >= cfg.related_max or degree.get(cid) >= cfg.related_cap:
                    break
                if degree.get(other) >= cfg.related_cap:
                    continue  # a chunk that holds its share of links is passed over for the next nearest
                related.append((cid, int(other), min(1.0, score[other] / (3 * cfg.related_min_score))))
                degree.add(cid, other)
                made += 1
        upsert_many(conn, related, "related_to", 0.0, now)


def trim_related(conn: sqlite3.Connection, cap: int) -> int:
    """Delete ``related_to`` links until no chunk takes part in more than ``cap`` (links made
    before the cap existed, or under a larger one); return how many went. A link goes when it
    is not among the ``cap`` strongest, ties to the nearest (as ``link_new_chunks`` chooses),
    of either of its ends. One ranking of every ``related_to`` link (a sort, in SQL: no
    lookup per chunk), then deletes by primary key."""
    gone = conn.execute(
        """WITH ends AS (SELECT src AS id, src, dst, strength FROM links WHERE type = 'related_to'
                         UNION ALL SELECT dst, src, dst, strength FROM links WHERE type = 'related_to'),
                ranked AS (SELECT src, dst, row_number() OVER (PARTITION BY id ORDER BY strength DESC, abs(src - dst), src, dst) AS r
                           FROM ends)
           SELECT DISTINCT src, dst FROM ranked WHERE r > ?""", (cap,)).fetchall()
    conn.executemany("DELETE FROM links WHERE src = ? AND type = 'related_to' AND dst = ?", gone)
    return len(gone)


class _Degrees:
    """How many ``related_to`` links each chunk takes part in: read from the store once per
    chunk (two index lookups), then counted as links are chosen."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.known: dict[int, int] = {}

    def get(self, chunk_id: int) -> int:
        if chunk_id not in self.known:
            self.known[chunk_id] = int(self.conn.execute(
                """SELECT (SELECT count(*) FROM links WHERE src = ? AND type = 'related_to')
                        + (SELECT count(*) FROM links WHERE dst = ? AND type = 'related_to')""", (chunk_id, chunk_id)).fetchone()[0])
        return self.known[chunk_id]

    def add(self, a: int, b: int) -> None:
        for i in (a, b):
            self.known[i] = self.get(i) + 1


def upsert_many(conn: sqlite3.Connection, pairs: Sequence[tuple[int, int] | tuple[int, int, float]], type: str, strength: float,
                now: float) -> None:
    """``upsert`` of many pairs of one type; a pair may carry its own strength (a, b, s),
    else ``strength`` (the stronger of old and new stays)."""
    rows = [(*_ends(p[0], p[1], type), type, p[2] if len(p) > 2 else strength, now, now) for p in pairs if p[0] != p[1]]
    conn.executemany(
        f"""INSERT INTO links (src, dst, type, strength, count, created, updated) VALUES (?, ?, ?, ?, 1, ?, ?)
           ON CONFLICT (src, type, dst) DO UPDATE SET strength = max(links.strength, excluded.strength),
           count = {capped_increment("links.count")}, updated = excluded.updated""", rows)


def co_recall(conn: sqlite3.Connection, ids: Sequence[int], cfg: LinkConfig, now: float) -> None:
    """Strengthen ``co_recalled`` between every pair of the first ``co_recall_top`` ids."""
    top = list(dict.fromkeys(ids))[: cfg.co_recall_top]
    for i, a in enumerate(top):
        for b in top[i + 1:]:
            upsert(conn, a, b, "co_recalled", cfg.co_recall_step, now, add=True, cap=cfg.co_recall_max)


def neighbours(conn: sqlite3.Connection, seeds: Sequence[int], limit: int, *, types: Sequence[str] | None = None,
               outgoing: bool = False) -> dict[int, float]:
    """Chunks linked to any seed (either direction, or only from a seed when ``outgoing``; of
    ``types``, or any type): id -> summed link strength, the ``limit`` strongest, seeds and
    chunks in the trash left out."""
    if not seeds:
        return {}
    marks = ",".join("?" * len(seeds))
    of_type, type_args = ("", []) if types is None else (f" AND type IN ({','.join('?' * len(types))})", list(types))
    incoming = "" if outgoing else f"UNION ALL SELECT src AS other, strength FROM links WHERE dst IN ({marks}){of_type}"
    rows = conn.execute(
        f"""SELECT other, sum(strength) AS s FROM (
                SELECT dst AS other, strength FROM links WHERE src IN ({marks}){of_type} {incoming})
            WHERE other NOT IN ({marks}) AND other NOT IN (SELECT id FROM chunks WHERE deleted_at IS NOT NULL)
            GROUP BY other ORDER BY s DESC LIMIT ?""",
        (*seeds, *type_args, *(() if outgoing else (*seeds, *type_args)), *seeds, limit)).fetchall()
    # A sum of +inf and -inf strengths (a store file from elsewhere) is NaN, which SQLite reads as NULL.
    return {int(other): float(s) if s is not None else 0.0 for other, s in rows}


def squash(strength: float) -> float:
    """A summed link strength in [0, inf) mapped to [0, 1): 1 - exp(-s)."""
    return 1.0 - math.exp(-max(strength, 0.0))


def links_of(conn: sqlite3.Connection, chunk_id: int, type: str | None = None) -> list[Link]:
    """Every link from or to a chunk (of one type when given), strongest first; links to a
    chunk in the trash are left out."""
    extra, args = ("AND type = ?", (type,)) if type else ("", ())
    extra += " AND NOT EXISTS (SELECT 1 FROM chunks WHERE id IN (src, dst) AND deleted_at IS NOT NULL)"
    rows = conn.execute(
        f"""SELECT src, dst, type, strength, count, created FROM links WHERE src = ? {extra}
            UNION ALL SELECT src, dst, type, strength, count, created FROM links WHERE dst = ? {extra}
            ORDER BY strength DESC, created""", (chunk_id, *args, chunk_id, *args)).fetchall()
    return [Link(int(r[0]), int(r[1]), str(r[2]), float(r[3]), int(r[4]), float(r[5])) for r in rows]
