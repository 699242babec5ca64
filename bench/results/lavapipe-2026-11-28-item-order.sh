#!/usr/bin/env bash
# Work-list items in list order (before) against bit-reversed order over the grid, and at least 2
# splits for the decode form with key lengths on a CPU device, so that a work list always runs (after);
# alternating builds, every shape in each round. Decode, GQA 32/8, d128, causal bottom-right, a long
# sequence beside short ones, where list order (or the batch order of an unsplit grid) put all the
# long one's work in one contiguous run of the grid (lavapipe hands each thread one such run): dense
# with key lengths, issue 14's batch (32768 + 7 x 512 keys) paged hnd and nhd (pages of 16) and
# packed (varlen); batch 1, and two equal sequences, as controls.
# Usage: bash this-file BEFORE_VKATTN AFTER_VKATTN ROUNDS [icd.json]
set -euo pipefail
before=$1 after=$2 rounds=$3
if [ -n "${4:-}" ]; then export VK_DRIVER_FILES=$4; fi
rounds_py="$(dirname "$0")/../rounds.py"
common=(--heads 32 --kv-heads 8 --seq-q 1 --dim 128 --dtype f16 --causal bottom-right --warmup 3 --iters 20 --json)
mixed=32768,512,512,512,512,512,512,512
shapes=("b1-q8_0|--lengths 32768 --kv-dtype q8_0"
        "long+2short-dense-q8_0|--lengths 32768,512,512 --kv-dtype q8_0"
        "long+2short-dense-f16|--lengths 16384,256,256"
        "long+6short-dense-f16|--lengths 8192,256,256,256,256,256,256"
        "2equal-dense-f16|--lengths 16384,16384"
        "mixed-hnd-f16|--lengths $mixed --paged 16 --page-order hnd"
        "mixed-hnd-q8_0|--lengths $mixed --paged 16 --page-order hnd --kv-dtype q8_0"
        "mixed-nhd-f16|--lengths $mixed --paged 16"
        "mixed-nhd-q8_0|--lengths $mixed --paged 16 --kv-dtype q8_0"
        "mixed-varlen-f16|--lengths $mixed --varlen")
for round in $(seq "$rounds"); do
  for build in before after; do
    bin=$before; [ "$build" = after ] && bin=$after
    for shape in "${shapes[@]}"; do
      # shellcheck disable=SC2086  # the shape's arguments are words
      "$bin" bench "${common[@]}" ${shape#*|} | python3 "$rounds_py" line "${shape%%|*}-$build"
    done
  done
done | python3 "$rounds_py" summary --sort
