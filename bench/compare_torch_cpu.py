#!/usr/bin/env python3
"""Times vkattn and PyTorch on the CPU (textbook matmul + softmax) on the same shapes, alternating.

What a CPU user has today, next to vkattn on the same machine (lavapipe by default):

    /usr/bin/python3 bench/compare_torch_cpu.py --vkattn build/release/tools/vkattn --out results.json

runs, for each of --rounds rounds (default 3), first `vkattn bench --json` on every shape, then every
shape through PyTorch on the CPU, and prints per shape vkattn GFLOP/s / torch GFLOP/s: the median over
the rounds of each round's median run, and the best (fastest single run) of each side. Alternating the
two programs spreads any drift of a shared machine (other jobs, clocks) over both sides alike.

torch runs the textbook attention, as a model's eager code does: S = (scale·Q)·Kᵀ, the causal mask
filled with -inf, softmax over the keys, P·V; for GQA the K/V heads are repeated first
(repeat_interleave, inside the timed call, as transformers' repeat_kv does). It needs no
scaled_dot_product_attention, so Debian bookworm's torch 1.13 (python3-torch) will do. torch always
computes in float32: a shape's storage dtype (f16, bf16) applies to vkattn only, and the f32 and f16
rows of one shape share one torch measurement per round. torch.set_num_threads is set to the CPU cores
this process may use (--threads to change it); each call is timed with a monotonic clock, median of
the timed runs after the warm-ups, on random float32 inputs of the shape.

Shapes: by default the comparison shapes of issue 12 (prefill B1 H8 S1024 d64 and d128 in f32 and f16;
decode 32 query heads / 8 KV heads d128 seq_q 1 against 8k and 32k keys in f16). --preset prefill|decode
takes the shapes of `vkattn bench --sweep <preset>` (reduced on CPU devices) instead, --shape adds
explicit ones. FLOPs follow vkattn's convention (tools/drivers/bench_metrics.hpp), the same as compare_torch.py.

Modes that need no torch and no vkattn:
    --from-json FILE   re-print the table of a recorded results file
    --dry-run          print the plan (rounds, commands, shapes, output); runs nothing
"""
import argparse
import datetime
import os
import platform
import re
import statistics
import sys
import time

import compare_torch as ct
from optional_deps import MissingDependency, import_torch

PROG = "compare_torch_cpu.py"
TOOL = "compare_torch_cpu"
DEFAULT_ROUNDS = 3
# The counts of compare_torch.py on both sides (10 warm-ups, 50 timed runs at most), within a budget of
# seconds per shape and round: lavapipe takes about a second per prefill run here.
DEFAULT_BUDGET = 5.0
SHAPE_DEFAULTS = {"batch": 1, "heads": 8, "kv_heads": None, "seq_q": 1024, "seq_k": None, "dim_qk": 64,
                  "dim_v": None, "causal": "none", "dtype": "f32"}
SHAPE_ALIASES = {"dim": "dim_qk", "b": "batch", "h": "heads"}
RATIO_CONVENTION = "vkattn GFLOP/s / torch GFLOP/s (= torch ms / vkattn ms); > 1: vkattn faster"
TORCH_METHOD = ("textbook attention in float32: S = (scale*Q) @ K^T, masked_fill(-inf) for causal, softmax(dim=-1), "
                "P @ V; GQA: K and V heads repeat_interleave'd inside the timed call; torch.inference_mode")


def default_shapes():
    """Issue 12's comparison shapes: prefill d64/d128 in f32 and f16, decode GQA 32/8 d128 at 8k and 32k keys."""
    shapes = []
    for dim in (64, 128):
        for dtype in ("f32", "f16"):
            shapes.append(dict(batch=1, heads=8, kv_heads=8, seq_q=1024, seq_k=1024, dim_qk=dim, dim_v=dim,
                               causal="none", dtype=dtype))
    for seq_k in (8192, 32768):
        shapes.append(dict(batch=1, heads=32, kv_heads=8, seq_q=1, seq_k=seq_k, dim_qk=128, dim_v=128,
                           causal="none", dtype="f16"))
    return shapes


