#!/usr/bin/env python3
"""The benchmark driver: `vkattn bench --json` for every case of one or more case files, recorded.

    /usr/bin/python3 bench/run.py --vkattn build/release/tools/vkattn issue12 serving
    /usr/bin/python3 bench/run.py --vkattn VKATTN --driver /opt/vkattn/mesa-25.0.7/lvp_icd.json \\
        --warmup 2 --iters 7 bench/cases/issue12.txt

Case files are bench/cases/*.txt (by path, or by name: `issue12`); each case runs in its own
process. The results go to bench/results/<device>-<date>.json (device as the run reports it, date in
UTC; lavapipe as lavapipe-mesa-VERSION): one file per device and date, each invocation appended to it as one run holding the command,
the binary's version, VK_DRIVER_FILES, and each case's result record as `vkattn bench --json` gave
it. `--out FILE` writes elsewhere (a proof run, a scratch file); `--results-dir` changes the folder.
bench/report.py turns bench/results/*.json into docs/performance.md's tables and plots.

First-dispatch (JIT) time, what building and compiling a shape's pipelines costs on lavapipe:

    /usr/bin/python3 bench/run.py --cold-shader-cache --warmup 1 --iters 3 first-dispatch \
        [--driver /opt/vkattn/mesa-25.0.7/lvp_icd.json]

runs each case with Mesa's shader cache in a new, empty folder (MESA_SHADER_CACHE_DIR), so that its
first run builds and JIT-compiles every pipeline; the record's first_run_ms (less ms_median: the JIT
time) and first_dispatches (per pipeline: build_ms + first_ms - warm_ms) are the figures.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile

import benchlib as bl


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="Case files: bench/cases/README.md. Results format: bench/benchlib.py.")
    p.add_argument("case_files", nargs="+", help="case files (paths, or names in bench/cases)")
    p.add_argument("--vkattn", default=os.path.join(os.path.dirname(bl.HERE), "build", "release", "tools", "vkattn"),
                   help="the vkattn binary (default: build/release/tools/vkattn)")
    p.add_argument("--driver", default="system",
                   help="'system' (the Vulkan loader's choice, the default) or an ICD manifest, passed as VK_DRIVER_FILES")
    p.add_argument("--device", help="passed to vkattn bench --device")
    p.add_argument("--case", action="append", help="run only this case (repeatable)")
    p.add_argument("--warmup", type=int, help="vkattn bench --warmup for every case")
    p.add_argument("--iters", type=int, help="vkattn bench --iters for every case")
    p.add_argument("--budget", type=float, help="vkattn bench --budget for every case")
    p.add_argument("--check", action="store_true", help="vkattn bench --check for every case")
    p.add_argument("--copy", action="store_true", help="vkattn bench --copy for every case")
    p.add_argument("--label", default="vkattn", help="the run's label in the results file (default: vkattn)")
    p.add_argument("--note", help="a line saying why or how this run was made, kept with it")
    p.add_argument("--results-dir", default=bl.RESULTS_DIR, help="where <device>-<date>.json goes (default bench/results)")
    p.add_argument("--out", help="write (or append) to this file instead of <results-dir>/<device>-<date>.json")
    p.add_argument("--cold-shader-cache", action="store_true",
                   help="run each case with Mesa's shader cache in a new, empty folder (MESA_SHADER_CACHE_DIR): "
                        "its first run builds and JIT-compiles every pipeline (first-dispatch time)")
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    return p.parse_args(argv)


def extra_options(args):
    extra = []
    for flag, value in (("--warmup", args.warmup), ("--iters", args.iters), ("--budget", args.budget),
                        ("--device", args.device)):
        if value is not None:
            extra += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    if args.check:
        extra.append("--check")
    if args.copy:
        extra.append("--copy")
    return extra


def run_one(args, case_args, extra):
    """One case's process; with --cold-shader-cache, Mesa's shader cache a new, empty folder of its own."""
    if not args.cold_shader_cache:
        return bl.run_case(args.vkattn, args.driver, case_args, extra)
    with tempfile.TemporaryDirectory(prefix="vkattn-shader-cache-") as cache:
        return bl.run_case(args.vkattn, args.driver, case_args, extra, env_extra={"MESA_SHADER_CACHE_DIR": cache})


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        cases = bl.load_cases(args.case_files, args.case)
    except (bl.CaseError, OSError) as e:
        sys.exit(f"run.py: {e}")
    extra = extra_options(args)
    if args.dry_run:
        prefix = "" if args.driver == "system" else f"VK_DRIVER_FILES={shlex.quote(args.driver)} "
        if args.cold_shader_cache:
            prefix += "MESA_SHADER_CACHE_DIR=<new empty folder> "
        for _, name, case_args in cases:
            print(f"{name}: {prefix}{shlex.join([args.vkattn, 'bench', '--json', *case_args, *extra])}")
        return 0
    if not os.access(args.vkattn, os.X_OK):
        sys.exit(f"run.py: {args.vkattn} is not an executable file (--vkattn)")

    run = {"label": args.label, "command": shlex.join(["bench/run.py", *(sys.argv[1:] if argv is None else argv)]),
           "binary": args.vkattn, "version": bl.binary_version(args.vkattn),
           "vk_driver_files": None if args.driver == "system" else args.driver, "started": bl.now(), "cases": []}
    if args.note:
        run["note"] = args.note
    meta = None
    try:
        for case_file, name, case_args in cases:
            command, doc, row = run_one(args, case_args, extra)
            if meta is None:
                meta = {"device": doc["device"], "driver": doc["driver"], "host_cpu": doc.get("host_cpu"),
                        "date": run["started"][:10]}
                run["version"] += f"; library {doc.get('version')}"
            run["cases"].append({"name": name, "case_file": case_file, "args": case_args,
                                 "command": [os.path.basename(command[0]), *command[1:]], "result": row})
            g = bl.gflops(row)
            first = ""
            if args.cold_shader_cache and row.get("first_run_ms") is not None:
                first = (f", first run {row['first_run_ms']:.0f} ms ({row.get('first_run_pipelines')} pipelines built,"
                         f" JIT {row['first_run_ms'] - row['ms_median']:.0f} ms)")
            print(f"{name}: {row['ms_median']:.3f} ms median, {g:.3f} GFLOP/s, {row.get('kernel')}"
                  f" x{row.get('splits')}{first}", flush=True)
    except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError, KeyError) as e:
        sys.exit(f"run.py: {' '.join(str(e).split())}")
    path = args.out or bl.results_path(args.results_dir, meta["device"], meta["driver"], meta["date"])
    try:
        bl.add_run(path, meta, run)
    except bl.CaseError as e:
        sys.exit(f"run.py: {e}")
    print(f"results: {path} ({meta['device']}, {meta['driver']}, {len(run['cases'])} cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
