#!/usr/bin/env bash
# The combine pass that shares each row's splits over its workgroup (attention_combine.comp, 1f0c1ee)
# against the one before (bf017bd), on lavapipe: shapes that split, alternating the two builds,
# ROUNDS rounds. Usage: lavapipe-2026-11-27-combine.sh OLD_VKATTN NEW_VKATTN [ROUNDS]
set -u
old=$1 new=$2 rounds=${3:-3}
D="--heads 32 --kv-heads 8 --dim 128 --seq-q 1 --dtype f16 --causal bottom-right"
shapes=("$D --seq-k 32768"
        "$D --lengths 32768,512,512,512,512,512,512,512 --paged 16"
        "--heads 2 --seq-q 64 --seq-k 65536 --dim 64 --dtype f16")
cols() { python3 -c '
import csv, sys
lines = [l for l in sys.stdin.read().splitlines() if l.count(",") > 40]
rows = list(csv.DictReader(lines))
r = rows[-1] if rows else {}
print(" ".join(c + "=" + r.get(c, "?") for c in ("kernel", "splits", "ms_median", "ms_min", "status")))'; }
for round in $(seq 1 "$rounds"); do
  for s in "${shapes[@]}"; do
    for build in old new; do
      bin=$old; [ $build = new ] && bin=$new
      echo "round $round | $s | $build | $($bin bench $s --csv 2>&1 | cols)"
    done
  done
done
