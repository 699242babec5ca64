#!/usr/bin/env bash
# q8_0 decode with whole blocks per lane (branch q8-decode-blocks, 742ba8b; not merged) against main,
# on both lavapipe versions: decode time with a warm shader cache (3 rounds, the binaries alternating),
# then the first dispatch with a cold one. GQA 32/8, d128, f16 Q, causal, seq_q 1.
#   A=main's vkattn B=the branch's vkattn M25=Mesa 25.0.7's ICD file bash this-script
set -u
: "${A:?}" "${B:?}" "${M25:?}"
D="--heads 32 --kv-heads 8 --dim 128 --seq-q 1 --dtype f16 --causal bottom-right --iters 10 --warmup 2 --json"
L=32768,512,512,512,512,512,512,512
row() { python3 -c "import json,sys; d=json.load(sys.stdin); r=d['results'][0]; print(f\"{r['layout']:<14} {r['seq_k']:>6} ms_median {r['ms_median']:8.2f} ms_min {r['ms_min']:8.2f} kv_GB/s {r['kv_gbps']:.3f} first_ms {r['first_run_ms']:8.0f}\")"; }
for round in 1 2 3; do
  for drv in 22 25; do
    for bin in A B; do
      V=${!bin}
      for shape in "--seq-k 32768" "--seq-k 32768 --kv-dtype q8_0" "--lengths $L --paged 16" "--lengths $L --paged 16 --kv-dtype q8_0"; do
        printf "round %s mesa %s %s: " $round $drv $bin
        if [ $drv = 25 ]; then VK_DRIVER_FILES=$M25 $V bench $D $shape | row; else $V bench $D $shape | row; fi
      done
    done
  done
done
echo "first dispatch, cold shader cache (q8_0, 2048 keys: the decode and combine pipelines)"
for drv in 22 25; do
  for bin in A B; do
    V=${!bin}
    rm -rf ~/.cache/mesa_shader_cache ~/.cache/mesa_shader_cache_db
    printf "mesa %s %s: " $drv $bin
    if [ $drv = 25 ]; then VK_DRIVER_FILES=$M25 $V bench $D --seq-k 2048 --kv-dtype q8_0 | row; else $V bench $D --seq-k 2048 --kv-dtype q8_0 | row; fi
  done
done
