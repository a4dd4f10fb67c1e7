"""Paraphrase questions in a reader's words, for bench/search_meaning.py: a question about one
sentence of a chunk, sharing no word with the chunk.

meaning_questions.py says a chunk's nouns otherwise by WordNet's rules, and its questions read
as no person writes ("which part is about cunctation, net and bottle?"): a sentence
transformer ranks them no better than the static model (SEARCH_MEANING.md). These are
questions. For a prose chunk drawn at random, one of its sentences (10-40 words) is what the
question asks about. A question is kept when it ends in "?", has three content words besides
words about the asking ("document", "say"), and the index finds none of its words in the
answer chunk (``meaning_questions.shares_a_word``: FTS5, its own stemming), so BM25 scores 0
on them by construction, as on the WordNet questions. Three ways to write them:

    python bench/meaning_written.py --essays PATH --model MODEL --out FILE      # a model asks
    python bench/meaning_written.py --essays PATH --draw --n 420 --out ITEMS    # sentences for people
        [--exclude FILE] [--new-sentences FILE]       # no chunk of FILE's questions; no sentence of them
    python bench/meaning_written.py --essays PATH --check WRITTEN --by WHO --out FILE

``--model`` (any litellm model, or an embedded one) asks three questions a sentence; when
none is kept, it is told the chunk's words they used and asked once more. The embedded models
keep the sentence's own words: the 0.5B had none kept of 80 asks (SEARCH_MEANING.md).
``--draw`` writes the drawn sentences with their chunks (JSON lines) for people to write a
question each; ``--check`` keeps those of a file of ``{"answer_key", "sentence",
"question"}`` lines that pass the same rule and prints the refused ones with the chunk's
words they use. ``bench/data/meaning_written.json`` holds 410 such questions (seed 29).

The corpus and its chunks are search_meaning.py's. Each question keeps its answer as the hash
of the chunk's text (chunk numbers depend on the files under /usr/share/doc of the machine);
search_meaning.py ``--written FILE`` measures them, dropping (and counting) a question whose
chunk its corpus does not have.
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
from collections.abc import Container
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


def drawn(conn: sqlite3.Connection, rng: random.Random, only: set[int], asked: Container[str] = ()) -> Any:
    """(chunk id, text, sentence) for prose chunks of ``only`` in a random order, one sentence
    of each drawn at random (none of ``asked``): what a writer asks about."""
    rows = conn.execute("SELECT id, text FROM chunks ORDER BY id").fetchall()
    order = list(range(len(rows)))
    rng.shuffle(order)
    for i in order:
        chunk_id, text = int(rows[i][0]), str(rows[i][1])
        if chunk_id not in only or not mq.is_prose(text):
            continue
        options = [s for s in sentences(text) if s not in asked]
        if options:
            yield chunk_id, text, rng.choice(options)


def kept_question(question: str, text: str, sentence: str, attempt: int, by: str) -> dict[str, Any]:
    return {"question": question, "query": " ".join(mq.content(question)), "answer_key": text_key(text),
            "sentence": sentence, "attempt": attempt, "family": "written", "by": by}


def write(db: Path, n: int, rng: random.Random, client: Any, only: set[int], log: Any) -> list[dict[str, Any]]:
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    try:
        out: list[dict[str, Any]] = []
        asked = logged = 0
        start = time.perf_counter()
        for chunk_id, text, sentence in drawn(conn, rng, only):
            if len(out) >= n:
                break
            messages = [{"role": "user", "content": ASK.format(sentence=sentence)}]
            for attempt in range(2):
                asked += 1
                reply = client.complete(messages, max_tokens=120).text
                kept, shared = _first_kept(conn, candidates(reply), chunk_id)
                if kept is not None:
                    out.append(kept_question(kept, text, sentence, attempt + 1, "model"))
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


def draw(db: Path, n: int, rng: random.Random, only: set[int], asked: Container[str] = ()) -> list[dict[str, Any]]:
    """``n`` items for a person to write a question for: the chunk's key and text, the sentence
    (none of ``asked``)."""
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    try:
        out = []
        for _, text, sentence in drawn(conn, rng, only, asked):
            if len(out) >= n:
                break
            out.append({"answer_key": text_key(text), "sentence": sentence, "chunk": text})
        return out
    finally:
        conn.close()


def check(db: Path, chunks: list[dict[str, Any]], items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Written questions (``answer_key``, ``sentence``, ``question``) checked by the rule a
    model's are kept by: (kept, refused), a refused one with ``why`` (the chunk's words it
    uses, or what else it lacks)."""
    ids = {text_key(c["text"]): (int(c["id"][3:]), c["text"]) for c in chunks}
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    try:
        kept, refused = [], []
        for item in items:
            question = str(item.get("question", "")).strip()
            if item.get("answer_key") not in ids:
                refused.append({**item, "why": "no chunk of this corpus has this key"})
                continue
            chunk_id, text = ids[item["answer_key"]]
            ok, shared = _first_kept(conn, [question], chunk_id)
            if ok is not None:
                kept.append(kept_question(ok, text, str(item.get("sentence", "")), 1, "person"))
            elif shared:
                refused.append({**item, "why": "the chunk has: " + ", ".join(sorted(shared))})
            else:
                refused.append({**item, "why": 'needs a "?" at its end and three content words besides words about the asking'})
        return kept, refused
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--essays", type=Path, required=True)
    ap.add_argument("--corpus-mb", type=float, default=4.0)
    ap.add_argument("--n", type=int, default=250)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--model", default="local:qwen2.5-coder-0.5b")
    how = ap.add_mutually_exclusive_group()
    how.add_argument("--draw", action="store_true", help="write the drawn sentences and chunks (JSON lines) for a person to ask about")
    how.add_argument("--check", type=Path, metavar="FILE", help="check questions a person wrote (JSON lines: answer_key, sentence, question)")
    ap.add_argument("--by", default="a person", help="who wrote the checked questions (kept in the file)")
    ap.add_argument("--exclude", type=Path, action="append", default=[], metavar="FILE",
                    help="draw no chunk a question of FILE (a questions file of this script) answers")
    ap.add_argument("--new-sentences", type=Path, action="append", default=[], metavar="FILE",
                    help="draw no sentence a question of FILE asks about (its chunk may be drawn, for another sentence)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        corpus = sm.build_corpus(work, args.corpus_mb, args.essays)
        search, db, _ = sm.index(work / "plain", corpus, None)
        try:
            chunks = search_recall.chunks_of(db)
            lines = corpus.read_text(encoding="utf-8").split("\n")
            prose_from = next(i for i, line in enumerate(lines) if line.startswith(sm.TOPICS_MARK)) + 1
            prose = {int(c["id"][3:]) for c in chunks if c["start"] >= prose_from}
            used = {q["answer_key"] for f in args.exclude for q in json.loads(f.read_text(encoding="utf-8"))["questions"]}
            prose -= {int(c["id"][3:]) for c in chunks if text_key(c["text"]) in used}
            if args.draw:
                asked = {q["sentence"] for f in args.new_sentences for q in json.loads(f.read_text(encoding="utf-8"))["questions"]}
                items = draw(db, args.n, random.Random(args.seed), prose, asked)
                args.out.write_text("".join(json.dumps(i) + "\n" for i in items), encoding="utf-8")
                log(f"wrote {len(items)} sentences to {args.out}")
                return 0
            if args.check:
                written = [json.loads(ln) for ln in args.check.read_text(encoding="utf-8").splitlines() if ln.strip()]
                made, refused = check(db, chunks, written)
                for r in refused:
                    print(json.dumps({"answer_key": r.get("answer_key"), "question": r.get("question"), "why": r["why"]}))
                log(f"{len(made)} kept, {len(refused)} refused (printed)")
                header: dict[str, Any] = {"written_by": args.by}
            else:
                client = make_client(args.model)
                try:
                    made = write(db, args.n, random.Random(args.seed), client, prose, log)
                finally:
                    client.close()
                header = {"model": args.model}
        finally:
            search.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({**header, "seed": args.seed, "questions": made}, indent=1) + "\n", encoding="utf-8")
    log(f"wrote {len(made)} questions to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
