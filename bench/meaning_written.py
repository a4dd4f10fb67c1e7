"""Paraphrase questions written by a model, for bench/search_meaning.py: a reader's question about
one sentence of a chunk, in other words than the chunk's.

meaning_questions.py says a chunk's nouns otherwise by WordNet's rules, and its questions read
as no person writes ("which part is about cunctation, net and bottle?"): a sentence
transformer ranks them no better than the static model (SEARCH_MEANING.md). These are
sentences. For a prose chunk drawn at random, one of its sentences (10-40 words) goes to the
embedded model with the request to ask, in everyday words, three questions that sentence
answers, using none of its words. The first of them is kept when it ends in "?", has three content words
besides words about the asking ("document", "say") and the
index finds none of them in the answer chunk (``meaning_questions.shares_a_word``: FTS5, its
own stemming); when none is kept, the model is told the chunk's words they used and asked once
more. BM25 scores 0
on them by construction, as on the WordNet questions.

    python bench/meaning_written.py --essays PATH [--n 250] [--seed 7] [--model local:qwen2.5-coder-0.5b] --out FILE

The corpus and its chunks are search_meaning.py's. Each question keeps its answer as the hash
of the chunk's text (chunk numbers depend on the files under /usr/share/doc of the machine);
search_meaning.py ``--written FILE`` measures them, dropping (and counting) a question whose
chunk its corpus does not have. The embedded models keep the sentence's own words: the 0.5B
had none kept of 80 asks (SEARCH_MEANING.md). Use a model that paraphrases (``--model``, any
litellm model).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import meaning_questions as mq  # noqa: E402
import search_meaning as sm  # noqa: E402
import search_recall  # noqa: E402

from rlm_runtime.llm import make_client  # noqa: E402

ASK = """A sentence from a document:

{sentence}

Write three different questions a reader who has not seen the document would ask, whose answer is \
this sentence. Use your own everyday words: none of the sentence's nouns, verbs or adjectives. Reply \
with the three questions alone, one a line."""
AGAIN = ("Your questions use {words}, words the document has. Write three again without them. Reply with the "
         "three questions alone, one a line.")
SENTENCE = re.compile(r"[^.!?]+[.!?]")
#: Words that name the asking, not the thing asked: a question needs three content words
#: besides them ("What does the document say?" asks nothing a search could find).
ABOUT_ASKING = frozenset("document documents sentence text passage author writer say says said mean means talk talks "
                         "describe describes explain explains".split())


def text_key(text: str) -> str:
    """The key of a chunk's text, the same on any machine that has the chunk."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


def sentences(text: str) -> list[str]:
    """The chunk's sentences of 10-40 words, on one line each."""
    out = []
    for raw in SENTENCE.findall(" ".join(text.split())):
        s = raw.strip()
        if 10 <= len(s.split()) <= 40 and not s.startswith(("#", "=")):
            out.append(s)
    return out


def candidates(reply: str) -> list[str]:
    """The reply's questions, one a line, without list marks or quotes (at most three)."""
    out = []
    for ln in reply.strip().splitlines():
        q = re.sub(r"^\s*(?:[-*]|\d+[.)])\s*", "", ln).strip("\"'` ")[:300]
        if q:
            out.append(q)
    return out[:3]


def _first_kept(conn: sqlite3.Connection, questions: list[str], chunk_id: int) -> tuple[str | None, set[str]]:
    """The first of ``questions`` that is kept (a "?" at its end, three content words besides
    words about the asking, none the index finds in the chunk), and the chunk's words the
    others used."""
    shared: set[str] = set()
    for question in questions:
        words = mq.content(question)
        found = {w.lower() for w in words if mq.shares_a_word(conn, [w], chunk_id)}
        if sum(w.lower() not in ABOUT_ASKING for w in words) >= 3 and not found and question.endswith("?"):
            return question, set()
        shared |= found
    return None, shared


def write(db: Path, n: int, rng: random.Random, client: Any, only: set[int], log: Any) -> list[dict[str, Any]]:
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT id, text FROM chunks ORDER BY id").fetchall()
        order = list(range(len(rows)))
        rng.shuffle(order)
        out: list[dict[str, Any]] = []
        asked = logged = 0
        start = time.perf_counter()
        for i in order:
            if len(out) >= n:
                break
            chunk_id, text = int(rows[i][0]), str(rows[i][1])
            if chunk_id not in only or not mq.is_prose(text):
                continue
            options = sentences(text)
            if not options:
                continue
            sentence = rng.choice(options)
            messages = [{"role": "user", "content": ASK.format(sentence=sentence)}]
            for attempt in range(2):
                asked += 1
                reply = client.complete(messages, max_tokens=120).text
                kept, shared = _first_kept(conn, candidates(reply), chunk_id)
                if kept is not None:
                    out.append({"question": kept, "query": " ".join(mq.content(kept)), "answer_key": text_key(text),
                                "sentence": sentence, "attempt": attempt + 1, "family": "written"})
                    break
                if attempt == 0 and shared:
                    messages += [{"role": "assistant", "content": reply},
                                 {"role": "user", "content": AGAIN.format(words=", ".join(sorted(shared)))}]
                else:
                    break
            if asked >= logged + 20:  # an item asks once or twice: a multiple of 20 may be stepped over
                logged = asked
                log(f"  {len(out)} kept of {asked} asked, {time.perf_counter() - start:.0f} s")
        return out
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--essays", type=Path, required=True)
    ap.add_argument("--corpus-mb", type=float, default=4.0)
    ap.add_argument("--n", type=int, default=250)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--model", default="local:qwen2.5-coder-0.5b")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        corpus = sm.build_corpus(work, args.corpus_mb, args.essays)
        search, db, _ = sm.index(work / "plain", corpus, None)
        chunks = search_recall.chunks_of(db)
        lines = corpus.read_text(encoding="utf-8").split("\n")
        prose_from = next(i for i, line in enumerate(lines) if line.startswith(sm.TOPICS_MARK)) + 1
        prose = {int(c["id"][3:]) for c in chunks if c["start"] >= prose_from}
        client = make_client(args.model)
        try:
            made = write(db, args.n, random.Random(args.seed), client, prose, log)
        finally:
            client.close()
            search.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"model": args.model, "seed": args.seed, "questions": made}, indent=1) + "\n", encoding="utf-8")
    log(f"wrote {len(made)} questions to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
