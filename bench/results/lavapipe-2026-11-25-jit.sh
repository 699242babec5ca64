#!/bin/bash
# usage: lavapipe-2026-11-25-jit.sh VKATTN [ICD...]
# First-dispatch (JIT) time of the pipelines of issue 12's shapes, Mesa's shader cache empty: each
# shape runs in a fresh process with MESA_SHADER_CACHE_DIR pointing at a new empty directory, once on
# the system's lavapipe and once per ICD manifest given (VK_DRIVER_FILES). `vkattn bench` reports the
# shape's first run apart (first_run_ms, with the pipelines it built); minus the median of the timed
# runs that follow, it is what building and JIT-compiling those pipelines cost.
vkattn=$1; shift
shapes=(
  "prefill_d64_f32|--heads 8 --seq-q 1024 --dim 64 --dtype f32"
  "prefill_d64_f16|--heads 8 --seq-q 1024 --dim 64 --dtype f16"
  "prefill_d128_f16|--heads 8 --seq-q 1024 --dim 128 --dtype f16"
  "decode_8k_f16|--heads 32 --kv-heads 8 --seq-q 1 --seq-k 8192 --dim 128 --dtype f16"
  "decode_8k_f32|--heads 32 --kv-heads 8 --seq-q 1 --seq-k 8192 --dim 128 --dtype f32"
  "unfused_d64_f32|--heads 8 --seq-q 1024 --dim 64 --dtype f32 --path unfused"
  "unfused_d64_f16|--heads 8 --seq-q 1024 --dim 64 --dtype f16 --path unfused"
)
echo "driver,shape,kernel,first_run_ms,first_run_pipelines,ms_median,jit_ms"
for driver in system "$@"; do
  for entry in "${shapes[@]}"; do
    name=${entry%%|*}; args=${entry#*|}
    cache=$(mktemp -d)
    if [ "$driver" = system ]; then env_driver=(); else env_driver=(VK_DRIVER_FILES="$driver"); fi
    json=$(env "${env_driver[@]}" MESA_SHADER_CACHE_DIR="$cache" "$vkattn" bench $args --warmup 1 --iters 3 --json)
    rm -rf "$cache"
    python3 -c '
import json, sys
d = json.loads(sys.argv[3]); r = d["results"][0]
print(",".join([d["driver"], sys.argv[2], str(r["kernel"]), "%.0f" % r["first_run_ms"], str(r["first_run_pipelines"]),
                "%.1f" % r["ms_median"], "%.0f" % (r["first_run_ms"] - r["ms_median"])]))' \
      "$driver" "$name" "$json"
  done
done
