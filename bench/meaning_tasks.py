"""Questions worded otherwise than their text, as ``rlm eval`` tasks: what search by meaning does
to answers (issue 41), ``rlm`` against ``rlm-words`` on the same tasks.

    python bench/meaning_tasks.py --essays PATH --written WRITTEN.jsonl [...] --kept KEPT.json [...] \\
        --n 30 --seed 5 --length 100000 -o DIR
    rlm eval DIR/tasks.jsonl -m local:qwen2.5-coder-1.5b --method rlm,rlm-words --out DIR/run

A written question (``meaning_written.py``: it shares no word with the chunk that answers it)
whose writer also copied a short answer out of its sentence (``"answer"``: one to six words)
and that ``meaning_written.py --check`` kept (``--kept``) becomes a task: the context is
``--length`` characters of the corpus's prose (the language reference's topics and the
essays) holding the answer's chunk at a random place, cut at line ends; the task is scored
``contains`` (the answer's words in the model's answer). Nothing here ranks or searches: the
tasks are drawn before any method sees them.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import search_meaning as sm  # noqa: E402
import search_recall  # noqa: E402
from meaning_written import text_key  # noqa: E402


def window(text: str, at: int, size: int, chunk_len: int, lo: int, rng: random.Random) -> str:
    """``size`` characters of ``text`` from ``lo`` on that hold ``text[at:at + chunk_len]``,
    the chunk at a random place, widened to whole lines."""
    start = max(lo, at - rng.randint(0, max(0, size - chunk_len)))
    end = min(len(text), start + size)
    start = max(lo, min(start, end - size))
    start = text.rfind("\n", lo, start) + 1 if start > lo else lo
    stop = text.find("\n", end)
    return text[start:stop if stop != -1 else len(text)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--essays", type=Path, required=True)
    ap.add_argument("--written", type=Path, nargs="+", required=True, help="JSON lines: answer_key, sentence, question, answer")
    ap.add_argument("--kept", type=Path, nargs="+", required=True, help="meaning_written.py --check's files: the questions kept")
    ap.add_argument("--corpus-mb", type=float, default=1.0)
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--length", type=int, default=100_000)
    ap.add_argument("-o", "--out", type=Path, required=True)
    args = ap.parse_args(argv)
    items = [json.loads(line) for f in args.written for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
    kept = {(q["answer_key"], q["question"]) for f in args.kept for q in json.loads(f.read_text(encoding="utf-8"))["questions"]}
    items = [i for i in items if (i.get("answer_key"), i.get("question")) in kept
             and isinstance(i.get("answer"), str) and 0 < len(i["answer"].split()) <= 6]
    rng = random.Random(args.seed)
    rng.shuffle(items)
    out_dir = args.out
    (out_dir / "contexts").mkdir(parents=True, exist_ok=True)
    tasks: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        corpus = sm.build_corpus(work, args.corpus_mb, args.essays)
        text = corpus.read_text(encoding="utf-8")
        search, db, _ = sm.index(work / "plain", corpus, None)
        try:
            chunks = {text_key(c["text"]): c["text"] for c in search_recall.chunks_of(db)}
        finally:
            search.close()
        lo = text.index(sm.TOPICS_MARK)
        for item in items:
            if len(tasks) >= args.n:
                break
            chunk = chunks.get(item["answer_key"])
            at = text.find(chunk, lo) if chunk else -1
            if chunk is None or at < 0 or item["answer"].lower() not in chunk.lower():
                continue
            context = window(text, at, args.length, len(chunk), lo, rng)
            task_id = f"meaning-{len(tasks) + 1:02d}"
            (out_dir / "contexts" / f"{task_id}.txt").write_text(context, encoding="utf-8")
            tasks.append({"id": task_id, "question": item["question"], "context": f"contexts/{task_id}.txt",
                          "answer": item["answer"], "scorer": "contains",
                          "metadata": {"family": "lookup", "length": len(context), "answer_key": item["answer_key"]}})
    (out_dir / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks), encoding="utf-8")
    print(f"wrote {len(tasks)} tasks to {out_dir / 'tasks.jsonl'} (of {len(items)} questions with an answer)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
