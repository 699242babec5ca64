#!/usr/bin/env python3
"""Times vkattn and PyTorch's scaled_dot_product_attention backends on the same prefill and decode shapes.

On a machine with an NVIDIA GPU, PyTorch >= 2.0 and the Vulkan loader:

    /usr/bin/python3 bench/compare_torch.py --vkattn build/release/tools/vkattn [--device nvidia]

runs `vkattn bench --sweep prefill --json` and `vkattn bench --sweep decode --json`, then runs every
shape of their results through torch.nn.functional.scaled_dot_product_attention once per backend torch
offers (flash, efficient, cudnn, math; each forced alone), prints the ratio vkattn TFLOP/s / backend
TFLOP/s per shape, writes both sides merged per shape to bench/results/<device>-<date>.json and draws
TFLOP/s against sequence length to bench/results/<device>-<date>.png.

The shapes come from vkattn's JSON, so both sides run exactly the same grid. FLOPs follow vkattn's
convention (tools/drivers/bench_metrics.hpp): 2·(Dqk+Dv) per visible (query, key) pair, the pairs counted
exactly for the causal mask in either alignment (FlashAttention's 4·B·H·Sq·Sk·D without a mask). torch is timed with CUDA events around each call, median of the timed runs after
warm-up; before each run a 256 MiB buffer is zeroed, which evicts the L2 cache (as vkattn's input
rotation does) and keeps the GPU busy while the call is enqueued, so host launch overhead is not
counted (vkattn's GPU timestamps do not count it either).

A backend the torch version lacks, or one that refuses a shape (flash with fp32 or dim_v != dim_qk,
GQA without enable_gqa, ...), is recorded as {"unsupported": reason}.

Modes that need no GPU and no torch:
    --from-json FILE   re-print the table and redraw the chart of a recorded results file
    --dry-run          print the plan (commands, presets, backends, outputs); runs nothing
"""
import argparse
import datetime
import inspect
import json
import math
import os
import re
import statistics
import subprocess
import sys
import warnings

from optional_deps import MissingDependency, import_pyplot, import_torch

PROG = "compare_torch.py"
PRESETS = ("prefill", "decode")
BACKENDS = ("flash", "efficient", "cudnn", "math")
SHAPE_KEYS = ("batch", "heads", "kv_heads", "seq_q", "seq_k", "dim_qk", "dim_v", "causal", "dtype")
DTYPES = ("f32", "f16", "bf16")
CAUSAL = ("none", "top-left", "bottom-right")
FLOP_CONVENTION = ("2*(Dqk+Dv) per visible (query, key) pair, causal pairs counted exactly in either alignment "
                   "(= 4*B*H*Sq*Sk*D without a mask; vkattn's tools/drivers/bench_metrics.hpp)")
RATIO_CONVENTION = "vkattn TFLOP/s / backend TFLOP/s (= backend ms / vkattn ms); > 1: vkattn faster"
SCRIPT_DIR = os.path.dirname(os.path.abspath(__file__))
RESULTS_DIR = os.path.join(SCRIPT_DIR, "results")
DEFAULT_VKATTN = "build/release/tools/vkattn"
# torch's names for the backends: the SDPBackend member (torch.nn.attention.sdpa_kernel, newer 2.x) and
# the flag of torch.backends.cuda.sdp_kernel (2.0 and the 2.x before sdpa_kernel).
SDP_BACKEND = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "cudnn": "CUDNN_ATTENTION",
               "math": "MATH"}
SDP_FLAG = {"flash": "enable_flash", "efficient": "enable_mem_efficient", "cudnn": "enable_cudnn",
            "math": "enable_math"}
FLUSH_BYTES = 256 << 20


class UsageError(Exception):
    """A bad argument: one line, exit 2."""


class Failure(Exception):
    """Something the run needs failed or is missing: one line, exit 1."""


# ---------------------------------------------------------------------------------------------------
# Figures


def visible_pairs(seq_q, seq_k, causal):
    """(query, key) pairs a causal mask leaves visible in one (batch, head): row i sees
    min(seq_k, max(0, i + 1 + off)) keys, off = 0 top-left or seq_k - seq_q bottom-right."""
    if causal == "none":
        return seq_q * seq_k
    off = seq_k - seq_q if causal == "bottom-right" else 0
    first = min(max(-off, 0), seq_q)                    # first row that sees a key
    full = min(max(seq_k - 1 - off, first), seq_q)      # first row that sees every key
    ramp = full - first
    return ramp * (first + 1 + off) + ramp * (ramp - 1) // 2 + (seq_q - full) * seq_k


def attention_flops(shape):
    """FLOPs of one attention call by vkattn's convention (tools/drivers/bench_metrics.hpp)."""
    pairs = visible_pairs(shape["seq_q"], shape["seq_k"], shape["causal"])
    return 2.0 * shape["batch"] * shape["heads"] * pairs * (shape["dim_qk"] + shape["dim_v"])


def tflops(shape, ms):
    return attention_flops(shape) / (ms * 1e-3) * 1e-12 if ms and ms > 0 else None