def parse_shape(text):
    """A --shape: key=value pairs, comma-separated, e.g. heads=32,kv_heads=8,seq_q=1,seq_k=8192,dim=128,dtype=f16.

    Keys: batch, heads, kv_heads, seq_q, seq_k, dim (dim_qk), dim_v, causal, dtype; the rest take vkattn
    bench's defaults (batch 1, heads 8, kv_heads = heads, seq_q 1024, seq_k = seq_q, dim 64, dim_v = dim,
    causal none, dtype f32).
    """
    shape = dict(SHAPE_DEFAULTS)
    seen = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, sep, value = part.partition("=")
        key = SHAPE_ALIASES.get(key.strip(), key.strip())
        value = value.strip()
        if not sep or key not in SHAPE_DEFAULTS:
            raise argparse.ArgumentTypeError(f"{text!r}: {part!r} is not key=value with a key among "
                                             "batch, heads, kv_heads, seq_q, seq_k, dim, dim_v, causal, dtype")
        if key in seen:
            raise argparse.ArgumentTypeError(f"{text!r}: {key} given twice")
        seen.add(key)
        if key == "causal":
            if value not in ct.CAUSAL:
                raise argparse.ArgumentTypeError(f"{text!r}: causal {value!r} is not one of {', '.join(ct.CAUSAL)}")
            shape[key] = value
        elif key == "dtype":
            if value not in ct.DTYPES:
                raise argparse.ArgumentTypeError(f"{text!r}: dtype {value!r} is not one of {', '.join(ct.DTYPES)}")
            shape[key] = value
        else:
            try:
                number = int(value)
            except ValueError:
                raise argparse.ArgumentTypeError(f"{text!r}: {key} {value!r} is not an integer") from None
            if number < 1:
                raise argparse.ArgumentTypeError(f"{text!r}: {key} {number} is not positive")
            shape[key] = number
    shape["kv_heads"] = shape["kv_heads"] or shape["heads"]
    shape["seq_k"] = shape["seq_k"] or shape["seq_q"]
    shape["dim_v"] = shape["dim_v"] or shape["dim_qk"]
    if shape["heads"] % shape["kv_heads"]:
        raise argparse.ArgumentTypeError(f"{text!r}: heads {shape['heads']} is not a multiple of kv_heads "
                                         f"{shape['kv_heads']}")
    return {k: shape[k] for k in ct.SHAPE_KEYS}


def shape_label(s):
    group = f"/{s['kv_heads']}" if s["kv_heads"] != s["heads"] else ""
    dims = f"d{s['dim_qk']}" if s["dim_qk"] == s["dim_v"] else f"d{s['dim_qk']}/{s['dim_v']}"
    causal = "" if s["causal"] == "none" else f" {s['causal']}"
    return f"B{s['batch']} H{s['heads']}{group} Sq{s['seq_q']} Sk{s['seq_k']} {dims}{causal} {s['dtype']}"


def torch_key(shape):
    """What torch computes for a shape: every key but the storage dtype (torch computes in float32)."""
    return tuple(shape[k] for k in ct.SHAPE_KEYS if k != "dtype")


def gflops(shape, ms):
    return ct.attention_flops(shape) / (ms * 1e-3) * 1e-9 if ms and ms > 0 else None


# ---------------------------------------------------------------------------------------------------
# vkattn's side


def counts_options(args):
    """The same counts as the torch side: exact when --warmup/--iters are given, else caps under --budget."""
    options = ["--warmup", str(ct.warmup_count(args)), "--iters", str(ct.iters_count(args))]
    if not ct.counts_given(args):
        options += ["--budget", f"{args.budget:g}"]
    return options


def vkattn_runs(args):
    """The `vkattn bench` invocations of one round: [(label, command, preset or None)]."""
    runs = []
    device = ["--device", args.device] if args.device is not None else []
    for preset in args.preset:
        cmd = [args.vkattn, "bench", "--sweep", preset, "--json"]
        if args.max_seq is not None:
            cmd += ["--max-seq", str(args.max_seq)]
        if args.dtype is not None:
            cmd += ["--dtype", args.dtype]
        runs.append((f"preset {preset}", cmd + device + counts_options(args), preset))
    for s in args.shapes:
        cmd = [args.vkattn, "bench", "--json", "--batch", str(s["batch"]), "--heads", str(s["heads"]),
               "--kv-heads", str(s["kv_heads"]), "--seq-q", str(s["seq_q"]), "--seq-k", str(s["seq_k"]),
               "--dim", str(s["dim_qk"]), "--dim-v", str(s["dim_v"]), "--dtype", s["dtype"], "--causal", s["causal"]]
        runs.append((shape_label(s), cmd + device + counts_options(args), None))
    return runs


