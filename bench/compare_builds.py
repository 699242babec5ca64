#!/usr/bin/env python3
"""Two builds of vkattn side by side: `vkattn bench` of each on the same shapes, alternating, on one or
more Vulkan drivers, and the before/after table (GFLOP/s, median and best of the rounds).

    python3 bench/compare_builds.py --before OLD/vkattn --after build/release/tools/vkattn \\
        --driver system --driver /opt/vkattn/mesa-25.0.7/lvp_icd.json --rounds 3 --json out.json

A driver is `system` (the Vulkan loader's own choice) or an ICD manifest, given to the loader through
VK_DRIVER_FILES: two Mesa versions of lavapipe are two devices. Each round runs every shape on every
driver with `before` then `after` (their order swapped every other round), so both see the same
machine; a shared machine's load shows as spread between the rounds, which the table keeps (min and
median). The default shapes are issue 12's: fused prefill B1 H8 S1024 (d64 f32 and f16, d128 f16)
and decode with GQA 32/8, d128, f16 at 8k and 32k keys; and issue 38's serving batch (one 32k- and
seven 512-key sequences) decoded from a paged cache and packed.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

SHAPES = {
    "prefill d64 f32": ["--heads", "8", "--seq-q", "1024", "--dim", "64", "--dtype", "f32"],
    "prefill d64 f16": ["--heads", "8", "--seq-q", "1024", "--dim", "64", "--dtype", "f16"],
    "prefill d128 f16": ["--heads", "8", "--seq-q", "1024", "--dim", "128", "--dtype", "f16"],
    "decode 32/8 d128 8k f16": ["--heads", "32", "--kv-heads", "8", "--seq-q", "1", "--seq-k", "8192",
                                "--dim", "128", "--dtype", "f16"],
    "decode 32/8 d128 32k f16": ["--heads", "32", "--kv-heads", "8", "--seq-q", "1", "--seq-k", "32768",
                                 "--dim", "128", "--dtype", "f16"],
    # A serving batch (one 32k and seven 512-key sequences) from a paged cache and packed (issue 38).
    "paged decode 32/8 d128 32k+7x512 f16 hnd16": ["--heads", "32", "--kv-heads", "8", "--seq-q", "1",
                                                   "--lengths", "32768,512,512,512,512,512,512,512", "--dim",
                                                   "128", "--dtype", "f16", "--paged", "16", "--page-order", "hnd"],
    "packed decode 32/8 d128 32k+7x512 f16": ["--heads", "32", "--kv-heads", "8", "--seq-q", "1", "--lengths",
                                              "32768,512,512,512,512,512,512,512", "--dim", "128", "--dtype",
                                              "f16", "--varlen"],
}


def run_bench(binary, driver, shape_args):
    """One `vkattn bench --json` run: its single result row and the run's driver string."""
    env = dict(os.environ)
    if driver != "system":
        env["VK_DRIVER_FILES"] = driver
    proc = subprocess.run([binary, "bench", "--json", *shape_args], capture_output=True, text=True, env=env,
                          timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"{binary} bench {' '.join(shape_args)} on {driver}: exit {proc.returncode}: "
                           + " ".join(proc.stderr.split())[-300:])
    doc = json.loads(proc.stdout)
    row = doc["results"][0]
    if row.get("status") != "ok":
        raise RuntimeError(f"{binary}: shape {' '.join(shape_args)} skipped: {row.get('reason')}")
    return row, doc.get("driver", "?")


def summarise(rows):
    """GFLOP/s of the rounds' medians: the median over rounds, and the best round."""
    gflops = [r["tflops"] * 1e3 for r in rows]
    out = {"gflops_median": statistics.median(gflops), "gflops_best": max(gflops),
           "ms_median": statistics.median(r["ms_median"] for r in rows), "kernel": rows[-1].get("kernel"),
           "splits": rows[-1].get("splits")}
    firsts = [r["first_run_ms"] for r in rows if r.get("first_run_ms") is not None]
    if firsts:  # builds from before the first-run column have none
        out["first_run_ms_max"] = max(firsts)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="the older build's vkattn binary")
    parser.add_argument("--after", required=True, help="the newer build's vkattn binary")
    parser.add_argument("--driver", action="append", default=None,
                        help="'system' or an ICD manifest (VK_DRIVER_FILES); repeat for several (default: system)")
    parser.add_argument("--shape", action="append", choices=list(SHAPES), help="shapes to run (default: all)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", dest="json_out", help="write every run and the summary here")
    args = parser.parse_args()
    drivers = args.driver or ["system"]
    shapes = args.shape or list(SHAPES)
    for binary in (args.before, args.after):
        if not os.access(binary, os.X_OK):
            sys.exit(f"compare_builds: {binary} is not an executable file")
    if args.rounds < 1:
        sys.exit(f"compare_builds: --rounds must be at least 1 (got {args.rounds})")

    runs = {}  # (driver, shape, side) -> [row]
    driver_names = {}
    try:
        for rnd in range(args.rounds):
            sides = ("before", "after") if rnd % 2 == 0 else ("after", "before")
            for driver in drivers:
                for shape in shapes:
                    for side in sides:
                        binary = args.before if side == "before" else args.after
                        row, name = run_bench(binary, driver, SHAPES[shape])
                        driver_names[driver] = name
                        runs.setdefault((driver, shape, side), []).append(row)
                        print(f"round {rnd + 1} {name} | {shape} | {side}: {row['tflops'] * 1e3:.3f} GFLOP/s "
                              f"({row.get('kernel')})", file=sys.stderr, flush=True)
    except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError, KeyError, IndexError) as e:
        sys.exit(f"compare_builds: {' '.join(str(e).split())}")

    summary = []
    for driver in drivers:
        print(f"\n{driver_names[driver]} ({args.rounds} rounds, alternating; GFLOP/s median over rounds [best])")
        print(f"| shape | before | after | after/before | kernel after | first run after (ms, max) |")
        print("|---|---|---|---|---|---|")
        for shape in shapes:
            b, a = summarise(runs[(driver, shape, "before")]), summarise(runs[(driver, shape, "after")])
            ratio = a["gflops_median"] / b["gflops_median"] if b["gflops_median"] > 0 else float("inf")
            first = f"{a['first_run_ms_max']:.0f}" if "first_run_ms_max" in a else "-"
            print(f"| {shape} | {b['gflops_median']:.2f} [{b['gflops_best']:.2f}] | {a['gflops_median']:.2f} "
                  f"[{a['gflops_best']:.2f}] | {ratio:.1f}x | {a['kernel']} x{a['splits']} | {first} |")
            summary.append({"driver": driver_names[driver], "shape": shape, "before": b, "after": a, "ratio": ratio})
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump({"before": args.before, "after": args.after, "rounds": args.rounds, "summary": summary,
                       "runs": [{"driver": driver_names[d], "shape": s, "side": side, "rows": rows}
                                for (d, s, side), rows in runs.items()]}, f, indent=1)


if __name__ == "__main__":
    main()
