"""Editing a stored chunk without losing what it is: its id, links, statistics and recall history.

A changed decision used to be ``forget`` plus ``add``: a new id, no links, no recalls. An
edit changes a chunk in place (its text, kind, tags, summary or confidence) and keeps the
version it replaces in ``chunk_versions``, so ``history`` lists every earlier state and
when it held. A new text is indexed again as a new chunk's is: its FTS entry (by the
``chunks_fts_update`` trigger), its key terms (and the ``related_to`` links they find; the
links it had stay), its fast vector written again and its quality vector dropped (the
quality tier fills it again, as it fills a new chunk's).

Only a note's text is edited (a chunk of a memory source: ``notes``, ``run:<id>``): a
file's chunk mirrors its file, and the next ingest of that file would put the file's text
back, so its text is refused with the way to change it (edit the file and add it again).
Its tags, kind, summary and confidence may change: they are not the file's.

``summary`` and ``confidence`` live in ``chunk_notes``; search results and ``show`` carry
them. Everything here runs inside the caller's write transaction.
"""

from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import dataclass
from typing import Any

from rlm_runtime.memory import links, vectors
from rlm_runtime.memory.chunks import content_hash, notes_of, tags_of, text_key
from rlm_runtime.memory.db import LIVE
from rlm_runtime.memory.errors import ChunkNotFound, StoreError
from rlm_runtime.memory.value_check import read_meta, wrapped_increment

#: The longest summary kept (characters).
SUMMARY_CHARS = 2000
#: Edits kept per chunk: past it the oldest version goes (a chunk edited by a script in a loop
#: must not grow the store without bound).
MAX_VERSIONS = 100
#: The highest version number: a chunk edited once a second counts to it in 68 years; an
#: imported history numbered past it is refused (the next edit could not be numbered).
MAX_VERSION = 2**31 - 1


