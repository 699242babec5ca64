#!/usr/bin/env bash
# q8_0 decode reading two key rows' half blocks with three 16-byte loads a lane instead of four
# (attention_subgroup_decode.comp, q8_half_rows_*), against the build before, alternating, several
# rounds: issue 14's shapes (batch 1 x 32768 keys; one 32768-key and seven 512-key sequences dense,
# in hnd pages and in nhd pages of 16), GQA 32/8, d128, causal bottom-right; q8_0 K/V from both
# builds, f16 from the second (its f16 pipelines are the same in both) as the per-token yardstick.
# Usage: bash this-file BEFORE/vkattn AFTER/vkattn rounds [icd.json]
set -euo pipefail
before=$1 after=$2 rounds=$3
if [ -n "${4:-}" ]; then export VK_DRIVER_FILES=$4; fi
here=$(dirname "$0")
common=(--heads 32 --kv-heads 8 --seq-q 1 --dim 128 --dtype f16 --causal bottom-right --warmup 3 --iters 20 --json)
mixed=32768,512,512,512,512,512,512,512
shapes=("b1|--lengths 32768" "mixed-dense|--lengths $mixed" "mixed-hnd|--lengths $mixed --paged 16 --page-order hnd"
        "mixed-nhd|--lengths $mixed --paged 16")
for round in $(seq "$rounds"); do
  for shape in "${shapes[@]}"; do
    # shellcheck disable=SC2086  # the shape's arguments are words
    for run in "before-q8_0|$before|--kv-dtype q8_0" "after-q8_0|$after|--kv-dtype q8_0" "f16|$after|"; do
      IFS='|' read -r label bin extra <<<"$run"
      "$bin" bench "${common[@]}" ${shape#*|} $extra | python3 "$here/../rounds.py" line "${shape%%|*}-$label"
    done
  done
done | python3 "$here/../rounds.py" summary --sort
