#!/usr/bin/env bash
# Issue 14: decode with K/V as f16 and as q8_0, dense and paged (page 16), alternated in one run.
# GQA 32/8, dim 128, f16 Q/O, causal bottom-right, seq_q 1; batch 8 with one 32768-key sequence and
# seven of 512 (dense: kv_lengths), and batch 1 with 32768 keys. Usage: bash this-file [vkattn] [rounds]
set -euo pipefail
vkattn=${1:-build/release/tools/vkattn}
rounds=${2:-3}
common=(--heads 32 --kv-heads 8 --seq-q 1 --dim 128 --dtype f16 --causal bottom-right --warmup 3 --iters 10 --csv)
"$vkattn" devices | head -n 3
for shape in "--lengths 32768,512,512,512,512,512,512,512" "--batch 1 --seq-k 32768"; do
  for round in $(seq "$rounds"); do
    for layout in "" "--paged 16"; do
      for kv in "" "--kv-dtype q8_0"; do
        echo "# round $round: $shape $layout $kv (load $(cut -d' ' -f1 /proc/loadavg))"
        # shellcheck disable=SC2086
        "$vkattn" bench "${common[@]}" $shape $layout $kv | tail -n 1
      done
    done
  done
done
