#!/usr/bin/env python3
"""What the Python package adds to a decode step: vkattn.flash_attn_with_kvcache on DeviceArrays
against the same prepared call run from C++, in one process, alternating.

The step: batch 1, 32 query heads, 8 KV heads, head dim 128, f16, a dense KV cache of 4096 tokens
(--cache) holding 4095, one new token appended (at token 4095, the same row every call) and attended
with causal masking: 4096 keys. Both sides run the same PreparedAttention (the Context's plan cache) on
the same device Buffers:

  python: flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=..., causal=True), each
          call timed: argument checks, the plan-cache lookup, the output's allocation, the block
          table's and lengths' upload, the run, the wait.
  python_out: the same with out= the same DeviceArray every call (no allocation).
  c++:    the module's timing hook (_vkattn.kvcache_attention(..., time_iterations=N)): the call
          gathered and planned once, its buffers kept, then PreparedAttention::run (record, submit,
          wait) timed N times, the GIL released.

Each call is timed twice: wall-clock, and the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID on
both sides). On a CPU device (lavapipe) the attention runs on the driver's threads while the caller
sleeps on the fence, so the thread CPU time is the host's own work, unblurred by the run's jitter:
on a loaded machine a 4096-key step varies by milliseconds of wall time, far more than the Python
layer costs.

Rounds alternate the two (ROUNDS x CALLS calls each); the report is the min, 10th percentile and
median microseconds per call of each and their differences, printed as one JSON line (and written with --json FILE as a
vkattn-bench-results/1 document: one run per side, each case's result holding us_min, us_median,
us_p10, ms_median, cpu_us_min, cpu_us_p10, cpu_us_median).

    PYTHONPATH=build/release/python python3 bench/python_overhead.py [--rounds 15] [--calls 20] [--cache 4096] [--json FILE]
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

import vkattn  # noqa: E402
from vkattn import _vkattn  # noqa: E402

BATCH, HEADS, KV_HEADS, DIM = 1, 32, 8, 128


def tenth(values):
    """The 10th percentile: the typical fast call, past the few that luck made fastest."""
    return sorted(values)[len(values) // 10]


def summary(samples):
    """samples: (wall, thread CPU) microseconds per call."""
    wall, cpu = [w for w, _ in samples], [c for _, c in samples]
    return {"us_min": round(min(wall), 2), "us_p10": round(tenth(wall), 2), "us_median": round(statistics.median(wall), 2),
            "ms_median": statistics.median(wall) / 1000.0, "cpu_us_min": round(min(cpu), 2),
            "cpu_us_p10": round(tenth(cpu), 2), "cpu_us_median": round(statistics.median(cpu), 2), "calls": len(samples)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="alternations of the two sides")
    parser.add_argument("--calls", type=int, default=20, help="timed calls per side and round")
    parser.add_argument("--cache", type=int, default=4096,
                        help="KV cache tokens (keys attended); a small cache shows the host's share with less noise")
    parser.add_argument("--device", default=None, help="a vkattn.Context device (index or name substring)")
    parser.add_argument("--json", metavar="FILE", help="also write a vkattn-bench-results/1 document here")
    args = parser.parse_args()
    cache = args.cache
    case = f"decode_b{BATCH}_h{HEADS}_g{KV_HEADS}_d{DIM}_k{cache}_f16"

    ctx = vkattn.Context(args.device)
    rng = np.random.default_rng(0)

    def device(*shape):
        return vkattn.asarray(rng.standard_normal(shape).astype(np.float16), context=ctx)

    q, k, v = device(BATCH, 1, HEADS, DIM), device(BATCH, 1, KV_HEADS, DIM), device(BATCH, 1, KV_HEADS, DIM)
    k_cache, v_cache = device(BATCH, cache, KV_HEADS, DIM), device(BATCH, cache, KV_HEADS, DIM)
    lengths = np.full(BATCH, cache - 1, dtype=np.int32)

    def python_call():
        return vkattn.flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=lengths, causal=True)

    out = python_call()  # plans (and on lavapipe compiles the pipelines) once
    for _ in range(3):
        python_call()

    def python_out_call():
        return vkattn.flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=lengths, causal=True, out=out)

    def timed(call):
        start, cpu_start = time.perf_counter_ns(), time.thread_time_ns()
        call()
        cpu = time.thread_time_ns() - cpu_start
        return (time.perf_counter_ns() - start) / 1000.0, cpu / 1000.0

    table = np.arange(BATCH, dtype=np.int32).reshape(BATCH, 1)

    def cpp_calls(n):
        return _vkattn.kvcache_attention(
            ctx, q, k_cache, v_cache, out, "f16", table, lengths, k_new=k, v_new=v,
            causal="bottom-right", time_iterations=n)

    cpp_calls(3)
    python_us, python_out_us, cpp_us = [], [], []
    for _ in range(args.rounds):
        python_us.extend(timed(python_call) for _ in range(args.calls))
        python_out_us.extend(timed(python_out_call) for _ in range(args.calls))
        cpp_us.extend(cpp_calls(args.calls))

    py_s, py_out_s, cpp_s = summary(python_us), summary(python_out_us), summary(cpp_us)
    record = {
        "case": case, "device": ctx.device_name, "driver": ctx.device["driver_info"],
        "python": py_s, "python_out": py_out_s, "cpp": cpp_s,
        "overhead_us_min": round(py_s["us_min"] - cpp_s["us_min"], 2),
        "overhead_us_p10": round(py_s["us_p10"] - cpp_s["us_p10"], 2),
        "overhead_us_median": round(py_s["us_median"] - cpp_s["us_median"], 2),
        "overhead_cpu_us_min": round(py_s["cpu_us_min"] - cpp_s["cpu_us_min"], 2),
        "overhead_cpu_us_p10": round(py_s["cpu_us_p10"] - cpp_s["cpu_us_p10"], 2),
        "overhead_cpu_us_median": round(py_s["cpu_us_median"] - cpp_s["cpu_us_median"], 2),
        "overhead_out_us_p10": round(py_out_s["us_p10"] - cpp_s["us_p10"], 2),
        "overhead_out_us_median": round(py_out_s["us_median"] - cpp_s["us_median"], 2),
        "overhead_out_cpu_us_p10": round(py_out_s["cpu_us_p10"] - cpp_s["cpu_us_p10"], 2),
        "rounds": args.rounds, "calls_per_round": args.calls, "plan_cache": ctx.plan_cache_info(),
    }
    print(json.dumps(record))
    if args.json:
        command = " ".join([os.path.basename(sys.executable), *sys.argv])
        meta = {"device": ctx.device_name, "driver": ctx.device["driver_info"], "host_cpu": platform.processor() or platform.machine(),
                "date": benchlib.today()}
        runs = []
        for label, result in (("vkattn-python flash_attn_with_kvcache", py_s),
                              ("vkattn-python flash_attn_with_kvcache(out=)", py_out_s),
                              ("vkattn C++ PreparedAttention::run", cpp_s)):
            runs.append({"label": label, "program": label.split()[0], "command": command, "binary": None,
                         "version": vkattn.__version__, "vk_driver_files": os.environ.get("VK_DRIVER_FILES"),
                         "started": benchlib.now(), "comparison": "python vs c++ decode step",
                         "note": "wall-clock microseconds per call, alternating rounds (bench/python_overhead.py)",
                         "cases": [{"name": case, "case_file": None, "args": [], "command": [command],
                                    "result": {**result, "tflops": None}}]})
        benchlib.write_json(args.json, {"format": benchlib.FORMAT, **meta, "runs": runs})


if __name__ == "__main__":
    main()
