"""Accuracy and time of the RLM loop with a local model on three long-context tasks.

    python bench/local_tasks.py [--model local:qwen2.5-coder-1.5b] [--trials 3] [--chars 1400000] [--json]

Tasks (each context is generated, seeded, and more than 10x the model's 32K-token window):
  needle   - one line states a project's secret code inside 1.4M characters of prose;
             scored by string match (RULER style).
  count    - a log of labelled lines; how many are ERROR lines; scored 0.75^|gold - pred|
             (OOLONG numeric style; 1.0 only when exact).
  two_hop  - "X reports to Y" and "Y works in room N" far apart, among distractors;
             which room does X's manager work in; string match.
Prints one row per trial and a summary (accuracy, median seconds per task).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rlm_runtime.budget import RunLimits
from rlm_runtime.orchestrator import RLM

WORDS = ("the of and to in is that it was for on are as with his they at be this from have or by one had not but what "
         "all were when we there can an your which their said if do will each about how up out them then she many "
         "some so these would other into has more her two like him see time could no make than first been its who "
         "now people my made over did down only way find use may water long little very after words called just "
         "where most know get through back much before go good new write our used me man too any day same right "
         "look think also around another came come work three word must because does part even place well such "
         "here take why things help put years different away again off went old number great tell men say small "
         "every found still between name should home big give air line set own under read last never us left end "
         "along while might next sound below saw something thought both few those always looked show large often "
         "together asked house world going want school important until form food keep children feet land side "
         "without boy once animals life enough took sometimes four head above kind began almost live page got earth "
         "need far hand high year mother light parts country father let night following picture being study second "
         "eyes soon times story boys since white days ever paper hard near sentence better best across during today "
         "others however sure means knew try told young miles sun ways thing whole hear example heard several change "
         "answer room sea against top turned learn point city play toward five using himself usually").split()
NAMES = ["Avery", "Blake", "Casey", "Devon", "Emery", "Finley", "Harper", "Jordan", "Kendall", "Logan", "Morgan",
         "Parker", "Quinn", "Reese", "Rowan", "Sawyer", "Skyler", "Taylor"]


def _prose_line(rng: random.Random) -> str:
    n = rng.randint(8, 18)
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def make_needle(rng: random.Random, chars: int) -> tuple[str, str, str]:
    code = str(rng.randint(1000, 9999))
    lines, size = [], 0
    while size < chars:
        line = _prose_line(rng)
        lines.append(line)
        size += len(line) + 1
    at = rng.randint(len(lines) // 3, len(lines) - 10)
    lines.insert(at, f"The secret code for project Falcon is {code}.")
    return "\n".join(lines) + "\n", "What is the secret code for project Falcon? Answer with the number.", code


def make_count(rng: random.Random, chars: int) -> tuple[str, str, str]:
    lines, size, errors = [], 0, 0
    while size < chars:
        level = rng.choices(["INFO", "DEBUG", "WARN", "ERROR"], [70, 20, 8, 2])[0]
        errors += level == "ERROR"
        line = f"2026-03-{rng.randint(1, 28):02d} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d} [{level}] {_prose_line(rng)}"
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines) + "\n", "How many lines in this log have the level [ERROR]? Answer with the number.", str(errors)


def make_two_hop(rng: random.Random, chars: int) -> tuple[str, str, str]:
    people = rng.sample(NAMES, 8)
    managers = {p: rng.choice([q for q in people if q != p]) for p in people}
    rooms = {p: str(rng.randint(100, 999)) for p in people}
    facts = [f"Staff note: {p} reports to {m}." for p, m in managers.items()]
    facts += [f"Facilities note: {p} works in room {r}." for p, r in rooms.items()]
    lines, size = [], 0
    while size < chars:
        line = _prose_line(rng)
        lines.append(line)
        size += len(line) + 1
    for fact in facts:
        lines.insert(rng.randint(0, len(lines)), fact)
    who = people[0]
    question = f"In which room does the person {who} reports to work? Answer with the room number."
    return "\n".join(lines) + "\n", question, rooms[managers[who]]


TASKS = {"needle": make_needle, "count": make_count, "two_hop": make_two_hop}


def score(task: str, gold: str, answer: str | None) -> float:
    if answer is None:
        return 0.0
    if task == "count":
        numbers = re.findall(r"-?\d+", answer)
        if not numbers:
            return 0.0
        return 0.75 ** abs(int(gold) - int(numbers[-1]))
    return 1.0 if re.search(rf"\b{re.escape(gold)}\b", answer) else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="local:qwen2.5-coder-1.5b")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--chars", type=int, default=1_400_000)
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--max-iterations", type=int, default=8)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    folder = Path(tempfile.mkdtemp(prefix="rlm-local-tasks-"))
    rlm = RLM(args.model, limits=RunLimits.for_small_model(max_iterations=args.max_iterations, max_wall_s=900),
              trace=folder / "traces")
    try:
        for task in args.tasks.split(","):
            for trial in range(args.trials):
                rng = random.Random(f"{task}-{trial}")
                text, question, gold = TASKS[task](rng, args.chars)
                path = folder / f"{task}-{trial}.txt"
                path.write_text(text, encoding="utf-8")
                start = time.monotonic()
                result = rlm.run(question, path)
                seconds = time.monotonic() - start
                row = {"task": task, "trial": trial, "gold": gold, "answer": result.answer, "score": score(task, gold, result.answer),
                       "seconds": round(seconds, 1), "iterations": result.iterations, "error": result.error,
                       "chars": len(text), "trace": result.trajectory}
                rows.append(row)
                if not args.json:
                    print(f"{task:8} trial {trial}: score {row['score']:.2f} in {seconds:6.1f}s, {result.iterations} iterations, "
                          f"gold {gold!r}, answer {str(result.answer)[:60]!r}" + (f" ({result.error})" if result.error else ""),
                          flush=True)
    finally:
        rlm.close()
    summary = {}
    for task in args.tasks.split(","):
        mine = [r for r in rows if r["task"] == task]
        summary[task] = {"accuracy": round(statistics.fmean(r["score"] for r in mine), 3),
                         "median_seconds": statistics.median(r["seconds"] for r in mine), "trials": len(mine)}
    if args.json:
        print(json.dumps({"model": args.model, "chars": args.chars, "summary": summary, "rows": rows}))
    else:
        print("\ntask      accuracy  median s  trials")
        for task, s in summary.items():
            print(f"{task:8}  {s['accuracy']:8.2f}  {s['median_seconds']:8.1f}  {s['trials']:6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