class _Keep:
    """The value of a field an edit leaves as it is."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP: Any = _Keep()


@dataclass(frozen=True)
class Edit:
    """What an edit changes; a field left ``KEEP`` stays. ``summary`` and ``confidence`` may be
    None (cleared). ``add_tags`` / ``remove_tags`` change the tags; the rest is replaced."""

    text: Any = KEEP
    kind: Any = KEEP
    add_tags: tuple[str, ...] = ()
    remove_tags: tuple[str, ...] = ()
    summary: Any = KEEP
    confidence: Any = KEEP


@dataclass(frozen=True)
class Version:
    """One state of a chunk: ``version`` 1 is the first it held; ``since`` when it began to
    hold it, ``replaced`` when an edit replaced it (None: the current state)."""

    version: int
    text: str
    kind: str
    tags: tuple[str, ...]
    summary: str | None
    confidence: float | None
    since: float
    replaced: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "text": self.text, "kind": self.kind, "tags": list(self.tags), "summary": self.summary,
                "confidence": self.confidence, "since": self.since, "replaced": self.replaced}


@dataclass(frozen=True)
class Edited:
    """What ``edit`` did: the fields it changed (empty: the chunk already held all of it), and
    the version it kept (0: none)."""

    chunk_id: int
    changed: tuple[str, ...]
    kept_version: int


def check(edit: Edit) -> Edit:
    """``edit`` with its values cleaned (tags and kind stripped, a blank summary cleared).

    Raises:
        StoreError: an empty text or kind, a tag both added and removed, a confidence outside
            [0, 1], a summary over ``SUMMARY_CHARS``.
    """
    text, kind, summary, confidence = edit.text, edit.kind, edit.summary, edit.confidence
    if text is not KEEP and (not isinstance(text, str) or not text.strip()):
        raise StoreError("an edit's text cannot be empty (rlm memory forget moves a chunk to the trash)")
    if kind is not KEEP:
        if not isinstance(kind, str) or not kind.strip():
            raise StoreError("a chunk's kind cannot be empty")
        kind = kind.strip()
    add = tuple(dict.fromkeys(t.strip() for t in edit.add_tags if t.strip()))
    remove = tuple(dict.fromkeys(t.strip() for t in edit.remove_tags if t.strip()))
    if both := set(add) & set(remove):
        raise StoreError(f"a tag cannot be added and removed at once: {', '.join(sorted(both))}")
    if summary is not KEEP and summary is not None:
        if not isinstance(summary, str):
            raise StoreError("a summary is text")
        summary = " ".join(summary.split()) or None
        if summary is not None and len(summary) > SUMMARY_CHARS:
            raise StoreError(f"a summary is at most {SUMMARY_CHARS:,} characters (this one has {len(summary):,})")
    if confidence is not KEEP and confidence is not None:
        if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not math.isfinite(confidence) \
                or not 0 <= confidence <= 1:
            raise StoreError(f"a confidence is a number from 0 to 1, not {confidence!r}")
        confidence = float(confidence)
    return Edit(text, kind, add, remove, summary, confidence)


def apply(conn: sqlite3.Connection, chunk_id: int, edit: Edit, *, now: float, link_cfg: Any, tokens: int = 0,
          fast: vectors.Vectors | None, template: frozenset[str] = frozenset()) -> Edited:
    """Change a live chunk as ``edit`` says (checked with ``check``), keeping its state before.
    ``tokens``: the new text's tokens, as the store's chunking counts them (the caller has
    checked that it is one chunk's text).

    Raises:
        ChunkNotFound: no live chunk has this id.
        StoreError: the text of a file's chunk (or what ``check`` refuses).
    """
    edit = check(edit)
    row = conn.execute(f"""SELECT c.text, c.kind, c.modified, s.kind, s.path, c.meta
                           FROM chunks c JOIN sources s ON s.id = c.source_id WHERE c.id = ? AND {LIVE}""",
                       (chunk_id,)).fetchone()
    if row is None:
        raise ChunkNotFound(chunk_id)
    text, kind, since, source_kind = str(row[0]), str(row[1]), float(row[2]), str(row[3])
    tags = tags_of(conn, [chunk_id]).get(chunk_id, ())
    summary, confidence = notes_of(conn, [chunk_id]).get(chunk_id, (None, None))
    new_text = text if edit.text is KEEP else edit.text
    if new_text != text and source_kind != "memory":
        raise StoreError(f"chunk {chunk_id} is part of the file {row[4]}: edit the file and add it again "
                         "(rlm memory add); its tags, kind, summary and confidence can be edited here")
    new_tags = tuple(sorted((set(tags) | set(edit.add_tags)) - set(edit.remove_tags)))
    after = {"text": new_text, "kind": kind if edit.kind is KEEP else edit.kind, "tags": new_tags,
             "summary": summary if edit.summary is KEEP else edit.summary,
             "confidence": confidence if edit.confidence is KEEP else edit.confidence}
    before = {"text": text, "kind": kind, "tags": tags, "summary": summary, "confidence": confidence}
    changed = tuple(k for k in after if after[k] != before[k])
    if not changed:
        return Edited(chunk_id, (), 0)
    last = conn.execute("SELECT max(version) FROM chunk_versions WHERE chunk_id = ?", (chunk_id,)).fetchone()[0]
    version = int(last or 0) + 1
    if not 1 <= version <= MAX_VERSION:  # a store written elsewhere, numbered past any count
        raise StoreError(f"chunk {chunk_id}'s earlier versions are numbered past {MAX_VERSION:,}: it cannot be edited "
                         "(forget it and add its text again)")
    conn.execute("""INSERT INTO chunk_versions (chunk_id, version, text, kind, tags, summary, confidence, since, replaced)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                 (chunk_id, version, text, kind, json.dumps(list(tags), ensure_ascii=False), summary, confidence, since, now))
    conn.execute("DELETE FROM chunk_versions WHERE chunk_id = ? AND version <= ?", (chunk_id, version - MAX_VERSIONS))
    if "text" in changed:
        _new_text(conn, chunk_id, new_text, tokens, read_meta(row[5]), now=now, link_cfg=link_cfg, fast=fast, template=template)
    if "kind" in changed:
        conn.execute("UPDATE chunks SET kind = ? WHERE id = ?", (after["kind"], chunk_id))
    if "tags" in changed:
        conn.executemany("DELETE FROM chunk_tags WHERE tag = ? AND chunk_id = ?", [(t, chunk_id) for t in set(tags) - set(new_tags)])
        conn.executemany("INSERT OR IGNORE INTO chunk_tags (tag, chunk_id) VALUES (?, ?)",
                         [(t, chunk_id) for t in set(new_tags) - set(tags)])
    if "summary" in changed or "confidence" in changed:
        conn.execute("""INSERT INTO chunk_notes (chunk_id, summary, confidence) VALUES (?, ?, ?)
                        ON CONFLICT (chunk_id) DO UPDATE SET summary = excluded.summary, confidence = excluded.confidence""",
                     (chunk_id, after["summary"], after["confidence"]))
    conn.execute("UPDATE chunks SET modified = ? WHERE id = ?", (now, chunk_id))
    return Edited(chunk_id, changed, version)


