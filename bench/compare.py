#!/usr/bin/env python3
"""Two programs side by side on the cases of case files, alternating in rounds: the ratio table.

    /usr/bin/python3 bench/compare.py --a OLD/tools/vkattn --b build/release/tools/vkattn issue12 serving
    /usr/bin/python3 bench/compare.py --a build/release/tools/vkattn --b torch-cpu issue12 --rounds 3
    /usr/bin/python3 bench/compare.py --a build/release/tools/vkattn --b ggml=GGML-BUILD/bin/test-backend-ops issue12
    /usr/bin/python3 bench/compare.py --a build/release/tools/vkattn --b torch-gpu:flash --case decode-h32-kv8-d128-k8192-f16 issue12
    /usr/bin/python3 bench/compare.py --a OLD/vkattn --b NEW/vkattn --driver system \\
        --driver /opt/vkattn/mesa-25.0.7/lvp_icd.json --case decode-h32-kv8-d128-k32768-f16 --json out.json issue12

A program (--a, --b; --before and --after are the same) is a vkattn binary, run as `vkattn bench
--json CASE-ARGS` in a process per case, optionally named `LABEL=PATH`; or `torch-cpu`, PyTorch on the
CPU timing the textbook attention in float32 (bench/compare_torch_cpu.py's adapter; needs torch,
takes the plain dense cases: batch, heads, kv-heads, seq-q, seq-k, dim, dim-v, dtype, causal); or ggml's
flash attention, `ggml=PATH` (or any PATH named test-backend-ops): `test-backend-ops perf -o FLASH_ATTN_EXT
-b BACKEND --test-file` on each case written as a --test-file line (bench/compare_ggml.py's adapter;
plain dense cases without causal, dtype f32, f16 or bf16 for K and V, Q and O in f32 as in ggml's test,
no mask; GFLOP/s from ggml's mean us/run; --ggml-backend picks the backend, default Vulkan0; ggml-vulkan
leaves lavapipe out unless GGML_VK_VISIBLE_DEVICES names it). The driver's VK_DRIVER_FILES applies to it too.
Or `torch-gpu[:BACKEND]`, torch.nn.functional.scaled_dot_product_attention on CUDA with one backend
allowed (flash, the default; efficient, cudnn or math; flash and cudnn refuse f32), timed with CUDA
events after a 256 MiB memset (bench/compare_torch.py's adapter; needs torch >= 2.0 with CUDA; dense
cases, causal too; --warmup/--iters as for vkattn, else compare_torch's caps within 2 s per case).
A driver is `system` (the Vulkan loader's own choice) or an ICD manifest, given to the loader through
VK_DRIVER_FILES: two Mesa versions of lavapipe are two devices. Each round runs every case on every
driver with A then B, their order swapped every other round, so both see the same machine; a shared
machine's load shows as spread between the rounds, which the table keeps: GFLOP/s as the median over
rounds of each run's median, and the best round, and B/A of both.

Case files: bench/cases/*.txt (default: issue12 and serving). --json writes every run in the results
format of bench/run.py (bench/benchlib.py), one run per program and driver, each case once per round,
plus the summary.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys

import benchlib as bl

DEFAULT_CASES = ["issue12", "serving"]
TORCH_CPU = "torch-cpu"
GGML = "ggml"
TORCH_GPU = "torch-gpu"


class Program:
    def __init__(self, spec, side, warmup=None, iters=None, ggml_backend="Vulkan0"):
        self.warmup, self.iters, self.ggml_backend = warmup, iters, ggml_backend
        label, _, path = spec.rpartition("=") if "=" in spec else ("", "", spec)
        self.sdpa_backend = None
        if path == TORCH_CPU:
            self.kind = TORCH_CPU
        elif path == TORCH_GPU or path.startswith(TORCH_GPU + ":"):
            self.kind = TORCH_GPU
            self.sdpa_backend = path.partition(":")[2] or "flash"
        elif label == GGML or os.path.basename(path) == "test-backend-ops":
            self.kind = GGML
        else:
            self.kind = "vkattn"
        self.path = path
        self.label = label or (path if self.kind in (TORCH_CPU, TORCH_GPU) else self.kind if self.kind == GGML else side)
        self.torch = None

    def check(self):
        if self.kind == TORCH_GPU:
            import compare_torch as ct
            if self.sdpa_backend not in ct.BACKENDS:
                raise bl.CaseError(f"{self.path}: the backend is one of {', '.join(ct.BACKENDS)}")
        elif self.kind != TORCH_CPU and not os.access(self.path, os.X_OK):
            raise bl.CaseError(f"{self.path} is not an executable file")

    def refuse(self, name, case_args):
        """Raises CaseError when this program cannot run the case (before anything runs)."""
        if self.kind == "vkattn":
            return
        try:
            shape = dense_shape(case_args, self.kind)
            if self.kind == GGML:
                import compare_ggml as cg
                cg.test_file_line(shape, name)
        except Exception as e:  # noqa: BLE001 (RuntimeError, compare_torch.Failure)
            raise bl.CaseError(f"case {name}: {e}")

    def version(self):
        if self.kind == "vkattn":
            return bl.binary_version(self.path)
        if self.kind == GGML:
            return f"ggml test-backend-ops, FLASH_ATTN_EXT on {self.ggml_backend} (Q and O f32)"
        if self.kind == TORCH_GPU:
            torch = self.torch_gpu_side().torch
            return (f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name()}, "
                    f"SDPA backend {self.sdpa_backend}")
        return f"torch {self.torch_side().torch.__version__}, {self.torch_side().threads} threads, float32"

    def torch_side(self):
        if self.torch is None:
            import compare_torch_cpu as ctc
            from optional_deps import import_torch
            torch = import_torch(purpose="compare.py's torch-cpu program")
            given = self.warmup is not None or self.iters is not None
            self.torch = ctc.TorchCpu(torch, len(os.sched_getaffinity(0)), 3 if self.warmup is None else self.warmup,
                                      10 if self.iters is None else self.iters, 5.0, given, seed=1)
        return self.torch

    def torch_gpu_side(self):
        if self.torch is None:
            import compare_torch as ct
            from optional_deps import import_torch
            torch = import_torch(min_version=(2, 0), need_cuda=True, purpose="compare.py's torch-gpu program")
            given = self.warmup is not None or self.iters is not None
            self.torch = ct.TorchSide(torch, [self.sdpa_backend], ct.DEFAULT_WARMUP if self.warmup is None else self.warmup,
                                      self.iters or ct.DEFAULT_ITERS, 2.0, given, seed=1)
        return self.torch

    def run(self, driver, case_args, extra, name="case"):
        """(command, document or None, result record) of one case."""
        if self.kind == "vkattn":
            return bl.run_case(self.path, driver, case_args, extra)
        shape = dense_shape(case_args, self.kind)
        import compare_torch as ct
        if self.kind == TORCH_GPU:
            side = self.torch_gpu_side()
            side.cache.pop(ct.shape_key(shape), None)  # TorchSide keeps a shape's records; each round times anew
            records, note = side.run(shape)
            rec = records[self.sdpa_backend]
            if "unsupported" in rec:
                raise RuntimeError(f"{self.path} refused {name}: {rec['unsupported']}")
            row = dict(shape, ms_median=rec["ms"], ms_min=rec["ms_min"], iters=rec["iters"], status="ok",
                       tflops=rec["tflops"], kernel=f"sdpa {self.sdpa_backend}", splits=None, torch_call=note)
            return [self.path, *case_args], None, row
        if self.kind == GGML:
            import compare_ggml as cg
            try:
                line, rec, case, _ = cg.run_shape(self.path, shape, name, self.ggml_backend, bl.driver_env(driver))
            except ct.Failure as e:
                raise RuntimeError(str(e)) from None
            ms = rec["us_per_run"] / 1e3
            row = dict(shape, ms_median=ms, ms_min=None, iters=rec["runs"], status="ok",
                       tflops=case["flops"] / (rec["us_per_run"] * 1e6), kernel="ggml FLASH_ATTN_EXT", splits=None,
                       ggml_case=line, ggml_params=rec["params"], notes=case["notes"])
            return [self.path, "perf", "-o", cg.OP, "-b", self.ggml_backend, "--test-file", "CASE"], None, row
        rec = self.torch_side().run(shape)
        if "unsupported" in rec:
            raise RuntimeError(f"torch-cpu refused {' '.join(case_args)}: {rec['unsupported']}")
        row = dict(shape, ms_median=rec["ms"], ms_min=rec["ms_min"], iters=rec["iters"], status="ok",
                   tflops=ct.tflops(shape, rec["ms"]), kernel="textbook f32", splits=None)
        return [TORCH_CPU, *case_args], None, row


def dense_shape(case_args, prog=TORCH_CPU):
    """The shape of a plain dense case (what torch-cpu and ggml take), with vkattn bench's defaults."""
    p = argparse.ArgumentParser(prog=prog, add_help=False, exit_on_error=False)
    for flag, default in (("--batch", 1), ("--heads", 8), ("--kv-heads", None), ("--seq-q", 1024), ("--seq-k", None),
                          ("--dim", 64), ("--dim-v", None)):
        p.add_argument(flag, type=int, default=default)
    p.add_argument("--dtype", default="f32")
    p.add_argument("--causal", default="none")
    try:
        a, rest = p.parse_known_args(case_args)
    except argparse.ArgumentError as e:
        raise RuntimeError(f"{prog}: {e}")
    if rest:
        raise RuntimeError(f"{prog} takes plain dense cases; not {' '.join(rest)}")
    return {"batch": a.batch, "heads": a.heads, "kv_heads": a.kv_heads or a.heads, "seq_q": a.seq_q,
            "seq_k": a.seq_k or a.seq_q, "dim_qk": a.dim, "dim_v": a.dim_v or a.dim, "causal": a.causal,
            "dtype": a.dtype}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="Case files: bench/cases/README.md.")
    p.add_argument("case_files", nargs="*", help=f"case files (paths, or names in bench/cases; default: {' '.join(DEFAULT_CASES)})")
    p.add_argument("--a", "--before", dest="a", required=True, help="program A: a vkattn binary ([LABEL=]PATH), torch-cpu, torch-gpu[:BACKEND] or ggml=PATH/test-backend-ops")
    p.add_argument("--b", "--after", dest="b", required=True, help="program B, the one whose ratio B/A is shown")
    p.add_argument("--driver", action="append", default=None,
                   help="'system' or an ICD manifest (VK_DRIVER_FILES); repeat for several (default: system)")
    p.add_argument("--case", action="append", help="run only this case (repeatable)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=int, help="vkattn bench --warmup (and torch's warm-up calls)")
    p.add_argument("--iters", type=int, help="vkattn bench --iters (and torch's timed calls)")
    p.add_argument("--ggml-backend", default="Vulkan0", help="the ggml program's test-backend-ops -b (default: %(default)s)")
    p.add_argument("--json", dest="json_out", help="write every run and the summary here")
    return p.parse_args(argv)


def ratio(b, a):
    return b / a if a and b else None


def fmt(x, spec=".2f"):
    return "-" if x is None else format(x, spec)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    programs = [Program(args.a, "A", args.warmup, args.iters, args.ggml_backend),
                Program(args.b, "B", args.warmup, args.iters, args.ggml_backend)]
    if programs[0].label == programs[1].label:
        programs[1].label += "'"
    drivers = args.driver or ["system"]
    extra = []
    if args.warmup is not None:
        extra += ["--warmup", str(args.warmup)]
    if args.iters is not None:
        extra += ["--iters", str(args.iters)]
    try:
        if args.rounds < 1:
            raise bl.CaseError(f"--rounds must be at least 1 (got {args.rounds})")
        for given in args.case_files:
            if os.path.basename(bl.resolve_case_file(given)).startswith("ggml-"):
                raise bl.CaseError(f"{given} holds ggml test-backend-ops --test-file lines, not vkattn cases: give the "
                                   "vkattn case file (e.g. issue12) and --b ggml=PATH, which writes those lines itself")
        cases = bl.load_cases(args.case_files or DEFAULT_CASES, args.case)
        for prog in programs:
            prog.check()
            for _, name, case_args in cases:  # refuse what it cannot run before anything runs
                prog.refuse(name, case_args)
    except (bl.CaseError, OSError) as e:
        sys.exit(f"compare.py: {e}")

    runs = {}  # (driver, program index) -> run record
    meta = {}  # driver -> device, driver name
    try:
        for rnd in range(args.rounds):
            order = (0, 1) if rnd % 2 == 0 else (1, 0)
            for driver in drivers:
                for case_file, name, case_args in cases:
                    for i in order:
                        prog = programs[i]
                        command, doc, row = prog.run(driver, case_args, extra, name)
                        if doc is not None:
                            meta.setdefault(driver, {"device": doc["device"], "driver": doc["driver"],
                                                     "host_cpu": doc.get("host_cpu")})
                        run = runs.setdefault((driver, i), {
                            "label": prog.label, "program": prog.kind,
                            "comparison": f"{programs[0].label} vs {programs[1].label}", "binary": prog.path, "version": prog.version(),
                            "vk_driver_files": None if driver == "system" or prog.kind in (TORCH_CPU, TORCH_GPU) else driver,
                            "started": bl.now(), "cases": []})
                        run["cases"].append({"name": name, "case_file": case_file, "args": case_args, "round": rnd + 1,
                                             "command": [os.path.basename(command[0]), *command[1:]], "result": row})
                        print(f"round {rnd + 1} {meta.get(driver, {}).get('driver', driver)} | {name} | {prog.label}: "
                              f"{fmt(bl.gflops(row), '.3f')} GFLOP/s ({row.get('kernel')})", file=sys.stderr, flush=True)
    except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError, KeyError, IndexError) as e:
        sys.exit(f"compare.py: {' '.join(str(e).split())}")
    except Exception as e:  # noqa: BLE001 (a missing torch: optional_deps says what to install)
        if type(e).__name__ != "MissingDependency":
            raise
        sys.exit(f"compare.py: {e}")

    a, b = programs[0].label, programs[1].label
    summary = []
    for driver in drivers:
        name = meta.get(driver, {}).get("driver", driver)
        print(f"\n{name} ({args.rounds} rounds, alternating; GFLOP/s median over rounds [best]; A = {a}, B = {b})")
        print("| case | A | B | B/A median | B/A best | ms A / B (median) | kernel B |")
        print("|---|---|---|---|---|---|---|")
        for _, case, _ in cases:
            sa = bl.summarise([c["result"] for c in runs[(driver, 0)]["cases"] if c["name"] == case])
            sb = bl.summarise([c["result"] for c in runs[(driver, 1)]["cases"] if c["name"] == case])
            rm, rb = ratio(sb["gflops_median"], sa["gflops_median"]), ratio(sb["gflops_best"], sa["gflops_best"])
            splits = f" x{sb['splits']}" if sb.get("splits") else ""
            print(f"| {case} | {fmt(sa['gflops_median'])} [{fmt(sa['gflops_best'])}] | {fmt(sb['gflops_median'])} "
                  f"[{fmt(sb['gflops_best'])}] | {fmt(rm, '.2f')}x | {fmt(rb, '.2f')}x | {fmt(sa['ms_median'], '.3f')} / "
                  f"{fmt(sb['ms_median'], '.3f')} | {sb['kernel']}{splits} |")
            summary.append({"driver": name, "case": case, "a": sa, "b": sb, "ratio_median": rm, "ratio_best": rb})
    if args.json_out:
        first = meta.get(drivers[0], {"device": "?", "driver": "?", "host_cpu": None})
        doc = {"format": bl.FORMAT, **first, "date": bl.today(),
               "compare": {"command": shlex.join(["bench/compare.py", *argv]), "a": a, "b": b, "rounds": args.rounds,
                           "summary": summary},
               "runs": [dict(run, command=shlex.join(["bench/compare.py", *argv]),
                             device=meta.get(d, {}).get("device"), driver=meta.get(d, {}).get("driver"))
                        for (d, _), run in sorted(runs.items(), key=lambda kv: (drivers.index(kv[0][0]), kv[0][1]))]}
        bl.write_json(args.json_out, doc)
        print(f"\nresults: {args.json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
