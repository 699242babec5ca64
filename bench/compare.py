#!/usr/bin/env python3
"""Programs side by side on the cases of case files, alternating in rounds: the ratio table.

    /usr/bin/python3 bench/compare.py --a OLD/tools/vkattn --b build/release/tools/vkattn issue12 serving
    /usr/bin/python3 bench/compare.py --a build/release/tools/vkattn --b torch-cpu issue12 --rounds 3
    /usr/bin/python3 bench/compare.py --a build/release/tools/vkattn --b ggml=GGML-BUILD/bin/test-backend-ops issue12
    /usr/bin/python3 bench/compare.py --a build/release/tools/vkattn --b torch-gpu:flash --b torch-gpu:cudnn \\
        --b torch-gpu:efficient --b torch-gpu:math --json h100.json decode-gpu prefill-gpu
    /usr/bin/python3 bench/compare.py --a OLD/vkattn --b NEW/vkattn --driver system \\
        --driver /opt/vkattn/mesa-25.0.7/lvp_icd.json --case decode-h32-kv8-d128-k32768-f16 --json out.json issue12
    /usr/bin/python3 bench/compare.py --dry-run --a build/release/tools/vkattn --b torch-cpu:2 smoke
    /usr/bin/python3 bench/compare.py --backward --a build/release/tools/vkattn --b torch-cpu issue12

A program (--a, and --b, repeatable: each B is shown against A; --before and --after are the same) is
- a vkattn binary, run as `vkattn bench --json CASE-ARGS` in a process per case, optionally `LABEL=PATH`;
- `torch-cpu[:THREADS]`, PyTorch on the CPU timing the textbook attention in float32 (bench/peer_torch_cpu.py);
- `torch-gpu[:BACKEND]`, torch.nn.functional.scaled_dot_product_attention on CUDA with one backend allowed
  (flash, the default; efficient, cudnn or math), timed with CUDA events (bench/peer_torch_gpu.py);
- `ggml=PATH` (or `LABEL=PATH` with PATH named test-backend-ops): ggml's FLASH_ATTN_EXT through
  `test-backend-ops perf --test-file` on each case written as a --test-file line (bench/peer_ggml.py;
  --ggml-backend picks the backend, default Vulkan0; the driver's VK_DRIVER_FILES applies to it too).
The peers take plain dense cases (batch, heads, kv-heads, seq-q, seq-k, dim, dim-v, dtype, causal; ggml
no causal) and are refused any other before anything runs. Counts as vkattn bench takes them: --warmup/
--iters exactly when given alone; with --budget SECONDS they are caps within that budget per case, on
vkattn and the torch programs alike (ggml's counts are its own).
A driver is `system` (the Vulkan loader's own choice) or an ICD manifest, given to the loader through
VK_DRIVER_FILES: two Mesa versions of lavapipe are two devices. Each round runs every case on every
driver with every program, in reverse order every other round, so all see the same machine; a shared
machine's load shows as spread between the rounds, which the table keeps: GFLOP/s as the median over
rounds of each run's median, and the best round, and B/A of both.

Case files: bench/cases/*.txt (default: issue12 and serving). --json writes every run in the results
format of bench/run.py (bench/benchlib.py), one run per program and driver, each case once per round,
plus the summary; bench/report.py draws the recorded files. --dry-run prints what each program would
run on each case and runs nothing (no torch needed).

--backward (or --backward in a case's line) times the backward pass instead: vkattn as `vkattn bench
--backward` (its result must say "backward": true), torch-cpu as torch.autograd of its textbook
attention, the backward alone (bench/peer_torch_cpu.py); FLOPs 2.5x the forward's on both sides
(benchlib.BACKWARD_FLOP_FACTOR). torch-gpu and ggml refuse backward cases.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys

import benchlib as bl
import peer_ggml
import peer_torch_cpu
import peer_torch_gpu

DEFAULT_CASES = ["issue12", "serving"]
VKATTN = "vkattn"


class Program:
    """One program of the comparison: a vkattn binary, or a peer through its adapter (bench/peer_*.py)."""

    def __init__(self, spec, side, warmup=None, iters=None, ggml_backend=peer_ggml.DEFAULT_BACKEND, budget_s=None):
        label, _, path = spec.rpartition("=") if "=" in spec else ("", "", spec)
        kind, _, option = path.partition(":")
        self.path, self.adapter = path, None
        if kind == peer_torch_cpu.KIND:
            self.kind, self.adapter = kind, peer_torch_cpu.TorchCpu(option, warmup, iters, budget_s)
        elif kind == peer_torch_gpu.KIND:
            self.kind, self.adapter = kind, peer_torch_gpu.TorchGpu(option, warmup, iters, budget_s)
        elif label == peer_ggml.KIND or os.path.basename(path) == "test-backend-ops":
            self.kind, self.adapter = peer_ggml.KIND, peer_ggml.Ggml(path, ggml_backend)
        else:
            self.kind = VKATTN
        self.label = label or (path if self.kind in (peer_torch_cpu.KIND, peer_torch_gpu.KIND)
                               else self.kind if self.kind == peer_ggml.KIND else side)

    def check(self):
        if self.adapter is not None:
            self.adapter.check()
        elif not os.access(self.path, os.X_OK):
            raise bl.CaseError(f"{self.path} is not an executable file")

    def runs_a_binary(self):
        return self.kind in (VKATTN, peer_ggml.KIND)

    def refuse(self, name, case_args):
        """Raises CaseError when this program cannot run the case (before anything runs)."""
        if self.adapter is None:
            return
        try:
            reason = self.adapter.refuse(name, dense_shape(case_args, self.kind))
        except RuntimeError as e:
            reason = str(e)
        if reason:
            raise bl.CaseError(f"case {name}: {reason}")

    def load(self):
        """Imports what the program needs (torch) before anything runs: a missing one is one line, at once."""
        if self.adapter is not None:
            self.adapter.load()

    def version(self):
        return bl.binary_version(self.path) if self.adapter is None else self.adapter.version()

    def describe(self, driver, name, case_args, extra):
        """What --dry-run prints for one case."""
        if self.adapter is None:
            prefix = "" if driver == "system" else f"VK_DRIVER_FILES={shlex.quote(driver)} "
            return prefix + shlex.join([self.path, "bench", "--json", *case_args, *extra])
        shape = dense_shape(case_args, self.kind)
        return self.adapter.describe(shape, name) if self.kind == peer_ggml.KIND else self.adapter.describe(shape)

    def run(self, driver, case_args, extra, name="case"):
        """(command, document or None, result record) of one case."""
        if self.adapter is None:
            command, doc, row = bl.run_case(self.path, driver, case_args, extra)
            if "--backward" in case_args and row.get("backward") is not True:
                raise RuntimeError(f"{' '.join(command)}: its result does not say \"backward\": true "
                                   "(a vkattn without bench --backward?)")
            return command, doc, row
        command, row = self.adapter.run(name, dense_shape(case_args, self.kind), case_args, driver)
        return command, None, row


def dense_shape(case_args, prog=peer_torch_cpu.KIND):
    """The shape of a plain dense case (what the peers take), with vkattn bench's defaults."""
    p = argparse.ArgumentParser(prog=prog, add_help=False, exit_on_error=False)
    for flag, default in (("--batch", 1), ("--heads", 8), ("--kv-heads", None), ("--seq-q", 1024), ("--seq-k", None),
                          ("--dim", 64), ("--dim-v", None)):
        p.add_argument(flag, type=int, default=default)
    p.add_argument("--dtype", default="f32")
    p.add_argument("--causal", default="none")
    p.add_argument("--backward", action="store_true")
    try:
        a, rest = p.parse_known_args(case_args)
    except argparse.ArgumentError as e:
        raise RuntimeError(f"{prog}: {e}")
    if rest:
        raise RuntimeError(f"{prog} takes plain dense cases; not {' '.join(rest)}")
    shape = {"batch": a.batch, "heads": a.heads, "kv_heads": a.kv_heads or a.heads, "seq_q": a.seq_q,
             "seq_k": a.seq_k or a.seq_q, "dim_qk": a.dim, "dim_v": a.dim_v or a.dim, "causal": a.causal,
             "dtype": a.dtype}
    if a.backward:
        shape["backward"] = True  # as vkattn bench --backward's result says it
    return shape


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="Case files: bench/cases/README.md. The peers: bench/peer_*.py.")
    p.add_argument("case_files", nargs="*", help=f"case files (paths, or names in bench/cases; default: {' '.join(DEFAULT_CASES)})")
    p.add_argument("--a", "--before", dest="a", required=True,
                   help="program A: a vkattn binary ([LABEL=]PATH), torch-cpu[:THREADS], torch-gpu[:BACKEND] or "
                        "ggml=PATH/test-backend-ops")
    p.add_argument("--b", "--after", dest="b", action="append", required=True,
                   help="program B, whose ratio B/A is shown; repeat for several, each against A")
    p.add_argument("--driver", action="append", default=None,
                   help="'system' or an ICD manifest (VK_DRIVER_FILES); repeat for several (default: system)")
    p.add_argument("--case", action="append", help="run only this case (repeatable)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=int, help="vkattn bench --warmup (and the peers' warm-up calls)")
    p.add_argument("--iters", type=int, help="vkattn bench --iters (and the peers' timed calls)")
    p.add_argument("--budget", type=float, help="vkattn bench --budget, and the torch programs' budget: seconds of timed "
                   "runs per case, --warmup/--iters becoming caps (on both sides alike)")
    p.add_argument("--ggml-backend", default=peer_ggml.DEFAULT_BACKEND,
                   help="the ggml program's test-backend-ops -b (default: %(default)s)")
    p.add_argument("--backward", action="store_true",
                   help="time the backward pass: vkattn bench --backward, torch-cpu's autograd (FLOPs 2.5x the forward's)")
    p.add_argument("--json", dest="json_out", help="write every run and the summary here")
    p.add_argument("--dry-run", action="store_true", help="print what each program would run on each case; run nothing")
    return p.parse_args(argv)


def ratio(b, a):
    return b / a if a and b else None


def fmt(x, spec=".2f"):
    return "-" if x is None else format(x, spec)


def check_case_file(given):
    """A vkattn case file, not a test-backend-ops --test-file (whose lines start with ggml's op number)."""
    with open(bl.resolve_case_file(given), encoding="utf-8") as f:
        first = next((line.split() for line in f if line.split("#", 1)[0].strip()), [""])
    if first[0].isdigit():
        raise bl.CaseError(f"{given} holds ggml test-backend-ops --test-file lines, not vkattn cases: give the vkattn "
                           "case file (e.g. issue12) and --b ggml=PATH, which writes those lines itself")


def prepare(args):
    """(programs, drivers, cases, extra vkattn options), every program checked on every case: CaseError."""
    programs = [Program(spec, side, args.warmup, args.iters, args.ggml_backend, args.budget)
                for spec, side in [(args.a, "A")] + [(b, "B" if len(args.b) == 1 else f"B{i + 1}")
                                                      for i, b in enumerate(args.b)]]
    labels = set()
    for prog in programs:
        while prog.label in labels:
            prog.label += "'"
        labels.add(prog.label)
    extra = []
    if args.warmup is not None:
        extra += ["--warmup", str(args.warmup)]
    if args.iters is not None:
        extra += ["--iters", str(args.iters)]
    if args.budget is not None:
        if not args.budget > 0:
            raise bl.CaseError(f"--budget must be positive (got {args.budget:g})")
        extra += ["--budget", f"{args.budget:g}"]
    if args.rounds < 1:
        raise bl.CaseError(f"--rounds must be at least 1 (got {args.rounds})")
    for given in args.case_files:
        check_case_file(given)
    cases = bl.load_cases(args.case_files or DEFAULT_CASES, args.case)
    if args.backward:
        cases = [(f, name, case_args if "--backward" in case_args else [*case_args, "--backward"])
                 for f, name, case_args in cases]
    for prog in programs:
        if not (args.dry_run and prog.runs_a_binary()):  # a dry run says which binary is missing instead
            prog.check()
        for _, name, case_args in cases:  # refuse what it cannot run before anything runs
            prog.refuse(name, case_args)
    return programs, args.driver or ["system"], cases, extra


def dry_run(args, programs, drivers, cases, extra):
    print(f"plan (dry run: nothing runs): {args.rounds} round(s), each: every case on every driver with "
          f"{', '.join(p.label for p in programs)} (reversed every other round)")
    for prog in programs:
        missing = "   (binary not found)" if prog.runs_a_binary() and not os.access(prog.path, os.X_OK) else ""
        print(f"{prog.label} ({prog.kind}){missing}:")
        for driver in drivers:
            for _, name, case_args in cases:
                print(f"  {name}: {prog.describe(driver, name, case_args, extra)}")
    print(f"output: {args.json_out or '(no --json: the table only)'}")
    return 0


def run_rounds(args, programs, drivers, cases, extra):
    """Every round: every driver, case and program, the programs' order reversed every other round.
    Returns (runs {(driver, program index): run record}, meta {driver: device, driver name, host})."""
    runs, meta = {}, {}
    comparison = f"{programs[0].label} vs {', '.join(p.label for p in programs[1:])}"
    for rnd in range(args.rounds):
        order = list(range(len(programs)))[::1 if rnd % 2 == 0 else -1]
        for driver in drivers:
            for case_file, name, case_args in cases:
                for i in order:
                    prog = programs[i]
                    command, doc, row = prog.run(driver, case_args, extra, name)
                    if doc is not None:
                        meta.setdefault(driver, {"device": doc["device"], "driver": doc["driver"],
                                                 "host_cpu": doc.get("host_cpu")})
                    run = runs.setdefault((driver, i), {
                        "label": prog.label, "program": prog.kind, "comparison": comparison, "binary": prog.path,
                        "version": prog.version(),
                        "vk_driver_files": None if driver == "system" or prog.kind in (peer_torch_cpu.KIND,
                                                                                       peer_torch_gpu.KIND) else driver,
                        "started": bl.now(), "cases": []})
                    run["cases"].append({"name": name, "case_file": case_file, "args": case_args, "round": rnd + 1,
                                         "command": [os.path.basename(command[0]), *command[1:]], "result": row})
                    print(f"round {rnd + 1} {meta.get(driver, {}).get('driver', driver)} | {name} | {prog.label}: "
                          f"{fmt(bl.gflops(row), '.3f')} GFLOP/s ({row.get('kernel')})", file=sys.stderr, flush=True)
    return runs, meta


def print_tables(args, programs, drivers, cases, runs, meta):
    """The ratio table of each B against A on each driver; returns the summary rows."""
    summary = []
    a = programs[0].label
    for driver in drivers:
        name = meta.get(driver, {}).get("driver", driver)
        for i, prog in enumerate(programs[1:], 1):
            print(f"\n{name} ({args.rounds} rounds, alternating; GFLOP/s median over rounds [best]; A = {a}, B = {prog.label})")
            print("| case | A | B | B/A median | B/A best | ms A / B (median) | kernel B |")
            print("|---|---|---|---|---|---|---|")
            for _, case, _ in cases:
                sa = bl.summarise([c["result"] for c in runs[(driver, 0)]["cases"] if c["name"] == case])
                sb = bl.summarise([c["result"] for c in runs[(driver, i)]["cases"] if c["name"] == case])
                rm, rb = ratio(sb["gflops_median"], sa["gflops_median"]), ratio(sb["gflops_best"], sa["gflops_best"])
                splits = f" x{sb['splits']}" if sb.get("splits") else ""
                print(f"| {case} | {fmt(sa['gflops_median'])} [{fmt(sa['gflops_best'])}] | {fmt(sb['gflops_median'])} "
                      f"[{fmt(sb['gflops_best'])}] | {fmt(rm, '.2f')}x | {fmt(rb, '.2f')}x | {fmt(sa['ms_median'], '.3f')} / "
                      f"{fmt(sb['ms_median'], '.3f')} | {sb['kernel']}{splits} |")
                summary.append({"driver": name, "case": case, "b_label": prog.label, "a": sa, "b": sb,
                                "ratio_median": rm, "ratio_best": rb})
    return summary


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    try:
        programs, drivers, cases, extra = prepare(args)
        if args.dry_run:
            return dry_run(args, programs, drivers, cases, extra)
    except (bl.CaseError, OSError, RuntimeError) as e:
        sys.exit(f"compare.py: {e}")
    try:
        for prog in programs:
            prog.load()
        runs, meta = run_rounds(args, programs, drivers, cases, extra)
    except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError, KeyError, IndexError) as e:
        sys.exit(f"compare.py: {' '.join(str(e).split())}")
    except Exception as e:  # noqa: BLE001 (a missing torch: optional_deps says what to install)
        if type(e).__name__ != "MissingDependency":
            raise
        sys.exit(f"compare.py: {e}")

    summary = print_tables(args, programs, drivers, cases, runs, meta)
    if args.json_out:
        command = shlex.join(["bench/compare.py", *argv])
        first = meta.get(drivers[0], {"device": "?", "driver": "?", "host_cpu": None})
        doc = {"format": bl.FORMAT, **first, "date": bl.today(),
               "compare": {"command": command, "a": programs[0].label, "b": ", ".join(p.label for p in programs[1:]),
                           "rounds": args.rounds, "summary": summary},
               "runs": [dict(run, command=command, device=meta.get(d, {}).get("device"),
                             driver=meta.get(d, {}).get("driver"))
                        for (d, _), run in sorted(runs.items(), key=lambda kv: (drivers.index(kv[0][0]), kv[0][1]))]}
        bl.write_json(args.json_out, doc)
        print(f"\nresults: {args.json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