# Warm-ups and timed runs per shape, on both sides, unless --warmup/--iters say otherwise.
DEFAULT_WARMUP, DEFAULT_ITERS = 10, 50


def run_counts(probe_ms, warmup, iters, budget_s):
    """(warm-ups, timed runs) within a budget of GPU seconds, as vkattn bench does with --budget."""
    probe_ms = max(probe_ms, 1e-3)
    budget_ms = budget_s * 1e3
    return (min(max(int(0.2 * budget_ms / probe_ms), 0), max(warmup - 1, 0)),
            min(max(int(budget_ms / probe_ms), 1), iters))


# ---------------------------------------------------------------------------------------------------
# vkattn's side


def shape_key(row):
    return tuple(row[k] for k in SHAPE_KEYS)


def shape_of(row):
    return {k: row[k] for k in SHAPE_KEYS}


def normalize_row(row, where):
    """One result row of `vkattn bench --json`, checked; missing optional keys get their defaults."""
    if not isinstance(row, dict):
        raise Failure(f"{where}: a result is not an object")
    missing = [k for k in SHAPE_KEYS if k not in row]
    if missing:
        raise Failure(f"{where}: a result lacks {', '.join(missing)}")
    out = dict(row)
    for k in ("batch", "heads", "kv_heads", "seq_q", "seq_k", "dim_qk", "dim_v"):
        value = row[k]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise Failure(f"{where}: {k} is {value!r}, not a positive integer")
    causal = row["causal"]
    if isinstance(causal, bool):  # tolerated: true = torch's is_causal (top-left)
        causal = "top-left" if causal else "none"
    if causal not in CAUSAL:
        raise Failure(f"{where}: causal is {row['causal']!r}, not one of {', '.join(CAUSAL)}")
    out["causal"] = causal
    if row["dtype"] not in DTYPES:
        raise Failure(f"{where}: dtype is {row['dtype']!r}, not one of {', '.join(DTYPES)}")
    out["status"] = row.get("status") or "ok"
    if out["status"] not in ("ok", "skipped"):
        raise Failure(f"{where}: status is {out['status']!r}, not ok or skipped")
    out["reason"] = row.get("reason")
    return out


def load_vkattn(document, preset, source):
    """vkattn's JSON for one preset: {device, driver, version, sweep, reduced, rows}."""
    if isinstance(document, str):
        try:
            document = json.loads(document)
        except json.JSONDecodeError as e:
            raise Failure(f"{source}: not JSON ({e})") from None
    if not isinstance(document, dict) or not isinstance(document.get("results"), list):
        raise Failure(f"{source}: not the JSON of `vkattn bench --json` (no \"results\" list)")
    sweep = document.get("sweep")
    if sweep is not None and sweep != preset:
        raise Failure(f"{source}: holds the {sweep!r} sweep, not {preset!r}")
    rows = [normalize_row(r, f"{source}: result {i}") for i, r in enumerate(document["results"])]
    return {"device": document.get("device", "unknown"), "driver": document.get("driver", "unknown"),
            "host_cpu": document.get("host_cpu"),
            "version": document.get("version", "unknown"), "sweep": sweep, "reduced": document.get("reduced"),
            "rows": rows}


def cap_seq(side, max_seq):
    """Drops the rows whose seq_q or seq_k exceeds max_seq (what --max-seq does to a recorded file)."""
    if max_seq is None:
        return side
    return dict(side, rows=[r for r in side["rows"] if max(r["seq_q"], r["seq_k"]) <= max_seq])


def vkattn_command(args, preset):
    cmd = [args.vkattn, "bench", "--sweep", preset, "--json"]
    if args.max_seq is not None:
        cmd += ["--max-seq", str(args.max_seq)]
    if args.device is not None:
        cmd += ["--device", args.device]
    # The same counts on both sides. Given: exactly. Otherwise both sides use the defaults (10 warm-ups,
    # 50 timed runs) as caps under the same --budget rule (run_counts mirrors vkattn bench's).
    cmd += ["--warmup", str(warmup_count(args)), "--iters", str(iters_count(args))]
    if not counts_given(args):
        cmd += ["--budget", f"{args.budget:g}"]
    return cmd


def counts_given(args):
    return args.warmup is not None or args.iters is not None


def warmup_count(args):
    return DEFAULT_WARMUP if args.warmup is None else args.warmup


def iters_count(args):
    return args.iters or DEFAULT_ITERS


def run_vkattn(cmd, preset, source=None):
    """Runs `vkattn bench ... --json` and loads its JSON; preset: the sweep it must hold (None: a
    single-shape run); source: how errors name the run (default: vkattn bench --sweep <preset>)."""
    print(f"running {' '.join(cmd)}", file=sys.stderr, flush=True)
    try:
        done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)  # its stderr goes straight to ours
    except OSError as e:
        raise Failure(f"cannot run {cmd[0]}: {e.strerror}") from None
    if done.returncode != 0:
        raise Failure(f"`{' '.join(cmd)}` exited with {done.returncode} (its message is above)")
    return load_vkattn(done.stdout, preset, source or f"vkattn bench --sweep {preset}")


