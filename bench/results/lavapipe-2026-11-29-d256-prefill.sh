#!/usr/bin/env bash
# Prefill past 128 head dims on CPU devices: the subgroup kernel (after) in place of rowwise
# (before), both chosen by `automatic`; first dispatch (JIT) and run time, alternating.
# 1. First dispatch per pipeline (bench/first_dispatch.sh, Mesa's cache empty) of d256 prefill
#    (8 heads, 256 x 256) in f16, bf16 and f32, and of d192 f16, per round.
# 2. Run time (vkattn bench, median ms) of d256 prefill 8 heads x 1024 x 1024 in f16, bf16 and f32,
#    of a short chunk (16 queries on 4096 keys, d256 f16) and of d192 f16 (64 queries, 2048 keys),
#    each checked against the CPU reference.
# Usage: bash this-file BEFORE/vkattn AFTER/vkattn rounds [icd.json]
set -euo pipefail
before=$1 after=$2 rounds=$3
if [ -n "${4:-}" ]; then export VK_DRIVER_FILES=$4; fi
here=$(dirname "$0")
jit_shapes=("d256-f16|--heads 8 --seq-q 256 --dim 256 --dtype f16"
            "d256-bf16|--heads 8 --seq-q 256 --dim 256 --dtype bf16"
            "d256-f32|--heads 8 --seq-q 256 --dim 256 --dtype f32"
            "d192-f16|--heads 8 --seq-q 256 --dim 192 --dtype f16")
echo "# first dispatch, ms (build + first dispatch - warm), per pipeline"
for round in $(seq "$rounds"); do
  for shape in "${jit_shapes[@]}"; do
    for run in "before|$before" "after|$after"; do
      IFS='|' read -r label bin <<<"$run"
      # (Given no ICD file, first_dispatch.sh runs the driver the environment names: VK_DRIVER_FILES.)
      line=$(bash "$here/../first_dispatch.sh" "$bin" --shape "$shape" | tail -1)
      echo "round $round ${shape%%|*} $label: $(echo "$line" | cut -d, -f3,8)"
    done
  done
done
echo "# run time"
run_shapes=("d256-f16|--heads 8 --seq-q 1024 --dim 256 --dtype f16"
            "d256-bf16|--heads 8 --seq-q 1024 --dim 256 --dtype bf16"
            "d256-f32|--heads 8 --seq-q 1024 --dim 256 --dtype f32"
            "d256-f16-chunk16|--heads 8 --seq-q 16 --seq-k 4096 --dim 256 --dtype f16"
            "d192-f16-chunk64|--heads 8 --seq-q 64 --seq-k 2048 --dim 192 --dtype f16")
for round in $(seq "$rounds"); do
  for shape in "${run_shapes[@]}"; do
    for run in "before|$before" "after|$after"; do
      IFS='|' read -r label bin <<<"$run"
      # shellcheck disable=SC2086  # the shape's arguments are words
      "$bin" bench ${shape#*|} --warmup 1 --iters 5 --check --json | python3 "$here/../rounds.py" line "${shape%%|*}-$label"
    done
  done
done | python3 "$here/../rounds.py" summary --sort
