"""Export and import of a whole store as JSON lines, so a store can be moved, merged or read.

One record per line, each with a ``type``, in this order: ``header`` (format, version, the
migrations of the exporting store), ``source``, ``chunk`` (text, position, provenance, tags,
key terms, statistics, and an edited chunk's summary, confidence and earlier versions),
``link``, ``trace`` (a search or recall and the chunks it gave).

Import into an empty store keeps every id, so exporting the imported store gives the same
records. Import into a store that has content merges: sources are matched by kind and path,
a chunk whose text that source already holds maps to the stored chunk (its statistics stay),
the others get new ids; links and traces follow the mapping (a stronger link wins).

Chunks in the trash (``forget``) are not exported, nor their links, nor their places in
traces: an export is what the store remembers, and a text its user forgot must not travel in
an export made to share or move the store. (A backup of the trash is the store file itself.)
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any

from rlm_runtime import strictjson
from rlm_runtime.memory import edits, import_check, links
from rlm_runtime.memory.chunks import NewChunk, insert_chunk, set_text_keys
from rlm_runtime.memory.errors import StoreError
from rlm_runtime.memory.migrations import applied
from rlm_runtime.memory.value_check import read_meta

if TYPE_CHECKING:
    from rlm_runtime.memory.db import Database

FORMAT = "rlm-memory"
VERSION = 1
_BATCH = 1000

Target = str | os.PathLike[str] | IO[str]


@contextmanager
def _open(target: Target, mode: str) -> Iterator[IO[str]]:
    if isinstance(target, (str, os.PathLike)):
        # Undecodable bytes are read as surrogates, so the check of each line names the line.
        with open(target, mode, encoding="utf-8", newline="\n", errors="surrogateescape" if mode == "r" else "strict") as fh:
            yield fh
    else:
        yield target


def records(conn: sqlite3.Connection, now: float) -> Iterator[dict[str, Any]]:
    """Every record of the store, in export order."""
    yield {"type": "header", "format": FORMAT, "version": VERSION, "migrations": applied(conn), "exported_at": now}
    for r in conn.execute("SELECT id, kind, path, size, mtime_ns, hash, state, note, created, updated FROM sources ORDER BY id"):
        yield {"type": "source", "id": r[0], "kind": r[1], "path": r[2], "size": r[3], "mtime_ns": r[4], "hash": r[5],
               "state": r[6], "note": r[7], "created": r[8], "updated": r[9]}
    cur = conn.execute(
        """SELECT c.id, c.source_id, c.seq, c.text, c.start_byte, c.end_byte, c.start_line, c.end_line, c.tokens, c.kind, c.hash,
                  c.run_id, c.meta, c.created, c.modified, c.accessed, s.recall_count, s.last_recall, s.strength, s.strength_at,
                  s.tier, s.pinned, s.expires_at,
                  (SELECT json_group_array(tag) FROM (SELECT tag FROM chunk_tags WHERE chunk_id = c.id ORDER BY tag)),
                  (SELECT json_group_array(term) FROM (SELECT term FROM chunk_terms WHERE chunk_id = c.id ORDER BY term)),
                  n.summary, n.confidence,
                  (SELECT json_group_array(json_array(version, text, kind, tags, summary, confidence, since, replaced))
                   FROM (SELECT * FROM chunk_versions WHERE chunk_id = c.id ORDER BY version))
           FROM chunks c JOIN chunk_stats s ON s.chunk_id = c.id LEFT JOIN chunk_notes n ON n.chunk_id = c.id
           WHERE c.deleted_at IS NULL ORDER BY c.id""")
    for r in cur:
        yield {"type": "chunk", "id": r[0], "source_id": r[1], "seq": r[2], "text": r[3], "start_byte": r[4], "end_byte": r[5],
               "start_line": r[6], "end_line": r[7], "tokens": r[8], "kind": r[9], "hash": r[10], "run_id": r[11],
               "meta": read_meta(r[12]), "created": r[13], "modified": r[14], "accessed": r[15],
               "stats": {"recall_count": r[16], "last_recall": r[17], "strength": r[18], "strength_at": r[19], "tier": r[20],
                         "pinned": bool(r[21]), "expires_at": r[22]},
               "tags": json.loads(r[23]), "terms": json.loads(r[24]), "summary": r[25], "confidence": r[26],
               "versions": [_version(v) for v in json.loads(r[27])]}
    for r in conn.execute("""SELECT src, dst, type, strength, count, created, updated FROM links
                             WHERE NOT EXISTS (SELECT 1 FROM chunks WHERE id IN (src, dst) AND deleted_at IS NOT NULL)
                             ORDER BY src, type, dst"""):
        yield {"type": "link", "src": r[0], "dst": r[1], "link_type": r[2], "strength": r[3], "count": r[4], "created": r[5], "updated": r[6]}
    for r in conn.execute(
            # SQLite's JSON writes an infinite score (a store file from elsewhere) as Inf, which
            # no JSON reader takes: it is written as null (9e999 is SQLite's infinity).
            """SELECT t.id, t.at, t.op, t.query, t.run_id,
                      (SELECT json_group_array(json_array(rank, chunk_id, CASE WHEN abs(score) < 9e999 THEN score END))
                       FROM (SELECT rank, chunk_id, score FROM trace_chunks WHERE trace_id = t.id
                             AND chunk_id NOT IN (SELECT id FROM chunks WHERE deleted_at IS NOT NULL) ORDER BY rank))
               FROM recall_traces t ORDER BY t.id"""):
        yield {"type": "trace", "id": r[0], "at": r[1], "op": r[2], "query": r[3], "run_id": r[4], "chunks": json.loads(r[5])}


def _version(row: list[Any]) -> dict[str, Any]:
    """An earlier version of a chunk as an export writes it (its tags read as ``edits`` reads them)."""
    return {"version": row[0], "text": row[1], "kind": row[2], "tags": list(edits.tag_list(row[3])), "summary": row[4],
            "confidence": row[5], "since": row[6], "replaced": row[7]}


def export_jsonl(db: Database, target: Target, now: float) -> int:
    """Write every record to ``target`` (a path or a text file); return how many."""
    n = 0
    with db.snapshot() as conn, _open(target, "w") as fh:
        for rec in records(conn, now):
            fh.write(strictjson.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n")
            n += 1
    return n


class _Importer:
    def __init__(self, conn: sqlite3.Connection, keep_ids: bool) -> None:
        self.conn = conn
        self.keep_ids = keep_ids
        self.sources: dict[int, int] = {}
        self.chunks: dict[int, int] = {}
        self.hashes: dict[int, dict[str, int]] = {}  # new source id -> hash -> chunk id (merge mode)
        self.counts = {"source": 0, "chunk": 0, "link": 0, "trace": 0, "merged": 0}
        self.kinds: dict[int, bool] = {}  # source id -> a memory source

    def handlers(self) -> dict[str, Callable[[dict[str, Any]], None]]:
        return {"source": self.source, "chunk": self.chunk, "link": self.link, "trace": self.trace}

    def source(self, r: dict[str, Any]) -> None:
        row = self.conn.execute("SELECT id FROM sources WHERE kind = ? AND path = ?", (r["kind"], r["path"])).fetchone()
        if row is not None:
            self.sources[r["id"]] = int(row[0])
            return
        cur = self.conn.execute(
            """INSERT INTO sources (id, kind, path, size, mtime_ns, hash, state, note, created, updated)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
            (r["id"] if self.keep_ids else None, r["kind"], r["path"], r["size"], r["mtime_ns"], r["hash"], r["state"], r["note"],
             r["created"], r["updated"]))
        self.sources[r["id"]] = int(cur.lastrowid or 0)
        # A source the import creates holds only the file's chunks: two of them with the same
        # text are two chunks (a repeated paragraph), never one merged into the other.
        self.hashes[self.sources[r["id"]]] = {}
        self.counts["source"] += 1

    def chunk(self, r: dict[str, Any]) -> None:
        sid = self.sources.get(r["source_id"])
        if sid is None:
            raise StoreError(f"chunk {r['id']} names source {r['source_id']}, which the file does not hold before it")
        if not self.keep_ids:
            known = self.hashes.get(sid)
            if known is None:
                # Not into a chunk in the trash: an imported text is meant to be found.
                rows = self.conn.execute("SELECT id, hash FROM chunks WHERE source_id = ? AND deleted_at IS NULL", (sid,))
                known = self.hashes[sid] = {str(h): int(i) for i, h in rows}
            if r["hash"] in known:
                self.chunks[r["id"]] = known[r["hash"]]
                self.counts["merged"] += 1
                return
        st = r["stats"]
        piece = NewChunk(r["text"], r["start_byte"], r["end_byte"], r["start_line"], r["end_line"], r["tokens"], r["kind"])
        new_id = insert_chunk(self.conn, source_id=sid, seq=r["seq"], piece=piece, tags=r["tags"], now=r["created"], run_id=r["run_id"],
                              meta=r["meta"], digest=r["hash"], pinned=bool(st["pinned"]), expires_at=st["expires_at"],
                              chunk_id=r["id"] if self.keep_ids else None)
        self.conn.execute("UPDATE chunks SET modified = ?, accessed = ? WHERE id = ?", (r["modified"], r["accessed"], new_id))
        if self._is_memory(sid):  # a note imported is one ``add_text`` will not store twice
            set_text_keys(self.conn, [(new_id, r["text"])])
        self.conn.execute("""UPDATE chunk_stats SET recall_count = ?, last_recall = ?, strength = ?, strength_at = ?, tier = ?
                             WHERE chunk_id = ?""",
                          (st["recall_count"], st["last_recall"], st["strength"], st["strength_at"], st["tier"], new_id))
        self.conn.executemany("INSERT OR IGNORE INTO chunk_terms (term, chunk_id) VALUES (?, ?)", [(t, new_id) for t in r.get("terms", ())])
        if r.get("summary") is not None or r.get("confidence") is not None:
            self.conn.execute("INSERT INTO chunk_notes (chunk_id, summary, confidence) VALUES (?, ?, ?)",
                              (new_id, r.get("summary"), r.get("confidence")))
        self.conn.executemany(
            """INSERT INTO chunk_versions (chunk_id, version, text, kind, tags, summary, confidence, since, replaced)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
            [(new_id, v["version"], v["text"], v["kind"], json.dumps(v["tags"], ensure_ascii=False), v["summary"], v["confidence"],
              v["since"], v["replaced"]) for v in r.get("versions", ())])
        # Not added to ``hashes``: only chunks the store held before this import are merged
        # onto (a re-import merges), never two chunks of one file with the same text.
        self.chunks[r["id"]] = new_id
        self.counts["chunk"] += 1

    def _is_memory(self, sid: int) -> bool:
        if sid not in self.kinds:
            row = self.conn.execute("SELECT kind FROM sources WHERE id = ?", (sid,)).fetchone()
            self.kinds[sid] = row is not None and row[0] == "memory"
        return self.kinds[sid]

    def link(self, r: dict[str, Any]) -> None:
        a, b = self.chunks.get(r["src"]), self.chunks.get(r["dst"])
        if a is None or b is None:
            return
        if self.keep_ids:
            self.conn.execute("""INSERT OR REPLACE INTO links (src, dst, type, strength, count, created, updated)
                                 VALUES (?, ?, ?, ?, ?, ?, ?)""",
                              (a, b, r["link_type"], r["strength"], r["count"], r["created"], r["updated"]))
        else:
            links.upsert(self.conn, a, b, r["link_type"], r["strength"], r["updated"])
        self.counts["link"] += 1

    def trace(self, r: dict[str, Any]) -> None:
        cur = self.conn.execute("INSERT INTO recall_traces (id, at, op, query, run_id) VALUES (?, ?, ?, ?, ?)",
                                (r["id"] if self.keep_ids else None, r["at"], r["op"], r["query"], r["run_id"]))
        tid = int(cur.lastrowid or 0)
        rows = [(tid, rank, self.chunks[cid], score) for rank, cid, score in r["chunks"] if cid in self.chunks]
        self.conn.executemany("INSERT INTO trace_chunks (trace_id, rank, chunk_id, score) VALUES (?, ?, ?, ?)", rows)
        self.counts["trace"] += 1


def import_jsonl(db: Database, source: Target) -> dict[str, int]:
    """Read records written by ``export_jsonl`` into the store, all or nothing: the whole
    import is one write transaction (records are applied ``_BATCH`` at a time inside it), so a
    bad line, or a crash, leaves the store exactly as it was. Readers go on meanwhile (WAL);
    another writer waits for it. Returns how many sources, chunks, links and traces were
    added and chunks merged.

    Raises:
        StoreError: the file is not an export of this format, or a line is not valid (its
            number is in the message; ``import_check`` says what a valid line is); nothing
            was imported.
    """
    importer: _Importer | None = None
    with db.write() as outer, _open(source, "r") as fh:
        empty = outer.execute("SELECT NOT EXISTS (SELECT 1 FROM sources) AND NOT EXISTS (SELECT 1 FROM recall_traces)").fetchone()[0]
        pending: list[tuple[int, str, dict[str, Any]]] = []

        def flush() -> None:
            if not pending or importer is None:
                return
            with db.write() as conn:  # joins the outer transaction
                importer.conn = conn
                handlers = importer.handlers()
                for number, kind, rec in pending:
                    try:
                        handlers[kind](rec)
                    except (KeyError, TypeError, ValueError, OverflowError, sqlite3.Error) as e:
                        raise StoreError(f"line {number}: invalid {kind} record ({e}); nothing was imported") from e
            pending.clear()

        for number, line in import_check.lines(fh):
            rec = import_check.parse(number, line)
            if importer is None:
                if rec.get("type") != "header" or rec.get("format") != FORMAT:
                    raise StoreError("not a memory store export: the first line is not its header")
                version = import_check.check_header(rec)
                if version > VERSION:
                    raise StoreError(f"the export has format version {version}; this version reads up to {VERSION}")
                importer = _Importer(outer, keep_ids=bool(empty))
                continue
            pending.append((number, import_check.check_record(number, rec), rec))
            if len(pending) >= _BATCH:
                flush()
        flush()
        if importer is None:
            raise StoreError("not a memory store export: the file is empty")
    return importer.counts