# ---------------------------------------------------------------------------------------------------
# torch's side


def plan_torch_call(shape, enable_gqa, lower_right):
    """How torch runs a shape: {is_causal, lower_right, enable_gqa, note}, or the reason it cannot.

    enable_gqa: torch's SDPA takes enable_gqa (2.5+); lower_right: torch.nn.attention.bias has
    causal_lower_right (newer 2.x).
    """
    plan = {"is_causal": False, "lower_right": False, "enable_gqa": False, "note": None}
    if shape["heads"] != shape["kv_heads"]:
        if not enable_gqa:
            return (f"GQA ({shape['heads']} heads, {shape['kv_heads']} KV heads) needs enable_gqa (torch >= 2.5); "
                    "not timed with K/V expanded by repeat_interleave, which moves more memory")
        plan["enable_gqa"] = True
    sq, sk = shape["seq_q"], shape["seq_k"]
    if shape["causal"] == "top-left" or (shape["causal"] == "bottom-right" and sq == sk):
        plan["is_causal"] = True  # torch's is_causal is top-left aligned; the same as bottom-right when Sq == Sk
    elif shape["causal"] == "bottom-right":
        if sq == 1:
            plan["note"] = "is_causal=False: one query row aligned bottom-right sees every key"
        elif lower_right:
            plan["lower_right"] = True
            plan["note"] = "attn_mask=causal_lower_right(seq_q, seq_k)"
        else:
            return ("bottom-right causal with seq_q != seq_k needs torch.nn.attention.bias.causal_lower_right "
                    "(a newer torch)")
    return plan


def refusal_reason(error, caught=()):
    """One line from torch's exception and the warnings it gave on the way (why each backend declined)."""
    parts = []
    for w in caught:
        text = re.sub(r"\s*\(Triggered internally at [^)]*\)\.?", "", str(getattr(w, "message", w)))
        text = " ".join(text.split())
        if text and text not in parts:
            parts.append(text)
    message = " ".join(str(error).split()) or type(error).__name__
    parts.append(f"{type(error).__name__}: {message}")
    reason = "; ".join(parts)
    return reason if len(reason) <= 600 else reason[:597] + "..."


class TorchSide:
    """Runs shapes through torch.nn.functional.scaled_dot_product_attention on CUDA, once per backend."""

    def __init__(self, torch, backends, warmup, iters, budget_s, counts_given, seed):
        self.torch = torch
        self.backends = backends
        self.warmup, self.iters, self.budget_s, self.counts_given = warmup, iters, budget_s, counts_given
        self.seed = seed
        self.version = torch.__version__
        doc = torch.nn.functional.scaled_dot_product_attention.__doc__ or ""
        self.enable_gqa = "enable_gqa" in doc
        try:
            from torch.nn.attention.bias import causal_lower_right  # noqa: PLC0415
        except ImportError:
            causal_lower_right = None
        self.causal_lower_right = causal_lower_right
        self.selectors = {b: self._selector(b) for b in backends}
        self.flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
        self.cache = {}

    def _selector(self, backend):
        """(a function returning the context manager that allows only this backend, None) or (None, reason)."""
        try:
            from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: PLC0415 (newer 2.x)
        except ImportError:
            sdpa_kernel = None
        if sdpa_kernel is not None:
            member = getattr(SDPBackend, SDP_BACKEND[backend], None)
            if member is None:
                return None, f"torch {self.version} has no SDPBackend.{SDP_BACKEND[backend]}"
            return (lambda: sdpa_kernel(member)), None
        sdp_kernel = getattr(self.torch.backends.cuda, "sdp_kernel", None)
        if sdp_kernel is None:
            return None, f"torch {self.version} has neither torch.nn.attention.sdpa_kernel nor torch.backends.cuda.sdp_kernel"
        params = inspect.signature(sdp_kernel).parameters
        if SDP_FLAG[backend] not in params:
            return None, f"torch {self.version}: torch.backends.cuda.sdp_kernel has no {SDP_FLAG[backend]}"
        flags = {f: f == SDP_FLAG[backend] for f in SDP_FLAG.values() if f in params}
        return (lambda: sdp_kernel(**flags)), None

    def _timed_runs(self, call, warmup, iters):
        torch = self.torch
        for _ in range(warmup):
            call()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        for start, end in zip(starts, ends):
            self.flush.zero_()  # evicts L2; the GPU is busy with it while the call is enqueued
            start.record()
            call()
            end.record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in zip(starts, ends)]

    def _time(self, shape, call):
        call()  # first call apart: kernel selection, cuDNN graph building, lazy loading
        self.torch.cuda.synchronize()
        if self.counts_given:
            warmup, iters = self.warmup, self.iters
        else:
            warmup, iters = run_counts(self._timed_runs(call, 0, 1)[0], self.warmup, self.iters, self.budget_s)
        ms = self._timed_runs(call, warmup, iters)
        median = statistics.median(ms)
        return {"ms": median, "ms_min": min(ms), "tflops": tflops(shape, median), "iters": len(ms)}

    def run(self, shape):
        """{backend: {ms, ms_min, tflops, iters} | {unsupported: reason}}, plus a note on the call (or None)."""
        key = shape_key(shape)
        if key not in self.cache:
            self.cache[key] = self._run(shape)
        return self.cache[key]

    def _run(self, shape):
        torch = self.torch
        # A backend this torch lacks says so; one it has but cannot call this way gets the reason why.
        missing = {b: {"unsupported": self.selectors[b][1]} for b in self.backends if self.selectors[b][0] is None}
        plan = plan_torch_call(shape, self.enable_gqa, self.causal_lower_right is not None)
        if isinstance(plan, str):
            return {b: missing.get(b, {"unsupported": plan}) for b in self.backends}, None
        dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[shape["dtype"]]
        b, h, g = shape["batch"], shape["heads"], shape["kv_heads"]
        try:
            gen = torch.Generator(device="cuda")
            gen.manual_seed(self.seed)
            inputs = [torch.randn(size, dtype=dtype, device="cuda", generator=gen)
                      for size in ((b, h, shape["seq_q"], shape["dim_qk"]), (b, g, shape["seq_k"], shape["dim_qk"]),
                                   (b, g, shape["seq_k"], shape["dim_v"]))]
        except torch.cuda.OutOfMemoryError as e:
            torch.cuda.empty_cache()
            oom = {"unsupported": "out of memory for the inputs: " + refusal_reason(e)}
            return {b_: missing.get(b_, oom) for b_ in self.backends}, None
        kwargs = {"is_causal": plan["is_causal"]}
        if plan["lower_right"]:
            kwargs["attn_mask"] = self.causal_lower_right(shape["seq_q"], shape["seq_k"])
        if plan["enable_gqa"]:
            kwargs["enable_gqa"] = True
        sdpa = torch.nn.functional.scaled_dot_product_attention

        def call():
            return sdpa(*inputs, **kwargs)

        records = {}
        for backend in self.backends:
            if backend in missing:
                records[backend] = missing[backend]
                continue
            selector = self.selectors[backend][0]
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    with torch.inference_mode(), selector():
                        records[backend] = self._time(shape, call)
                except Exception as e:  # noqa: BLE001 (any refusal is recorded, never fatal)
                    records[backend] = {"unsupported": refusal_reason(e, caught)}
                    try:
                        torch.cuda.synchronize()
                        torch.cuda.empty_cache()
                    except Exception:  # noqa: BLE001 (a broken context shows in the next records' reasons)
                        pass
        inputs.clear()
        torch.cuda.empty_cache()
        return records, plan["note"]


