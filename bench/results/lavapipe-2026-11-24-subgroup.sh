#!/bin/bash
# Alternating rowwise vs subgroup, 3 rounds; one CSV line per run.
B=${VKATTN:-build/release/tools/vkattn}
for round in 1 2 3; do
  for shape in "64 f32" "64 f16" "128 f32" "128 f16"; do
    set -- $shape
    for k in rowwise subgroup; do
      $B bench --batch 1 --heads 8 --seq-q 1024 --dim $1 --dtype $2 --kernel $k --warmup 2 --iters 5 --csv 2>&1 | tail -1 | sed "s/^/$round,/"
    done
  done
done
