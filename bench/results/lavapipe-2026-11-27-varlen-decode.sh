#!/usr/bin/env bash
# Issue 14's decode batch (one 32768-key sequence and seven of 512, GQA 32/8, d128, f16, causal
# bottom-right) as dense K/V with key lengths and as one packed variable-length call (K and V
# (total_k, kv_heads, dim)), with several builds alternating, several rounds.
# Usage: bash this-file rounds LABEL=VKATTN... [-- icd.json]
set -euo pipefail
rounds=$1; shift
builds=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do builds+=("$1"); shift; done
if [ "${1:-}" = -- ]; then export VK_ICD_FILENAMES=$2; fi
common=(--heads 32 --kv-heads 8 --seq-q 1 --dim 128 --dtype f16 --causal bottom-right
        --lengths 32768,512,512,512,512,512,512,512 --warmup 3 --iters 20 --json)
for round in $(seq "$rounds"); do
  for build in "${builds[@]}"; do
    label=${build%%=*} bin=${build#*=}
    "$bin" bench "${common[@]}" | python3 "$(dirname "$0")/../rounds.py" line "$label-dense"
    "$bin" bench "${common[@]}" --varlen | python3 "$(dirname "$0")/../rounds.py" line "$label-varlen"
  done
done | python3 "$(dirname "$0")/../rounds.py" summary
