#!/bin/bash
# usage: lavapipe-2026-11-25-jit.sh VKATTN [ICD...]
# First-dispatch (JIT) time of the pipelines of issue 12's shapes, Mesa's shader cache empty: the
# shapes measured on 2026-11-25, through bench/first_dispatch.sh (a fresh process and an empty
# MESA_SHADER_CACHE_DIR per shape, once on the system's lavapipe and once per ICD manifest given;
# first_run_ms less the median run is what building and JIT-compiling the pipelines cost).
set -euo pipefail
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
shape_args=()
for shape in "${shapes[@]}"; do shape_args+=(--shape "$shape"); done
exec bash "$(dirname "$0")/../first_dispatch.sh" "$vkattn" "${shape_args[@]}" "$@"
