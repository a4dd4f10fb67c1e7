"""Benchmarks of the memory store (``rlm_runtime.memory``) on text that ships with Python and Debian.

Run from the repository root (the package must be importable: installed, or on PYTHONPATH)::

    python bench/memory_bench.py [--quick] [--ingest-mb 20] [--scales 10000,100000,1000000] [--json]

What it measures (bench/MEMORY.md has the details, the targets and the figures):

1. ingest throughput (MB/s) of ``MemoryStore.ingest`` on real files, beside a plain sqlite3
   bulk insert of the same chunks into the same FTS5 schema, in the same run; and the parts:
   chunking alone, and the store's write path alone (rows, index, stats, links);
2. store size on disk per MB of text, and what a trigram index would add;
3. ``search`` latency p50/p99 at 10K, 100K and 1M chunks for a rare term, a unique term, two
   words, a question in plain words, a stop-word query and a common-word query (capped),
   and what the stop-word query costs without the cap.

The corpus: the standard library's ``.py`` files and the text under /usr/share/doc (plain
and gzipped), in a fixed order. The stores of 10K-1M chunks are filled with chunks of that
text, repeated with variations (every copy has a unique marker word and 1 word in 16 changed)
through the store's own write path. Everything is written under a temp folder, removed at the
end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import sqlite3
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _common import machine, quantile

from rlm_runtime.llm.tokens import count_tokens
from rlm_runtime.memory import IngestConfig, MemorySettings, MemoryStore
from rlm_runtime.memory.chunking import ChunkingConfig, chunk_text
from rlm_runtime.memory.chunks import NewChunk, content_hash, source_id
from rlm_runtime.memory.db import Database
from rlm_runtime.memory.migrations import migrate
from rlm_runtime.memory.search import capped_df
from rlm_runtime.memory.terms import key_terms
from rlm_runtime.memory.writer import SourceWriter

SEED = 20_261_123
RATIO_TARGET = 2.0
P50_TARGET_MS_AT_1M = 20.0
QUERIES = 200  # timed searches per query type and scale (fewer for the slow ones)
DOC_EXTENSIONS = {".txt", ".md", ".rst", ".html", ".htm", ".text"}
STOP_QUERY = "the of and to in"
COMMON_QUERY = "return self value"
SUBSTRING = "rrogateesc"  # inside "surrogateescape": no word index finds it


def corpus_files() -> list[Path]:
    """Text files that ship with Python and Debian, interleaved (stdlib, docs, stdlib, ...)."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    py = sorted(p for p in stdlib.rglob("*.py") if "site-packages" not in p.parts and p.is_file())
    docs = sorted(p for p in Path("/usr/share/doc").rglob("*")
                  if p.is_file() and not p.is_symlink() and (p.suffix.lower() in DOC_EXTENSIONS or p.name in ("copyright", "README")))
    out: list[Path] = []
    for i in range(max(len(py), len(docs))):
        out += [lst[i] for lst in (py, docs) if i < len(lst)]
    return out


def gz_texts() -> Iterator[str]:
    """The gzipped docs (changelogs mostly), decompressed, as more text for the large stores."""
    for p in sorted(Path("/usr/share/doc").rglob("*.gz")):
        try:
            yield gzip.decompress(p.read_bytes()).decode("utf-8", "replace")
        except (OSError, EOFError):
            continue


def pick_files(files: list[Path], budget_bytes: int) -> list[Path]:
    out, total = [], 0
    for p in files:
        size = p.stat().st_size
        if size == 0 or size > 4 * 1024 * 1024:
            continue
        out.append(p)
        total += size
        if total >= budget_bytes:
            break
    return out


def db_size(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists())


def timed(fn: Any) -> tuple[Any, float, float]:
    """(result, wall seconds, CPU seconds of this process)."""
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


# ------------------------------------------------------------------ 1-2: ingest

