#!/usr/bin/env python3
"""Decode on lavapipe before/after the subgroup kernel's decode form, against the copy bandwidth of
the same run (issue 12). Writes the raw rows and the summary tables to stdout.

    python3 bench/results/lavapipe-2026-11-25-decode-bandwidth.py --before OLD/vkattn --after NEW/vkattn [--rounds 3]
    python3 bench/results/lavapipe-2026-11-25-decode-bandwidth.py --jit --before OLD/vkattn --after NEW/vkattn
    python3 bench/results/lavapipe-2026-11-25-decode-bandwidth.py --cpu --before OLD/vkattn --after NEW/vkattn
    python3 bench/results/lavapipe-2026-11-25-decode-bandwidth.py --summarize OUTPUT   (the tables again)

Timing: each round runs every shape with both binaries, one process each, alternating which goes
first from round to round; the after runs add `--copy` (the before binary predates it), and that
copy (same round, same shape, seconds later) is the reference for both. The machine is shared: the
1-minute load average is recorded before every run. --jit: first dispatch (pipeline JIT + a small
call) with Mesa's disk cache off, two fresh processes per shape and binary. --cpu: the process's CPU
time (user + system, both lavapipe threads) per call, from a run of 22 timed calls less one of 2: far
less sensitive than wall time to the other jobs on a shared machine (not to their use of the caches).
"""
import argparse
import csv
import io
import os
import statistics
import subprocess
import sys
import time

DECODE = ["--heads", "32", "--kv-heads", "8", "--seq-q", "1", "--dim", "128"]
SHAPES = [  # name, args, counts
    ("decode 8192 f16", DECODE + ["--seq-k", "8192", "--dtype", "f16"], ["--warmup", "2", "--iters", "7"]),
    ("decode 32768 f16", DECODE + ["--seq-k", "32768", "--dtype", "f16"], ["--warmup", "2", "--iters", "7"]),
    ("decode 8192 f32", DECODE + ["--seq-k", "8192", "--dtype", "f32"], ["--warmup", "2", "--iters", "7"]),
    ("decode 32768 f32", DECODE + ["--seq-k", "32768", "--dtype", "f32"], ["--warmup", "2", "--iters", "7"]),
    # d124: not whole 16-byte chunks of f16, the decode form's element-wise pipeline
    ("decode 8192 f16 d124", ["--heads", "32", "--kv-heads", "8", "--seq-q", "1", "--dim", "124", "--seq-k", "8192",
                              "--dtype", "f16"], ["--warmup", "2", "--iters", "7"]),
    ("prefill B1 H8 S1024 d64 f16", ["--batch", "1", "--heads", "8", "--seq-q", "1024", "--dim", "64", "--dtype", "f16"],
     ["--warmup", "1", "--iters", "3"]),
    ("prefill B1 H8 S1024 d128 f16", ["--batch", "1", "--heads", "8", "--seq-q", "1024", "--dim", "128", "--dtype", "f16"],
     ["--warmup", "1", "--iters", "3"]),
]
JIT_SHAPES = [("seq_q 1 d128 f16", "1", "128", "f16"), ("seq_q 1 d128 f32", "1", "128", "f32"),
              ("seq_q 1 d128 bf16", "1", "128", "bf16"), ("seq_q 1 d64 f16", "1", "64", "f16"),
              ("seq_q 2 d128 f16", "2", "128", "f16"), ("seq_q 4 d128 f16", "4", "128", "f16"),
              ("seq_q 1 d124 f16 (element-wise)", "1", "124", "f16"), ("seq_q 1 d124 bf16 (element-wise)", "1", "124", "bf16")]


