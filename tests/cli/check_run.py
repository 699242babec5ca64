#!/usr/bin/env python3
"""Checks `vkattn run` against an independent fp64 NumPy reference on the cases of gen_case.py, and
checks that bad inputs fail cleanly (one stderr line, non-zero exit, no output file).

    python3 tests/cli/check_run.py                       # every case, the build's vkattn
    python3 tests/cli/check_run.py --case dim_203 --case bf16_from_f32 --vkattn build/release/tools/vkattn
    python3 tests/cli/check_run.py --list

One line per case: PASS/FAIL, the max error of O normalised by max|V| against docs/testing.md's
("Precision") tolerance of the compute dtype, the LSE error, and for the cases that ask for them (--weights) the max
error of the attention weights P against the same tolerance (P's entries are at most 1, so no
normalisation; masked keys and fully masked rows must be exactly 0). Exits 1 when any case fails.

The paged_* cases run `vkattn run --k-cache ... --block-table ... --cache-lens ...` over a paged KV
cache (shuffled pages, rows no sequence holds set to NaN): the NumPy reference gathers each
sequence's pages into a dense K and V (after the append of --k-new/--v-new) and runs the dense
reference on it, so causal and the modifiers align to the sequence's own length; the caches written
by --k-cache-out/--v-cache-out must equal the inputs with the new rows written, exactly.

The varlen_* cases run `vkattn run --cu-seqlens-q ... --cu-seqlens-k ...` over packed sequences (3-D
Q, K and V): the NumPy reference loops over the sequences, slicing each one's rows out and running
the dense reference on them, so causal and the modifiers align to the sequence's own lengths.

The *q8_0* cases pass --kv-dtype q8_0 (dense, paged, packed): the reference reads K and V as the
values their q8_0 blocks hold (q8_0_values, an independent NumPy quantizer of the values given).

This file holds the command line, the dense cases (gen_case.py's, and the dense q8_0 ones) and the
loop over every case; the paged and packed cases are in run_serving_cases.py, the bad inputs in
run_error_cases.py, the tolerances and compare in run_compare.py, q8_0_values in q8_0_reference.py.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
except ImportError:
    sys.exit("check_run: error: numpy is required (Debian: apt install python3-numpy; run with /usr/bin/python3)")

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_case  # noqa: E402
import sdpa_reference  # noqa: E402
from q8_0_reference import q8_0_values  # noqa: E402
from run_compare import LSE_TOLERANCE, TOLERANCE, compare  # noqa: E402
from run_error_cases import check_error_case, error_cases  # noqa: E402
from run_serving_cases import PAGED_CASES, VARLEN_CASES, check_paged_case, check_varlen_case  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def check_case(vkattn, case, directory, seed, generate=gen_case.generate):
    files, args, (ref_out, ref_lse, ref_p), v_seen = generate(case, seed)
    gen_case.write(directory, files)
    start = time.time()
    proc = subprocess.run([vkattn, "run"] + args, cwd=directory, capture_output=True, text=True, timeout=900)
    seconds = time.time() - start
    if proc.returncode != 0:
        return False, f"vkattn run exited {proc.returncode}: {proc.stderr.strip()}", seconds

    out = np.load(os.path.join(directory, "out.npy"))
    expected_dtype = np.float16 if case.file_dtype == "f2" and case.compute_dtype != "bf16" else np.float32
    if out.dtype != expected_dtype or out.shape != ref_out.shape:
        return False, f"out.npy is {out.dtype} {out.shape}, expected {np.dtype(expected_dtype)} {ref_out.shape}", seconds
    finite_v = np.abs(v_seen[np.isfinite(v_seen)])
    scale = float(finite_v.max()) if finite_v.size and finite_v.max() > 0 else 1.0
    err = compare(out, ref_out, scale)
    tol = TOLERANCE[case.compute_dtype]
    detail = f"err {err:.2e} / tol {tol:.0e}"
    ok = err <= tol
    if case.lse:
        lse = np.load(os.path.join(directory, "lse.npy"))
        if lse.dtype != np.float32 or lse.shape != ref_lse.shape:
            return False, f"lse.npy is {lse.dtype} {lse.shape}, expected float32 {ref_lse.shape}", seconds
        lse_err = compare(lse, ref_lse, 1.0)
        finite = np.isfinite(ref_lse)
        if np.isfinite(lse_err) and finite.any():
            lse_err = float(np.max(np.abs(lse[finite] - ref_lse[finite]) / (1.0 + np.abs(ref_lse[finite]))))
        detail += f"  lse {lse_err:.2e} / {LSE_TOLERANCE:.0e}"
        ok = ok and lse_err <= LSE_TOLERANCE
        if np.isinf(ref_lse).any():
            detail += f"  ({int(np.isinf(ref_lse).sum())} fully masked rows)"
    if case.weights:
        p = np.load(os.path.join(directory, "p.npy"))
        if p.dtype != np.float32 or p.shape != ref_p.shape:
            return False, f"p.npy is {p.dtype} {p.shape}, expected float32 {ref_p.shape}", seconds
        p_err = compare(p, ref_p, 1.0)
        zeros = ref_p == 0.0  # masked keys, fully masked rows: exactly 0, not merely small
        if (p[zeros] != 0.0).any():
            p_err = np.inf
            detail += f"  ({int((p[zeros] != 0.0).sum())} weights of masked keys are not exactly 0)"
        detail += f"  P {p_err:.2e}"
        ok = ok and p_err <= tol
    if case.heatmap:
        with open(os.path.join(directory, "heads.png"), "rb") as png:
            if png.read(8) != b"\x89PNG\r\n\x1a\n":
                return False, "heads.png is not a PNG", seconds
        detail += "  heatmap ok"
    return ok, detail, seconds


# Dense runs (--k/--v) with --kv-dtype q8_0: gen_case's cases (dims multiples of 32, no --weights or
# --heatmap: q8_0 runs on the fused kernels), K and V as the values of their blocks.
DENSE_Q8_0_CASES = [
    gen_case.Case("dense_q8_0_gqa_lens_sinks", batch=2, heads=4, kv_heads=2, seq_q=9, seq_k=40, dim=64, dim_v=32,
                  causal="bottom-right", kv_lengths=[40, 17], sinks=True, softcap=6.0),
    gen_case.Case("dense_q8_0_f16_mask", batch=1, heads=2, seq_q=5, seq_k=33, dim=32, file_dtype="f2", mask="bool",
                  window=(12, 3)),
]


def generate_dense_q8_0(case, seed):
    """gen_case.generate with --kv-dtype q8_0: the reference of the same files with K and V quantized
    as read (before any rounding to the compute dtype), Q rounded to it."""
    files, args, _, _ = gen_case.generate(case, seed)
    q = sdpa_reference.round_to(files["q"], case.compute_dtype)
    k, v = q8_0_values(files["k"]), q8_0_values(files["v"])
    out, lse, p = sdpa_reference.attention(
        q, k, v, causal=case.causal, scale=case.scale, mask=files.get("mask"), kv_lengths=case.kv_lengths,
        weights=True, window=case.window, align=case.align, softcap=case.softcap, alibi=files.get("alibi"),
        sinks=files.get("sinks"))
    return files, args + ["--kv-dtype", "q8_0"], (out, lse, p), v


def default_vkattn():
    built = os.path.join(REPO, "build", "release", "tools", "vkattn")
    return built if os.path.exists(built) else shutil.which("vkattn") or built


def main():
    parser = argparse.ArgumentParser(description="Check `vkattn run` against an fp64 NumPy reference.")
    parser.add_argument("--vkattn", default=default_vkattn(), help="the vkattn binary (default: %(default)s)")
    parser.add_argument("--case", action="append", help="run only this case (repeatable; see --list)")
    parser.add_argument("--list", action="store_true", help="list the cases")
    parser.add_argument("--seed", type=int, default=0, help="offset to every case's seed")
    parser.add_argument("--keep", help="keep each case's files under this directory")
    parser.add_argument("--no-errors", action="store_true", help="skip the bad-input cases")
    args = parser.parse_args()

    errors = error_cases()
    if args.list:
        for case in gen_case.CASES + DENSE_Q8_0_CASES + PAGED_CASES + VARLEN_CASES:
            print(case.name)
        for name, _, _ in errors:
            print("error:" + name)
        return 0
    vkattn = os.path.abspath(args.vkattn)
    if not os.path.exists(vkattn):
        sys.exit(f"check_run: error: {vkattn} does not exist (build it, or pass --vkattn)")

    paged = {c.name: c for c in PAGED_CASES}
    varlen = {c.name: c for c in VARLEN_CASES}
    dense_q8_0 = {c.name: c for c in DENSE_Q8_0_CASES}
    selected = args.case or [c.name for c in gen_case.CASES] + list(dense_q8_0) + list(paged) + list(varlen) + (
        [] if args.no_errors else ["error:" + e[0] for e in errors])
    root = args.keep or tempfile.mkdtemp(prefix="vkattn-check-")
    failures = 0
    for name in selected:
        directory = os.path.join(root, name.replace(":", "_"))
        if name.startswith("error:"):
            matches = [e for e in errors if e[0] == name[len("error:"):]]
            if not matches:
                sys.exit(f"check_run: error: no case named {name!r} (see --list)")
            ok, detail = check_error_case(vkattn, *matches[0], directory)
            seconds = 0.0
        elif name in paged:
            ok, detail, seconds = check_paged_case(vkattn, paged[name], directory, args.seed)
        elif name in varlen:
            ok, detail, seconds = check_varlen_case(vkattn, varlen[name], directory, args.seed)
        elif name in dense_q8_0:
            ok, detail, seconds = check_case(vkattn, dense_q8_0[name], directory, args.seed, generate_dense_q8_0)
        else:
            ok, detail, seconds = check_case(vkattn, gen_case.find_case(name), directory, args.seed)
        failures += not ok
        print(f"{'PASS' if ok else 'FAIL'}  {name:36s} {detail}  [{seconds:.1f}s]", flush=True)
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    total = len(selected)
    print(f"{total - failures}/{total} passed (seed offset {args.seed})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
