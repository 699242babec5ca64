#!/usr/bin/env bash
# Issue 14: q8_0 decode with half blocks per lane (main after this change, B) against the chunk
# reader before it (A), alternating, f16 K/V as the control. GQA 32/8, d128, f16 Q/O, causal
# bottom-right, seq_q 1: batch 8 (one 32768-key sequence and seven of 512) paged 16 and dense, and
# batch 1 with 32768 keys. Then the first dispatch of the q8_0 decode with Mesa's shader cache off.
# Usage: bash this-file A-vkattn B-vkattn [rounds] [icd.json]
set -euo pipefail
a=$1 b=$2 rounds=${3:-3}
if [ -n "${4:-}" ]; then export VK_ICD_FILENAMES=$4; fi
common=(--heads 32 --kv-heads 8 --seq-q 1 --dim 128 --dtype f16 --causal bottom-right --warmup 3 --iters 10 --json)
"$b" devices | head -n 3
row() {  # label, binary, args...
  local label=$1 bin=$2; shift 2
  "$bin" bench "${common[@]}" "$@" | python3 -c "import json,sys; r=json.load(sys.stdin)['results'][0]; print('$label', r['layout'], r['kernel'], r['splits'], 'median %.1f ms min %.1f ms kv %.1f MB %.2f GB/s' % (r['ms_median'], r['ms_min'], r['kv_bytes']/1e6, r['kv_gbps']))"
}
for shape in "--lengths 32768,512,512,512,512,512,512,512 --paged 16" "--lengths 32768,512,512,512,512,512,512,512" "--batch 1 --seq-k 32768"; do
  for round in $(seq "$rounds"); do
    echo "# round $round: $shape (load $(cut -d' ' -f1 /proc/loadavg))"
    # shellcheck disable=SC2086
    for kv in "" "--kv-dtype q8_0"; do
      row "A${kv:+ q8_0}" "$a" $shape $kv
      row "B${kv:+ q8_0}" "$b" $shape $kv
    done
  done
done
echo "# first dispatch, Mesa's shader cache off: first_run_ms less the median (ms)"
for bin in "$a" "$b"; do
  for kv in "" "--kv-dtype q8_0"; do
    # shellcheck disable=SC2086
    MESA_SHADER_CACHE_DISABLE=true "$bin" bench "${common[@]}" --batch 1 --seq-k 8192 $kv |
      python3 -c "import json,sys; r=json.load(sys.stdin)['results'][0]; print('$bin', r['layout'], 'first %.0f ms, pipelines %s, median %.1f ms' % (r['first_run_ms'] - r['ms_median'], r['first_run_pipelines'], r['ms_median']))"
  done
done
