#!/usr/bin/env bash
# The fused kernels' split/unsplit output as a specialization constant (SPEC_ATTENTION_PARTIAL, not
# a push flag), and the decode form writing O and the split partials in 16-byte chunks: first
# dispatch (JIT) of the decode form and its run time, before against after, alternating.
# 1. First dispatch per pipeline (bench/first_dispatch.sh, Mesa's cache empty) of d256 decode
#    (GQA 32/8, 8192 keys: split) in f16, bf16 and f32, of d128 decode f16, and of d256 f16 on one
#    sequence of 64 keys in 16 KV heads (a call in one piece: the kernel writes O), per round.
# 2. Run time (vkattn bench, median ms) of the same decode shapes at 32768 keys, and of the 64-key one.
# Usage: bash this-file BEFORE/vkattn AFTER/vkattn rounds [icd.json]
set -euo pipefail
before=$1 after=$2 rounds=$3
if [ -n "${4:-}" ]; then export VK_DRIVER_FILES=$4; fi
here=$(dirname "$0")
jit_shapes=("d256-f16|--heads 32 --kv-heads 8 --seq-q 1 --seq-k 8192 --dim 256 --dtype f16"
            "d256-bf16|--heads 32 --kv-heads 8 --seq-q 1 --seq-k 8192 --dim 256 --dtype bf16"
            "d256-f32|--heads 32 --kv-heads 8 --seq-q 1 --seq-k 8192 --dim 256 --dtype f32"
            "d128-f16|--heads 32 --kv-heads 8 --seq-q 1 --seq-k 8192 --dim 128 --dtype f16"
            "d256-f16-unsplit|--heads 64 --kv-heads 16 --seq-q 1 --seq-k 64 --dim 256 --dtype f16")
echo "# first dispatch, ms (build + first dispatch - warm), per pipeline"
for round in $(seq "$rounds"); do
  for shape in "${jit_shapes[@]}"; do
    for run in "before|$before" "after|$after"; do
      IFS='|' read -r label bin <<<"$run"
      # (Given no ICD file, first_dispatch.sh runs the driver the environment names: VK_DRIVER_FILES.)
      line=$(bash "$here/../first_dispatch.sh" "$bin" --shape "$shape" | tail -1)
      echo "round $round ${shape%%|*} $label: $(echo "$line" | cut -d, -f8)"
    done
  done
done
echo "# run time"
run_shapes=("d256-f16|--heads 32 --kv-heads 8 --seq-q 1 --seq-k 32768 --dim 256 --dtype f16"
            "d128-f16|--heads 32 --kv-heads 8 --seq-q 1 --seq-k 32768 --dim 128 --dtype f16"
            "d256-f16-unsplit|--heads 64 --kv-heads 16 --seq-q 1 --seq-k 64 --dim 256 --dtype f16")
for round in $(seq "$rounds"); do
  for shape in "${run_shapes[@]}"; do
    for run in "before|$before" "after|$after"; do
      IFS='|' read -r label bin <<<"$run"
      # shellcheck disable=SC2086  # the shape's arguments are words
      "$bin" bench ${shape#*|} --warmup 3 --iters 20 --json | python3 "$here/../rounds.py" line "${shape%%|*}-$label"
    done
  done
done | python3 "$here/../rounds.py" summary --sort
