#!/usr/bin/env bash
# Dense K/V beyond one storage-buffer binding (128 MiB on lavapipe): one batch to a chunk (before)
# against as many whole batches as fit (after), alternating builds, every shape in each round.
# Issue 14's mixed batch (32768 + 7 x 512 keys, K/V padded to 32768 with key lengths: 512 MiB each
# in f16, 285 MiB in q8_0; GQA 32/8, d128, causal bottom-right) with f16 and q8_0 K/V, and 14
# batches of 20000 keys, 2 KV heads, d64, f32 (143 MB: the conformance case long-binding/1).
# Usage: bash this-file BEFORE_VKATTN AFTER_VKATTN ROUNDS [icd.json]
set -euo pipefail
before=$1 after=$2 rounds=$3
if [ -n "${4:-}" ]; then export VK_DRIVER_FILES=$4; fi
rounds_py="$(dirname "$0")/../rounds.py"
mixed=(--heads 32 --kv-heads 8 --seq-q 1 --dim 128 --dtype f16 --causal bottom-right
       --lengths 32768,512,512,512,512,512,512,512 --warmup 3 --iters 20 --json)
b14=(--batch 14 --heads 4 --kv-heads 2 --seq-q 2 --seq-k 20000 --dim 64 --dtype f32 --warmup 2 --iters 10 --json)
for round in $(seq "$rounds"); do
  for build in before after; do
    bin=$before; [ "$build" = after ] && bin=$after
    "$bin" bench "${mixed[@]}" | python3 "$rounds_py" line "mixed-f16-$build"
    "$bin" bench "${mixed[@]}" --kv-dtype q8_0 | python3 "$rounds_py" line "mixed-q8_0-$build"
    "$bin" bench "${b14[@]}" | python3 "$rounds_py" line "b14-f32-$build"
  done
done | python3 "$rounds_py" summary --sort