def chunk_all(files: list[Path]) -> list[tuple[str, list[NewChunk]]]:
    cfg = ChunkingConfig()
    out = []
    for p in files:
        text = p.read_bytes().decode("utf-8", "replace")
        out.append((str(p), [NewChunk(c.text, c.start_byte, c.end_byte, c.start_line, c.end_line, c.tokens, c.kind)
                             for c in chunk_text(text, path=str(p), config=cfg)]))
    return out


def plain_bulk_insert(path: Path, pieces: list[tuple[str, list[NewChunk]]]) -> None:
    """The baseline: the same chunks into the same schema with executemany, one transaction."""
    db = Database(path)
    migrate(db.conn)
    rows, fts = [], []
    sources = [(i + 1, "file", name, 0.0, 0.0) for i, (name, _) in enumerate(pieces)]
    cid = 0
    for sid, (_, chunks) in enumerate(pieces, 1):
        for seq, c in enumerate(chunks):
            cid += 1
            rows.append((cid, sid, seq, c.text, c.start_byte, c.end_byte, c.start_line, c.end_line, c.tokens, c.kind,
                         content_hash(c.text), 0.0, 0.0))
            fts.append((cid, c.text))

    def go() -> None:
        conn = db.conn
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("INSERT INTO sources (id, kind, path, created, updated) VALUES (?, ?, ?, ?, ?)", sources)
        conn.executemany("""INSERT INTO chunks (id, source_id, seq, text, start_byte, end_byte, start_line, end_line, tokens, kind, hash,
                            created, modified) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""", rows)
        conn.executemany("INSERT INTO chunks_fts (rowid, text) VALUES (?, ?)", fts)
        conn.execute("COMMIT")

    plain_bulk_insert.timing = timed(go)[1:]  # type: ignore[attr-defined]
    db.close()


def write_path(path: Path, pieces: list[tuple[str, list[NewChunk]]], batch: int = 256) -> None:
    """The store's write path without reading or chunking, with ingest's transactions: about
    ``batch`` chunks per transaction, small files sharing one."""
    st = MemoryStore(path)

    def go() -> None:
        now = time.time()
        queue: list[tuple[str, list[NewChunk]]] = []
        queued = 0

        def flush() -> None:
            with st.db.write() as conn:
                for name, chunks in queue:
                    sid = source_id(conn, "file", name, now)
                    assert sid is not None
                    SourceWriter(sid, st.settings.links).write(conn, chunks, now)

        for name, chunks in pieces:
            for i in range(0, max(len(chunks), 1), batch):
                queue.append((f"{name}#{i}", chunks[i:i + batch]))
                queued += len(chunks[i:i + batch])
                if queued >= batch:
                    flush()
                    queue, queued = [], 0
        flush()

    write_path.timing = timed(go)[1:]  # type: ignore[attr-defined]
    st.close()


def like_scan(path: Path) -> tuple[float, int]:
    """A substring search without an index: ``LIKE`` over every chunk's text (ms, matches)."""
    conn = sqlite3.connect(path)
    t = time.perf_counter()
    n = conn.execute("SELECT count(*) FROM chunks WHERE text LIKE ?", (f"%{SUBSTRING}%",)).fetchone()[0]
    ms = (time.perf_counter() - t) * 1000
    conn.close()
    return ms, int(n)


