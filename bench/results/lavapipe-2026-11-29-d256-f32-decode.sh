#!/usr/bin/env bash
# d256 f32 decode on CPU devices: the decode form's keys per iteration capped by a lane's unrolled
# K loads (after) against 4 keys for 1-2 rows and 2 for 4 (before); first dispatch (JIT) and run
# time, alternating.
# 1. First dispatch per pipeline (bench/first_dispatch.sh, Mesa's cache empty) of d256 f32 decode,
#    8 KV heads, 8192 keys, in groups of 1, 2 and 4 query heads, per round.
# 2. Run time (vkattn bench, median ms) of the same at 32768 keys.
# Usage: bash this-file BEFORE/vkattn AFTER/vkattn rounds [icd.json]
set -euo pipefail
before=$1 after=$2 rounds=$3
if [ -n "${4:-}" ]; then export VK_DRIVER_FILES=$4; fi
here=$(dirname "$0")
shapes=("g1|--heads 8 --kv-heads 8 --seq-q 1 --dim 256 --dtype f32"
        "g2|--heads 16 --kv-heads 8 --seq-q 1 --dim 256 --dtype f32"
        "g4|--heads 32 --kv-heads 8 --seq-q 1 --dim 256 --dtype f32")
echo "# first dispatch, ms (build + first dispatch - warm), per pipeline"
for round in $(seq "$rounds"); do
  for shape in "${shapes[@]}"; do
    for run in "before|$before" "after|$after"; do
      IFS='|' read -r label bin <<<"$run"
      # (Given no ICD file, first_dispatch.sh runs the driver the environment names: VK_DRIVER_FILES.)
      line=$(bash "$here/../first_dispatch.sh" "$bin" --shape "${shape%%|*}|${shape#*|} --seq-k 8192" | tail -1)
      echo "round $round ${shape%%|*} $label: $(echo "$line" | cut -d, -f8)"
    done
  done
done
echo "# run time"
for round in $(seq "$rounds"); do
  for shape in "${shapes[@]}"; do
    for run in "before|$before" "after|$after"; do
      IFS='|' read -r label bin <<<"$run"
      # shellcheck disable=SC2086  # the shape's arguments are words
      "$bin" bench ${shape#*|} --seq-k 32768 --warmup 3 --iters 20 --json | python3 "$here/../rounds.py" line "${shape%%|*}-$label"
    done
  done
done | python3 "$here/../rounds.py" summary --sort
