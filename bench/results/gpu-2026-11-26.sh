#!/usr/bin/env bash
# The first run of vkattn on a GPU (a lent NVIDIA H100 machine, 2026-11-26): correctness first
# (vkattn conform on every path, quick then full, the validation layer on the quick sweep), then the
# issue-12 shapes, the issue-14 decode batch, and PyTorch SDPA on the same grid (bench/compare_torch.py).
#
# Run from the repository root with:
#   V      the vkattn binary, T the vkattn_tests binary (built on Debian bookworm, release preset)
#   DEBS   a folder with bookworm's libvulkan1, libpng16-16 and vulkan-validationlayers .debs
#   OUT    where the logs go: one archive, gpu-logs.tgz, rewritten after every step
# Every step has its own time limit so that one slow step cannot eat the others.
set -u
: "${V:?}" "${T:?}" "${DEBS:?}" "${OUT:?}"
W=/tmp/gpu-logs; mkdir -p $W
# One line per bench row: the columns that matter, out of the CSV's fifty.
brief() {
  python3 - "$1" <<'PY'
import csv, sys
cols = ["layout", "kernel", "path", "dtype", "batch", "heads", "kv_heads", "seq_q", "seq_k", "dim_qk", "splits",
        "ms_median", "ms_min", "tflops", "kv_gbps", "copy_transfer_gbps", "copy_shader_gbps",
        "max_err_over_max_v", "status", "first_run_ms"]
lines = open(sys.argv[1]).read().splitlines()
header = next((l for l in lines if l.startswith("device,")), None)
for l in lines:
    if l.startswith("device,"):
        continue
    if header is None or not l.startswith('"'):
        print(l)  # an error line
        continue
    row = next(csv.DictReader([header, l]))
    def short(v):
        try:
            return "%.4g" % float(v)
        except ValueError:
            return v
    print(" ".join(c + "=" + short(row[c]) for c in cols if row.get(c)))
PY
}
log() { tar -C $W -czf "$OUT/gpu-logs.tgz" . 2>/dev/null; echo "== $(date -u +%T) $*"; }

# The Vulkan loader and glvnd (the image has the NVIDIA driver but neither), and libpng beside them.
for f in "$DEBS"/libvulkan1_*.deb "$DEBS"/libglvnd0_*.deb "$DEBS"/libegl1_*.deb "$DEBS"/libgl1_*.deb \
         "$DEBS"/libglx0_*.deb "$DEBS"/libopengl0_*.deb "$DEBS"/libgles2_*.deb; do dpkg -x "$f" /; done
mkdir -p /tmp/extra && for f in "$DEBS"/libpng16-16_*.deb "$DEBS"/vulkan-validationlayers_*.deb; do dpkg -x "$f" /tmp/extra; done
ldconfig
export LD_LIBRARY_PATH=/tmp/extra/usr/lib/x86_64-linux-gnu:/tmp/extra/lib/x86_64-linux-gnu
export VK_LAYER_PATH=/tmp/extra/usr/share/vulkan/explicit_layer.d

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv | tee "$W/gpu.txt"
"$V" devices > "$W/devices.txt" 2>&1
if ! grep -qi nvidia "$W/devices.txt"; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/usr/local/nvidia/lib64
  "$V" devices > "$W/devices.txt" 2>&1
fi
cat "$W/devices.txt"
if ! grep -qi nvidia "$W/devices.txt"; then
  VK_LOADER_DEBUG=error,warn,driver "$V" devices 2>&1 | grep -v "^DRIVER: *\(/\|In\|Search\|Found the\)" | head -20
  exit 1
fi
export VKATTN_DEVICE=nvidia

log "conform --quick, every path"
timeout 120 "$V" conform --quick > "$W/conform-quick.txt" 2>&1; echo "rc=$?"
tail -5 "$W/conform-quick.txt"

log "bench --check (the quick start's command)"
timeout 30 "$V" bench --check 2>&1 | tee "$W/bench-default.txt"

log "issue-12 shapes"
{
  for kernel in tiled rowwise subgroup; do
    for dt in f32 f16; do
      timeout 20 "$V" bench --kernel $kernel --dtype $dt --heads 8 --seq-q 1024 --dim 64 --check --csv
    done
    timeout 20 "$V" bench --kernel $kernel --dtype f16 --heads 8 --seq-q 1024 --dim 128 --check --csv
  done
  for sk in 8192 32768; do
    timeout 20 "$V" bench --dtype f16 --heads 32 --kv-heads 8 --dim 128 --seq-q 1 --seq-k $sk --causal bottom-right --copy --check --csv
  done
  timeout 30 "$V" bench --path unfused --dtype f16 --heads 8 --seq-q 1024 --dim 64 --check --csv
} > "$W/issue12.csv" 2>&1
brief "$W/issue12.csv"

log "issue-14 decode batch: 32768 + 7x512 keys, dense / paged 16, f16 / q8_0"
L=32768,512,512,512,512,512,512,512
{
  for rep in 1 2; do
    for kv in "" "--kv-dtype q8_0"; do
      timeout 20 "$V" bench --lengths $L --heads 32 --kv-heads 8 --dim 128 --seq-q 1 --dtype f16 --causal bottom-right $kv --copy --check --csv
      timeout 20 "$V" bench --lengths $L --heads 32 --kv-heads 8 --dim 128 --seq-q 1 --dtype f16 --causal bottom-right $kv --paged 16 --copy --check --csv
    done
  done
  timeout 20 "$V" bench --varlen --lengths $L --heads 32 --kv-heads 8 --dim 128 --seq-q 1 --dtype f16 --causal bottom-right --check --csv
} > "$W/issue14.csv" 2>&1
brief "$W/issue14.csv"

log "first-dispatch (JIT) time per pipeline"
timeout 30 "$V" prepare --no-save --dtype f16 --dims 64,128 2>&1 | tee "$W/prepare.txt"

log "PyTorch SDPA on the same grid"
PYTHONUNBUFFERED=1 timeout 130 python3 bench/compare_torch.py --vkattn "$V" --device nvidia --max-seq 4096 \
  --backends flash,cudnn,efficient --budget 0.3 --results-dir "$W" > "$W/compare-torch.txt" 2>&1; echo "rc=$?"
tail -60 "$W/compare-torch.txt"

log "conform, full, 8 shards in parallel; vkattn_tests beside them"
for k in 1 2 3 4 5 6 7 8; do
  timeout 120 "$V" conform --shard $k/8 > "$W/conform-full-$k.log" 2>&1 &
done
timeout 120 "$T" --quick > "$W/tests-quick.log" 2>&1 &
wait
for k in 1 2 3 4 5 6 7 8; do echo "shard $k: $(tail -1 "$W/conform-full-$k.log")"; done
tail -4 "$W/tests-quick.log"
cat "$W"/conform-full-*.log > "$W/conform-full.txt"; rm "$W"/conform-full-*.log

log "conform --quick --validation (fused paths)"
timeout 60 "$V" conform --quick --validation --path fused > "$W/conform-validation.txt" 2>&1; echo "rc=$?"
tail -3 "$W/conform-validation.txt"
log done
