"""Answer leads in the brief (issue 26): does telling the model how earlier questions over a
registered context found their answers help it answer the next ones?

    .venv/bin/python bench/context_leads.py [--model local:qwen2.5-coder-1.5b] [--questions 8] [--seed 5] [--json]

One generated text (a register of coffee lots, one ``key=value`` line a lot, ~100K characters,
a shape and wording of this script's own), registered in a fresh registry; the same questions
(lookups and counts, in a seeded order) asked one after another in one session, twice: with
``ProbeConfig(earlier_answers=False)`` (the brief says nothing of earlier answers) and with
``True`` (from the second question on, the brief lists the probes that found earlier answers).
Each condition starts from an empty registry. Scored by the expected value appearing in the
answer; the first question is the same in both (nothing is known yet) and is left out of the
comparison. With the local model, one run at a time: about 1-2 minutes a question.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rlm_runtime import Session
from rlm_runtime.budget import RunLimits
from rlm_runtime.context.settings import ProbeConfig
from rlm_runtime.registry import Registry

FARMS = ("Alto Verde", "Finca Rosa", "La Cumbre", "Monte Azul", "Las Nubes", "El Mirador", "San Isidro", "Rio Claro")
VARIETIES = ("bourbon", "typica", "gesha", "caturra", "catuai", "pacamara")
PROCESSES = ("washed", "natural", "honey", "anaerobic")


def register_text(rng: random.Random, lots: int = 1600) -> tuple[str, list[dict[str, str]]]:
    rows = []
    for i in range(lots):
        rows.append({"lot": f"L-{1000 + i * 7}", "farm": rng.choice(FARMS), "variety": rng.choice(VARIETIES),
                     "process": rng.choice(PROCESSES), "bin": f"bin {rng.randint(1, 90):02d}"})
    text = "".join(" | ".join(f"{k}={v}" for k, v in r.items()) + "\n" for r in rows)
    return text, rows


def questions(rng: random.Random, rows: list[dict[str, str]], n: int) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    picked = rng.sample(rows, n)
    for k, row in enumerate(picked):
        if k % 3 == 2:
            process = row["process"]
            count = sum(r["process"] == process for r in rows)
            out.append((f"How many lots went through the {process} process?", str(count)))
        elif k % 3 == 1:
            out.append((f"Lot {row['lot']} was grown by which farm?", row["farm"]))
        else:
            out.append((f"Which bin is lot {row['lot']} kept in?", row["bin"]))
    return out


def run(model: str, text_path: Path, asked: list[tuple[str, str]], earlier: bool, work: Path) -> list[dict[str, Any]]:
    registry = Registry(work / f"registry-{earlier}.db")
    registry.add(text_path, id="lots", name="coffee lots")
    rows = []
    try:
        with Session(model, contexts=["ctx:lots"], registry=registry, probe=ProbeConfig(earlier_answers=earlier),
                     limits=RunLimits(max_iterations=8, max_wall_s=900.0)) as session:
            for question, want in asked:
                began = time.monotonic()
                result = session.ask(question)
                rows.append({"question": question, "expected": want, "answer": result.answer,
                             "right": result.answer is not None and want.casefold() in result.answer.casefold(),
                             "seconds": time.monotonic() - began})
                print(json.dumps({"earlier": earlier, **rows[-1]}), file=sys.stderr, flush=True)
        rows.append({"leads": registry.leads("lots", most=10)})
    finally:
        registry.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="local:qwen2.5-coder-1.5b")
    ap.add_argument("--questions", type=int, default=8)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    text, rows = register_text(rng)
    asked = questions(rng, rows, args.questions)
    result: dict[str, Any] = {"model": args.model, "seed": args.seed, "chars": len(text), "questions": len(asked)}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        path = work / "lots.txt"
        path.write_text(text, encoding="utf-8")
        for earlier in (False, True):
            got = run(args.model, path, asked, earlier, work)
            scored = [r for r in got if "right" in r][1:]  # the first question knows nothing either way
            result["with" if earlier else "without"] = {
                "right": sum(r["right"] for r in scored), "of": len(scored),
                "median_s": statistics.median(r["seconds"] for r in scored) if scored else 0.0,
                "rows": got}
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        for key in ("without", "with"):
            r = result[key]
            print(f"{key} earlier answers: {r['right']}/{r['of']} right after the first question, median {r['median_s']:.0f} s")
        print("leads kept:", result["with"]["rows"][-1]["leads"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