def run_vkattn_round(runs, run=ct.run_vkattn):
    """One round of vkattn: {"device", "driver", "host_cpu", "version", "rows": [normalized rows, in order]}."""
    rows, meta = [], None
    for label, cmd, preset in runs:
        side = run(cmd, preset, f"vkattn bench ({label})")
        if preset is None and len(side["rows"]) != 1:
            raise ct.Failure(f"vkattn bench ({label}): {len(side['rows'])} results, expected 1")
        this = (side["device"], side["driver"], side["version"], side.get("host_cpu"))
        if meta is not None and this != meta:
            raise ct.Failure(f"vkattn bench ({label}) ran on {this[0]} ({this[1]}, vkattn {this[2]}), the runs before it "
                             f"on {meta[0]} ({meta[1]}, vkattn {meta[2]})")
        meta = this
        rows += side["rows"]
    return {"device": meta[0], "driver": meta[1], "version": meta[2], "host_cpu": meta[3], "rows": rows}


# ---------------------------------------------------------------------------------------------------
# torch's side


def cpu_threads():
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def loaded_blas():
    """The BLAS/LAPACK libraries this process has mapped (Linux), resolved: which one torch's matmul uses."""
    found = []
    try:
        with open("/proc/self/maps", encoding="utf-8") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                name = os.path.basename(path).lower()
                if path.startswith("/") and ("blas" in name or "mkl" in name or "blis" in name):
                    real = os.path.realpath(path)
                    if real not in found:
                        found.append(real)
    except OSError:
        pass
    return found


def causal_mask(torch, seq_q, seq_k, causal):
    """Boolean (seq_q, seq_k), True where a key is hidden: key j > i + off (off = seq_k - seq_q bottom-right)."""
    if causal == "none":
        return None
    off = seq_k - seq_q if causal == "bottom-right" else 0
    rows = torch.arange(seq_q).unsqueeze(1)
    cols = torch.arange(seq_k).unsqueeze(0)
    return cols > rows + off


def textbook_attention(torch, q, k, v, scale, mask=None):
    """softmax((scale·Q)·Kᵀ [masked]) · V, K/V heads repeated to Q's (GQA). Rows with no visible key give NaN."""
    group = q.shape[1] // k.shape[1]
    if group > 1:
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
    s = torch.matmul(q * scale, k.transpose(-2, -1))
    if mask is not None:
        s.masked_fill_(mask, float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), v)


def time_calls(call, warmup, iters, budget_s, counts_given, clock=time.perf_counter):
    """Times call() as vkattn bench does: exact counts, or a probe run (the first warm-up) and the counts
    the budget allows (compare_torch.run_counts). Returns (timed ms list, warm-ups run)."""
    if counts_given:
        for _ in range(warmup):
            call()
        warmed = warmup
    else:
        start = clock()
        call()
        warmup, iters = ct.run_counts((clock() - start) * 1e3, warmup, iters, budget_s)
        for _ in range(warmup):
            call()
        warmed = warmup + 1
    ms = []
    for _ in range(iters):
        start = clock()
        call()
        ms.append((clock() - start) * 1e3)
    return ms, warmed


