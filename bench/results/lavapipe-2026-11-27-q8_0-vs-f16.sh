#!/usr/bin/env bash
# q8_0 against f16 K/V per token, one binary, alternating, several rounds: issue 14's mixed batch
# (32768 + 7 x 512 keys) dense, paged hnd and paged nhd (pages of 16), and batch 1 with 32768 keys;
# GQA 32/8, d128, causal bottom-right.
# Usage: bash this-file vkattn rounds [icd.json]
set -euo pipefail
vkattn=$1 rounds=$2
if [ -n "${3:-}" ]; then export VK_DRIVER_FILES=$3; fi
common=(--heads 32 --kv-heads 8 --seq-q 1 --dim 128 --dtype f16 --causal bottom-right --warmup 3 --iters 20 --json)
mixed=32768,512,512,512,512,512,512,512
for round in $(seq "$rounds"); do
  for kv in f16 q8_0; do
    kv_args=(); [ "$kv" = q8_0 ] && kv_args=(--kv-dtype q8_0)
    for shape in "b1|--lengths 32768" "mixed-dense|--lengths $mixed" "mixed-hnd|--lengths $mixed --paged 16 --page-order hnd" \
                 "mixed-nhd|--lengths $mixed --paged 16"; do
      # shellcheck disable=SC2086  # the shape's arguments are words
      "$vkattn" bench "${common[@]}" ${shape#*|} "${kv_args[@]}" | python3 "$(dirname "$0")/../rounds.py" line "${shape%%|*}-$kv"
    done
  done
done | python3 "$(dirname "$0")/../rounds.py" summary --sort
