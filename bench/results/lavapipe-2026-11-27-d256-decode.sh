#!/usr/bin/env bash
# d256 GQA decode on a CPU device: the tiled kernel (the plan's choice before, forced here with
# --kernel tiled) against the subgroup kernel's decode form (the plan's choice now), alternating, in
# one binary, per dtype; batch 1, 32 query heads over 8 KV heads, 32768 keys.
# Usage: bash this-file vkattn rounds [icd.json]
set -euo pipefail
vkattn=$1 rounds=$2
if [ -n "${3:-}" ]; then export VK_DRIVER_FILES=$3; fi
common=(--heads 32 --kv-heads 8 --seq-q 1 --seq-k 32768 --dim 256 --warmup 2 --iters 10 --json)
for round in $(seq "$rounds"); do
  for dtype in f16 f32 bf16; do
    "$vkattn" bench "${common[@]}" --dtype "$dtype" --kernel tiled | python3 "$(dirname "$0")/../rounds.py" line "tiled-$dtype"
    "$vkattn" bench "${common[@]}" --dtype "$dtype" | python3 "$(dirname "$0")/../rounds.py" line "decode-form-$dtype"
  done
done | python3 "$(dirname "$0")/../rounds.py" summary --sort
