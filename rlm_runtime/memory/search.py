"""Ranked full-text search over chunks: FTS5 with BM25, whatever text the user typed.

How a query runs (``plan``):

1. It is split on whitespace; every piece is quoted for MATCH (``"don't"``, ``"a.b"``,
   ``"x-y"``: FTS5 syntax never reaches the parser, so ``-``, ``'``, ``.`` or ``AND`` typed by
   a model are searched, not obeyed). A quoted piece of several words is a phrase.
   Duplicates go, pieces beyond ``max_terms`` are ignored.
2. Pieces made only of stop words are dropped when others remain.
3. Each remaining piece's document frequency is counted, up to ``rank_budget`` (reading at
   most that many postings, without ranking them). Pieces are taken rarest first while the
   sum of their frequencies stays within ``rank_budget``, and OR-ed: BM25 ranks a chunk
   holding more of them higher, and scores at most ``rank_budget`` chunks. The pieces left
   out are too common to matter next to the rarer ones; ``Hits.dropped`` names them.
4. When no piece fits (a query of stop words, or of words each in more than ``rank_budget``
   chunks), the query is capped: it returns the newest k chunks holding all its pieces (or,
   when fewer than k hold all, any of them), unranked (score 0). BM25 cannot be capped:
   FTS5's ``bm25()`` counts every chunk holding each term before scoring the first one,
   ~20 ms per stop word at 1M chunks whatever the LIMIT, and ranking five stop words over
   every match took 3 s there. Reading the newest k matches costs a few milliseconds.

Filters (``kind``, ``tags``: every tag, ``source``: a path or a folder prefix) apply before
the top k are taken. Snippets mark matched terms with « and ».
"""

from __future__ import annotations

import math
import os
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rlm_runtime.memory.chunks import notes_of, tags_of
from rlm_runtime.memory.db import LIVE, LIVE_FTS
from rlm_runtime.memory.records import Hit, Hits
from rlm_runtime.memory.terms import is_stop_phrase, words

if TYPE_CHECKING:
    from rlm_runtime.memory.settings import SearchConfig

MARK_OPEN, MARK_CLOSE, ELLIPSIS = "«", "»", "…"


def quote(piece: str) -> str:
    """``piece`` as one FTS5 string (a phrase when it holds several words)."""
    return '"' + piece.replace('"', '""') + '"'


@dataclass
class Plan:
    """What a query becomes: the quoted pieces searched, those dropped, and whether it is
    capped: the newest matches, unranked, of all the pieces (``all_of``) or of any."""

    terms: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    capped: bool = False
    all_of: bool = False

    @property
    def match(self) -> str:
        return (" AND " if self.all_of else " OR ").join(quote(t) for t in self.terms)

    @property
    def any_match(self) -> str:
        return " OR ".join(quote(t) for t in self.terms)


@dataclass(frozen=True)
class Filters:
    """Restrictions applied before ranking. ``source`` is a stored source path (files are
    stored absolute: a relative path is made absolute) or a folder holding sources."""

    kind: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    source: str | None = None

    @classmethod
    def of(cls, kind: str | Sequence[str] | None, tags: str | Sequence[str] | None, source: str | os.PathLike[str] | None) -> Filters:
        kinds = (kind,) if isinstance(kind, str) else tuple(kind or ())
        tag_list = (tags,) if isinstance(tags, str) else tuple(tags or ())
        return cls(kinds, tag_list, None if source is None else os.fspath(source))

    def __bool__(self) -> bool:
        return bool(self.kind or self.tags or self.source)

    def sql(self, conn: sqlite3.Connection) -> tuple[str, list[Any]]:
        """A WHERE fragment over ``chunks c`` and its arguments."""
        parts: list[str] = []
        args: list[Any] = []
        if self.kind:
            parts.append(f"c.kind IN ({','.join('?' * len(self.kind))})")
            args.extend(self.kind)
        for tag in self.tags:
            parts.append("EXISTS (SELECT 1 FROM chunk_tags t WHERE t.tag = ? AND t.chunk_id = c.id)")
            args.append(tag)
        if self.source is not None:
            ids = source_ids(conn, self.source)
            parts.append(f"c.source_id IN ({','.join('?' * len(ids))})" if ids else "0")
            args.extend(ids)
        return " AND ".join(parts) or "1", args


def source_ids(conn: sqlite3.Connection, source: str) -> list[int]:
    """Ids of the sources named ``source`` exactly, or lying under it as a folder (a relative
    file path is tried as given and made absolute)."""
    names = [source.rstrip("/") or "/"]
    absolute = os.path.abspath(os.path.expanduser(source))
    if absolute not in names:
        names.append(absolute)
    ids: list[int] = []
    for name in names:
        prefix = name.rstrip(os.sep) + os.sep
        ids += [int(r[0]) for r in conn.execute("SELECT id FROM sources WHERE path = ? OR substr(path, 1, ?) = ?",
                                                 (name, len(prefix), prefix))]
    return sorted(set(ids))