def trigram_cost(path: Path, pieces: list[tuple[str, list[NewChunk]]], base_db: Path) -> dict[str, Any]:
    """What a trigram index of the same text costs: build time, size, and a substring query
    beside a LIKE scan of ``base_db``'s chunks (a LIKE on the trigram table itself would use the index)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE VIRTUAL TABLE tri USING fts5(text, tokenize='trigram')")
    texts = [(c.text,) for _, chunks in pieces for c in chunks]

    def go() -> None:
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO tri (text) VALUES (?)", texts)
        conn.execute("COMMIT")

    _, wall, cpu = timed(go)
    conn.close()
    size = db_size(path)
    conn = sqlite3.connect(path)
    t = time.perf_counter()
    n = conn.execute(f"SELECT count(*) FROM tri WHERE tri MATCH '\"{SUBSTRING}\"'").fetchone()[0]
    q_ms = (time.perf_counter() - t) * 1000
    conn.close()
    like_ms, n_like = like_scan(base_db)
    return {"wall_s": wall, "cpu_s": cpu, "bytes": size, "substring": SUBSTRING, "substring_query_ms": q_ms, "substring_hits": n,
            "like_scan_ms": like_ms, "like_hits": n_like}


def bench_ingest(work: Path, budget_mb: float, log: Any) -> dict[str, Any]:
    files = pick_files(corpus_files(), int(budget_mb * 1e6))
    text_bytes = sum(p.stat().st_size for p in files)
    mb = text_bytes / 1e6
    log(f"ingest corpus: {len(files)} files, {mb:.1f} MB")
    count_tokens("load the tokenizer before timing")
    pieces, chunk_wall, chunk_cpu = timed(lambda: chunk_all(files))
    n_chunks = sum(len(c) for _, c in pieces)
    log(f"  chunking alone: {chunk_wall:.1f} s ({mb / chunk_wall:.2f} MB/s), {n_chunks} chunks")
    runs: dict[str, list[tuple[float, float]]] = {"baseline": [], "write_path": [], "ingest": [], "ingest_estimated_tokens": []}
    sizes: dict[str, int] = {}
    for rep in range(2):  # interleaved, twice: a busy spell slows both sides
        p = work / f"baseline{rep}.db"
        plain_bulk_insert(p, pieces)
        runs["baseline"].append(plain_bulk_insert.timing)  # type: ignore[attr-defined]
        sizes["baseline"] = db_size(p)
        if rep:
            p.replace(work / "baseline.db")
        else:
            p.unlink()
        p = work / f"write{rep}.db"
        write_path(p, pieces)
        runs["write_path"].append(write_path.timing)  # type: ignore[attr-defined]
        sizes["write_path"] = db_size(p)
        for q in work.glob(f"write{rep}.db*"):
            q.unlink()
        p = work / f"ingest{rep}.db"
        with MemoryStore(p) as st:
            report, wall, cpu = timed(lambda st=st: st.ingest(files))
            stats = st.stats()
        runs["ingest"].append((wall, cpu))
        sizes["ingest"] = db_size(p)
        for q in work.glob(f"ingest{rep}.db*"):
            q.unlink()
        p = work / f"estimate{rep}.db"
        with MemoryStore(p, settings=MemorySettings(ingest=IngestConfig(exact_tokens=False))) as st:
            runs["ingest_estimated_tokens"].append(timed(lambda st=st: st.ingest(files))[1:])
        for q in work.glob(f"estimate{rep}.db*"):
            q.unlink()
        log(f"  run {rep + 1}: baseline {runs['baseline'][-1][0]:.2f} s, write path {runs['write_path'][-1][0]:.2f} s, "
            f"ingest {wall:.2f} s ({report.chunks_added} chunks, {len(report.skipped)} skipped)")
    best = {k: (min(w for w, _ in v), min(c for _, c in v)) for k, v in runs.items()}
    tri = trigram_cost(work / "trigram.db", pieces, work / "baseline.db")
    for q in work.glob("trigram.db*"):
        q.unlink()
    out = {
        "files": len(files), "mb": mb, "chunks": n_chunks, "chunks_stored": stats.chunks, "links": stats.links_by_type,
        "chunking": {"wall_s": chunk_wall, "cpu_s": chunk_cpu, "mb_per_s": mb / chunk_wall},
        "runs": runs,
        "best": {k: {"wall_s": w, "cpu_s": c, "mb_per_s": mb / w} for k, (w, c) in best.items()},
        "ratio_write_path": best["write_path"][0] / best["baseline"][0],
        "ratio_ingest": best["ingest"][0] / best["baseline"][0],
        "ratio_write_path_cpu": best["write_path"][1] / best["baseline"][1],
        "ratio_ingest_cpu": best["ingest"][1] / best["baseline"][1],
        "ratio_ingest_estimated_tokens": best["ingest_estimated_tokens"][0] / best["baseline"][0],
        "bytes_per_mb": {k: v / mb for k, v in sizes.items()},
        "trigram": {**tri, "extra_bytes_per_mb": tri["bytes"] / mb, "extra_s_per_mb": tri["wall_s"] / mb},
    }
    return out


# ------------------------------------------------------------------ 3: search at scale

def base_pieces(limit: int, log: Any) -> list[str]:
    """Up to ``limit`` distinct pieces of real text (paragraph runs of ~300-3000 bytes): cut
    cheaply, since these only fill the large stores (the ingest section times the chunker)."""
    out: list[str] = []

    def cut(text: str) -> None:
        buf: list[str] = []
        size = 0
        for para in text.split("\n\n"):
            if not para.strip():
                continue
            buf.append(para)
            size += len(para)
            if size >= 300:
                piece = "\n\n".join(buf)[:3000]
                out.append(piece)
                buf, size = [], 0

    for p in corpus_files():
        if len(out) >= limit:
            break
        cut(p.read_bytes().decode("utf-8", "replace"))
    if len(out) < limit:
        for text in gz_texts():
            cut(text)
            if len(out) >= limit:
                break
    log(f"  base text: {len(out)} pieces, {sum(map(len, out)) / 1e6:.0f} MB")
    return out[:limit]


def variant(text: str, copy: int, index: int) -> str:
    """Copy ``copy`` of a piece: 1 word in 16 changed (a suffix by copy), and a unique marker word."""
    marker = f"zq{copy:x}x{index:x}"
    if copy == 0:
        return f"{text}\n{marker}"
    words = text.split(" ")
    rng = random.Random(copy * 1_000_003 + index)
    for i in rng.sample(range(len(words)), max(1, len(words) // 16)):
        if words[i].isalpha():
            words[i] = f"{words[i]}{chr(97 + copy % 26)}"
    return " ".join(words) + f"\n{marker}"


def fill(st: MemoryStore, base: list[str], start: int, stop: int, log: Any) -> float:
    """Write chunks ``start`` to ``stop`` (variants of the base pieces), 1000 per transaction,
    one source per 200 chunks; return the wall seconds."""
    t0 = time.perf_counter()
    now = time.time()
    n = start
    writer: SourceWriter | None = None
    while n < stop:
        batch = []
        for i in range(n, min(stop, n + 1000)):
            copy, index = divmod(i, len(base))
            text = variant(base[index], copy, index)
            batch.append(NewChunk(text, 0, len(text.encode()), 1, text.count("\n") + 1, len(text) // 4, "prose"))
        with st.db.write() as conn:
            for k, piece in enumerate(batch):
                i = n + k
                if i % 200 == 0 or writer is None:
                    sid = source_id(conn, "memory", f"bench/{i // 200}", now)
                    assert sid is not None
                    writer = SourceWriter(sid, st.settings.links)
                writer.write(conn, [piece], now)
        n += len(batch)
        if n % 50_000 == 0:
            rate = (n - start) / (time.perf_counter() - t0)
            log(f"    {n} chunks ({rate:.0f} chunks/s)")
    return time.perf_counter() - t0


def latencies(st: MemoryStore, queries: list[str], record: bool = False) -> dict[str, Any]:
    times, hits = [], []
    for q in queries:
        t = time.perf_counter()
        found = st.search(q, k=10, record=record)
        times.append((time.perf_counter() - t) * 1000)
        hits.append(len(found))
    return {"p50_ms": quantile(times, 0.5), "p99_ms": quantile(times, 0.99), "n": len(times), "mean_hits": sum(hits) / len(hits)}


def recall_latencies(st: MemoryStore, queries: list[str]) -> dict[str, Any]:
    times, hits = [], []
    for q in queries:
        t = time.perf_counter()
        hits.append(len(st.recall(q, k=10, record=False)))
        times.append((time.perf_counter() - t) * 1000)
    return {"p50_ms": quantile(times, 0.5), "p99_ms": quantile(times, 0.99), "n": len(times), "mean_hits": sum(hits) / len(hits)}


def query_sets(st: MemoryStore, n_chunks: int, base: list[str], rng: random.Random) -> dict[str, list[str]]:
    conn = st.db.conn
    rare: list[str] = []
    pairs: list[str] = []
    questions: list[str] = []
    tries = 0
    while len(rare) < QUERIES and tries < 20 * QUERIES:
        tries += 1
        i = rng.randrange(n_chunks)
        copy, index = divmod(i, len(base))
        terms = key_terms(variant(base[index], copy, index), 8)
        terms = [t for t in terms if not t.startswith("zq")]
        if len(terms) < 2:
            continue
        df = capped_df(conn, terms[0], 51)
        if 1 <= df <= 50:
            rare.append(terms[0])
            pairs.append(f"{terms[0]} {terms[1]}")
            questions.append(f"how does the {terms[1]} work with {terms[0]} and {terms[-1]}?")
    unique = [f"zq{(i // len(base)):x}x{(i % len(base)):x}" for i in (rng.randrange(n_chunks) for _ in range(QUERIES))]
    return {"rare word (df 1-50)": rare, "unique marker (df 1)": unique, "two words": pairs, "question in plain words": questions,
            f"stop words only: {STOP_QUERY!r}": [STOP_QUERY] * 20, f"common words only: {COMMON_QUERY!r}": [COMMON_QUERY] * 20}


def uncapped_stop_ms(st: MemoryStore) -> float:
    """What the stop-word query would cost ranked over every match (no cap), once."""
    t = time.perf_counter()
    st.db.conn.execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH '\"the\" OR \"of\" OR \"and\" OR \"to\" OR \"in\"' "
                       "ORDER BY rank LIMIT 10").fetchall()
    return (time.perf_counter() - t) * 1000


def bench_scales(work: Path, scales: list[int], log: Any) -> list[dict[str, Any]]:
    rng = random.Random(SEED)
    base = base_pieces(min(max(scales), 250_000), log)
    path = work / "scale.db"
    out = []
    done = 0
    fill_s = 0.0
    with MemoryStore(path, settings=MemorySettings()) as st:
        done = st.stats().chunks  # a store kept by --keep goes on from where it is
        for n in scales:
            if done < n:
                log(f"  filling to {n} chunks")
                fill_s += fill(st, base, done, n, log)
                done = n
            elif done > n:
                log(f"  the kept store has {done} chunks: skipping {n}")
                continue
            st.db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            text_mb = st.db.conn.execute("SELECT sum(length(CAST(text AS BLOB))) FROM chunks").fetchone()[0] / 1e6
            row: dict[str, Any] = {"chunks": n, "fill_s": fill_s, "text_mb": text_mb, "bytes": db_size(path),
                                   "links": st.stats().links_by_type}
            sets = query_sets(st, n, base, rng)
            for name, queries in sets.items():
                latencies(st, queries[:5])  # warm the cache
                row[name] = latencies(st, queries)
                log(f"    {name}: p50 {row[name]['p50_ms']:.2f} ms, p99 {row[name]['p99_ms']:.2f} ms")
            row["rare word, record=True"] = latencies(st, sets["rare word (df 1-50)"], record=True)
            row["recall(rare word)"] = recall_latencies(st, sets["rare word (df 1-50)"])
            row["stop words without the cap"] = uncapped_stop_ms(st)
            row["substring LIKE scan"] = like_scan(path)[0]
            log(f"    stop words without the cap: {row['stop words without the cap']:.0f} ms")
            out.append(row)
    return out


# ------------------------------------------------------------------ report

def table(res: dict[str, Any]) -> str:
    lines = []
    ing = res.get("ingest")
    if ing:
        b = ing["best"]
        lines += [f"ingest: {ing['files']} files, {ing['mb']:.1f} MB, {ing['chunks']} chunks (best of 2 runs)",
                  f"  plain bulk insert (baseline)   {b['baseline']['mb_per_s']:7.2f} MB/s",
                  f"  store write path (no chunking) {b['write_path']['mb_per_s']:7.2f} MB/s  "
                  f"{ing['ratio_write_path']:.2f}x the baseline's time "
                  f"(CPU {ing['ratio_write_path_cpu']:.2f}x)",
                  f"  chunking alone                 {ing['chunking']['mb_per_s']:7.2f} MB/s",
                  f"  MemoryStore.ingest             {b['ingest']['mb_per_s']:7.2f} MB/s  {ing['ratio_ingest']:.2f}x the baseline's time "
                  f"(CPU {ing['ratio_ingest_cpu']:.2f}x)  target {RATIO_TARGET:.0f}x",
                  f"  ingest, estimated token counts {b['ingest_estimated_tokens']['mb_per_s']:7.2f} MB/s  "
                  f"{ing['ratio_ingest_estimated_tokens']:.2f}x the baseline's time",
                  f"  size on disk per MB of text: store {ing['bytes_per_mb']['ingest'] / 1e6:.2f} MB, baseline "
                  f"{ing['bytes_per_mb']['baseline'] / 1e6:.2f} MB; a trigram index would add "
                  f"{ing['trigram']['extra_bytes_per_mb'] / 1e6:.2f} MB and {ing['trigram']['extra_s_per_mb']:.2f} s per MB",
                  f"  substring {ing['trigram']['substring']!r}: trigram MATCH {ing['trigram']['substring_query_ms']:.1f} ms "
                  f"({ing['trigram']['substring_hits']} chunks), LIKE scan {ing['trigram']['like_scan_ms']:.0f} ms"]
    for row in res.get("scales", []):
        lines.append(f"search at {row['chunks']:,} chunks ({row['text_mb']:.0f} MB of text, {row['bytes'] / 1e6:.0f} MB on disk, "
                     f"filled in {row['fill_s']:.0f} s):")
        for name, v in row.items():
            if isinstance(v, dict) and "p50_ms" in v:
                lines.append(f"  {name:42s} p50 {v['p50_ms']:8.2f} ms  p99 {v['p99_ms']:8.2f} ms  ({v['n']} queries, {v['mean_hits']:.1f} hits)")
        lines.append(f"  {'stop words, uncapped (raw FTS5, once)':42s} {row['stop words without the cap']:8.0f} ms")
        lines.append(f"  {f'substring {SUBSTRING!r}, LIKE scan (once)':42s} {row['substring LIKE scan']:8.0f} ms")
    lines.append(f"wall time {res['wall_s']:.0f} s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 MB ingest, 10K chunks only (about a minute)")
    ap.add_argument("--ingest-mb", type=float, default=20.0)
    ap.add_argument("--scales", default="10000,100000,1000000")
    ap.add_argument("--workdir", default=None, help="where the stores go (default: a temp folder)")
    ap.add_argument("--keep", action="store_true", help="leave the stores on disk (the large one is reused by the next run)")
    ap.add_argument("--skip-ingest", action="store_true", help="only the search part")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    ingest_mb = 2.0 if args.quick else args.ingest_mb
    scales = [10_000] if args.quick else [int(s) for s in args.scales.split(",") if s]
    work = Path(args.workdir or tempfile.mkdtemp(prefix="rlm-memory-bench-"))
    work.mkdir(parents=True, exist_ok=True)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    res: dict[str, Any] = {"machine": machine(), "sqlite": sqlite3.sqlite_version, "ingest_mb": ingest_mb, "scales": []}
    try:
        if ingest_mb > 0 and not args.skip_ingest:
            res["ingest"] = bench_ingest(work, ingest_mb, log)
        if scales:
            res["scales"] = bench_scales(work, scales, log)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    res["wall_s"] = time.perf_counter() - t0
    try:
        res["load_1min_end"] = os.getloadavg()[0]
    except OSError:
        pass
    print(json.dumps(res, indent=1, default=str) if args.json else table(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
