#!/usr/bin/env bash
# Issue 12's targets on today's build, one process each, twice: fused prefill (8 heads, 1024 x 1024)
# at d64 f32 and f16 and d128 f16, decode (GQA 32/8, d128, f16, 32768 keys) with the copy shader
# and vkCmdCopyBuffer in the same run (--copy), and the three-stage path's GEMM at 1024 x 1024 x 64.
# Usage: bash this-file BUILD_DIR (e.g. build/release)
set -euo pipefail
build=$1
vkattn=$build/tools/vkattn
for round in 1 2; do
  for dtype in f32 f16; do
    "$vkattn" bench --heads 8 --seq-q 1024 --dim 64 --dtype "$dtype" --warmup 2 --iters 10 --json |
      python3 -c 'import json, sys; r = json.load(sys.stdin)["results"][0]; print("round %s prefill d64 %s: %.2f ms, %.1f GFLOP/s" % (sys.argv[1], sys.argv[2], r["ms_median"], 4 * 8 * 1024 * 1024 * 64 / r["ms_median"] / 1e6))' "$round" "$dtype"
  done
  "$vkattn" bench --heads 8 --seq-q 1024 --dim 128 --dtype f16 --warmup 2 --iters 10 --json |
    python3 -c 'import json, sys; r = json.load(sys.stdin)["results"][0]; print("round %s prefill d128 f16: %.2f ms, %.1f GFLOP/s" % (sys.argv[1], r["ms_median"], 4 * 8 * 1024 * 1024 * 128 / r["ms_median"] / 1e6))' "$round"
  "$vkattn" bench --heads 32 --kv-heads 8 --seq-q 1 --seq-k 32768 --dim 128 --dtype f16 --warmup 3 --iters 20 --copy --json |
    python3 -c 'import json, sys; r = json.load(sys.stdin)["results"][0]; print("round %s decode 32k: %.2f ms, K/V %.2f GB/s, copy shader %.2f GB/s, vkCmdCopyBuffer %.2f GB/s" % (sys.argv[1], r["ms_median"], r["kv_gbps"], r["copy_shader_gbps"], r["copy_transfer_gbps"]))' "$round"
  echo "round $round GEMM: $("$build/bench/vkattn_gemm_bench" --op scores --m 1024 --n 1024 --k 64 --dtype f32 --warmup 3 --iters 20 | tail -1)"
done