class TorchCpu:
    """Runs shapes through textbook_attention on the CPU, in float32."""

    def __init__(self, torch, threads, warmup, iters, budget_s, counts_given, seed):
        self.torch = torch
        torch.set_num_threads(threads)
        self.threads = torch.get_num_threads()
        self.warmup, self.iters, self.budget_s, self.counts_given = warmup, iters, budget_s, counts_given
        self.seed = seed

    def info(self):
        torch = self.torch
        with torch.inference_mode():  # a matmul first, so that the BLAS library is loaded
            torch.matmul(torch.ones(64, 64), torch.ones(64, 64))
        config = ""
        try:
            config = torch.__config__.show()
        except Exception:  # noqa: BLE001 (the configuration is a nicety)
            pass
        found = re.search(r"\bBLAS_INFO=([^,\s]+)", config)
        blas_info = found.group(1) if found else None
        return {"version": torch.__version__, "threads": self.threads, "blas_info": blas_info,
                "blas_loaded": loaded_blas(), "dtype": "f32", "method": TORCH_METHOD}

    def run(self, shape):
        """{ms, ms_min, iters, warmup} of one shape, or {unsupported: reason} when torch refuses or runs out of memory."""
        torch = self.torch
        b, h, g = shape["batch"], shape["heads"], shape["kv_heads"]
        try:
            gen = torch.Generator()
            gen.manual_seed(self.seed)
            q, k, v = (torch.randn(size, dtype=torch.float32, generator=gen)
                       for size in ((b, h, shape["seq_q"], shape["dim_qk"]), (b, g, shape["seq_k"], shape["dim_qk"]),
                                    (b, g, shape["seq_k"], shape["dim_v"])))
            mask = causal_mask(torch, shape["seq_q"], shape["seq_k"], shape["causal"])
            scale = 1.0 / shape["dim_qk"] ** 0.5

            def call():
                return textbook_attention(torch, q, k, v, scale, mask)

            with torch.inference_mode():
                ms, warmed = time_calls(call, self.warmup, self.iters, self.budget_s, self.counts_given)
        except (RuntimeError, MemoryError) as e:
            return {"unsupported": ct.refusal_reason(e)}
        return {"ms": statistics.median(ms), "ms_min": min(ms), "iters": len(ms), "warmup": warmed}


# ---------------------------------------------------------------------------------------------------
# Rounds, merging, the table


def load_average():
    """The 1-minute load average (None where the system has none): a busy machine shows in the results."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def run_rounds(args, vk_runs, torch_side, rounds, log=None, run=ct.run_vkattn, loads=None):
    """rounds x (vkattn on every shape, then torch on every shape). Returns (vkattn meta, shapes,
    vkattn rows per round, torch records per round); log(text) reports progress; loads, a list, gets
    {round, side, load} before each side of each round."""
    log = log or (lambda text: print(text, file=sys.stderr, flush=True))
    loads = [] if loads is None else loads
    meta, shapes, vk_rounds, torch_rounds = None, None, [], []
    for r in range(rounds):
        loads.append({"round": r + 1, "side": "vkattn", "load_1min": load_average()})
        log(f"round {r + 1}/{rounds}: vkattn")
        side = run_vkattn_round(vk_runs, run)
        these = [ct.shape_of(row) for row in side["rows"]]
        this_meta = {k: side.get(k) for k in ("device", "driver", "host_cpu", "version")}
        if shapes is None:
            meta, shapes = this_meta, these
        elif these != shapes:
            raise ct.Failure(f"round {r + 1}: vkattn bench gave other shapes than in round 1")
        elif this_meta != meta:
            raise ct.Failure(f"round {r + 1}: vkattn ran on {this_meta['device']}, in round 1 on {meta['device']}")
        vk_rounds.append(side["rows"])
        loads.append({"round": r + 1, "side": "torch", "load_1min": load_average()})
        log(f"round {r + 1}/{rounds}: torch")
        records = {}
        for i, (shape, row) in enumerate(zip(shapes, side["rows"])):
            key = torch_key(shape)
            if key in records:
                continue  # the same float32 computation as an earlier row (another storage dtype)
            log(f"  torch {i + 1}/{len(shapes)}: {shape_label(shape)}")
            records[key] = torch_side.run(shape)
        torch_rounds.append([records[torch_key(s)] for s in shapes])
    return meta, shapes, vk_rounds, torch_rounds


def summarize(shape, per_round):
    """Over the rounds: the median of each round's median, the fastest run, and GFLOP/s of both."""
    medians = [r["ms"] for r in per_round]
    ms_median = statistics.median(medians)
    ms_min = min(r.get("ms_min") or r["ms"] for r in per_round)
    return {"ms_median": ms_median, "ms_min": ms_min, "gflops_median": gflops(shape, ms_median),
            "gflops_best": gflops(shape, ms_min)}


def vkattn_entry(shape, rows):
    skipped = [r for r in rows if r["status"] != "ok"]
    if skipped:
        return {"status": "skipped", "reason": skipped[0].get("reason") or "no reason given",
                "rounds": [ct.vkattn_record(r) for r in rows]}
    rounds = []
    for row in rows:
        rec = ct.vkattn_record(row)
        rec["iters"] = row.get("iters")
        rounds.append(rec)
    entry = {"status": "ok"}
    entry.update(summarize(shape, rounds))
    for k in ("path", "kernel", "splits"):
        if k in rounds[-1]:
            entry[k] = rounds[-1][k]
    entry["rounds"] = rounds
    return entry


