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
  "$bin" bench "${common[@]}" "$@" | python3 -c "import json,sys; r=json.load(sys.stdin)['results'][0]; print('$label', 'median %.2f min %.2f kv_GB/s %.2f' % (r['ms_median'], r['ms_min'], r['kv_gbps']))"
}
for round in $(seq "$rounds"); do
  for kv in f16 q8_0; do
    extra=(); if [ "$kv" = q8_0 ]; then extra=(--kv-dtype q8_0); fi
    one "dense-$kv" "${extra[@]}"
    one "paged16-nhd-$kv" --paged 16 "${extra[@]}"
    one "paged16-hnd-$kv" --paged 16 --page-order hnd "${extra[@]}"
  done
done | python3 -c "
import sys, statistics, collections
rows = collections.defaultdict(list)
for line in sys.stdin:
    print(line, end='', flush=True)
    label, rest = line.split(' ', 1)
    f = rest.split()
    rows[label].append((float(f[1]), float(f[3]), float(f[5])))
print()
for label, v in rows.items():
    print('%-18s rounds %d: median of medians %.2f ms, min %.2f ms, kv GB/s (median) %.2f' % (label, len(v), statistics.median(x[0] for x in v), min(x[1] for x in v), statistics.median(x[2] for x in v)))
"