def _new_text(conn: sqlite3.Connection, chunk_id: int, text: str, tokens: int, meta: dict[str, Any] | None, *, now: float,
              link_cfg: Any, fast: vectors.Vectors | None, template: frozenset[str]) -> None:
    """Write a note's new text and index it again: FTS (by trigger), key terms, vectors."""
    size = len(text.encode("utf-8", "surrogatepass"))
    conn.execute("""UPDATE chunks SET text = ?, hash = ?, text_key = ?, tokens = ?, end_byte = start_byte + ?,
                           end_line = start_line + ? WHERE id = ?""",
                 (text, content_hash(text), text_key(text), max(1, tokens), size, text.count("\n"), chunk_id))
    conn.execute("DELETE FROM chunk_terms WHERE chunk_id = ?", (chunk_id,))
    links.link_new_chunks(conn, [(chunk_id, text, None)], (), None, link_cfg, now, template=template)
    header = (meta or {}).get("header")
    written = fast.write(conn, [(chunk_id, vectors.vector_text(text, header))], appended=False) if fast is not None else 0
    for tier in (vectors.QUALITY,) if written else (vectors.FAST, vectors.QUALITY):
        _drop_vector(conn, tier, chunk_id)


def _drop_vector(conn: sqlite3.Connection, tier: vectors.Tier, chunk_id: int) -> None:
    """Remove a chunk's vector of ``tier`` (made from its old text); readers reload."""
    if not vectors.has_table(conn, tier):
        return
    if conn.execute(f"DELETE FROM {tier.table} WHERE chunk_id = ?", (chunk_id,)).rowcount:
        conn.execute(f"UPDATE {tier.meta_table} SET epoch = {wrapped_increment('epoch')} WHERE id = 1")


def history(conn: sqlite3.Connection, chunk_id: int) -> list[Version]:
    """Every state of a live chunk, oldest first, the current one last.

    Raises:
        ChunkNotFound: no live chunk has this id.
    """
    row = conn.execute(f"SELECT c.text, c.kind, c.modified FROM chunks c WHERE c.id = ? AND {LIVE}", (chunk_id,)).fetchone()
    if row is None:
        raise ChunkNotFound(chunk_id)
    out = []
    for r in conn.execute("""SELECT version, text, kind, tags, summary, confidence, since, replaced FROM chunk_versions
                             WHERE chunk_id = ? ORDER BY version""", (chunk_id,)):
        out.append(Version(int(r[0]), str(r[1]), str(r[2]), tag_list(r[3]), r[4], r[5], float(r[6]), float(r[7])))
    summary, confidence = notes_of(conn, [chunk_id]).get(chunk_id, (None, None))
    current = out[-1].version + 1 if out else 1
    out.append(Version(current, str(row[0]), str(row[1]), tags_of(conn, [chunk_id]).get(chunk_id, ()),
                       summary, confidence, float(row[2]), None))
    return out


def tag_list(value: Any) -> tuple[str, ...]:
    """A version's tags from their JSON (a store file from elsewhere may hold anything)."""
    try:
        tags = json.loads(value)
    except (TypeError, ValueError, RecursionError):
        return ()
    return tuple(t for t in tags if isinstance(t, str)) if isinstance(tags, list) else ()