def torch_entry(shape, records):
    refused = [r for r in records if "unsupported" in r]
    if refused:
        return {"status": "unsupported", "reason": refused[0]["unsupported"], "rounds": records}
    entry = {"status": "ok"}
    entry.update(summarize(shape, records))
    entry["rounds"] = records
    return entry


def merge(meta, shapes, vk_rounds, torch_rounds, info):
    """The results document: info at the top, then one entry per shape with both sides and the ratios."""
    doc = {"tool": TOOL}
    doc.update(info)
    doc["vkattn"] = dict(meta)
    doc.setdefault("flops", ct.FLOP_CONVENTION)
    doc.setdefault("ratio", RATIO_CONVENTION)
    doc["rounds"] = len(vk_rounds)
    entries = []
    for i, shape in enumerate(shapes):
        entry = dict(shape)
        entry["vkattn"] = vkattn_entry(shape, [rows[i] for rows in vk_rounds])
        entry["torch"] = torch_entry(shape, [records[i] for records in torch_rounds])
        entry["ratio_median"], entry["ratio_best"] = ratios(entry)
        entries.append(entry)
    doc["entries"] = entries
    return doc


def ratios(entry):
    """(median ratio, best ratio): vkattn GFLOP/s / torch GFLOP/s, None where a side has no figure."""
    v, t = entry["vkattn"], entry["torch"]
    if v.get("status") != "ok" or t.get("status") != "ok":
        return None, None
    return tuple(v[k] / t[k] if v.get(k) and t.get(k) else None for k in ("gflops_median", "gflops_best"))


def _num(x):
    return "-" if x is None else f"{x:.3g}"


def format_table(doc):
    torch_info = doc.get("torch", {})
    vk = doc["vkattn"]
    blas = ", ".join(os.path.basename(p) for p in torch_info.get("blas_loaded") or []) or "unknown"
    lines = [f"vkattn {vk.get('version')} on {vk.get('device')} ({vk.get('driver')}) | torch {torch_info.get('version')} "
             f"on the CPU ({torch_info.get('threads')} threads, BLAS {blas}) | {doc.get('cpu', 'CPU unknown')} | "
             f"{doc.get('date')}"]
    if doc.get("synthetic"):
        lines.append("SYNTHETIC figures (a test fixture), not a measurement")
    lines.append(f"{doc.get('rounds')} rounds alternating (vkattn on every shape, then torch on every shape); GFLOP/s by "
                 "vkattn's FLOP convention; med: median over the rounds of each round's median run; best: the "
                 "fastest run")
    lines.append("torch computes in float32 whatever the dtype column says (it applies to vkattn's storage); "
                 f"ratio = {RATIO_CONVENTION}")
    head = (f"{'B':>3} {'H':>3} {'KVH':>3} {'seq_q':>5} {'seq_k':>6} {'dqk':>4} {'dv':>4} {'causal':>12} {'dtype':>5}"
            f" | {'vkattn med':>10} {'best':>7} | {'torch med':>9} {'best':>7} | {'ratio med':>9} {'best':>6}")
    lines.append(head)
    notes = {}
    for e in doc["entries"]:
        v, t = e["vkattn"], e["torch"]
        line = (f"{e['batch']:>3} {e['heads']:>3} {e['kv_heads']:>3} {e['seq_q']:>5} {e['seq_k']:>6} {e['dim_qk']:>4}"
                f" {e['dim_v']:>4} {e['causal']:>12} {e['dtype']:>5}")
        if v.get("status") == "ok":
            line += f" | {_num(v.get('gflops_median')):>10} {_num(v.get('gflops_best')):>7}"
        else:
            line += f" | {'skipped':>10} {'-':>7}"
            text = f"vkattn skipped: {v.get('reason')}"
            notes[text] = notes.get(text, 0) + 1
        if t.get("status") == "ok":
            line += f" | {_num(t.get('gflops_median')):>9} {_num(t.get('gflops_best')):>7}"
        else:
            line += f" | {'refused':>9} {'-':>7}"
            text = f"torch refused: {t.get('reason')}"
            notes[text] = notes.get(text, 0) + 1
        line += f" | {_num(e.get('ratio_median')):>9} {_num(e.get('ratio_best')):>6}"
        lines.append(line)
    found = [e["ratio_median"] for e in doc["entries"] if e.get("ratio_median")]
    if found:
        geo = statistics.geometric_mean(found)
        lines.append(f"geometric mean of the median ratios: {geo:.3g} over {len(found)} shape(s)")
    for text, count in notes.items():
        lines.append(f"  {text} ({count} shape{'s' if count > 1 else ''})")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------
