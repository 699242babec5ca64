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
  "$bin" bench "${common[@]}" "$@" | python3 -c "import json,sys; r=json.load(sys.stdin)['results'][0]; print('$label', 'median %.2f min %.2f kv_GB/s %.2f' % (r['ms_median'], r['ms_min'], r['kv_gbps']))"
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
done | python3 -c "
import sys, statistics, collections
rows = collections.defaultdict(list)
for line in sys.stdin:
    print(line, end='', flush=True)
    label, rest = line.split(' ', 1)
    f = rest.split()
    rows[label].append((float(f[1]), float(f[3]), float(f[5])))
print()
for label, v in sorted(rows.items()):
    print('%-20s rounds %d: median of medians %.2f ms, min %.2f ms, kv GB/s (median) %.2f' % (label, len(v), statistics.median(x[0] for x in v), min(x[1] for x in v), statistics.median(x[2] for x in v)))
"
