#!/usr/bin/env bash
# Issue 14's decode batch (one 32768-key sequence and seven of 512, GQA 32/8, d128, f16 Q/O, causal
# bottom-right) on dense K/V and on paged caches of 16-token pages in both page orders, f16 and q8_0
# K/V, with two builds alternating (before and after the decode form's touching of rows ahead),
# several rounds.
# Usage: bash this-file VKATTN_BEFORE VKATTN_AFTER rounds [icd.json]
set -euo pipefail
before=$1 after=$2 rounds=$3
if [ -n "${4:-}" ]; then export VK_ICD_FILENAMES=$4; fi
common=(--heads 32 --kv-heads 8 --seq-q 1 --dim 128 --dtype f16 --causal bottom-right
        --lengths 32768,512,512,512,512,512,512,512 --warmup 3 --iters 20 --json)
one() {  # label, binary, args...
  local label=$1 bin=$2; shift 2
  "$bin" bench "${common[@]}" "$@" | python3 "$(dirname "$0")/../rounds.py" line "$label"
}
for round in $(seq "$rounds"); do
  for kv in f16 q8_0; do
    extra=(); if [ "$kv" = q8_0 ]; then extra=(--kv-dtype q8_0); fi
    for build in before after; do
      bin=$before; if [ "$build" = after ]; then bin=$after; fi
      one "$build-dense-$kv" "$bin" "${extra[@]}"
      one "$build-nhd-$kv" "$bin" --paged 16 "${extra[@]}"
      one "$build-hnd-$kv" "$bin" --paged 16 --page-order hnd "${extra[@]}"
    done
  done
done | python3 "$(dirname "$0")/../rounds.py" summary
