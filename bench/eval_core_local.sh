#!/bin/sh
# The measured table of the README's "Batch evaluation" and "Measured with the local model":
# the core suite (needle, aggregation, multi-hop), seeds 1-3, at 10K, 100K and 1M characters,
# `rlm` against `direct`, with the embedded model. About 50 minutes on 2 cores (2026-11-26).
#
#   sh bench/eval_core_local.sh [OUT] [MODEL] [DIRECT_WINDOW]
#
# OUT defaults to eval-runs/core-local, MODEL to local:qwen2.5-coder-1.5b, DIRECT_WINDOW
# (tokens of context pasted into the direct call) to 4096: the model's whole 32K window costs
# 15-25 minutes of prefill per question on 2 cores (bench/EVAL.md).
set -eu
OUT=${1:-eval-runs/core-local}
MODEL=${2:-local:qwen2.5-coder-1.5b}
WINDOW=${3:-4096}
RLM=${RLM:-rlm}
mkdir -p "$OUT/tasks"
for seed in 1 2 3; do
    $RLM eval make core --lengths 10000,100000,1000000 --n 1 --seed "$seed" -o "$OUT/tasks/core_s$seed.jsonl"
done
cat "$OUT"/tasks/core_s1.jsonl "$OUT"/tasks/core_s2.jsonl "$OUT"/tasks/core_s3.jsonl > "$OUT/tasks/core.jsonl"
# contexts are named relative to each seed's file; the combined file sits beside them
$RLM eval "$OUT/tasks/core.jsonl" --model "$MODEL" --method rlm --out "$OUT/run" --resume --no-report
$RLM eval "$OUT/tasks/core.jsonl" --model "$MODEL" --method direct --window "$WINDOW" --out "$OUT/run" --resume --no-report
$RLM eval report "$OUT/run"