def bench(binary, args, env=None):
    load = os.getloadavg()[0]
    proc = subprocess.run([binary, "bench", "--csv", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=1800)
    if proc.returncode != 0:
        sys.exit(f"{binary} bench {' '.join(args)}: {proc.stderr.strip()}")
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    return rows[0], load


def num(row, key):
    value = row.get(key)
    return float(value) if value not in (None, "") else None


def timing(args):
    device = None
    raw = []  # (round, shape, variant, row, load)
    for r in range(args.rounds):
        for name, shape, counts in SHAPES:
            order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
            for variant in order:
                binary = args.before if variant == "before" else args.after
                extra = ["--copy"] if variant == "after" and name.startswith("decode") else []
                row, load = bench(binary, shape + counts + extra)
                device = device or f"{row['device']} | {row['driver']}"
                raw.append((r, name, variant, row, load))
                print(f"round {r} {name:30s} {variant:6s} load {load:4.1f} {row['kernel']:16s} x{row['splits']:>2s} "
                      f"ms median {float(row['ms_median']):9.2f} min {float(row['ms_min']):9.2f}", flush=True)

    print("\n## Raw rows (CSV of vkattn bench, with round, shape, variant and the load average before the run)\n")
    keys = []  # every column of any row (the before binary's CSV has no --copy columns)
    for _, _, _, row, _ in raw:
        keys += [k for k in row if k not in keys]
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["round", "shape", "variant", "load1"] + keys)
    for r, name, variant, row, load in raw:
        out.writerow([str(r), name, variant, f"{load:.2f}"] + [row.get(k) or "" for k in keys])
    sys.stdout.flush()
    summarize(raw, device, args.rounds)


def summarize(raw, device, rounds):
    """raw: (round, shape, variant, row, load) as timing() collects them."""
    print(f"\n## Summary ({device}; {rounds} rounds)\n")
    print("ms: the rounds' median times (each the median of that run's timed calls), their median, and the "
          "least single call. GFLOP/s and K/V GB/s (bytes of K and V over the time) from the median of the "
          "rounds' medians. Copies: the after run's `--copy` in each round (as many bytes as K and V, by a "
          "copy shader moving 16 bytes per invocation and by vkCmdCopyBuffer, median times); each round's "
          "ratio divides that round's K/V GB/s (its median time) by that round's copy GB/s, and the table "
          "gives the median of the rounds' ratios (min-max).\n")
    print("| shape | variant | kernel | ms median per round | ms median | ms min | GFLOP/s | K/V GB/s | "
          "copy shader GB/s per round | K/V ÷ shader copy | vkCmdCopyBuffer GB/s (median) | K/V ÷ vkCmdCopyBuffer | "
          "speed-up (medians) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    names = []
    for _, n, _, _, _ in raw:
        names += [n] if n not in names else []
    for name in names:
        base = None
        copies = {r: row for r, n, v, row, _ in raw if n == name and v == "after" and row.get("copy_shader_gbps")}
        for variant in ("before", "after"):
            runs = [(r, row) for r, n, v, row, _ in raw if n == name and v == variant]
            meds = [float(row["ms_median"]) for _, row in runs]
            med, lo = statistics.median(meds), min(float(row["ms_min"]) for _, row in runs)
            row0 = runs[0][1]
            gflops = float(row0["tflops"]) * 1e3 * float(row0["ms_median"]) / med
            cells = [name, variant, f"{row0['kernel']} x{row0['splits']}", ", ".join(f"{m:.1f}" for m in meds),
                     f"{med:.1f}", f"{lo:.1f}", f"{gflops:.2f}"]
            if copies:
                kv_bytes = float(next(iter(copies.values()))["kv_bytes"])
                shader = [float(copies[r]["copy_shader_gbps"]) for r, _ in runs]
                transfer = [float(copies[r]["copy_transfer_gbps"]) for r, _ in runs]
                kv = [kv_bytes / (float(row["ms_median"]) * 1e6) for _, row in runs]
                by_shader = [k / c for k, c in zip(kv, shader)]
                by_transfer = [k / c for k, c in zip(kv, transfer)]
                cells += [f"{kv_bytes / (med * 1e6):.2f}", ", ".join(f"{c:.2f}" for c in shader),
                          f"{statistics.median(by_shader):.2f} ({min(by_shader):.2f}-{max(by_shader):.2f})",
                          f"{statistics.median(transfer):.1f}",
                          f"{statistics.median(by_transfer):.3f} ({min(by_transfer):.3f}-{max(by_transfer):.3f})"]
            else:
                cells += ["", "", "", "", ""]
            cells.append("" if base is None else f"{base / med:.2f}x")
            base = med if base is None else base
            print("| " + " | ".join(cells) + " |")


def from_output(path):
    """Re-reads the raw rows of an earlier timing output (--summarize)."""
    lines = open(path, encoding="utf-8").read().splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("round,shape,variant,load1,"))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].strip()), len(lines))
    raw = []
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:end]))):
        raw.append((int(row["round"]), row["shape"], row["variant"], row, float(row["load1"])))
    device = f"{raw[0][3]['device']} | {raw[0][3]['driver']}"
    summarize(raw, device, max(r for r, *_ in raw) + 1)


