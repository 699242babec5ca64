#!/usr/bin/env bash
# f16 widened with integer operations and selects in the CPU devices' kernels (after) against
# unpackHalf2x16 (before): run time and first dispatch, alternating.
# 1. Run time (vkattn bench, median ms, checked against the CPU reference) of f16 prefill, 8 heads x
#    1024 x 1024, at d64, d128 and d256 (the subgroup kernel), of the three-stage path at d64 f16
#    (the subgroup GEMM), of d128 bf16 prefill and d128 f16 decode (GQA 32/8, 32768 keys), which do
#    not change (controls).
# 2. First dispatch per pipeline (bench/first_dispatch.sh, Mesa's cache empty) of the f16 shapes.
# Usage: bash this-file BEFORE/vkattn AFTER/vkattn rounds [icd.json]
set -euo pipefail
before=$1 after=$2 rounds=$3
if [ -n "${4:-}" ]; then export VK_DRIVER_FILES=$4; fi
here=$(dirname "$0")
run_shapes=("prefill-d64-f16|--heads 8 --seq-q 1024 --dim 64 --dtype f16"
            "prefill-d128-f16|--heads 8 --seq-q 1024 --dim 128 --dtype f16"
            "prefill-d256-f16|--heads 8 --seq-q 1024 --dim 256 --dtype f16"
            "unfused-d64-f16|--heads 8 --seq-q 1024 --dim 64 --dtype f16 --path unfused"
            "prefill-d128-bf16|--heads 8 --seq-q 1024 --dim 128 --dtype bf16"
            "decode-d128-f16|--heads 32 --kv-heads 8 --seq-q 1 --seq-k 32768 --dim 128 --dtype f16")
echo "# run time"
for round in $(seq "$rounds"); do
  for shape in "${run_shapes[@]}"; do
    for run in "before|$before" "after|$after"; do
      IFS='|' read -r label bin <<<"$run"
      # shellcheck disable=SC2086  # the shape's arguments are words
      "$bin" bench ${shape#*|} --warmup 2 --iters 10 --check --json | python3 "$here/../rounds.py" line "${shape%%|*}-$label"
    done
  done
done | python3 "$here/../rounds.py" summary --sort
echo "# first dispatch, ms (build + first dispatch - warm), per pipeline"
for round in $(seq "$rounds"); do
  for shape in "${run_shapes[@]:0:4}"; do
    shape=${shape/--seq-q 1024/--seq-q 256}
    for run in "before|$before" "after|$after"; do
      IFS='|' read -r label bin <<<"$run"
      # (Given no ICD file, first_dispatch.sh runs the driver the environment names: VK_DRIVER_FILES.)
      line=$(bash "$here/../first_dispatch.sh" "$bin" --shape "$shape" | tail -1)
      echo "round $round ${shape%%|*} $label: $(echo "$line" | cut -d, -f8)"
    done
  done
done
