"""What the store has recorded, folded into a search's ranking.

A search ranks by the query's words or meaning (``search.py``, ``vectors.py``). The store
also records what was used: every recorded search or recall counts its hits as recalled
(count, time), and a remembered answer is linked ``derived_from`` the chunks its run read.
``rerank`` adds that record to the text ranking, so a question asked again, or one whose best
match is an earlier answer, finds the chunks that answered it even when its words are not
theirs:

    score = best * (text + w_memory * (w_learned_link * link + w_recalled_recency * recency
                                       + w_recalled_rate * rate))

* **text**: the hit's score divided by the best hit's (1 for the best match; the order of an
  unranked, capped query counts all as 1). ``best``, the best hit's score, keeps the result
  on the text's scale (``search_chunks`` sorts a store's hits with a context index's).
* **link**: ``1 - exp(-s)``, ``s`` summing the ``derived_from`` links (``LEARNED_LINKS``)
  from the ``memory_seeds`` best text hits to the chunks they came from, each weighed by its
  seed's text score. Followed from answer to source only: a hit does not bring up the answers
  that cited it. ``co_recalled`` links are made among any recorded search's top hits, so they
  say a ranking put chunks together, not that they were used; links made at ingest
  (``related_to``, ``context_of``) are structure. Neither counts (bench/MEMORY_LEARNING.md
  measured both).
* **recency**: ``exp(-age / tau)`` of the time since the chunk was last recalled (0 for a
  chunk never recalled: being new is not being used).
* **rate**: the recall rate, as ``recall()`` scores it.

The weights are ``SearchConfig``'s; ``w_memory`` 0 turns this off. A store with no recall
and no learned link is ranked by text alone, unchanged (one indexed lookup says so), which
is every context index: they never record.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rlm_runtime.memory import lifecycle, links, search
from rlm_runtime.memory.records import Hit, Hits, ScoreParts

if TYPE_CHECKING:
    from rlm_runtime.memory.settings import RecallConfig, SearchConfig

#: Link types that record use: read together for one answer, or an answer's sources.
LEARNED_LINKS = ("derived_from",)


def has_record(conn: sqlite3.Connection) -> bool:
    """Whether anything was ever recalled or linked by use (two indexed lookups: the partial
    indexes ``chunk_stats_last_recall`` and ``links_learned``, which SQLite uses only for a
    query naming the link type as a literal, not a parameter)."""
    if conn.execute("SELECT 1 FROM chunk_stats WHERE last_recall IS NOT NULL LIMIT 1").fetchone():
        return True
    return conn.execute("SELECT 1 FROM links WHERE type = 'derived_from' LIMIT 1").fetchone() is not None


def rerank(conn: sqlite3.Connection, found: Hits, k: int, filters: search.Filters, cfg: SearchConfig,
           recall_cfg: RecallConfig, now: float) -> Hits:
    """The best ``k`` of ``found`` (ranked by text, best first) and of the chunks learned
    links tie to its best hits, by the score in the module docstring; each hit's ``parts``
    holds its four terms. ``found`` is returned cut to ``k`` when the switch is off (the
    caller asks ``has_record`` first: a store that recorded nothing keeps its text order)."""
    if cfg.w_memory <= 0 or not found:
        return _cut(found, found[:k])
    best = max(h.score for h in found)
    text = {h.chunk_id: (h.score / best if best > 0 else 1.0) for h in found}
    # Each seed's links count as much as the seed matches the query.
    linked: dict[int, float] = {}
    for seed in found[: cfg.memory_seeds]:
        sources = links.neighbours(conn, [seed.chunk_id], recall_cfg.link_candidates, types=LEARNED_LINKS, outgoing=True)
        for other, strength in sources.items():
            linked[other] = linked.get(other, 0.0) + strength * text[seed.chunk_id]
    new_ids = search.existing(conn, [i for i in linked if i not in text], filters)
    ids = list(text) + new_ids
    stats = lifecycle.use_of(conn, ids)
    scored: list[tuple[int, ScoreParts, float]] = []
    for chunk_id in ids:
        created, last_recall, count = stats.get(chunk_id, (now, None, 0))
        p = _parts(recall_cfg, now, text=text.get(chunk_id, 0.0), link_sum=linked.get(chunk_id, 0.0), created=created,
                   last_recall=last_recall, count=count)
        learned = cfg.w_learned_link * p.link + cfg.w_recalled_recency * p.recency + cfg.w_recalled_rate * p.reinforcement
        # On the text's scale (times the best hit's score), so hits of a store and of a
        # context index ranked by words still sort together.
        scored.append((chunk_id, p, (p.text + cfg.w_memory * learned) * (best if best > 0 else 1.0)))
    order = {h.chunk_id: n for n, h in enumerate(found)}
    scored.sort(key=lambda t: (-t[2], order.get(t[0], len(order))))
    top = scored[:k]
    by_id = {h.chunk_id: h for h in found}
    # The caller made snippets for the text's first k; a hit moved up from below, or brought
    # by a link, gets its own (the start of its text when the query's words are not in it).
    unsnipped = [i for i, _, _ in top if order.get(i, k) >= k]
    snips = search.snippets(conn, search.Plan(terms=list(found.terms)).any_match, unsnipped, cfg.snippet_tokens) \
        if found.terms and unsnipped else {}
    fresh = search.hits(conn, [(i, 0.0) for i in unsnipped], snips)
    by_id.update({h.chunk_id: h for h in fresh})
    return _cut(found, [dataclasses.replace(by_id[i], score=s, parts=p) for i, p, s in top if i in by_id])


def _parts(cfg: RecallConfig, now: float, *, text: float, link_sum: float, created: float, last_recall: float | None,
           count: int) -> ScoreParts:
    return ScoreParts(text=text, link=links.squash(link_sum),
                      recency=0.0 if last_recall is None else lifecycle.recency(cfg, now, last_recall),
                      reinforcement=lifecycle.reinforcement(cfg, now, created, count))


def _cut(found: Hits, kept: Sequence[Hit]) -> Hits:
    """``kept`` with ``found``'s account of how the query ran."""
    out = Hits(kept, terms=found.terms, dropped=found.dropped, capped=found.capped, scanned=found.scanned,
               all_of=found.all_of, mode=found.mode, fallback=found.fallback)
    out.strength, out.cosines = found.strength, found.cosines
    return out
