"""A memory that uses what it records: search with and without the store's record (issue 26, section 2).

A store remembers what runs found (``remember``: the question and answer, linked
``derived_from`` the chunks the run read) and counts every recorded search's hits as
recalled. ``SearchConfig.w_memory`` folds that record into search's ranking
(``rlm_runtime/memory/learned.py``). This measures what it changes:

* **asked again**: questions a run answered earlier (its search recorded, its answer
  remembered with the chunk it read), asked again a day later;
* **new**: questions never asked, over the same store, after the same history (what the
  record must not make worse);
* the history also holds ``--noise`` recorded searches of two rare words each (other
  questions, whose hits are counted as recalled too).

Each question is searched with ``w_memory`` 0 (text alone) and with the default, on the same
store; a question counts as found at k when its answer chunk is among the first k hits.

    .venv/bin/python bench/memory_learning.py [--corpus-mb 4] [--n 150] [--noise 300] [--seed 7] [--json]

Questions: ``search_recall.py``'s exact-word families (plural/singular flips, "What does NAME
do?", two rare words), and, when WordNet is installed (``apt-get install wordnet-base``),
``meaning_questions.py``'s synonym questions, which share no word with their answer chunk.
About a minute; no network; BM25 (the store's default mode).
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

import meaning_questions  # noqa: E402
import search_recall  # noqa: E402
from _common import machine, quantile  # noqa: E402

from rlm_runtime.memory import MemoryStore  # noqa: E402
from rlm_runtime.memory.settings import MemorySettings  # noqa: E402

DAY = 86400.0
EXTRA: dict[str, float] = {}


class Clock:
    """A clock the bench moves: the history takes hours, the questions come a day later."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def with_memory_weight(weight: float) -> MemorySettings:
    base = MemorySettings()
    return base.model_copy(update={"search": base.search.model_copy(update={"w_memory": weight, **EXTRA})})


def chunk_id(answer: str) -> int:
    return int(answer.split(".")[1])


def questions(store_path: Path, n: int, seed: int) -> list[dict[str, Any]]:
    chunks = search_recall.chunks_of(store_path)
    out = search_recall.questions(chunks, n, random.Random(seed))
    for q in out:
        q["query"] = " ".join(search_recall.content_words(q["question"])) or q["question"]
    if Path(meaning_questions.WORDNET).is_dir():
        out += meaning_questions.questions(store_path, n, random.Random(seed), "synonym")
    # One question a wording: the corpus's near-identical licences make the same question for
    # several chunks, and no ranking can tell which of them was meant.
    seen: set[str] = set()
    return [q for q in out if not (q["query"] in seen or seen.add(q["query"]))]  # type: ignore[func-returns-value]


def history(store: MemoryStore, clock: Clock, asked: list[dict[str, Any]], noise: int, rng: random.Random) -> None:
    """Runs that answered ``asked`` (a recorded search, the answer remembered with the chunk
    read), and ``noise`` other recorded searches, an hour apart in random order."""
    chunks = search_recall.chunks_of(store.path)
    words = sorted({w.lower() for c in chunks for w in search_recall.WORD.findall(c["text"])})
    events: list[tuple[str, Any]] = [("run", q) for q in asked] + [("noise", " ".join(rng.sample(words, 2))) for _ in range(noise)]
    rng.shuffle(events)
    for n, (what, item) in enumerate(events):
        clock.now += 3600.0
        if what == "noise":
            store.search(item, k=10, run_id=f"noise{n}")
            continue
        gold = chunk_id(item["answer"])
        store.search(item["query"], k=10, run_id=f"run{n}")
        first = store.read(gold, record=False).text.strip().split("\n")[0][:160]
        store.remember(item["question"], f"It is in the part that begins: {first}", run_id=f"run{n}", read_chunk_ids=[gold])


def ranks(store: MemoryStore, qs: list[dict[str, Any]]) -> tuple[list[int | None], list[float]]:
    out: list[int | None] = []
    ms: list[float] = []
    for q in qs:
        began = time.perf_counter()
        found = [h.chunk_id for h in store.search(q["query"], k=10, record=False)]
        ms.append((time.perf_counter() - began) * 1000)
        gold = chunk_id(q["answer"])
        out.append(found.index(gold) if gold in found else None)
    return out, ms


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus-mb", type=float, default=4.0)
    ap.add_argument("--n", type=int, default=150, help="questions per kind (exact, and synonym when WordNet is installed)")
    ap.add_argument("--noise", type=int, default=300, help="other recorded searches in the history")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--w-memory", type=float, help="the weight measured (default: the setting's)")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="another SearchConfig weight measured")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    for pair in args.set:
        key, _, value = pair.partition("=")
        EXTRA[key] = float(value)
    rng = random.Random(args.seed)
    weight = args.w_memory if args.w_memory is not None else MemorySettings().search.w_memory
    result: dict[str, Any] = {"machine": machine(), "seed": args.seed, "w_memory": weight, "noise": args.noise, "rows": {}}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        corpus = search_recall.build_corpus(folder, args.corpus_mb)
        clock = Clock()
        path = folder / "memory.db"
        store = MemoryStore(path, clock=clock, embedder=None)
        store.ingest(corpus)
        qs = questions(path, args.n, args.seed)
        for q in qs:
            q["kind"] = "synonym" if q["family"] == "synonym" else "exact"
        asked = qs[0::2]
        new = qs[1::2]
        before, _ = ranks(store, qs)
        history(store, clock, asked, args.noise, rng)
        store.close()
        clock.now += DAY
        result["chunks"] = len(search_recall.chunks_of(path))
        for label, w in (("text alone", 0.0), ("with the record", weight)):
            s = MemoryStore(path, clock=clock, embedder=None, settings=with_memory_weight(w), readonly=True)
            for group, items in (("asked again", asked), ("new", new)):
                for kind in ("exact", "synonym"):
                    part = [q for q in items if q["kind"] == kind]
                    if not part:
                        continue
                    r, ms = ranks(s, part)
                    row = result["rows"].setdefault(f"{kind} / {group}", {"n": len(part)})
                    row[label] = {**search_recall.metrics(r), "ms_p50": quantile(ms, 0.5)}
                    if label == "text alone":
                        fresh = [before[qs.index(q)] for q in part]
                        row["before any history"] = search_recall.metrics(fresh)
            s.close()
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"{result['chunks']} chunks; history: {len(asked)} answered runs, {args.noise} other searches; w_memory={weight}")
    print(f"{'questions':24} {'n':>4}  {'ranking':18} {'R@1':>5} {'R@10':>5} {'MRR':>5}  {'ms p50':>6}")
    for name, row in result["rows"].items():
        for label in ("before any history", "text alone", "with the record"):
            m = row[label]
            took = f"{m['ms_p50']:6.1f}" if "ms_p50" in m else ""
            print(f"{name:24} {row['n']:>4}  {label:18} {m['recall@1']:5.2f} {m['recall@10']:5.2f} {m['mrr']:5.2f}  {took}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
