"""Which format windows a change touches: a hash of what the probe and ``records()`` make of each.

For every ``*.txt`` window under the given folders (``build.py``'s ``contexts/``), one hash of
the brief's structure (the probe's shape line and the rest of its structure) and of every
record ``records()`` reads (its line, fields, parent's line and number of children, and the
list's shape, coverage and note). Two trees give the same hash for a window exactly when the
model's first prompt and the records its code reads are the same there: a lever is then
measured on the tasks of the windows whose hash changed. Only hashes are written, so a
held-out window's parse is never shown.

    F=bench/formats/fingerprint.py; W="eval-runs/formats-dev/contexts eval-runs/formats-heldout/contexts"
    .venv/bin/python $F $W -o before.json
    (change the tree)
    .venv/bin/python $F $W -o after.json --against before.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

from rlm_runtime.context.handles import FileHandle


def fingerprint(path: Path) -> str:
    """The hash of what the probe and ``records()`` make of the text at ``path``."""
    handle = FileHandle(path)
    probe = handle.probe()
    parts = [json.dumps(probe.structure, sort_keys=True, default=str), probe.shape]
    try:
        recs = handle.records()
        parts += [f"{r.line}|{sorted(dict.items(r), key=str)!r}|{r.parent.line if r.parent is not None else -1}|"
                  f"{len(r.children)}" for r in recs]
        parts.append(f"{recs.shape}|{recs.coverage}|{recs!r}".split("\n", 1)[0])
    except Exception as e:  # a refusal is a result too
        parts.append(f"error {type(e).__name__}: {e}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("-o", "--out", type=Path, required=True, help="where to write the hashes (JSON)")
    parser.add_argument("--against", type=Path, help="hashes of another tree: say which windows differ")
    args = parser.parse_args(argv)
    hashes = {p.name: fingerprint(p) for folder in args.folders for p in sorted(folder.glob("*.txt"))}
    args.out.write_text(json.dumps(hashes, indent=1))
    print(f"{len(hashes)} windows hashed: {args.out}")
    if args.against:
        before = json.loads(args.against.read_text())
        changed = sorted(k for k in hashes if before.get(k) != hashes[k])
        print(f"{len(changed)} changed: {', '.join(changed) or '(none)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
