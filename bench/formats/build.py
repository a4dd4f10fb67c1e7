"""Tasks over real files of many formats, split by format: ``rlm eval`` task files.

Each format (``readers/``) names real files installed from Debian or PyPI and a reference
reader that lives here only. For each format of the split asked for and each length, one
window of the real text is cut (``model.context``) and one question of each family drawn
from the records wholly inside it; a family the format cannot ask (no nesting, no field
naming another record) is left out for it and said so.

    .venv/bin/python bench/formats/build.py --split dev -o eval-runs/formats-dev [--lengths 100000,1000000]
        [--n 1] [--seed 7] [--formats NAME,...]
    .venv/bin/python bench/formats/build.py --list
    rlm eval eval-runs/formats-dev/tasks.jsonl -m local:qwen2.5-coder-1.5b --assists auto --out ...

The list of formats and their status is in ``README.md`` beside this file.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from model import FAMILIES, Format, context, read_text  # noqa: E402
from readers import FORMATS  # noqa: E402


def build(formats: list[Format], lengths: list[int], n: int, seed: int, out: Path) -> dict[str, list[str]]:
    """Write ``out/tasks.jsonl`` and ``out/contexts/``; what was left out, by format."""
    (out / "contexts").mkdir(parents=True, exist_ok=True)
    left: dict[str, list[str]] = {}
    with (out / "tasks.jsonl").open("w", encoding="utf-8") as tasks:
        for fmt in formats:
            try:
                text = read_text(fmt)
            except FileNotFoundError as e:
                left.setdefault(fmt.name, []).append(str(e))
                continue
            records = fmt.parse(text)
            for length in lengths:
                for k in range(n):
                    rng = random.Random(f"{seed}:{fmt.name}:{length}:{k}")
                    ctx, inside = context(fmt, text, records, length, rng)
                    name = f"{fmt.name}-{length}-{k}.txt"
                    (out / "contexts" / name).write_text(ctx, encoding="utf-8")
                    for family, draw in FAMILIES.items():
                        q = draw(fmt, inside, rng)
                        if q is None:
                            left.setdefault(fmt.name, []).append(f"{family} at {length:,}: no question")
                            continue
                        task = {"id": f"{fmt.name}-{family}-{length}-{k}", "question": q.question,
                                "context": f"contexts/{name}", "answer": q.answer, "scorer": q.scorer,
                                "metadata": {"family": family, "length": length, "format": fmt.name,
                                             "split": fmt.split, "kind": q.kind, "chars": len(ctx),
                                             "records": len(inside)}}
                        if q.options:
                            task["options"] = q.options
                        tasks.write(json.dumps(task, ensure_ascii=False) + "\n")
    return left


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=("dev", "heldout", "all"), default="dev")
    parser.add_argument("--formats", help="only these formats (comma-separated names)")
    parser.add_argument("--lengths", default="100000,1000000")
    parser.add_argument("--n", type=int, default=1, help="windows per format and length (a question of each family on each)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("-o", "--out", type=Path)
    parser.add_argument("--list", action="store_true", help="the formats, their split and whether their files are here")
    args = parser.parse_args()
    if args.list:
        for fmt in FORMATS:
            here = "installed" if fmt.files() else f"missing: {fmt.source}"
            print(f"{fmt.name:<24} {fmt.split:<8} {here}")
        return 0
    if args.out is None:
        parser.error("-o OUT is required")
    chosen = [f for f in FORMATS if args.split == "all" or f.split == args.split]
    if args.formats:
        names = set(args.formats.split(","))
        unknown = names - {f.name for f in FORMATS}
        if unknown:
            parser.error(f"no such format: {', '.join(sorted(unknown))}")
        chosen = [f for f in chosen if f.name in names]
    left = build(chosen, [int(x) for x in args.lengths.split(",")], args.n, args.seed, args.out)
    for name, why in left.items():
        print(f"{name}: {'; '.join(why)}", file=sys.stderr)
    print(args.out / "tasks.jsonl")
    return 0


if __name__ == "__main__":
    sys.exit(main())