# ---------------------------------------------------------------------------------------------------
# Merging, the table, output paths


def vkattn_record(row):
    if row["status"] != "ok":
        return {"ms": None, "tflops": None, "status": row["status"], "reason": row.get("reason")}
    record = {"ms": row.get("ms_median"), "ms_min": row.get("ms_min"), "tflops": row.get("tflops"),
              "gbps": row.get("gbps"), "status": "ok"}
    for k in ("path", "kernel", "splits", "chunks", "max_err_over_max_v"):
        if k in row:
            record[k] = row[k]
    if "max_abs_err" in row:  # vkattn 0.1.0's name for the same figure (recorded files)
        record["max_err_over_max_v"] = row["max_abs_err"]
    return record


def merge(sides, torch_results, meta):
    """One results document: vkattn's rows per preset, each with torch's figures for its shape.

    sides: {preset: load_vkattn(...)}; torch_results: {shape_key: ({backend: record}, note)};
    meta: date, device, torch_version, cuda, backends and anything else to keep at the top.
    """
    devices = {(s["device"], s["driver"], s["version"]) for s in sides.values()}
    if len(devices) > 1:
        raise Failure("the vkattn results come from different devices or versions: "
                      + "; ".join(f"{p}: {s['device']} ({s['driver']}, vkattn {s['version']})" for p, s in sides.items()))
    first = next(iter(sides.values()))
    results = dict(meta)
    results["vkattn"] = {"device": first["device"], "driver": first["driver"], "host_cpu": first.get("host_cpu"),
                         "version": first["version"]}
    results.setdefault("flops", FLOP_CONVENTION)
    results.setdefault("ratio", RATIO_CONVENTION)
    results["presets"] = {}
    for preset, side in sides.items():
        entries = []
        for row in side["rows"]:
            entry = shape_of(row)
            entry["vkattn"] = vkattn_record(row)
            records, note = torch_results.get(shape_key(row), ({}, None))
            entry["torch"] = {b: records.get(b, {"unsupported": "not run"}) for b in meta.get("backends", BACKENDS)}
            if note:
                entry["torch_call"] = note
            entries.append(entry)
        results["presets"][preset] = entries
    return results


