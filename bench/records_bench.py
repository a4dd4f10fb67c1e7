"""How fast ``records()`` reads each text shape, as a ratio to JSON lines in the same run.

Run from the repository root (the package importable: installed, or on PYTHONPATH)::

    python bench/records_bench.py [--chars 1000000] [--repeat 3] [--json]

The same records (the eval suites' generator, a fixed seed) are written in each shape the
suites know (line, block, csv, tsv, jsonl, markdown, prose), then ``parse_text`` reads each
text whole, ``--repeat`` times; the table gives the median, MB/s, the records read (they must
equal the records written) and the ratio to ``jsonl`` (json.loads per line: the baseline).
Prose is read by sentence forms (``context/facts.py``), the slowest path.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time

from _common import machine

from rlm_runtime.context import records
from rlm_runtime.eval.suites import records as generator
from rlm_runtime.eval.suites.shapes import SHAPES

SEED = 2026_11_27


def text_of(shape_name: str, chars: int) -> tuple[str, int]:
    shape = SHAPES[shape_name]
    domain = generator.DOMAINS["hosts"]
    rows = generator.build(random.Random(SEED), domain, "words", shape, chars)
    return shape.head(domain.fields()) + "".join(shape.row(r) for r in rows), len(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chars", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = []
    for name in SHAPES:
        text, written = text_of(name, args.chars)
        times, read, kind = [], 0, ""
        for _ in range(args.repeat):
            started = time.perf_counter()
            parsed = records.parse_text(text)
            times.append(time.perf_counter() - started)
            read, kind = len(parsed), parsed.shape
        median = statistics.median(times)
        rows.append({"shape": name, "read_as": kind, "chars": len(text), "written": written, "read": read,
                     "median_s": median, "mb_s": len(text.encode()) / 1e6 / median})
    base = next(r for r in rows if r["shape"] == "jsonl")["median_s"]
    for r in rows:
        r["x_jsonl"] = r["median_s"] / base
    if args.json:
        print(json.dumps({"machine": machine(), "rows": rows}, indent=2))
        return 0
    print("| shape | read as | chars | records written / read | median | MB/s | x jsonl |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['shape']} | {r['read_as']} | {r['chars']:,} | {r['written']:,} / {r['read']:,} | "
              f"{r['median_s'] * 1000:.0f} ms | {r['mb_s']:.1f} | {r['x_jsonl']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
