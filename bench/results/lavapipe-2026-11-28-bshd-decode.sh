#!/usr/bin/env bash
# Decode over dense K/V laid out BHSD (batch, kv_heads, seq, dim) and BSHD (batch, seq, kv_heads, dim:
# PyTorch's, a head's rows kv_heads * dim elements apart), GQA 32/8, d128, f16, causal bottom-right:
# issue 14's mixed batch (one 32768-key sequence and seven of 512) and one sequence of 32768 keys,
# alternating, several rounds.
# Usage: bash this-file VKATTN rounds [icd.json]
set -euo pipefail
bin=$1 rounds=$2
if [ -n "${3:-}" ]; then export VK_ICD_FILENAMES=$3; fi
common=(--heads 32 --kv-heads 8 --seq-q 1 --dim 128 --dtype f16 --causal bottom-right --warmup 3 --iters 20 --json)
for round in $(seq "$rounds"); do
  for layout in bhsd bshd; do
    "$bin" bench "${common[@]}" --lengths 32768,512,512,512,512,512,512,512 --kv-layout "$layout" |
      python3 "$(dirname "$0")/../rounds.py" line "mixed-$layout"
    "$bin" bench "${common[@]}" --seq-k 32768 --kv-layout "$layout" | python3 "$(dirname "$0")/../rounds.py" line "b1-$layout"
  done
done | python3 "$(dirname "$0")/../rounds.py" summary
