#!/usr/bin/env bash
# q8_0 decode with the cheaper realignment (both halves of a block realigned alike, two select steps
# and a halfword shift; the scale applied once per row) against the build before it, with f16 as
# the control, alternating, several rounds: issue 14's mixed batch (dense and paged hnd, page 16)
# and batch 1 with 32768 keys.
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
for round in $(seq "$rounds"); do
  one "mixed-dense-f16" "$new" --lengths $mixed
  one "mixed-hnd-f16" "$new" --lengths $mixed --paged 16 --page-order hnd
  one "b1-dense-f16" "$new" --lengths 32768
  for b in new old; do
    bin=$new; if [ $b = old ]; then bin=$old; fi
    one "mixed-dense-q8_0-$b" "$bin" --lengths $mixed --kv-dtype q8_0
    one "mixed-hnd-q8_0-$b" "$bin" --lengths $mixed --paged 16 --page-order hnd --kv-dtype q8_0
    one "b1-dense-q8_0-$b" "$bin" --lengths 32768 --kv-dtype q8_0
  done
done | python3 "$(dirname "$0")/../rounds.py" summary --sort
