#!/bin/sh
# The README's quality table over real files (issue 40): the formats of one split at the
# given lengths (one window a format and length, one question a family), `rlm` with the
# embedded model under each setting of ASSISTS, and `direct` (the same model given the text's
# first 4,096 tokens). Each setting takes ~25 minutes for the 100K dev part on 2 cores, and
# direct ~45; run one at a time, with nothing heavy beside it. The format sources must be
# installed (bench/formats/README.md). A held-out split is measured once a lever is final;
# once its trajectories are read it is development.
#
# Each task runs on a cold engine (`--cold`), so a task's trajectory does not depend on the
# task before it, and each turn's reply ends where the server stops it (not where the client
# stopped reading), so a rerun of one tree repeats its replies; a lever is still compared with a
# baseline run beside it, and a task it turned is its own where the trace shows it acted.
# COLD= (empty) runs warm: faster, one task in 35 may differ.
#
#   [ASSISTS="auto none"] [DIRECT=1] [LENGTHS=100000] [COLD=--cold] sh bench/formats/eval_local.sh SPLIT [OUT] [MODEL]
# (ASSISTS="" runs no rlm setting: DIRECT=1 ASSISTS="" measures direct alone)
set -eu
SPLIT=${1:?dev or heldout}
OUT=${2:-eval-runs/formats-$SPLIT}
MODEL=${3:-local:qwen2.5-coder-1.5b}
RLM=${RLM:-.venv/bin/rlm}
PYTHON=${PYTHON:-.venv/bin/python}
ASSISTS=${ASSISTS-auto none}
LENGTHS=${LENGTHS:-100000}
COLD=${COLD---cold}
mkdir -p "$OUT"
[ -f "$OUT/tasks.jsonl" ] || $PYTHON bench/formats/build.py --split "$SPLIT" --lengths "$LENGTHS" -o "$OUT"
for assists in $ASSISTS; do
    $RLM eval "$OUT/tasks.jsonl" --model "$MODEL" --method rlm --assists "$assists" $COLD --out "$OUT/$assists" --resume --no-report
    $RLM eval report "$OUT/$assists"
done
if [ -n "${DIRECT:-}" ]; then
    $RLM eval "$OUT/tasks.jsonl" --model "$MODEL" --method direct --window 4096 $COLD --out "$OUT/direct" --resume --no-report
    $RLM eval report "$OUT/direct"
fi
