#!/bin/sh
# The quality table of the README ("Measured with the local model"): the core families
# (lookup, aggregation, multi-hop) over text shapes and question wordings, the dev part or the
# held-out part (rlm eval make core --split), at 100K and 1M characters, three tasks per family
# and length (18 tasks), `rlm` with the embedded model, by default with no assist
# (--assists none). Each run takes 30-60 minutes on 2 cores; run one at a time. ASSISTS names the
# settings to run, each into OUT/SETTING (default "none", the plain loop; the README's table is
# ASSISTS="auto none", auto being the small-model set for the local model; to measure a
# new one, ASSISTS="none small NAME" and compare).
#
#   [ASSISTS="none NAME"] [PROSE_FIRST=1] sh bench/eval_shapes_local.sh SPLIT [OUT] [MODEL] [SEED]
#
# SPLIT is dev or heldout; OUT defaults to eval-runs/shapes-SPLIT, MODEL to
# local:qwen2.5-coder-1.5b, SEED to 11 (a held-out set whose trajectories were read is a
# development set from then on: take another seed, and say so).
set -eu
SPLIT=${1:?dev or heldout}
OUT=${2:-eval-runs/shapes-$SPLIT}
MODEL=${3:-local:qwen2.5-coder-1.5b}
SEED=${4:-11}
RLM=${RLM:-rlm}
ASSISTS=${ASSISTS:-none}
mkdir -p "$OUT"
if [ -n "${PROSE_FIRST:-}" ]; then
    # Weight the draw to prose: of 8 tasks per family and length, the first two in prose and
    # the first other one (the seed 17 held-out part: 11 prose tasks of 18).
    $RLM eval make core --split "$SPLIT" --lengths 100000,1000000 --n 8 --seed "$SEED" -o "$OUT/all.jsonl"
    ${PYTHON:-python3} - "$OUT/all.jsonl" "$OUT/tasks.jsonl" <<'PICK'
import json, sys
from collections import defaultdict
groups = defaultdict(list)
for line in open(sys.argv[1]):
    task = json.loads(line)
    groups[(task["metadata"]["family"], task["metadata"]["length"])].append(task)
with open(sys.argv[2], "w") as out:
    for tasks in groups.values():
        prose = [t for t in tasks if t["metadata"]["shape"] == "prose"][:2]
        other = [t for t in tasks if t["metadata"]["shape"] != "prose"]
        for task in (prose + other)[:3]:
            out.write(json.dumps(task) + "\n")
PICK
else
    $RLM eval make core --split "$SPLIT" --lengths 100000,1000000 --n 3 --seed "$SEED" -o "$OUT/tasks.jsonl"
fi
for assists in $ASSISTS; do
    $RLM eval "$OUT/tasks.jsonl" --model "$MODEL" --method rlm --assists "$assists" --out "$OUT/$assists" --resume --no-report
    $RLM eval report "$OUT/$assists"
done
