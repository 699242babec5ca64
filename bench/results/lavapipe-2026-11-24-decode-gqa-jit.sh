#!/bin/bash
# First dispatch (pipeline JIT + a small decode problem: split-KV pass and combine), ms median of one
# run, two fresh processes per line, Mesa's disk cache off.
B=${VKATTN:-build/release/tools/vkattn}
for shape in "1 128 f32" "1 128 f16" "1 128 bf16" "1 64 f16" "4 128 f16" "15 128 f16"; do
  set -- $shape
  for rep in 1 2; do
    ms=$(MESA_SHADER_CACHE_DISABLE=true $B bench --batch 1 --heads 32 --kv-heads 8 --seq-q $1 --seq-k 256 --dim $2 \
      --dtype $3 --warmup 0 --iters 1 --csv 2>&1 | tail -1 |
      python3 -c 'import csv,sys; r=next(csv.reader(sys.stdin)); print(r[15], "splits", r[16], "first dispatch ms", r[22])')
    echo "seq_q $1 d$2 $3: $ms"
  done
done
