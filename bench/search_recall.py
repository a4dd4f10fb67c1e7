"""Search quality: recall@k of `search_chunks` against grep of the question's words.

Issue 12's benchmark: on generated questions whose answer chunk is known, how often does the
answer's chunk come back in the top k of ranked search (`search_chunks`, through the same
`ChunkSearch` a session uses), and of a grep of the question's words (what a model does:
each content word grepped ignoring case, lines ranked by how many of the words they hold,
mapped to the chunks that hold them)?

    python bench/search_recall.py [--corpus-mb 4] [--n 150] [--seed 7] [--json]

The corpus is the text memory_bench.py ingests (the standard library's .py files and the
text under /usr/share/doc; PSF and the packages' own licences), concatenated into one file,
which is the context. Questions, in three families, each from one chunk chosen at random:

* `paraphrase`: a prose sentence's three rarest words in their other number (plural <->
  singular), shuffled into a question; kept only when no form of the question occurs in the
  chunk as written: the case grep cannot find and stemmed search can.
* `definition`: "What does NAME do?" for a `def NAME(` / `class NAME` of the corpus whose
  chunk holds its docstring; the name occurs in many other chunks (callers, imports).
* `keyword`: the chunk's two rarest words as they are: where grep is expected to do well.

Both methods get the same words: the question's content words (stop words and the
templates' own words, "which part is about", left out). A question counts as found at k if
its answer chunk is among the first k chunks returned.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import re
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import memory_bench  # noqa: E402  (the corpus picker)

from rlm_runtime.context import open_context  # noqa: E402
from rlm_runtime.memory.terms import LINK_STOPWORDS, STOPWORDS  # noqa: E402
from rlm_runtime.searching import ChunkSearch  # noqa: E402

WORD = re.compile(r"[A-Za-z][a-z]{3,}")
TOKEN = re.compile(r"\w+")
SENTENCE = re.compile(r"[^.!?\n]{40,240}[.!?]")
DEF = re.compile(r"^\s*(?:def|class) ([A-Za-z_][A-Za-z0-9_]{4,40})\b", re.M)


def build_corpus(folder: Path, mb: float) -> Path:
    files = memory_bench.pick_files(memory_bench.corpus_files(), int(mb * 1_000_000))
    out = folder / "corpus.txt"
    with out.open("w", encoding="utf-8") as f:
        for path in files:
            text = path.read_text(encoding="utf-8", errors="replace")
            f.write(f"\n\n# ==== {path} ====\n\n{text}\n")
    return out


def chunks_of(index_db: Path) -> list[dict[str, Any]]:
    conn = sqlite3.connect(index_db)
    rows = conn.execute("SELECT id, start_line, end_line, text FROM chunks ORDER BY start_line").fetchall()
    conn.close()
    return [{"id": f"c0.{r[0]}", "start": r[1], "end": r[2], "text": r[3]} for r in rows]


def vary(word: str, rng: random.Random) -> str:
    """The other number of ``word`` (plural <-> singular), which a regex of it does not find
    and a stemmer folds into the same term."""
    w = word.lower()
    if w.endswith("ies") and len(w) > 5:
        return w[:-3] + "y"
    if w.endswith(("ches", "shes", "sses", "xes")):
        return w[:-2]
    if w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    if w.endswith("y") and w[-2] not in "aeiou":
        return w[:-1] + "ies"
    if w.endswith(("ch", "sh", "ss", "x")):
        return w + "es"
    return w + "s"


def prose(sentence: str) -> bool:
    """A sentence of words, not code: mostly letters and spaces, six words or more."""
    letters = sum(ch.isalpha() or ch == " " for ch in sentence)
    return letters >= 0.92 * len(sentence) and len(sentence.split()) >= 6


def questions(chunks: list[dict[str, Any]], n: int, rng: random.Random) -> list[dict[str, Any]]:
    df: Counter[str] = Counter()
    for c in chunks:
        df.update({w.lower() for w in WORD.findall(c["text"])})
    out: list[dict[str, Any]] = []
    order = list(range(len(chunks)))
    rng.shuffle(order)
    families = ["paraphrase", "definition", "keyword"]
    per = {f: 0 for f in families}
    for i in order:
        if len(out) >= n:
            break
        c = chunks[i]
        family = min(families, key=lambda f: per[f])
        q = None
        if family == "definition":
            m = DEF.search(c["text"])
            if m and ('"""' in c["text"] or "'''" in c["text"]):
                q = {"question": f"What does {m.group(1)} do?"}
        else:
            for s in SENTENCE.findall(c["text"]):
                if family == "paraphrase" and not prose(s):
                    continue
                words = [w.lower() for w in WORD.findall(s) if w.lower() not in LINK_STOPWORDS]
                rare = sorted(set(words), key=lambda w: (df[w], w))[:3]
                if len(rare) < 2 or df[rare[0]] > 5:
                    continue
                if family == "keyword":
                    q = {"question": f"Where does the text mention {rare[0]} and {rare[1]}?"}
                else:
                    # nouns are what change number: leave out participles, adverbs, adjectives
                    rare = [w for w in sorted(set(words), key=lambda w: (df[w], w))
                            if not w.endswith(("ed", "ing", "ly", "al", "ful", "ive", "ous", "able"))][:3]
                    if len(rare) < 2 or df[rare[0]] > 5:
                        continue
                    forms = [vary(w, rng) for w in rare]
                    if any(re.search(re.escape(f), c["text"], re.I) for f in forms):
                        continue  # a form that still occurs verbatim: not the hard case
                    rng.shuffle(forms)
                    q = {"question": f"Which part is about {forms[0]} with {' and '.join(forms[1:])}?"}
                q["sentence"] = s.strip()
                break
        if q is None:
            continue
        q.update(family=family, answer=c["id"])
        per[family] += 1
        out.append(q)
    return out