# Command line


def parse_args(argv):
    p = ct.Parser(prog=PROG, description=__doc__.splitlines()[0],
                  epilog="See docs/performance.md for a recorded run.")
    p.add_argument("--vkattn", default=None, help=f"the vkattn binary (default: {ct.DEFAULT_VKATTN})")
    p.add_argument("--device", help="passed to vkattn bench --device (index or name substring; default: vkattn's "
                                    "choice, lavapipe on a machine without a GPU)")
    p.add_argument("--preset", action="append", choices=ct.PRESETS, default=[],
                   help="the shapes of `vkattn bench --sweep PRESET` (reduced on CPU devices); repeatable")
    p.add_argument("--shape", dest="shapes", action="append", type=parse_shape, default=[], metavar="K=V,...",
                   help="an explicit shape, e.g. heads=32,kv_heads=8,seq_q=1,seq_k=8192,dim=128,dtype=f16 (keys: batch, "
                        "heads, kv_heads, seq_q, seq_k, dim, dim_v, causal, dtype; the rest take vkattn bench's "
                        "defaults); repeatable. Without --preset and --shape: issue 12's comparison shapes")
    p.add_argument("--dtype", choices=ct.DTYPES, help="with --preset: vkattn's storage dtype (default: the sweep's, f16)")
    p.add_argument("--max-seq", type=ct.positive_int, help="with --preset: passed to vkattn bench --max-seq")
    p.add_argument("--rounds", type=ct.positive_int, default=DEFAULT_ROUNDS,
                   help=f"rounds of (vkattn, then torch) (default {DEFAULT_ROUNDS})")
    p.add_argument("--warmup", type=ct.non_negative_int, help=f"warm-up runs per shape and round on both sides (default "
                                                              f"{ct.DEFAULT_WARMUP}, capped by --budget; when given, exact)")
    p.add_argument("--iters", type=ct.positive_int, help=f"timed runs per shape and round on both sides (default "
                                                         f"{ct.DEFAULT_ITERS}, capped by --budget; when given, exact)")
    p.add_argument("--budget", type=ct.positive_float, default=DEFAULT_BUDGET,
                   help=f"without --warmup/--iters: seconds the timed runs of one shape may take per round, on each "
                        f"side (default {DEFAULT_BUDGET:g})")
    p.add_argument("--threads", type=ct.positive_int, help=f"torch.set_num_threads (default: the cores this process may "
                                                           f"use, {cpu_threads()} here)")
    p.add_argument("--seed", type=int, default=1, help="seed of torch's random inputs (vkattn uses its own, 1)")
    p.add_argument("--out", metavar="FILE", help="write the results (both sides merged per shape) as JSON here")
    p.add_argument("--from-json", metavar="FILE", help="re-print the table of a results file; needs no torch, no vkattn")
    p.add_argument("--dry-run", action="store_true", help="print the plan and exit; runs nothing")
    args = p.parse_args(argv)

    if args.from_json:
        others = [f"--{n.replace('_', '-')}" for n in ("vkattn", "device", "dtype", "max_seq", "warmup", "iters",
                                                        "threads", "out")
                  if getattr(args, n) is not None]
        others += ["--preset"] * bool(args.preset) + ["--shape"] * bool(args.shapes) + ["--dry-run"] * args.dry_run
        if others:
            p.error(f"--from-json re-prints a recorded file; {', '.join(others)} would be ignored")
        if not os.path.isfile(args.from_json):
            p.error(f"--from-json {args.from_json}: no such file")
        return args
    if (args.dtype or args.max_seq) and not args.preset:
        p.error(f"{'--dtype' if args.dtype else '--max-seq'} applies to --preset's sweeps; an explicit --shape carries "
                "its own")
    args.preset = list(dict.fromkeys(args.preset))
    if not args.preset and not args.shapes:
        args.shapes = default_shapes()
    args.threads = args.threads or cpu_threads()
    if args.vkattn is None:
        args.vkattn = ct.default_vkattn()
    if args.out:
        parent = os.path.dirname(os.path.abspath(args.out))
        if os.path.isdir(args.out) or not os.path.isdir(parent):
            p.error(f"--out {args.out}: {'a directory' if os.path.isdir(args.out) else 'its directory does not exist'}")
    if not args.dry_run and not ct.is_executable(args.vkattn):
        p.error(f"--vkattn {args.vkattn}: no such executable (build it: cmake --preset release && "
                "cmake --build --preset release)")
    return args


