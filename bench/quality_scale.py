"""Search latency with the quality tier filled, at 100K and 1M chunks (issue 41's target:
hybrid p50 under 30 ms at 100K, under 100 ms at 1M), and the memory its vectors take.

    .venv/bin/rlm model install minilm-l6
    .venv/bin/python bench/quality_scale.py [--scales 100000,1000000] [--real 1000] [--json]

The store is search_meaning.py's scale store: 100K chunks of real text written through
``SourceWriter`` with the fast tier's vectors, grown to 1M by copies in SQL. Its quality
vectors cannot all come from the model (56 MB of text at ~0.02 MB/s is most of an hour, 1M
chunks most of a day), so ``--real`` chunks get the model's vectors and every other chunk the
vector of one of those with noise added (each component plus a normal draw of a fifth of its
spread), written through ``Vectors.put`` as a fill writes them. The ranking pass costs what
it costs whatever the vectors hold: a bit count over every chunk's 96 bytes, then the exact
score of the best candidates. Queries: half "how does the X work with Y and Z?" from a chunk's
key terms, half the development part of the written questions; each query is embedded by the
real model (a query's share of the latency). Every chunk has a quality vector, so hybrid ranks
by BM25 and the quality tier (the fast tier is not searched).
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

import search_meaning as sm  # noqa: E402
from _common import machine  # noqa: E402

from rlm_runtime import contextual  # noqa: E402
from rlm_runtime.config import paths_from_env  # noqa: E402
from rlm_runtime.memory import MemoryStore  # noqa: E402
from rlm_runtime.memory.vectors import QUALITY, Vectors, index_bytes  # noqa: E402

MODES = ("bm25", "vector", "hybrid")  # the rankings the table shows (the row has hybrid-rrf too)


def fill_quality(path: Path, model: Any, real: int, log: Any) -> dict[str, Any]:
    """Give every chunk without a quality vector one: the model's for the first ``real``
    chunks (by id), a noisy copy of one of those for the rest."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        ids = [int(r[0]) for r in conn.execute(
            "SELECT id FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM quality_vectors v WHERE v.chunk_id = c.id) ORDER BY id")]
        if not ids:
            return {"embedded": 0, "synthetic": 0}
        vectors = Vectors(model, QUALITY)
        seeds = conn.execute("SELECT id, text FROM chunks ORDER BY id LIMIT ?", (real,)).fetchall()
        t0 = time.perf_counter()
        base = model.embed([str(t) for _, t in seeds])
        embed_s = time.perf_counter() - t0
        log(f"    embedded {len(seeds)} chunks in {embed_s:.0f} s")
        rng = np.random.default_rng(11)
        spread = float(base.std())
        made = 0
        for start in range(0, len(ids), 50_000):
            part = ids[start:start + 50_000]
            rows = base[np.asarray(part) % len(base)] + rng.normal(0, spread / 5, (len(part), base.shape[1])).astype(np.float32)
            conn.execute("BEGIN IMMEDIATE")
            vectors.put(conn, part, rows.astype(np.float32), appended=False)
            conn.execute("COMMIT")
            made += len(part)
        log(f"    quality vectors for {made} chunks")
        return {"embedded": len(seeds), "embed_s": embed_s, "synthetic": made - min(made, len(seeds))}
    finally:
        conn.close()


def latency(path: Path, models: Path, queries: list[str]) -> dict[str, Any]:
    """search_meaning.py's latency pass with the quality tier's model, and what the quality
    tier adds: its index in memory, a query's embedding."""
    def keep(st: MemoryStore, out: dict[str, Any]) -> None:
        quality = st.quality
        assert quality is not None
        out["quality_index_mb"] = index_bytes(quality.index) / 1e6
        began = time.perf_counter()
        for q in queries[:50]:
            quality.embedder.embed([q])
        out["query_embed_ms"] = (time.perf_counter() - began) * 1000 / 50
        out["quality_vectors"] = st.stats().quality_vectors

    return sm.latency(path, queries, quality=contextual.factory(models), keep=keep)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scales", default="100000,1000000")
    ap.add_argument("--real", type=int, default=1000, help="chunks given the model's own vectors")
    ap.add_argument("--written", type=Path, default=Path(__file__).parent / "data" / "meaning_written.json")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--workdir", type=Path, help="keep the stores here (default: a temporary folder)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    models = paths_from_env().models
    if not contextual.installed(models):
        print(f"the quality model is not installed: {contextual.INSTALL_HINT}", file=sys.stderr)
        return 2

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    model = contextual.load(models)
    written = [q["query"] for q in json.loads(args.written.read_text(encoding="utf-8"))["questions"] if q.get("split") == "dev"]
    result: dict[str, Any] = {"machine": machine(), "real": args.real, "scale": []}
    with tempfile.TemporaryDirectory() as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        path = work / "quality-scale.db"
        scales = [int(s) for s in args.scales.split(",") if s]
        rng = random.Random(args.seed)
        if not path.exists():
            log(f"  filling {scales[0]} chunks through the write path, with the fast tier's vectors")
            result["fill"] = sm.fill_scale(path, scales[0], log)
            MemoryStore(path).close()  # migrated: the quality tier's tables
        for n in scales:
            if n > scales[0]:
                log(f"  cloning to {n}")
                sm.clone_to(path, n, log)
            result.setdefault("quality_fill", []).append(fill_quality(path, model, args.real, log))
            row = latency(path, models, sm.scale_queries(path, rng, written))
            result["scale"].append(row)
            log(f"    {row['chunks']}: " + ", ".join(f"{m} p50 {row[m]['p50_ms']:.1f} ms p99 {row[m]['p99_ms']:.1f}" for m in MODES)
                + f"; query embedding {row['query_embed_ms']:.1f} ms; quality index {row['quality_index_mb']:.0f} MB")
    if args.json:
        print(json.dumps(result, indent=1, default=str))
        return 0
    print("| chunks | bm25 p50 / p99 | vector p50 / p99 | **hybrid** p50 / p99 | query embedding | quality index in memory |")
    print("|---|---|---|---|---|---|")
    for row in result["scale"]:
        print(f"| {row['chunks']:,} | " + " | ".join(f"{row[m]['p50_ms']:.1f} / {row[m]['p99_ms']:.1f} ms" for m in MODES)
              + f" | {row['query_embed_ms']:.1f} ms | {row['quality_index_mb']:.0f} MB |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