def jit(args):
    print("## First dispatch with Mesa's disk cache off (MESA_SHADER_CACHE_DISABLE=true): H32/KV8, 256 keys, "
          "one run; the split pass's pipeline JIT, the combine's, and the run\n")
    print("| shape | variant | kernel | first dispatch ms (two processes) |")
    print("|---|---|---|---|")
    for name, seq_q, dim, dtype in JIT_SHAPES:
        for variant, binary in (("before", args.before), ("after", args.after)):
            times, kernel = [], ""
            for _ in range(2):
                row, _ = bench(binary, ["--heads", "32", "--kv-heads", "8", "--seq-q", seq_q, "--seq-k", "256", "--dim", dim,
                                        "--dtype", dtype, "--warmup", "0", "--iters", "1"],
                               env={"MESA_SHADER_CACHE_DISABLE": "true"})
                times.append(float(row["ms_median"]))
                kernel = f"{row['kernel']} x{row['splits']}"
            print(f"| {name} | {variant} | {kernel} | {', '.join(f'{t:.0f}' for t in times)} |", flush=True)


def cpu_seconds(binary, args):
    pid = os.fork()
    if pid == 0:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.execv(binary, [binary, "bench", *args])
    _, status, usage = os.wait4(pid, 0)
    if status != 0:
        sys.exit(f"{binary} bench {' '.join(args)}: exit status {status}")
    return usage.ru_utime + usage.ru_stime


def cpu(args):
    print("## CPU time per call (user + system of the process: 22 timed calls less 2, after one warm-up; "
          f"{args.rounds} rounds, alternating)\n")
    print("| shape | variant | CPU ms per call (rounds) | median |")
    print("|---|---|---|---|")
    for name, shape, _ in SHAPES:
        per = {"before": [], "after": []}
        for binary in (args.before, args.after):  # Mesa's disk cache gets the pipelines first
            cpu_seconds(binary, shape + ["--warmup", "0", "--iters", "1"])
        for r in range(args.rounds):
            for variant in (["before", "after"] if r % 2 == 0 else ["after", "before"]):
                binary = args.before if variant == "before" else args.after
                a = cpu_seconds(binary, shape + ["--warmup", "1", "--iters", "2"])
                b = cpu_seconds(binary, shape + ["--warmup", "1", "--iters", "22"])
                per[variant].append((b - a) / 20 * 1e3)
        for variant in ("before", "after"):
            v = per[variant]
            print(f"| {name} | {variant} | {', '.join(f'{x:.1f}' for x in v)} | {statistics.median(v):.1f} |", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before")
    parser.add_argument("--after")
    parser.add_argument("--summarize", metavar="OUTPUT", help="the summary of an earlier timing output's raw rows")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jit", action="store_true", help="first-dispatch times instead of the timing rounds")
    parser.add_argument("--cpu", action="store_true", help="CPU time per call instead of the timing rounds")
    args = parser.parse_args()
    if args.summarize:
        return from_output(args.summarize)
    if not args.before or not args.after:
        parser.error("--before and --after are required")
    print(f"# {' '.join(sys.argv)}\n# date {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, host {os.uname().nodename}, "
          f"{os.cpu_count()} CPUs\n")
    (jit if args.jit else cpu if args.cpu else timing)(args)


if __name__ == "__main__":
    main()
