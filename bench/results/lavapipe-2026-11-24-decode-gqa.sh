#!/bin/bash
# Decode GQA on lavapipe: the old automatic choice (tiled) vs the new one (subgroup, GQA-packed),
# alternating, 3 rounds; one CSV line per run (the first column is the round).
B=${VKATTN:-build/release/tools/vkattn}
for round in 1 2 3; do
  for shape in "1 8192" "1 32768" "8 8192"; do
    set -- $shape
    for k in tiled auto; do
      $B bench --batch $1 --heads 32 --kv-heads 8 --seq-q 1 --seq-k $2 --dim 128 --dtype f16 --kernel $k \
        --warmup 1 --iters 5 --csv 2>&1 | tail -1 | sed "s/^/$round,/"
    done
  done
done
