#!/usr/bin/env bash
# The third run of vkattn on a GPU (a lent NVIDIA H100 machine, 2026-11-27): the subgroup kernel's
# decode form as the GPU decode kernel (key groups of 16 lanes at d128 f16, many splits), against
# the tiled kernel that was the GPU default, then the conformance suite on the kernels the plans pick
# (`--path fused-auto`), then PyTorch SDPA on the same grid (bench/compare_torch.py).
#
# Run from the repository root with:
#   V      the vkattn binary (built on Debian bookworm, release preset)
#   DEBS   a folder with bookworm's libvulkan1, glvnd and libpng16-16 .debs (the image has the NVIDIA
#          driver but not the loader)
#   OUT    where the logs go: gpu-logs-c.tgz, rewritten after every step
# Every step has its own time limit so that one slow step cannot eat the others.
set -u
: "${V:?}" "${DEBS:?}" "${OUT:?}"
W=/tmp/gpu-logs; mkdir -p $W
# The named columns of every bench CSV row on stdin (error lines as they are).
pick() { python3 -c '
import csv, sys
lines = sys.stdin.read().splitlines()
header = next((l for l in lines if l.startswith("device,")), None)
for l in lines:
    if l.startswith("device,"): continue
    if header is None or not l.startswith("\""):
        print(l); continue
    row = next(csv.DictReader([header, l]))
    def short(v):
        try: return "%.4g" % float(v)
        except ValueError: return v
    print(" ".join(c + "=" + short(row.get(c, "?")) for c in sys.argv[1:] if row.get(c)))' "$@"; }
COLS="layout kernel splits ms_median ms_min kv_gbps copy_transfer_gbps copy_shader_gbps first_run_ms max_err_over_max_v status"
log() { tar -C $W -czf "$OUT/gpu-logs-c.tgz" . 2>/dev/null; echo "== $(date -u +%T) $*"; }
for f in "$DEBS"/*.deb; do case $f in *libpng*) ;; *) dpkg -x "$f" /;; esac; done
mkdir -p /tmp/extra && dpkg -x "$DEBS"/libpng16-16_*.deb /tmp/extra && ldconfig
export LD_LIBRARY_PATH=/tmp/extra/usr/lib/x86_64-linux-gnu:/tmp/extra/lib/x86_64-linux-gnu
export VKATTN_DEVICE=nvidia
"$V" devices | tee "$W/devices.txt" | grep -i "nvidia\|NaN\|subgroup" || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee -a "$W/devices.txt"

D="--heads 32 --kv-heads 8 --dim 128 --seq-q 1 --dtype f16 --causal bottom-right"
L=32768,512,512,512,512,512,512,512
log "decode batch 1, GQA 32/8 d128 f16: tiled (the old default) against auto (the decode form), alternating"
for round in 1 2; do
  for sk in 8192 32768; do
    for k in tiled auto; do
      echo "round $round seq_k $sk kernel $k: $(timeout 20 "$V" bench $D --seq-k $sk --kernel $k --copy --check --csv 2>&1 | pick $COLS)"
    done
  done
done 2>&1 | tee "$W/decode-b1.txt"
log "decode form, --splits, batch 1 x 32768"
for s in 32 64 128 256 512 1024; do
  echo "splits $s: $(timeout 20 "$V" bench $D --seq-k 32768 --kernel subgroup --splits $s --check --csv 2>&1 | pick $COLS)"
done 2>&1 | tee "$W/decode-splits-b1.txt"
log "issue 14's batch (32768 + 7 x 512), paged 16: tiled against auto, then --splits on the decode form"
for round in 1 2; do
  for k in tiled auto; do
    echo "round $round paged f16 $k: $(timeout 20 "$V" bench $D --lengths $L --paged 16 --kernel $k --check --csv 2>&1 | pick $COLS)"
  done
  echo "round $round paged q8_0 auto: $(timeout 20 "$V" bench $D --lengths $L --paged 16 --kv-dtype q8_0 --check --csv 2>&1 | pick $COLS)"
  echo "round $round varlen f16 auto: $(timeout 20 "$V" bench $D --lengths $L --varlen --check --csv 2>&1 | pick $COLS)"
done 2>&1 | tee "$W/decode-batch8.txt"
for s in 32 64 128 256 512; do
  echo "paged f16 splits $s: $(timeout 20 "$V" bench $D --lengths $L --paged 16 --kernel subgroup --splits $s --check --csv 2>&1 | pick $COLS)"
done 2>&1 | tee -a "$W/decode-batch8.txt"
log "other decode shapes: d64, MHA 32/32, seq_q 4 (16 packed rows), f32"
for x in "--heads 32 --kv-heads 8 --dim 64 --seq-q 1 --dtype f16 --seq-k 32768" \
         "--heads 32 --kv-heads 32 --dim 128 --seq-q 1 --dtype f16 --seq-k 8192" \
         "--heads 32 --kv-heads 8 --dim 128 --seq-q 4 --dtype f16 --seq-k 32768 --causal bottom-right" \
         "--heads 32 --kv-heads 8 --dim 128 --seq-q 1 --dtype f32 --seq-k 32768"; do
  for k in tiled auto; do
    echo "$x $k: $(timeout 20 "$V" bench $x --kernel $k --check --csv 2>&1 | pick $COLS)"
  done
done 2>&1 | tee "$W/decode-other.txt"

log "conformance on the kernels the plans pick (fused-auto), 16 shards"
for k in $(seq 1 16); do
  timeout 150 "$V" conform --path fused-auto --shard $k/16 > "$W/conform-$k.log" 2>&1 &
done
wait
for k in $(seq 1 16); do echo "shard $k: $(tail -n 1 "$W/conform-$k.log")"; done | tee "$W/conform-summary.txt"
grep -h "FAIL" "$W"/conform-*.log | head -20

log "PyTorch SDPA side by side (bench/compare_torch.py)"
mkdir -p "$W/torch"
PYTHONUNBUFFERED=1 timeout 60 python3 bench/compare_torch.py --vkattn "$V" --presets decode --budget 0.3 \
  --results-dir "$W/torch" --no-plot 2>&1 | tail -n 40 | tee "$W/torch-decode.txt"
log "PyTorch SDPA, prefill up to 8192"
PYTHONUNBUFFERED=1 timeout 120 python3 bench/compare_torch.py --vkattn "$V" --presets prefill --max-seq 8192 \
  --budget 0.2 --results-dir "$W/torch" --no-plot 2>&1 | tail -n 60 | tee "$W/torch-prefill.txt"
log done