def device_slug(name):
    """File-name form of a device name: 'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    if slug.startswith("llvmpipe"):
        return "lavapipe"
    return slug or "unknown-device"


def output_paths(results_dir, device, date, exists=os.path.exists):
    """(json, png) paths <results_dir>/<device slug>-<date>[-N].{json,png}; -2, -3... when taken."""
    stem = os.path.join(results_dir, f"{device_slug(device)}-{date}")
    candidate, n = stem, 1
    while exists(candidate + ".json") or exists(candidate + ".png"):
        n += 1
        candidate = f"{stem}-{n}"
    return candidate + ".json", candidate + ".png"


def backends_of(results):
    names = list(results.get("backends") or [])
    for entries in results["presets"].values():
        for entry in entries:
            names += [b for b in entry.get("torch", {}) if b not in names]
    return names


def _num(x):
    return "-" if x is None else f"{x:.4g}"


def ratio(entry, backend):
    """vkattn TFLOP/s / backend TFLOP/s for one shape, or None when either side has no figure."""
    mine = entry["vkattn"].get("tflops") if entry["vkattn"].get("status", "ok") == "ok" else None
    theirs = entry.get("torch", {}).get(backend, {}).get("tflops")
    return mine / theirs if mine and theirs else None


def format_table(results):
    """The ratio table, per preset; then each backend's geometric-mean ratio and its refusals."""
    backends = backends_of(results)
    lines = [f"device {results.get('device')} | torch {results.get('torch_version')} (CUDA {results.get('cuda')}) | "
             f"vkattn {results['vkattn']['version']} on {results['vkattn']['device']} ({results['vkattn']['driver']}) | "
             f"{results.get('date')}"]
    if results.get("synthetic"):
        lines.append("SYNTHETIC figures (a test fixture), not a measurement")
    lines.append(f"TFLOP/s by vkattn's FLOP convention; ratio = {RATIO_CONVENTION}")
    for preset, entries in results["presets"].items():
        lines.append("")
        lines.append(f"{preset}")
        if not entries:
            lines.append("  (no shapes)")
            continue
        head = (f"{'B':>4} {'H':>4} {'KVH':>4} {'seq_q':>6} {'seq_k':>6} {'dqk':>4} {'dv':>4} {'causal':>12} {'dtype':>5}"
                f" | {'vkattn':>9}")
        for b in backends:
            head += f" | {b:>9} {'ratio':>8}"
        lines.append(head)
        for e in entries:
            line = (f"{e['batch']:>4} {e['heads']:>4} {e['kv_heads']:>4} {e['seq_q']:>6} {e['seq_k']:>6} {e['dim_qk']:>4}"
                    f" {e['dim_v']:>4} {e['causal']:>12} {e['dtype']:>5}")
            v = e["vkattn"]
            line += f" | {(_num(v.get('tflops')) if v.get('status', 'ok') == 'ok' else 'skipped'):>9}"
            for b in backends:
                t = e.get("torch", {}).get(b, {})
                cell = "unsup." if "unsupported" in t else _num(t.get("tflops"))
                r = ratio(e, b)
                line += f" | {cell:>9} {('-' if r is None else f'{r:.3g}'):>8}"
            lines.append(line)
        for b in backends:
            ratios = [r for r in (ratio(e, b) for e in entries) if r]
            if ratios:
                geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
                lines.append(f"  {b}: geometric mean ratio {geo:.3g} over {len(ratios)} shape(s)")
        notes = {}  # each distinct reason once, with the number of shapes it concerns
        for e in entries:
            texts = []
            if e["vkattn"].get("status", "ok") != "ok":
                texts.append(f"vkattn skipped: {e['vkattn'].get('reason') or 'no reason given'}")
            for b in backends:
                reason = e.get("torch", {}).get(b, {}).get("unsupported")
                if reason:
                    texts.append(f"{b} unsupported: {reason}")
            for text in texts:
                notes[text] = notes.get(text, 0) + 1
        for text, count in notes.items():
            lines.append(f"  {text} ({count} shape{'s' if count > 1 else ''})")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------
# The chart


