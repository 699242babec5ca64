#!/bin/bash
# usage: lavapipe-2026-11-25-tiled-rebuild.sh BEFORE_VKATTN AFTER_VKATTN ROUNDS
# The rebuilt tiled kernel (074c0f5..198d185) against the one before it, forced with --kernel tiled,
# alternating; one CSV row per run (vkattn bench --csv), prefixed by round, side and shape.
out=/tmp/bench_$(date +%H%M%S).csv
for r in $(seq 1 $3); do
 for which in before after; do
  bin=$1; [ $which = after ] && bin=$2
  p=$($bin bench --batch 1 --heads 8 --seq-q 1024 --dim 64 --dtype f32 --kernel tiled --csv 2>/dev/null | tail -1)
  echo "$r,$which,prefill_f32,$p" >> $out
  p=$($bin bench --batch 1 --heads 8 --seq-q 1024 --dim 64 --dtype f16 --kernel tiled --csv 2>/dev/null | tail -1)
  echo "$r,$which,prefill_f16,$p" >> $out
  p=$($bin bench --batch 1 --heads 32 --kv-heads 8 --seq-q 1 --seq-k 8192 --dim 128 --dtype f16 --kernel tiled --csv 2>/dev/null | tail -1)
  echo "$r,$which,decode_f16,$p" >> $out
 done
done
echo $out
