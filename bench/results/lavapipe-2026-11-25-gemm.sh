#!/bin/bash
# The GEMM on lavapipe, before (gemm.comp, what CPU devices ran) and after (gemm_subgroup.comp), in
# one run with the two builds alternating round by round (a shared, busy machine: compare within a
# round; min and median over the rounds). Raw lines go to stdout; lavapipe-2026-11-25-gemm.txt has
# them and the table made from them.
#   BEFORE=<build dir> AFTER=<build dir> [ROUNDS=3] bench/results/lavapipe-2026-11-25-gemm.sh
# Each build dir has bench/vkattn_gemm_bench and tools/vkattn.
set -u
BEFORE=${BEFORE:?set BEFORE to the old build directory}
AFTER=${AFTER:?set AFTER to the new build directory}
ROUNDS=${ROUNDS:-3}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
vulkaninfo --summary 2>/dev/null | grep -E "deviceName|driverInfo" | sed 's/^\s*/# /'

# The layer's inputs: E 512, 8 heads, one sequence of 1024 tokens (self-attention), f32.
/usr/bin/python3 - "$WORK" <<'EOF'
import sys, numpy as np
d = sys.argv[1]; rng = np.random.default_rng(1); E = 512
np.savez(f"{d}/w.npz", **{"in_proj_weight": (rng.standard_normal((3 * E, E)) / np.sqrt(E)).astype(np.float32),
                          "in_proj_bias": rng.standard_normal(3 * E).astype(np.float32) * 0.1,
                          "out_proj.weight": (rng.standard_normal((E, E)) / np.sqrt(E)).astype(np.float32),
                          "out_proj.bias": rng.standard_normal(E).astype(np.float32) * 0.1})
np.save(f"{d}/x.npy", rng.standard_normal((1, 1024, E)).astype(np.float32))
EOF

GEMMS=("--op scores --m 1024 --n 1024 --k 64" "--op scores --m 1024 --n 1024 --k 64 --dtype f16"
       "--op pv --m 1024 --n 64 --k 1024" "--op pv --m 1024 --n 64 --k 1024 --dtype f16"
       "--op linear --m 1024 --n 512 --k 512" "--op linear --m 1024 --n 512 --k 512 --dtype f16")
PATHS=("1 f32" "8 f32" "8 f16")

csv() {  # the named columns of the last row of `vkattn bench --csv` (its device name holds a comma)
  /usr/bin/python3 -c 'import csv, sys; rows = list(csv.DictReader(sys.stdin)); print(" ".join(rows[-1][c] for c in sys.argv[1:]))' "$@"
}

layer() {  # seconds of one `vkattn mha` process (device setup, files, the forward pass)
  local t0 t1
  t0=$(date +%s.%N)
  "$1/tools/vkattn" mha --weights "$WORK/w.npz" --query "$WORK/x.npy" --heads 8 --path "$2" --out "$WORK/o.npy" >/dev/null || echo "mha failed"
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc
}

# Warm Mesa's disk cache for both builds, so that JIT stays out of the timed rounds.
for dir in "$BEFORE" "$AFTER"; do
  for g in "${GEMMS[@]}"; do "$dir/bench/vkattn_gemm_bench" $g --warmup 0 --iters 1 >/dev/null; done
  for p in "${PATHS[@]}"; do set -- $p; "$dir/tools/vkattn" bench --batch 1 --heads $1 --seq-q 1024 --dim 64 --dtype $2 --path unfused --warmup 0 --iters 1 >/dev/null; done
  layer "$dir" fused >/dev/null; layer "$dir" unfused >/dev/null
done

for round in $(seq "$ROUNDS"); do
  for side in before after; do
    dir=$BEFORE; [ $side = after ] && dir=$AFTER
    echo "## round $round $side (load $(cut -d' ' -f1 /proc/loadavg))"
    for g in "${GEMMS[@]}"; do
      echo "gemm $side $("$dir/bench/vkattn_gemm_bench" $g --iters 10 | cut -d';' -f1)"
    done
    for p in "${PATHS[@]}"; do
      set -- $p
      # the three-stage path (S, masked softmax, P·V; P written)
      echo "unfused $side B1 H$1 S1024 d64 $2: ms_median ms_min TFLOP/s $("$dir/tools/vkattn" bench --batch 1 --heads $1 --seq-q 1024 \
        --dim 64 --dtype $2 --path unfused --csv --iters 10 | csv ms_median ms_min tflops)"
    done
    echo "layer $side E512 H8 S1024 f32 fused: $(layer "$dir" fused) s, unfused: $(layer "$dir" unfused) s"
  done
done

# First dispatch with Mesa's disk cache off (the pipeline's JIT happens there on lavapipe), two fresh
# processes per line: the GEMM's pipelines alone (small shapes, the tiles the library uses), and
# the three-stage path's three pipelines together (vkattn bench, seq 32).
echo "## first dispatch, MESA_SHADER_CACHE_DISABLE=true"
for side in before after; do
  dir=$BEFORE; [ $side = after ] && dir=$AFTER
  for g in "--op scores --m 64 --n 64 --k 64" "--op scores --m 64 --n 64 --k 64 --dtype f16" "--op scores --m 1 --n 256 --k 64 --dtype f16" \
           "--op pv --m 64 --n 64 --k 64" "--op pv --m 64 --n 64 --k 64 --dtype f16" "--op pv --m 1 --n 128 --k 256 --dtype f16" \
           "--op linear --m 64 --n 64 --k 64" "--op linear --m 64 --n 64 --k 64 --dtype bf16"; do
    for rep in 1 2; do
      echo "jit $side $g: $(MESA_SHADER_CACHE_DISABLE=true "$dir/bench/vkattn_gemm_bench" $g --warmup 0 --iters 1 | grep -o 'kernel .*(cpu [0-9.]*)')"
    done
  done
  for dtype in f32 f16; do
    for rep in 1 2; do
      echo "jit $side unfused path seq 32 d64 $dtype (S + softmax + P·V): $(MESA_SHADER_CACHE_DISABLE=true "$dir/tools/vkattn" bench --batch 1 \
        --heads 1 --seq-q 32 --dim 64 --dtype $dtype --path unfused --csv --warmup 0 --iters 1 | csv ms_median) ms"
    done
  done
done