def dry_run(args):
    print("plan (dry run: nothing is run)")
    print(f"  {args.rounds} round(s), each: vkattn on every shape, then torch on every shape")
    missing = "" if ct.is_executable(args.vkattn) else "   (binary not found)"
    for label, cmd, preset in vkattn_runs(args):
        shapes = f" (the shapes of the {preset} sweep on the device)" if preset else ""
        print(f"  vkattn {label}: {' '.join(cmd)}{shapes}{missing}")
    print(f"  torch on the CPU, {args.threads} thread(s): {TORCH_METHOD}; the f32 and f16 rows of one shape share one "
          "measurement")
    if ct.counts_given(args):
        counts = f"warmup {ct.warmup_count(args)}, iters {ct.iters_count(args)}, exactly, on both sides"
    else:
        counts = (f"warmup up to {ct.DEFAULT_WARMUP}, iters up to {ct.DEFAULT_ITERS} within {args.budget:g} s per shape "
                  "and round, on both sides")
    print(f"  timing: vkattn GPU timestamps, torch a monotonic clock around each call; medians; {counts}")
    print(f"  ratio: {RATIO_CONVENTION}")
    print(f"  output: {args.out or '(no --out: the table only)'}")
    return 0


def from_json(args):
    print(format_table(ct.read_tool_results(args.from_json, TOOL, PROG)))
    return 0


def run(args):
    torch = import_torch(purpose="the CPU side")
    for name in ("matmul", "softmax", "repeat_interleave", "inference_mode", "set_num_threads"):
        if not hasattr(torch, name):
            raise MissingDependency(f"torch {torch.__version__} has no torch.{name}")
    side = TorchCpu(torch, args.threads, ct.warmup_count(args), ct.iters_count(args), args.budget, ct.counts_given(args),
                    args.seed)
    info = {"date": datetime.date.today().isoformat(), "started": datetime.datetime.now().isoformat(timespec="seconds"),
            "cpu": cpu_model(), "cores": cpu_threads(), "python": platform.python_version(), "torch": side.info()}
    vk_runs = vkattn_runs(args)
    info["commands"] = [" ".join(cmd) for _, cmd, _ in vk_runs]
    info["timing"] = {"vkattn": "vkattn bench's GPU timestamps (its median and fastest run per round)",
                      "torch": "time.perf_counter around each call (median and fastest per round), warm-ups apart",
                      "warmup": ct.warmup_count(args), "iters": ct.iters_count(args),
                      "budget_s": None if ct.counts_given(args) else args.budget, "seed": args.seed,
                      "order": "per round: vkattn on every shape, then torch on every shape"}
    loads = []
    meta, shapes, vk_rounds, torch_rounds = run_rounds(args, vk_runs, side, args.rounds, loads=loads)
    loads.append({"round": None, "side": "end", "load_1min": load_average()})
    info["load_average"] = loads  # this run itself adds about 2 (lavapipe's and torch's threads)
    if not any(word in meta["device"].lower() for word in ("llvmpipe", "cpu", "swiftshader")):
        print(f"{PROG}: warning: vkattn ran on {meta['device']}, not on the CPU: the ratio compares that device with "
              "torch on the CPU", file=sys.stderr)
    info["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
    doc = merge(meta, shapes, vk_rounds, torch_rounds, info)
    if args.out:
        ct.write_tool_results(args.out, doc)
    print(format_table(doc))
    if args.out:
        print(f"results: {args.out}")
    return 0


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    return ct.tool_main(PROG, args, dry_run, from_json, run)


if __name__ == "__main__":
    sys.exit(main())