def capped_df(conn: sqlite3.Connection, piece: str, cap: int) -> int:
    """How many chunks match ``piece``, counted up to ``cap`` (reads at most ``cap`` postings)."""
    row = conn.execute("SELECT count(*) FROM (SELECT 1 FROM chunks_fts WHERE chunks_fts MATCH ? LIMIT ?)", (quote(piece), cap)).fetchone()
    return int(row[0])


def pieces(query: str, max_terms: int) -> list[str]:
    """The whitespace-separated pieces of a query that hold a word, deduplicated, at most ``max_terms``."""
    seen: dict[str, str] = {}
    # FTS5 reads a MATCH expression as a C string: a NUL would end it inside a quoted piece.
    for piece in query.replace("\x00", " ").split():
        if words(piece) and piece.lower() not in seen:
            seen[piece.lower()] = piece
    return list(seen.values())[:max_terms]


def plan(conn: sqlite3.Connection, query: str, cfg: SearchConfig, df_cache: dict[str, int] | None = None) -> Plan:
    """Decide what to search for (see the module docstring)."""
    found = pieces(query, cfg.max_terms)
    if not found:
        return Plan()
    stop = [p for p in found if is_stop_phrase(p)]
    content = [p for p in found if p not in stop]
    if not content:
        return Plan(terms=stop, capped=True, all_of=len(stop) > 1)
    cache = {} if df_cache is None else df_cache
    for p in content:
        if p.lower() not in cache:
            cache[p.lower()] = capped_df(conn, p, cfg.rank_budget + 1)
    chosen: set[str] = set()
    total = 0
    for p in sorted(content, key=lambda p: cache[p.lower()]):
        if total + cache[p.lower()] > cfg.rank_budget:
            break
        chosen.add(p)
        total += cache[p.lower()]
    if chosen:
        return Plan(terms=[p for p in content if p in chosen], dropped=stop + [p for p in content if p not in chosen])
    return Plan(terms=content, dropped=stop, capped=True, all_of=len(content) > 1)


def ranked(conn: sqlite3.Connection, the_plan: Plan, k: int, filters: Filters) -> list[tuple[int, float]]:
    """(chunk id, score) of the best ``k`` matches, best first (score = -BM25, higher is
    better; 0 for a capped plan, newest first). A capped plan of all the pieces that finds
    fewer than ``k`` becomes one of any piece."""
    if not the_plan.terms or k <= 0:
        return []
    where, args = filters.sql(conn) if filters else ("1", [])
    where = f"{where} AND {LIVE_FTS}"  # chunks in the trash are never found
    join = "JOIN chunks c ON c.id = chunks_fts.rowid" if filters else ""
    if the_plan.capped:
        rows = conn.execute(f"""SELECT chunks_fts.rowid FROM chunks_fts {join}
                                WHERE chunks_fts MATCH ? AND {where} ORDER BY chunks_fts.rowid DESC LIMIT ?""",
                            (the_plan.match, *args, k)).fetchall()
        if the_plan.all_of and len(rows) < k:
            the_plan.all_of = False
            return ranked(conn, the_plan, k, filters)
        return [(int(r[0]), 0.0) for r in rows]
    if filters:
        rows = conn.execute(
            f"""SELECT chunks_fts.rowid, bm25(chunks_fts) AS s FROM chunks_fts {join}
                WHERE chunks_fts MATCH ? AND {where} ORDER BY s LIMIT ?""", (the_plan.match, *args, k)).fetchall()
    else:
        rows = conn.execute(f"SELECT rowid, rank FROM chunks_fts WHERE chunks_fts MATCH ? AND {LIVE_FTS} ORDER BY rank LIMIT ?",
                            (the_plan.match, k)).fetchall()
    return [(int(r[0]), -float(r[1])) for r in rows]


def coverage(conn: sqlite3.Connection, the_plan: Plan, chunk_id: int, df: dict[str, int], total: int) -> float:
    """The share of the query's word weight (each term's idf, ``log(1 + total / df)``) that the
    chunk ``chunk_id`` holds: 1 when it has every term searched, near 0 when it has only the
    common ones."""
    return coverages(conn, the_plan, [chunk_id], df, total).get(chunk_id, 0.0)


