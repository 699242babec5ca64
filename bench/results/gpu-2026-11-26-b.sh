#!/usr/bin/env bash
# The second run on the lent H100 (2026-11-26), after the first (gpu-2026-11-26.sh) found NaN query
# rows coming out as 0 from the tiled kernel. Checks the fix (SignedZeroInfNanPreserve on every
# module: `vkattn devices` says "NaN/Inf preserved yes"), runs the conformance sweep on the GPU
# kernels, the issue-12 prefill shapes again (the mode's cost), and sweeps --splits on the two decode
# shapes that were slow (batch 1 x 32768 keys; batch 8: 32768 + 7 x 512, paged 16).
# Same inputs as the first script: V, DEBS, OUT.
set -u
: "${V:?}" "${DEBS:?}" "${OUT:?}"
W=/tmp/gpu-logs; mkdir -p $W
# The named columns of a bench CSV's last row.
pick() { python3 -c '
import csv, sys
rows = list(csv.DictReader(l for l in sys.stdin if l.startswith(("device,", "\"", "NVIDIA"))))
print(" ".join(c + "=" + rows[-1].get(c, "?") for c in sys.argv[1:]) if rows else "no result")' "$@"; }
log() { tar -C $W -czf "$OUT/gpu-logs-b.tgz" . 2>/dev/null; echo "== $(date -u +%T) $*"; }
for f in "$DEBS"/libvulkan1_*.deb "$DEBS"/libglvnd0_*.deb "$DEBS"/libegl1_*.deb "$DEBS"/libgl1_*.deb \
         "$DEBS"/libglx0_*.deb "$DEBS"/libopengl0_*.deb "$DEBS"/libgles2_*.deb; do dpkg -x "$f" /; done
mkdir -p /tmp/extra && dpkg -x "$DEBS"/libpng16-16_*.deb /tmp/extra && ldconfig
export LD_LIBRARY_PATH=/tmp/extra/usr/lib/x86_64-linux-gnu:/tmp/extra/lib/x86_64-linux-gnu
export VKATTN_DEVICE=nvidia
"$V" devices | tee "$W/devices.txt" | grep -i "nvidia\|NaN" || exit 1

log "the failing cases, then the sweep on the GPU kernels (8 shards)"
timeout 40 "$V" conform --filter 'masks-nan-rows*' --path fused-tiled --path fused-rowwise --path unfused 2>&1 | tail -4
for k in 1 2 3 4 5 6 7 8; do
  timeout 60 "$V" conform --path fused-tiled --path unfused --shard $k/8 > "$W/conform-$k.log" 2>&1 &
done
wait
for k in 1 2 3 4 5 6 7 8; do echo "shard $k: $(tail -1 "$W/conform-$k.log")"; done
grep -h "^FAIL" "$W"/conform-*.log | head -10

log "prefill (tiled), the issue-12 shapes"
for dt in f32 f16; do
  timeout 15 "$V" bench --dtype $dt --heads 8 --seq-q 1024 --dim 64 --check --csv 2>&1 | pick dtype dim_qk kernel splits ms_median ms_min tflops max_err_over_max_v
done
timeout 15 "$V" bench --dtype f16 --heads 8 --seq-q 1024 --dim 128 --check --csv 2>&1 | pick dtype dim_qk kernel splits ms_median ms_min tflops max_err_over_max_v

log "decode, --splits: batch 1 x 32768 keys (dtype, kernel, splits, chunks, ms_median, ms_min, TFLOP/s, kv_GB/s)"
D="--heads 32 --kv-heads 8 --dim 128 --seq-q 1 --dtype f16 --causal bottom-right"
for s in auto 32 64 128 256 512; do
  x=""; [ $s = auto ] || x="--splits $s"
  timeout 15 "$V" bench $D --seq-k 32768 $x --check --csv 2>&1 | pick layout kernel splits ms_median ms_min kv_gbps max_err_over_max_v status
done
log "decode, --splits: batch 8, 32768 + 7 x 512 keys, paged 16"
L=32768,512,512,512,512,512,512,512
for s in auto 32 128 512; do
  x=""; [ $s = auto ] || x="--splits $s"
  timeout 15 "$V" bench $D --lengths $L --paged 16 $x --check --csv 2>&1 | pick layout kernel splits ms_median ms_min kv_gbps max_err_over_max_v status
done
timeout 15 "$V" bench $D --lengths $L --paged 16 --kv-dtype q8_0 --splits 128 --check --csv 2>&1 | pick layout kernel splits ms_median ms_min kv_gbps max_err_over_max_v status
timeout 30 "$V" bench $D --lengths $L --splits 128 --check --csv 2>&1 | pick layout kernel splits ms_median ms_min kv_gbps max_err_over_max_v status
log done
