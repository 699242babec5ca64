#!/usr/bin/env bash
# The second run of 2026-11-27 on the lent H100, after the first (gpu-2026-11-27.sh) showed the
# combine pass, one invocation looping over every split of a row, taking most of the time at
# hundreds of splits. With the combine sharing the splits over its workgroup: the --splits sweeps
# again (the planner's split rule for the decode form comes from them), the conformance suite on
# the kernels the plans pick, and PyTorch SDPA (decode, then prefill up to 4096).
# Same inputs as gpu-2026-11-27.sh: V, DEBS, OUT.
set -u
: "${V:?}" "${DEBS:?}" "${OUT:?}"
W=/tmp/gpu-logs; mkdir -p $W
# The named columns of each bench CSV row on stdin (other lines as they are).
pick() { python3 -c '
import csv, sys
lines = sys.stdin.read().splitlines()
header = next((l for l in lines if l.startswith("device,")), None)
for l in lines:
    if l.startswith("device,"): continue
    if header is None or l.count(",") < 40:
        print(l); continue
    row = next(csv.DictReader([header, l]))
    def short(v):
        try: return "%.4g" % float(v)
        except ValueError: return v
    print(" ".join(c + "=" + short(row.get(c, "?")) for c in sys.argv[1:] if row.get(c)))' "$@"; }
COLS="kernel splits ms_median ms_min kv_gbps copy_transfer_gbps copy_shader_gbps first_run_ms max_err_over_max_v status"
log() { tar -C $W -czf "$OUT/gpu-logs-d.tgz" . 2>/dev/null; echo "== $(date -u +%T) $*"; }
for f in "$DEBS"/*.deb; do case $f in *libpng*) ;; *) dpkg -x "$f" /;; esac; done
mkdir -p /tmp/extra && dpkg -x "$DEBS"/libpng16-16_*.deb /tmp/extra && ldconfig
export LD_LIBRARY_PATH=/tmp/extra/usr/lib/x86_64-linux-gnu:/tmp/extra/lib/x86_64-linux-gnu
export VKATTN_DEVICE=nvidia
"$V" devices | grep -i "nvidia" || exit 1

D="--heads 32 --kv-heads 8 --dim 128 --seq-q 1 --dtype f16 --causal bottom-right"
L=32768,512,512,512,512,512,512,512
b() { timeout 20 "$V" bench "$@" --check --csv 2>&1 | pick $COLS; }
# (The sweeps unchecked: the conformance run below checks the kernels.)
u() { timeout 20 "$V" bench "$@" --warmup 3 --iters 10 --csv 2>&1 | pick $COLS; }
log "tiled against auto, with the copy bandwidth in the same process"
for sk in 8192 32768; do
  for k in tiled auto; do echo "b1 $sk $k: $(b $D --seq-k $sk --kernel $k --copy)"; done
done 2>&1 | tee "$W/b1.txt"
for k in tiled auto; do echo "paged batch $k: $(b $D --lengths $L --paged 16 --kernel $k)"; done 2>&1 | tee -a "$W/b1.txt"
log "--splits sweeps on the decode form, two rounds in opposite orders"
for round in 1 2; do
  S="32 64 128 256 512"; [ $round = 2 ] && S="512 256 128 64 32"
  for s in $S; do
    echo "r$round b1-32k splits $s: $(u $D --seq-k 32768 --kernel subgroup --splits $s)"
    echo "r$round b1-8k splits $s: $(u $D --seq-k 8192 --kernel subgroup --splits $s)"
    echo "r$round paged splits $s: $(u $D --lengths $L --paged 16 --kernel subgroup --splits $s)"
  done
done 2>&1 | tee "$W/splits.txt"
for x in "--kv-dtype q8_0 --paged 16" "--varlen" "--paged 16"; do
  echo "batch auto $x: $(b $D --lengths $L $x)"
done 2>&1 | tee -a "$W/splits.txt"
log "conformance, fused-auto, 16 shards"
for k in $(seq 1 16); do timeout 100 "$V" conform --path fused-auto --shard $k/16 > "$W/conform-$k.log" 2>&1 & done
wait
for k in $(seq 1 16); do echo "shard $k: $(tail -n 1 "$W/conform-$k.log")"; done | tee "$W/conform-summary.txt"
log "PyTorch SDPA, decode"
mkdir -p "$W/torch"
PYTHONUNBUFFERED=1 timeout 60 python3 bench/compare_torch.py --vkattn "$V" --presets decode --budget 0.3 \
  --results-dir "$W/torch" --no-plot 2>&1 | grep -v "unsupported:" | tail -n 25 | tee "$W/torch-decode.txt"
log "PyTorch SDPA, prefill up to 4096"
PYTHONUNBUFFERED=1 timeout 110 python3 bench/compare_torch.py --vkattn "$V" --presets prefill --max-seq 4096 \
  --warmup 3 --iters 10 --results-dir "$W/torch" --no-plot 2>&1 | tail -n 40 | tee "$W/torch-prefill.txt"
log done