def content_words(question: str) -> list[str]:
    return [w for w in dict.fromkeys(t.lower() for t in TOKEN.findall(question)) if w not in STOPWORDS and len(w) > 2
            and w not in {"what", "which", "does", "part", "text", "mention", "where", "about"}]


def grep_ranking(question: str, lines: list[str], line_chunk: list[str], k: int) -> list[str]:
    """The chunks a model gets by grepping each content word (ignoring case), lines ranked by
    how many of the words they hold, then by position."""
    words = content_words(question)
    if not words:
        return []
    patterns = [re.compile(re.escape(w), re.I) for w in words]
    scored = []
    for n, line in enumerate(lines):
        hits = sum(1 for p in patterns if p.search(line))
        if hits:
            scored.append((-hits, n))
    scored.sort()
    ranked: list[str] = []
    for _, n in scored:
        cid = line_chunk[n]
        if cid and cid not in ranked:
            ranked.append(cid)
            if len(ranked) == k:
                break
    return ranked


def metrics(ranks: list[int | None]) -> dict[str, float]:
    n = len(ranks) or 1
    return {"recall@1": sum(1 for r in ranks if r is not None and r < 1) / n,
            "recall@5": sum(1 for r in ranks if r is not None and r < 5) / n,
            "recall@10": sum(1 for r in ranks if r is not None and r < 10) / n,
            "mrr": sum(1 / (r + 1) for r in ranks if r is not None) / n}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus-mb", type=float, default=4.0)
    ap.add_argument("--n", type=int, default=150)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        corpus = build_corpus(folder, args.corpus_mb)
        search = ChunkSearch(folder / "index")
        search.set_contexts([open_context(corpus)])
        began = time.perf_counter()
        search.search("warm up the index", 1)
        index_s = time.perf_counter() - began
        [db] = list((folder / "index").glob("*.db"))
        chunks = chunks_of(db)
        lines = corpus.read_text(encoding="utf-8").split("\n")
        line_chunk = [""] * (len(lines) + 1)
        for c in chunks:
            for n in range(c["start"] - 1, min(c["end"], len(lines))):
                line_chunk[n] = c["id"]
        qs = questions(chunks, args.n, rng)
        rows: dict[str, dict[str, list[Any]]] = {}
        for q in qs:
            t = time.perf_counter()
            found = [h["id"] for h in search.search(" ".join(content_words(q["question"])) or q["question"], 10)]
            s_ms = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            grepped = grep_ranking(q["question"], lines, line_chunk, 10)
            g_ms = (time.perf_counter() - t) * 1000
            for fam in (q["family"], "all"):
                r = rows.setdefault(fam, {"search": [], "grep": [], "search_ms": [], "grep_ms": [], "grep_empty": []})
                r["search"].append(found.index(q["answer"]) if q["answer"] in found else None)
                r["grep"].append(grepped.index(q["answer"]) if q["answer"] in grepped else None)
                r["search_ms"].append(s_ms)
                r["grep_ms"].append(g_ms)
                r["grep_empty"].append(not grepped)
        search.close()
    result = {"machine": {"python": platform.python_version(), "sqlite": sqlite3.sqlite_version, "cpus": __import__("os").cpu_count()},
              "corpus_mb": round(corpus_size_mb := sum(len(x) for x in lines) / 1e6, 2), "chunks": len(chunks),
              "index_s": round(index_s, 2), "questions": len(qs), "seed": args.seed,
              "examples": {f: [q for q in qs if q["family"] == f][:3] for f in ("paraphrase", "definition", "keyword")},
              "families": {}}
    for fam, r in rows.items():
        result["families"][fam] = {
            "n": len(r["search"]), "search": metrics(r["search"]), "grep": metrics(r["grep"]),
            "grep_found_nothing": sum(r["grep_empty"]) / len(r["grep_empty"]),
            "search_ms_mean": sum(r["search_ms"]) / len(r["search_ms"]), "grep_ms_mean": sum(r["grep_ms"]) / len(r["grep_ms"])}
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"corpus {corpus_size_mb:.1f} MB, {len(chunks)} chunks (indexed in {index_s:.1f} s), {len(qs)} questions, seed {args.seed}")
    print(f"{'family':11} {'n':>4}  {'method':7} {'R@1':>5} {'R@5':>5} {'R@10':>5} {'MRR':>5}  {'ms/query':>8}  grep empty")
    for fam in ("paraphrase", "definition", "keyword", "all"):
        f = result["families"].get(fam)
        if not f:
            continue
        for method in ("search", "grep"):
            m = f[method]
            ms = f[f"{method}_ms_mean"]
            empty = f"{f['grep_found_nothing']:.0%}" if method == "grep" else ""
            print(f"{fam:11} {f['n']:>4}  {method:7} {m['recall@1']:5.2f} {m['recall@5']:5.2f} {m['recall@10']:5.2f} {m['mrr']:5.2f}"
                  f"  {ms:8.1f}  {empty}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
