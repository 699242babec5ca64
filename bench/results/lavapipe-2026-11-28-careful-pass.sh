#!/usr/bin/env bash
# The subgroup kernel's careful pass as its own pipeline (issue 12, first dispatch): prefill B1 H8
# S1024 at d64 (f32, f16) and d128 (f16), two builds side by side. First the first dispatch with
# Mesa's shader cache empty (bench/first_dispatch.sh: each build, each shape, on the system's driver
# and on each ICD given), then the timed runs, the builds alternating, several rounds.
# Usage: bash this-file BEFORE_VKATTN AFTER_VKATTN rounds [icd.json...]
set -euo pipefail
before=$1 after=$2 rounds=$3
shift 3
here=$(dirname "$0")
shapes=(
  "prefill_d64_f32|--heads 8 --seq-q 1024 --dim 64 --dtype f32"
  "prefill_d64_f16|--heads 8 --seq-q 1024 --dim 64 --dtype f16"
  "prefill_d128_f16|--heads 8 --seq-q 1024 --dim 128 --dtype f16"
)
shape_args=()
for s in "${shapes[@]}"; do shape_args+=(--shape "$s"); done
for build in before after; do
  bin=$before
  if [ "$build" = after ]; then bin=$after; fi
  echo "# first dispatch, $build"
  bash "$here/../first_dispatch.sh" "$bin" "${shape_args[@]}" "$@"
done
echo "# timed runs (ms; --warmup 2 --iters 10)"
for round in $(seq "$rounds"); do
  for s in "${shapes[@]}"; do
    name=${s%%|*} args=${s#*|}
    for build in before after; do
      bin=$before
      if [ "$build" = after ]; then bin=$after; fi
      # shellcheck disable=SC2086  # the shape's arguments are words
      "$bin" bench $args --warmup 2 --iters 10 --json | python3 "$here/../rounds.py" line "$name-$build"
    done
  done
done | python3 "$here/../rounds.py" summary
