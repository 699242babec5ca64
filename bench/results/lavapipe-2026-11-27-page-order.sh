#!/usr/bin/env bash
# Issue 14's decode batch on a paged cache with nhd pages (page_size, kv_heads, dim) against hnd pages
# (kv_heads, page_size, dim) and dense K/V, f16 and q8_0, alternating, several rounds.
# Usage: bash this-file vkattn rounds [icd.json]
set -euo pipefail
bin=$1 rounds=$2
if [ -n "${3:-}" ]; then export VK_ICD_FILENAMES=$3; fi
common=(--heads 32 --kv-heads 8 --seq-q 1 --dim 128 --dtype f16 --causal bottom-right
        --lengths 32768,512,512,512,512,512,512,512 --warmup 3 --iters 20 --json)
one() {  # label, args...
  local label=$1; shift
  "$bin" bench "${common[@]}" "$@" | python3 "$(dirname "$0")/../rounds.py" line "$label"
}
for round in $(seq "$rounds"); do
  for kv in f16 q8_0; do
    extra=(); if [ "$kv" = q8_0 ]; then extra=(--kv-dtype q8_0); fi
    one "dense-$kv" "${extra[@]}"
    one "paged16-nhd-$kv" --paged 16 "${extra[@]}"
    one "paged16-hnd-$kv" --paged 16 --page-order hnd "${extra[@]}"
  done
done | python3 "$(dirname "$0")/../rounds.py" summary
