#!/usr/bin/env bash
# Paged decode with splits by each sequence's own keys (the device's work list) against the build
# before it (splits by the table's capacity), and dense K/V, alternating, several rounds.
# Usage: bash this-file vkattn-new vkattn-old rounds [icd.json]
set -euo pipefail
new=$1 old=$2 rounds=$3
if [ -n "${4:-}" ]; then export VK_ICD_FILENAMES=$4; fi
common=(--heads 32 --kv-heads 8 --seq-q 1 --dim 128 --dtype f16 --causal bottom-right --warmup 3 --iters 20 --json)
one() {  # label, binary, args...
  local label=$1 bin=$2; shift 2
  "$bin" bench "${common[@]}" "$@" | python3 "$(dirname "$0")/../rounds.py" line "$label"
}
mixed=32768,512,512,512,512,512,512,512
tiny=32768,1,1,1,1,1,1,1
for round in $(seq "$rounds"); do
  one "mixed-dense-f16" "$new" --lengths $mixed
  for b in new old; do
    bin=$new; if [ $b = old ]; then bin=$old; fi
    one "mixed-hnd-f16-$b" "$bin" --lengths $mixed --paged 16 --page-order hnd
    one "mixed-nhd-f16-$b" "$bin" --lengths $mixed --paged 16
    one "mixed-hnd-q8_0-$b" "$bin" --lengths $mixed --paged 16 --page-order hnd --kv-dtype q8_0
    one "tiny-hnd-f16-$b" "$bin" --lengths $tiny --paged 16 --page-order hnd
  done
  one "mixed-dense-q8_0" "$new" --lengths $mixed --kv-dtype q8_0
done | python3 "$(dirname "$0")/../rounds.py" summary --sort
