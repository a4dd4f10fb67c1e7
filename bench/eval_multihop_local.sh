#!/bin/sh
# The multi-hop figures of bench/EVAL.md ("Following the chain"): the multi-hop family at
# 100K and 1M characters, `rlm` with the embedded model, seeds 1-6 by default (12 tasks,
# about 6 minutes on 2 cores); SEEDS="7 8 9" gives the set no lever was built on.
#
#   [SEEDS="..."] sh bench/eval_multihop_local.sh [OUT] [MODEL]
set -eu
OUT=${1:-eval-runs/multihop-local}
MODEL=${2:-local:qwen2.5-coder-1.5b}
RLM=${RLM:-rlm}
mkdir -p "$OUT/tasks"
: > "$OUT/tasks/multihop.jsonl"
for seed in ${SEEDS:-1 2 3 4 5 6}; do
    $RLM eval make multi-hop --lengths 100000,1000000 --n 1 --seed "$seed" -o "$OUT/tasks/mh_s$seed.jsonl"
    cat "$OUT/tasks/mh_s$seed.jsonl" >> "$OUT/tasks/multihop.jsonl"
done
$RLM eval "$OUT/tasks/multihop.jsonl" --model "$MODEL" --method rlm --out "$OUT/run" --resume
