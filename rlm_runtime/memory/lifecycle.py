"""The lifecycle of a memory: recall (ranking), reinforce, decay and promote, prune.

``recall`` ranks candidate chunks by a weighted sum of four terms, each in [0, 1]:

* **text relevance**: the chunk's BM25 score for the query divided by the best score of the
  query (the best text match gets 1; 0 without a query or for a chunk found only by links).
* **link strength**: ``1 - exp(-s)`` where ``s`` sums the strengths of the links between the
  chunk and the seed chunks (any type, either direction): one strong link gives ~0.63.
* **recency**: ``exp(-age / tau)`` with ``age`` the time since the chunk was created or last
  recalled, whichever is later, and ``tau = recency_tau_hours`` (72 h: a chunk touched three
  days ago scores 0.37, a week ago 0.1). Not ``1 / (1 + age_seconds)``, which is ~0 after a minute.
* **reinforcement**: the recall rate ``r = recall_count / max(age_since_created, min_rate_window)``
  (recalls per day) mapped to ``r / (r + rate_half_per_day)``: it rises with every recall and
  falls as time passes without one (not ``1 / count``, which falls as recalls rise).

Candidates: the text matches of the query (``candidates`` of them), the chunks linked to the
seeds (``link_candidates``), or without either the most recently created and recalled chunks.

Strength (``chunk_stats.strength`` as of ``strength_at``) starts at 1, gains
``reinforce_boost`` per recall (capped at ``max_strength``) and halves every
``half_life_hours`` (``long_term_half_life_hours`` once promoted). It is always read decayed to
the present, so ranking and pruning do not depend on when ``decay_and_promote`` last ran; that
operation writes the decayed values down and promotes chunks recalled ``promote_after`` times
from the working tier to long-term (a promoted chunk loses its expiry: it has earned its keep).

``prune`` removes unpinned chunks past ``expires_at``, and unpinned working-tier memories (not
file chunks: a document ingested stays until its file goes or it is forgotten) whose decayed
strength fell below ``strength_floor``. Pinned chunks never go. Every operation works in
batches of short transactions, so readers and other writers go on meanwhile.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rlm_runtime import timestamps
from rlm_runtime.memory import links
from rlm_runtime.memory.chunks import delete_chunks
from rlm_runtime.memory.db import LIVE
from rlm_runtime.memory.records import Hit, LifecycleReport, ScoreParts
from rlm_runtime.memory.value_check import capped_increment

if TYPE_CHECKING:
    from rlm_runtime.memory.db import Database
    from rlm_runtime.memory.settings import LinkConfig, RecallConfig

HOUR = 3600.0
DAY = 86400.0
_BATCH = 5000


def _strength_sql(cfg: RecallConfig) -> str:
    return (f"rlm_decay(strength, strength_at, :now, CASE tier WHEN 'long_term' THEN {cfg.long_half_life_s!r} "
            f"ELSE {cfg.half_life_s!r} END)")


def score_parts(cfg: RecallConfig, now: float, *, text: float, link_sum: float, created: float, last_recall: float | None,
                recall_count: int) -> ScoreParts:
    """The four terms of one candidate (see the module docstring)."""
    times = [t for t in (timestamps.valid(created), timestamps.valid(last_recall)) if t is not None]
    return ScoreParts(text=text, link=links.squash(link_sum), recency=recency(cfg, now, max(times, default=None)),
                      reinforcement=reinforcement(cfg, now, created, recall_count))


def recency(cfg: RecallConfig, now: float, touched: float | None) -> float:
    """``exp(-age / tau)`` of the time since ``touched``; 0 when that is no time (None, or a
    value of a store file from elsewhere that is no time: ``timestamps.valid``)."""
    at = timestamps.valid(touched)
    if at is None:
        return 0.0
    return math.exp(-max(now - at, 0.0) / (cfg.recency_tau_hours * HOUR))


def reinforcement(cfg: RecallConfig, now: float, created: float, recall_count: int) -> float:
    """The recall rate (recalls a day since ``created``, over at least the minimum window) in
    [0, 1); 0 when ``created`` is no time or the count is not positive (a store file from
    elsewhere: a count of -1 made the rate's denominator 0)."""
    since = timestamps.valid(created)
    if since is None or recall_count <= 0:
        return 0.0
    rate = recall_count / (max(now - since, cfg.min_rate_window_hours * HOUR) / DAY)
    return rate / (rate + cfg.rate_half_per_day)


def weighted(cfg: RecallConfig, p: ScoreParts) -> float:
    return cfg.w_text * p.text + cfg.w_link * p.link + cfg.w_recency * p.recency + cfg.w_reinforcement * p.reinforcement


def rank(conn: sqlite3.Connection, cfg: RecallConfig, now: float, *, text_scores: dict[int, float], link_sums: dict[int, float],
         exclude: Sequence[int] = (), k: int = 10, recent: bool = False) -> list[tuple[int, ScoreParts, float]]:
    """Rank candidates (ids from either dict; with ``recent``, also the most recently
    created and recalled chunks): (id, parts, score), best first, at most ``k``."""
    ids = set(text_scores) | set(link_sums)
    if recent:
        rows = conn.execute(f"SELECT id FROM chunks c WHERE {LIVE} ORDER BY id DESC LIMIT ?", (cfg.candidates,)).fetchall()
        rows += conn.execute("SELECT chunk_id FROM chunk_stats WHERE last_recall IS NOT NULL ORDER BY last_recall DESC LIMIT ?",
                               (cfg.candidates,)).fetchall()
        ids |= {int(r[0]) for r in rows}
    ids -= set(exclude)
    if not ids:
        return []
    best = max(text_scores.values(), default=0.0)
    out = []
    for chunk_id, (created, last_recall, count) in use_of(conn, sorted(ids)).items():
        rel = text_scores.get(chunk_id, 0.0) / best if best > 0 else 0.0
        p = score_parts(cfg, now, text=rel, link_sum=link_sums.get(chunk_id, 0.0), created=created,
                        last_recall=last_recall, recall_count=count)
        out.append((chunk_id, p, weighted(cfg, p)))
    out.sort(key=lambda t: (-t[2], t[0]))
    return out[:k]


def use_of(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, tuple[float, float | None, int]]:
    """Each live chunk's (created, last recall or None, recall count), 500 ids a query."""
    out: dict[int, tuple[float, float | None, int]] = {}
    for start in range(0, len(ids), 500):
        part = list(ids[start:start + 500])
        rows = conn.execute(
            f"""SELECT c.id, c.created, s.last_recall, s.recall_count FROM chunks c JOIN chunk_stats s ON s.chunk_id = c.id
                WHERE c.id IN ({','.join('?' * len(part))}) AND {LIVE}""", part)
        out.update({int(i): (float(created), last, int(count)) for i, created, last, count in rows})
    return out


def reinforce(conn: sqlite3.Connection, ids: Sequence[int], cfg: RecallConfig, now: float) -> int:
    """One more recall for each chunk: count, time, and strength (decayed, then boosted)."""
    ids = list(dict.fromkeys(ids))
    if not ids:
        return 0
    cur = conn.execute(
        f"""UPDATE chunk_stats SET strength = min(:cap, {_strength_sql(cfg)} + :boost), strength_at = :now,
                recall_count = {capped_increment("recall_count")}, last_recall = :now
            WHERE chunk_id IN ({','.join(f':i{n}' for n in range(len(ids)))})""",
        {"cap": cfg.max_strength, "boost": cfg.reinforce_boost, "now": now, **{f"i{n}": i for n, i in enumerate(ids)}})
    return int(cur.rowcount)


def record(conn: sqlite3.Connection, hits: Sequence[Hit], *, op: str, query: str | None, run_id: str | None, now: float,
           cfg: RecallConfig, link_cfg: LinkConfig) -> int:
    """Count hits as recalled together: a trace, reinforcement, ``co_recalled`` links. Returns the trace id."""
    cur = conn.execute("INSERT INTO recall_traces (at, op, query, run_id) VALUES (?, ?, ?, ?)", (now, op, query, run_id))
    trace_id = int(cur.lastrowid or 0)
    conn.executemany("INSERT INTO trace_chunks (trace_id, rank, chunk_id, score) VALUES (?, ?, ?, ?)",
                     [(trace_id, n, h.chunk_id, h.score) for n, h in enumerate(hits)])
    ids = [h.chunk_id for h in hits]
    reinforce(conn, ids, cfg, now)
    links.co_recall(conn, ids, link_cfg, now)
    return trace_id


def decay_and_promote(db: Database, cfg: RecallConfig, now: float, *, dry_run: bool = False) -> LifecycleReport:
    """Write every strength down decayed to ``now`` and promote chunks recalled
    ``promote_after`` times to long-term; ``_BATCH`` chunks per transaction."""
    promoted: list[int] = []
    decayed = 0
    last = 0
    while True:
        with db.snapshot() if dry_run else db.write() as conn:
            rows = conn.execute("SELECT chunk_id, tier, recall_count FROM chunk_stats WHERE chunk_id > ? ORDER BY chunk_id LIMIT ?",
                                (last, _BATCH)).fetchall()
            if not rows:
                break
            lo, last = int(rows[0][0]), int(rows[-1][0])
            batch_promoted = [int(r[0]) for r in rows if r[1] == "working" and int(r[2]) >= cfg.promote_after]
            promoted += batch_promoted
            decayed += len(rows)
            if not dry_run:
                conn.execute(f"UPDATE chunk_stats SET strength = {_strength_sql(cfg)}, strength_at = :now "
                             "WHERE chunk_id BETWEEN :lo AND :hi AND strength_at < :now", {"now": now, "lo": lo, "hi": last})
                conn.executemany("UPDATE chunk_stats SET tier = 'long_term', expires_at = NULL WHERE chunk_id = ?",
                                 [(i,) for i in batch_promoted])
    return LifecycleReport(dry_run=dry_run, decayed=decayed, promoted=tuple(promoted))


def prune_candidates(conn: sqlite3.Connection, cfg: RecallConfig, now: float) -> dict[int, str]:
    """Chunk id -> why ``prune`` would remove it (see the module docstring)."""
    reasons: dict[int, str] = {}
    # An expiry that is no time (``timestamps``: -1e300 from a store file elsewhere) is unknown: never past.
    for (chunk_id,) in conn.execute("SELECT chunk_id FROM chunk_stats WHERE expires_at BETWEEN ? AND ? AND pinned = 0",
                                    (timestamps.EARLIEST, now)):
        reasons[int(chunk_id)] = "expired"
    rows = conn.execute(
        f"""SELECT s.chunk_id, {_strength_sql(cfg)} AS st FROM sources src JOIN chunks c ON c.source_id = src.id
            JOIN chunk_stats s ON s.chunk_id = c.id
            WHERE src.kind = 'memory' AND s.pinned = 0 AND s.tier = 'working' AND st < :floor""",
        {"now": now, "floor": cfg.strength_floor}).fetchall()
    for chunk_id, strength in rows:
        reasons.setdefault(int(chunk_id), f"strength {strength:.3g} below {cfg.strength_floor:g}")
    return reasons


def prune(db: Database, cfg: RecallConfig, now: float, *, dry_run: bool = False, trace_before: float | None = None) -> LifecycleReport:
    """Remove what ``prune_candidates`` names (and recall traces older than ``trace_before``),
    500 chunks per transaction; with ``dry_run``, only say what would go."""
    with db.snapshot() as conn:
        reasons = prune_candidates(conn, cfg, now)
        traces = 0
        if trace_before is not None:
            traces = int(conn.execute("SELECT count(*) FROM recall_traces WHERE at < ?", (trace_before,)).fetchone()[0])
    ids = sorted(reasons)
    if not dry_run:
        for start in range(0, len(ids), 500):
            with db.write() as conn:
                # Re-checked inside the write: a chunk pinned or recalled since the snapshot stays.
                still = prune_candidates_among(conn, cfg, now, ids[start:start + 500])
                delete_chunks(conn, still, now)
                for i in set(ids[start:start + 500]) - set(still):
                    reasons.pop(i, None)
        if trace_before is not None and traces:
            with db.write() as conn:
                conn.execute("DELETE FROM recall_traces WHERE at < ?", (trace_before,))
    return LifecycleReport(dry_run=dry_run, removed=tuple(sorted(reasons)), reasons=reasons, traces_removed=traces)


def prune_candidates_among(conn: sqlite3.Connection, cfg: RecallConfig, now: float, ids: Sequence[int]) -> list[int]:
    """Those of ``ids`` that are still prune candidates."""
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    rows = conn.execute(
        f"""SELECT s.chunk_id FROM chunk_stats s JOIN chunks c ON c.id = s.chunk_id JOIN sources src ON src.id = c.source_id
            WHERE s.chunk_id IN ({marks}) AND s.pinned = 0 AND (
                (s.expires_at BETWEEN ? AND ?)
                OR (src.kind = 'memory' AND s.tier = 'working'
                    AND rlm_decay(s.strength, s.strength_at, ?, ?) < ?))""",
        (*ids, timestamps.EARLIEST, now, now, cfg.half_life_s, cfg.strength_floor)).fetchall()
    return [int(r[0]) for r in rows]
