#!/usr/bin/env bash
# First-dispatch (JIT) time of vkattn's pipelines on lavapipe, Mesa's shader cache empty: issue 12's
# shapes plus the dtypes and dims whose pipelines are the largest (bf16, d256, q8_0 decode). Each
# shape runs in a fresh process with MESA_SHADER_CACHE_DIR pointing at a new, empty directory, once on
# the system's driver and once per Vulkan ICD manifest given (VK_DRIVER_FILES, e.g. Mesa 25.0.7's).
# `vkattn bench` reports its first run apart (first_run_ms, with the number of pipelines it built):
# less the median of the timed runs after it, that is what building and JIT-compiling them cost.
# Per pipeline (first_dispatches: host time building it, plus its first dispatch less the same
# dispatch warm): the last column, "pipeline=ms" entries separated by ';'.
# The kernel column is what the plan chose on this device (d256 prefill: the subgroup kernel; d256
# GQA decode: the subgroup kernel's decode form).
# Usage: bash bench/first_dispatch.sh VKATTN [--shape 'NAME|BENCH ARGS']... [ICD_JSON...]   (CSV on stdout)
# --shape (repeatable) replaces the default shapes, those of bench/cases/first-dispatch.txt.
set -euo pipefail
vkattn=$1; shift
given=()
while [ "${1:-}" = --shape ]; do given+=("$2"); shift 2; done
# The default shapes: bench/cases/first-dispatch.txt (a name, then the vkattn bench arguments).
shapes=()
while read -r name args; do
  case $name in ''|'#'*) continue ;; esac
  shapes+=("$name|${args%%#*}")
done < "$(dirname "$0")/cases/first-dispatch.txt"
if [ ${#given[@]} -gt 0 ]; then shapes=("${given[@]}"); fi
echo "driver,shape,kernel,first_run_ms,first_run_pipelines,ms_median,jit_ms,per_pipeline_ms"
for driver in system "$@"; do
  for entry in "${shapes[@]}"; do
    name=${entry%%|*} args=${entry#*|}
    cache=$(mktemp -d)
    env_driver=()
    if [ "$driver" != system ]; then env_driver=(VK_DRIVER_FILES="$driver"); fi
    # shellcheck disable=SC2086  # the shape's arguments are words
    json=$(env "${env_driver[@]}" MESA_SHADER_CACHE_DIR="$cache" "$vkattn" bench $args --warmup 1 --iters 3 --json)
    rm -rf "$cache"
    python3 -c '
import json, sys
d = json.loads(sys.argv[3]); r = d["results"][0]
print(",".join([d["driver"], sys.argv[2], str(r["kernel"]), "%.0f" % r["first_run_ms"], str(r["first_run_pipelines"]),
                "%.1f" % r["ms_median"], "%.0f" % (r["first_run_ms"] - r["ms_median"]),
                ";".join("%s=%.0f" % (p["pipeline"], p["build_ms"] + p["first_ms"] - p["warm_ms"])
                         for p in r["first_dispatches"])]))' \
      "$driver" "$name" "$json"
  done
done
