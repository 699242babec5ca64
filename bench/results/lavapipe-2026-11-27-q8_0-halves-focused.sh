#!/usr/bin/env bash
# The q8_0 half-block reader, focused: one shape, many alternating rounds (this machine's noise is
# +-30% between neighbouring runs). A = before, B = after; f16 through B as the control.
# Usage: bash this-file A-vkattn B-vkattn rounds "shape args" [icd.json]
set -euo pipefail
a=$1 b=$2 rounds=$3 shape=$4
if [ -n "${5:-}" ]; then export VK_ICD_FILENAMES=$5; fi
common=(--heads 32 --kv-heads 8 --seq-q 1 --dim 128 --dtype f16 --causal bottom-right --warmup 3 --iters 20 --json)
one() {  # label, binary, args...
  local label=$1 bin=$2; shift 2
  "$bin" bench "${common[@]}" "$@" | python3 -c "import json,sys; r=json.load(sys.stdin)['results'][0]; print('$label', 'median %.2f min %.2f' % (r['ms_median'], r['ms_min']))"
}
for round in $(seq "$rounds"); do
  # shellcheck disable=SC2086
  one "A q8_0" "$a" $shape --kv-dtype q8_0
  # shellcheck disable=SC2086
  one "B q8_0" "$b" $shape --kv-dtype q8_0
  # shellcheck disable=SC2086
  one "B f16" "$b" $shape
done | python3 -c "
import sys, statistics, collections
rows = collections.defaultdict(list)
for line in sys.stdin:
    print(line, end='')
    label, rest = line.rsplit(' median ', 1)
    med, _, mn = rest.split()
    rows[label].append((float(med), float(mn)))
for label, v in rows.items():
    print('%-8s rounds %d: median of medians %.2f ms, min %.2f ms' % (label, len(v), statistics.median(x[0] for x in v), min(x[1] for x in v)))
"