def coverages(conn: sqlite3.Connection, the_plan: Plan, ids: Sequence[int], df: dict[str, int], total: int) -> dict[int, float]:
    """``coverage`` of each chunk of ``ids``, one query a term."""
    if not the_plan.terms or not ids:
        return {}
    weights = {t: math.log(1 + max(total, 1) / max(df.get(t.lower(), 1), 1)) for t in the_plan.terms}
    held = dict.fromkeys(ids, 0.0)
    for term, weight in weights.items():
        for cid in holding(conn, quote(term), list(held)):
            held[cid] += weight
    whole = sum(weights.values())
    return {cid: w / whole for cid, w in held.items()}


def existing(conn: sqlite3.Connection, ids: Sequence[int], filters: Filters) -> list[int]:
    """The ids of ``ids`` that name a live chunk passing ``filters``, in the order given
    (a vector search's candidates: its copy in memory may hold chunks deleted since, and
    holds those in the trash)."""
    kept: set[int] = set()
    where, args = filters.sql(conn) if filters else ("1", [])
    for start in range(0, len(ids), 500):
        part = list(ids[start:start + 500])
        marks = ",".join("?" * len(part))
        kept.update(int(r[0]) for r in conn.execute(f"SELECT c.id FROM chunks c WHERE c.id IN ({marks}) AND {LIVE} AND {where}", (*part, *args)))
    return [i for i in ids if i in kept]


def holding(conn: sqlite3.Connection, match: str, ids: Sequence[int]) -> set[int]:
    """The ids of ``ids`` whose chunk matches ``match`` (holds a word of the query)."""
    found: set[int] = set()
    for start in range(0, len(ids), 500):
        part = list(ids[start:start + 500])
        marks = ",".join("?" * len(part))
        found.update(int(r[0]) for r in conn.execute(
            f"SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? AND rowid IN ({marks})", (match, *part)))
    return found


def snippets(conn: sqlite3.Connection, match: str, ids: Sequence[int], tokens: int) -> dict[int, str]:
    """FTS5 snippets of these chunks for ``match``, matched terms between « and »."""
    out: dict[int, str] = {}
    for chunk_id in ids:
        row = conn.execute(
            "SELECT snippet(chunks_fts, 0, ?, ?, ?, ?) FROM chunks_fts WHERE chunks_fts MATCH ? AND rowid = ?",
            (MARK_OPEN, MARK_CLOSE, ELLIPSIS, tokens, match, chunk_id)).fetchone()
        if row is not None:
            out[chunk_id] = str(row[0])
    return out


def hits(conn: sqlite3.Connection, scored: Sequence[tuple[int, float]], snips: dict[int, str], *, preview_chars: int = 240,
         by_meaning: frozenset[int] = frozenset()) -> list[Hit]:
    """``Hit`` rows for scored chunk ids (in that order); a chunk without a snippet shows the
    start of its text. Ids no longer stored, or in the trash, are left out; those of
    ``by_meaning`` (holding none of the query's words) say so (``Hit.by``)."""
    if not scored:
        return []
    ids = [i for i, _ in scored]
    marks = ",".join("?" * len(ids))
    rows = {int(r[0]): r for r in conn.execute(
        f"""SELECT c.id, s.path, c.start_line, c.end_line, c.kind, substr(c.text, 1, ?) FROM chunks c
            JOIN sources s ON s.id = c.source_id WHERE c.id IN ({marks}) AND {LIVE}""", (preview_chars, *ids))}
    tags = tags_of(conn, ids)
    notes = notes_of(conn, ids)
    out = []
    for chunk_id, score in scored:
        r = rows.get(chunk_id)
        if r is None:
            continue
        preview = str(r[5]) + (ELLIPSIS if len(str(r[5])) >= preview_chars else "")
        out.append(Hit(chunk_id, score, str(r[1]), int(r[2]), int(r[3]), snips.get(chunk_id, preview), str(r[4]), tags.get(chunk_id, ()),
                       by="meaning" if chunk_id in by_meaning else "words", summary=notes.get(chunk_id, (None, None))[0],
                       confidence=notes.get(chunk_id, (None, None))[1]))
    return out


def search(conn: sqlite3.Connection, query: str, k: int, filters: Filters, cfg: SearchConfig,
           df_cache: dict[str, int] | None = None, *, snipped: int | None = None) -> Hits:
    """The best ``k`` chunks for ``query`` (capped at ``max_k``), read-only; the first
    ``snipped`` (default all) with snippets, the others with the start of their text."""
    k = max(0, min(k, cfg.max_k))
    the_plan = plan(conn, query, cfg, df_cache)
    scored = ranked(conn, the_plan, k, filters)
    snips = snippets(conn, the_plan.any_match, [i for i, _ in scored[:snipped]], cfg.snippet_tokens) if scored else {}
    return Hits(hits(conn, scored, snips), terms=tuple(the_plan.terms), dropped=tuple(the_plan.dropped),
                capped=the_plan.capped, scanned=len(scored) if the_plan.capped else 0, all_of=the_plan.all_of)
