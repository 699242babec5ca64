#!/bin/bash
# usage: lavapipe-2026-11-25-window.sh VKATTN [ROUNDS]
# A sliding window is work skipped, not masked (issue 13): prefill B1 H8 d64 f16, causal
# bottom-right with a window of 512 keys (--window 512:0, Mistral's shape), seq 2048 -> 16384, on
# the device's default kernel; each round times every length once, and the rounds alternate with
# the same lengths without the window (causal only, up to 8192: the full square grows as seq^2).
# Prints vkattn bench's CSV rows (ms_median, tflops, first_run_ms ...) with a round column.
vkattn=$1; rounds=${2:-2}
echo "round,run_window,$("$vkattn" bench --seq-q 64 --dim 64 --csv --warmup 0 --iters 1 2>/dev/null | head -1)"
for r in $(seq 1 "$rounds"); do
  for s in 2048 4096 8192 16384; do
    row=$("$vkattn" bench --heads 8 --seq-q "$s" --dim 64 --dtype f16 --causal bottom-right --window 512:0 \
          --warmup 2 --iters 5 --csv | tail -1)
    echo "$r,512:0,$row"
  done
  for s in 2048 4096 8192; do
    row=$("$vkattn" bench --heads 8 --seq-q "$s" --dim 64 --dtype f16 --causal bottom-right \
          --warmup 1 --iters 3 --csv | tail -1)
    echo "$r,none,$row"
  done
done