def panel_key(entry):
    return (entry["dim_qk"], entry["dim_v"], entry["causal"], entry["dtype"], entry["heads"] // entry["kv_heads"])


def panel_title(preset, key):
    dqk, dv, causal, dtype, group = key
    dims = f"d{dqk}" if dqk == dv else f"dqk {dqk} dv {dv}"
    title = f"{preset}: {dims}, {'non-causal' if causal == 'none' else 'causal ' + causal}, {dtype}"
    return title + (f", GQA {group}:1" if group > 1 else "")


def _seq_label(s):
    return f"{s // 1024}k" if s >= 1024 and s % 1024 == 0 else str(s)


def plot(results, png_path):
    """Draws TFLOP/s against seq_k, one panel per (preset, dims, causal, dtype, GQA group), one line per
    implementation, and writes png_path. Returns what was drawn: {"path", "panels": [{"title", "lines"}]}."""
    plt = import_pyplot()
    backends = backends_of(results)
    rows = []
    for preset, entries in results["presets"].items():
        panels = {}
        for e in entries:
            panels.setdefault(panel_key(e), []).append(e)
        if panels:
            rows.append((preset, panels))
    if not rows:
        raise Failure("no results to draw")
    ncols = max(len(p) for _, p in rows)
    fig, axes = plt.subplots(len(rows), ncols, figsize=(4.6 * ncols, 3.8 * len(rows)), squeeze=False)
    styles = {"vkattn": dict(color="black", linewidth=2.2, marker="o")}
    palette = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown"]
    for i, b in enumerate(backends):
        styles[b] = dict(color=palette[i % len(palette)], linewidth=1.4, marker="s", linestyle="--")
    summary = {"path": png_path, "panels": []}
    for r, (preset, panels) in enumerate(rows):
        for c in range(ncols):
            ax = axes[r][c]
            if c >= len(panels):
                ax.remove()
                continue
            key, entries = list(panels.items())[c]
            entries = sorted(entries, key=lambda e: (e["seq_k"], e["seq_q"], e["batch"], e["heads"]))
            seqs = [e["seq_k"] for e in entries]
            repeated = len(set(seqs)) != len(seqs)  # e.g. several batch sizes at one seq: one line each
            drawn = []
            for impl in ["vkattn"] + backends:
                series = {}
                for e in entries:
                    if impl == "vkattn":
                        y = e["vkattn"].get("tflops") if e["vkattn"].get("status", "ok") == "ok" else None
                    else:
                        y = e.get("torch", {}).get(impl, {}).get("tflops")
                    if y is None:
                        continue
                    sub = f" B{e['batch']} H{e['heads']} Sq{e['seq_q']}" if repeated else ""
                    series.setdefault(sub, []).append((e["seq_k"], y))
                for sub, points in series.items():
                    label = (impl if impl == "vkattn" else f"torch {impl}") + sub
                    ax.plot([p[0] for p in points], [p[1] for p in points], label=label, **styles[impl])
                    drawn.append(label)
            ax.set_xscale("log", base=2)
            ticks = sorted(set(seqs))
            ax.set_xticks(ticks)
            ax.set_xticklabels([_seq_label(s) for s in ticks])
            ax.minorticks_off()
            ax.set_xlabel("seq_k" if preset == "decode" else "sequence length")
            ax.set_ylabel("TFLOP/s")
            ax.set_title(panel_title(preset, key), fontsize=9)
            ax.grid(True, alpha=0.3)
            if drawn:
                ax.legend(fontsize=7)
            summary["panels"].append({"preset": preset, "title": panel_title(preset, key), "lines": drawn})
    title = (f"{results.get('device')}: vkattn {results['vkattn']['version']} vs torch {results.get('torch_version')} "
             f"SDPA, {results.get('date')}")
    if results.get("synthetic"):
        title = "SYNTHETIC (test fixture) - " + title
    fig.suptitle(title, fontsize=10)
    fig.text(0.5, 0.005, "FLOPs: " + FLOP_CONVENTION, ha="center", fontsize=7)
    fig.tight_layout(rect=(0, 0.02, 1, 0.96))
    fig.savefig(png_path, dpi=110)
    plt.close(fig)
    return summary


# ---------------------------------------------------------------------------------------------------
# Command line


class Parser(argparse.ArgumentParser):
    """Usage errors as one line, "<prog>: error: ...", exit 2 (prog: the script's name)."""
    def error(self, message):
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(2)


def checked_number(parse, kind, acceptable, complaint):
    """An argparse type: `parse` the text (else "'x' is not <kind>"), then require `acceptable(value)`."""
    def check(text):
        try:
            value = parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {kind}") from None
        if not acceptable(value):
            raise argparse.ArgumentTypeError(f"{value} {complaint}")
        return value
    return check


positive_int = checked_number(int, "an integer", lambda v: v >= 1, "is not positive")
non_negative_int = checked_number(int, "an integer", lambda v: v >= 0, "is negative")
positive_float = checked_number(float, "a number", lambda v: math.isfinite(v) and v > 0,
                                "is not a positive number")


def name_list(choices):
    def parse(text):
        names = [n.strip() for n in text.split(",") if n.strip()]
        bad = [n for n in names if n not in choices]
        if bad or not names:
            raise argparse.ArgumentTypeError(f"{text!r}: choose from {', '.join(choices)} (comma-separated)")
        return list(dict.fromkeys(names))
    return parse


def parse_args(argv):
    p = Parser(prog=PROG, description=__doc__.splitlines()[0],
               epilog="See docs/performance.md for running it on a GPU machine.")
    p.add_argument("--vkattn", default=None, help=f"the vkattn binary (default: {DEFAULT_VKATTN})")
    p.add_argument("--device", help="passed to vkattn bench --device (index or name substring); torch uses the "
                                    "current CUDA device (CUDA_VISIBLE_DEVICES)")
    p.add_argument("--presets", type=name_list(PRESETS), default=list(PRESETS), help="prefill,decode (default both)")
    p.add_argument("--backends", type=name_list(BACKENDS), default=list(BACKENDS),
                   help="torch SDPA backends, each forced alone (default flash,efficient,cudnn,math)")
    p.add_argument("--max-seq", type=positive_int, help="passed to vkattn bench --max-seq; also caps the rows of "
                                                        "--vkattn-*-json files")
    p.add_argument("--vkattn-prefill-json", metavar="FILE", help="vkattn's prefill side from a recorded "
                                                                 "`vkattn bench --sweep prefill --json` instead of running it")
    p.add_argument("--vkattn-decode-json", metavar="FILE", help="likewise for decode")
    p.add_argument("--warmup", type=non_negative_int, help=f"warm-up runs on both sides (default {DEFAULT_WARMUP}, "
                                                           "capped by --budget; when given, honoured exactly)")
    p.add_argument("--iters", type=positive_int, help=f"timed runs on both sides (default {DEFAULT_ITERS}, capped by "
                                                      "--budget; when given, honoured exactly)")
    p.add_argument("--budget", type=positive_float, default=2.0,
                   help="without --warmup/--iters: GPU seconds the timed runs of one shape may take, on vkattn and "
                        "on each torch backend alike (default 2)")
    p.add_argument("--seed", type=int, default=1, help="seed of torch's random inputs")
    p.add_argument("--results-dir", default=RESULTS_DIR, help="where <device>-<date>.json/.png go (default bench/results)")
    p.add_argument("--no-plot", action="store_true", help="write no chart (matplotlib not needed)")
    p.add_argument("--from-json", metavar="FILE", help="re-print the table and redraw the chart of a results file; "
                                                       "needs no torch and no GPU")
    p.add_argument("--png", metavar="FILE", help="with --from-json: where the chart goes (default: FILE with .png)")
    p.add_argument("--dry-run", action="store_true", help="print the plan and exit; runs nothing")
    args = p.parse_args(argv)

    if args.from_json and args.dry_run:
        p.error("--from-json and --dry-run exclude each other")
    if args.png and not args.from_json:
        p.error("--png goes with --from-json (a new run writes <results-dir>/<device>-<date>.png)")
    if args.from_json:
        others = [f"--{name.replace('_', '-')}" for name in ("vkattn", "device", "max_seq", "vkattn_prefill_json",
                                                              "vkattn_decode_json", "warmup", "iters")
                  if getattr(args, name) is not None]
        if others:
            p.error(f"--from-json redraws a recorded file; {', '.join(others)} would be ignored")
        if not os.path.isfile(args.from_json):
            p.error(f"--from-json {args.from_json}: no such file")
        return args
    for preset in PRESETS:
        path = getattr(args, f"vkattn_{preset}_json")
        if path is None:
            continue
        if preset not in args.presets:
            p.error(f"--vkattn-{preset}-json given but --presets {','.join(args.presets)} leaves {preset} out")
        if not os.path.isfile(path):
            p.error(f"--vkattn-{preset}-json {path}: no such file")
    if args.vkattn is None:
        args.vkattn = default_vkattn()
    needs_binary = any(getattr(args, f"vkattn_{p_}_json") is None for p_ in args.presets)
    if needs_binary and not args.dry_run and not is_executable(args.vkattn):
        p.error(f"--vkattn {args.vkattn}: no such executable (build it: cmake --build build/release; or give "
                "--vkattn-prefill-json/--vkattn-decode-json)")
    return args


def default_vkattn():
    """build/release/tools/vkattn from the current directory, else from the repository of this script."""
    if not os.path.exists(DEFAULT_VKATTN) and os.path.exists(os.path.join(SCRIPT_DIR, "..", DEFAULT_VKATTN)):
        return os.path.normpath(os.path.join(SCRIPT_DIR, "..", DEFAULT_VKATTN))
    return DEFAULT_VKATTN


def is_executable(path):
    return os.path.isfile(path) and os.access(path, os.X_OK)


def dry_run(args):
    print("plan (dry run: nothing is run)")
    for preset in args.presets:
        path = getattr(args, f"vkattn_{preset}_json")
        if path:
            capped = f", rows with seq > {args.max_seq} dropped" if args.max_seq else ""
            print(f"  vkattn {preset}: from {path}{capped}")
        else:
            missing = "" if os.path.exists(args.vkattn) else "   (binary not found)"
            print(f"  vkattn {preset}: {' '.join(vkattn_command(args, preset))}{missing}")
    print(f"  torch: torch.nn.functional.scaled_dot_product_attention on CUDA, backends {', '.join(args.backends)},"
          " each forced alone; on every shape of vkattn's results (batch, heads, kv_heads, seq_q, seq_k, dim_qk,"
          " dim_v, causal, dtype)")
    if counts_given(args):
        counts = f"warmup {warmup_count(args)}, iters {iters_count(args)}, exactly, on both sides"
    else:
        counts = (f"warmup up to {DEFAULT_WARMUP}, iters up to {DEFAULT_ITERS} within {args.budget:g} s per shape "
                  "(torch: per backend and shape), on both sides")
    print(f"  timing: CUDA events around each call, median; {counts}")
    print(f"  ratio: {RATIO_CONVENTION}")
    print(f"  output: {os.path.join(args.results_dir, '<device>-<date>.json')}"
          f"{'' if args.no_plot else ' and .png'} (device: the CUDA GPU's name)")
    return 0


def write_tool_results(path, doc):
    """Writes a sibling script's results document (compare_torch_cpu.py, compare_ggml.py) as indented JSON."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def tool_main(prog, args, dry_run, from_json, run):
    """A sibling script's main once its arguments are parsed: --dry-run, --from-json or the run itself. A Failure or
    MissingDependency is one error line and exit 1, as is an OSError (an output file that cannot be written)."""
    try:
        if args.dry_run:
            return dry_run(args)
        if args.from_json:
            return from_json(args)
        return run(args)
    except (Failure, MissingDependency) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"{prog}: error: {e.filename or ''}: {e.strerror}", file=sys.stderr)
        return 1


def read_tool_results(path, tool, prog):
    """A results file of a sibling script whose JSON names its `tool` and holds `entries` (compare_torch_cpu.py,
    compare_ggml.py), for their --from-json; Failure naming the file when it is not one."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise Failure(f"{path}: cannot read it as JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("tool") != tool or not isinstance(doc.get("entries"), list):
        raise Failure(f"{path}: not a {prog} results file (no \"tool\": \"{tool}\" and \"entries\")")
    return doc


def from_json(args):
    try:
        with open(args.from_json, encoding="utf-8") as f:
            results = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise Failure(f"{args.from_json}: cannot read it as JSON ({e})") from None
    if not isinstance(results, dict) or not isinstance(results.get("presets"), dict) or "vkattn" not in results:
        raise Failure(f"{args.from_json}: not a compare_torch.py results file (no \"presets\" or \"vkattn\")")
    print(format_table(results))
    if not args.no_plot:
        png = args.png or os.path.splitext(args.from_json)[0] + ".png"
        summary = plot(results, png)
        print(f"chart: {png} ({len(summary['panels'])} panels)")
    return 0


def run(args):
    torch = import_torch(min_version=(2, 0), need_cuda=True,
                         purpose="torch.nn.functional.scaled_dot_product_attention")
    if not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        raise MissingDependency(f"torch {torch.__version__} has no torch.nn.functional.scaled_dot_product_attention")
    if not args.no_plot:
        import_pyplot()  # now, not after an hour of benchmarking
    gpu = torch.cuda.get_device_name()

    sides = {}
    commands = {}
    for preset in args.presets:
        path = getattr(args, f"vkattn_{preset}_json")
        if path:
            with open(path, encoding="utf-8") as f:
                sides[preset] = cap_seq(load_vkattn(f.read(), preset, path), args.max_seq)
            commands[preset] = f"recorded: {path}" + (f" (rows with seq > {args.max_seq} dropped)" if args.max_seq else "")
        else:
            cmd = vkattn_command(args, preset)
            sides[preset] = run_vkattn(cmd, preset)
            commands[preset] = " ".join(cmd)
    vk_device = next(iter(sides.values()))["device"]
    if "llvmpipe" in vk_device.lower():
        print(f"{PROG}: warning: vkattn ran on {vk_device} (the CPU), torch on {gpu}: is the NVIDIA Vulkan ICD "
              "installed? (vkattn devices; --device nvidia)", file=sys.stderr)
    elif vk_device.lower() != gpu.lower():
        print(f"{PROG}: warning: vkattn ran on {vk_device!r}, torch on {gpu!r}", file=sys.stderr)

    side = TorchSide(torch, args.backends, warmup_count(args), iters_count(args), args.budget, counts_given(args),
                     args.seed)
    torch_results = {}
    for preset, s in sides.items():
        for i, row in enumerate(s["rows"]):
            print(f"torch {preset} {i + 1}/{len(s['rows'])}: B{row['batch']} H{row['heads']}/{row['kv_heads']} "
                  f"Sq{row['seq_q']} Sk{row['seq_k']} d{row['dim_qk']}/{row['dim_v']} {row['causal']} {row['dtype']}",
                  file=sys.stderr, flush=True)
            torch_results[shape_key(row)] = side.run(shape_of(row))

    date = datetime.date.today().isoformat()
    meta = {"date": date, "device": gpu, "torch_version": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(), "backends": args.backends,
            "timing": {"method": "CUDA events around each call, median; a 256 MiB memset before each run (evicts L2, "
                                 "keeps the GPU busy while the call is enqueued); first call untimed",
                       "warmup": side.warmup, "iters": side.iters,
                       "budget_s": None if counts_given(args) else args.budget, "seed": args.seed},
            "allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32), "commands": commands}
    results = merge(sides, torch_results, meta)
    os.makedirs(args.results_dir, exist_ok=True)
    json_path, png_path = output_paths(args.results_dir, gpu, date)
    with open(json_path, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
        f.write("\n")
    print(format_table(results))
    print(f"results: {json_path}")
    if not args.no_plot:
        plot(results, png_path)
        print(f"chart: {png_path}")
    return 0


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.dry_run:
            return dry_run(args)
        if args.from_json:
            return from_json(args)
        return run(args)
    except (Failure, MissingDependency) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
