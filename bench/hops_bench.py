"""What the ``hop`` lookup costs on a large text, as a ratio to parsing it in the same run.

Run from the repository root (the package importable: installed, or on PYTHONPATH)::

    python bench/hops_bench.py [--records 100000] [--fields 13] [--repeat 5] [--json]

``follow_link`` asks the worker for the next hop after every cell that printed something, over
the records the model's code parsed. The first ask builds the tables it reads (the value index
and the records by name, kept on the parsed list); each later ask matches the question and reads
those tables. This writes one record a line (``key=value`` pairs, a name, a link to another
record, a few-valued field and ``--fields - 3`` fields of 500 values each), parses it (the
baseline: what the model's own ``records()`` cost), then times the first ask and the median of
``--repeat`` later asks, and says whether each found the hop.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time

from _common import machine

from rlm_runtime.context import hops, records

SEED = 2026_11_27


def text_of(n: int, fields: int) -> tuple[str, list[str]]:
    rng = random.Random(SEED)
    names = [f"k{i:06d}" for i in range(n)]
    rows = []
    for name in names:
        pairs = [f"kiln={name}", f"fed by={names[rng.randrange(n)]}", f"glaze=g{rng.randrange(40)}"]
        pairs += [f"x{j}={rng.randrange(500)}" for j in range(fields - 3)]
        rows.append("|".join(pairs))
    return "\n".join(rows), names


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--fields", type=int, default=13)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    text, names = text_of(args.records, max(3, args.fields))
    started = time.perf_counter()
    parsed = records.parse_text(text)
    parse_s = time.perf_counter() - started
    start = names[len(names) // 2]
    question = f"What is the glaze of the fed by of {start}?"
    shown = f"fed by: {parsed.find(start)[0]['fed by']}"
    started = time.perf_counter()
    first = hops.next_hop(parsed, question, shown)
    first_s = time.perf_counter() - started
    later = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        hop = hops.next_hop(parsed, question, shown)
        later.append(time.perf_counter() - started)
    later_s = statistics.median(later)
    result = {"records": len(parsed), "fields": len(parsed.fields), "chars": len(text), "parse_s": parse_s,
              "first_ask_s": first_s, "later_ask_s": later_s, "first_x_parse": first_s / parse_s,
              "later_x_parse": later_s / parse_s, "found": first is not None and hop == first}
    if args.json:
        json.dump({"machine": machine(), **result}, sys.stdout, indent=2)
        print()
        return 0
    print(machine())
    print(f"{result['records']:,} records x {result['fields']} fields, {len(text) / 1e6:.1f} MB; hop found: {result['found']}")
    print(f"parse (baseline)      {parse_s:8.3f} s   1.00")
    print(f"first ask (tables)    {first_s:8.3f} s   {result['first_x_parse']:.3f}")
    print(f"later ask (median)    {later_s:8.4f} s   {result['later_x_parse']:.4f}")
    return 0 if result["found"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
