#!/usr/bin/env python3
"""Checks `vkattn run` against an independent fp64 NumPy reference on the cases of gen_case.py, and
checks that bad inputs fail cleanly (one stderr line, non-zero exit, no output file).

    python3 tests/cli/check_run.py                       # every case, the build's vkattn
    python3 tests/cli/check_run.py --case dim_203 --case bf16_from_f32 --vkattn build/release/tools/vkattn
    python3 tests/cli/check_run.py --list

One line per case: PASS/FAIL, the max error of O normalised by max|V| against the README's
("Precision") tolerance of the compute dtype, the LSE error, and for the cases that ask for them (--weights) the max
error of the attention weights P against the same tolerance (P's entries are at most 1, so no
normalisation; masked keys and fully masked rows must be exactly 0). Exits 1 when any case fails.
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

TOLERANCE = {"f32": 1e-5, "f16": 2e-3, "bf16": 1.6e-2}  # README.md, "Precision", normalised by max|V|
LSE_TOLERANCE = 1e-4  # |LSE - ref| <= tol * (1 + |ref|): f32 arithmetic on the same rounded inputs
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def compare(got, want, scale):
    """Max |got - want| / scale over finite reference values; inf when non-finite values disagree
    (NaN where the reference has a number, a different infinity, or a number where it has NaN)."""
    got = got.astype(np.float64)
    finite = np.isfinite(want)
    nan_want = np.isnan(want)
    if (np.isnan(got) != nan_want).any():
        return np.inf
    inf_want = np.isinf(want)
    if (got[inf_want] != want[inf_want]).any():
        return np.inf
    if not np.isfinite(got[finite]).all():
        return np.inf
    if not finite.any():
        return 0.0
    return float(np.max(np.abs(got[finite] - want[finite])) / scale)


def check_case(vkattn, case, directory, seed):
    files, args, (ref_out, ref_lse, ref_p), v_seen = gen_case.generate(case, seed)
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


def save(directory, name, array):
    np.save(os.path.join(directory, name), array)


def error_cases():
    """(name, files {name: array or raw bytes}, extra args): each must fail cleanly."""
    rng = np.random.default_rng(7)
    q = rng.standard_normal((2, 2, 8, 16)).astype(np.float32)
    kv = rng.standard_normal((2, 2, 10, 16)).astype(np.float32)
    base = {"q.npy": q, "k.npy": kv, "v.npy": kv}
    with tempfile.TemporaryDirectory() as tmp:
        save(tmp, "q.npy", q)
        truncated = open(os.path.join(tmp, "q.npy"), "rb").read()[:-5]
    return [
        ("missing_file", {"k.npy": kv, "v.npy": kv}, []),
        ("truncated_q", dict(base, **{"q.npy": truncated}), []),
        ("not_npy", dict(base, **{"q.npy": b"hello, world, this is not a numpy file"}), []),
        ("float64_input", dict(base, **{"q.npy": q.astype(np.float64)}), []),
        ("big_endian", dict(base, **{"q.npy": q.astype(">f4")}), []),
        ("fortran_order", dict(base, **{"q.npy": np.asfortranarray(q)}), []),
        ("q_3d", dict(base, **{"q.npy": q[0]}), []),
        ("dim_mismatch", dict(base, **{"k.npy": kv[..., :8]}), []),
        ("dim_over_256", {"q.npy": np.zeros((1, 1, 2, 300), np.float32), "k.npy": np.zeros((1, 1, 3, 300), np.float32),
                          "v.npy": np.zeros((1, 1, 3, 300), np.float32)}, []),
        ("heads_not_divisible", dict(base, **{"q.npy": np.zeros((2, 3, 8, 16), np.float32)}), []),
        ("mixed_dtypes", dict(base, **{"k.npy": kv.astype(np.float16)}), []),
        ("mask_no_broadcast", dict(base, **{"mask.npy": np.ones((3, 1, 8, 10), bool)}), ["--mask", "mask.npy"]),
        ("mask_wrong_seq", dict(base, **{"mask.npy": np.ones((8, 11), bool)}), ["--mask", "mask.npy"]),
        ("mask_int_dtype", dict(base, **{"mask.npy": np.ones((8, 10), np.int32)}), ["--mask", "mask.npy"]),
        ("kv_lens_negative", dict(base, **{"kv.npy": np.array([3, -1], np.int32)}), ["--kv-lens", "kv.npy"]),
        ("kv_lens_too_long", dict(base, **{"kv.npy": np.array([3, 11], np.int64)}), ["--kv-lens", "kv.npy"]),
        ("kv_lens_wrong_length", dict(base, **{"kv.npy": np.array([3, 4, 5], np.int32)}), ["--kv-lens", "kv.npy"]),
        ("scale_inf", base, ["--scale", "inf"]),
        ("scale_nan", base, ["--scale", "nan"]),
        ("scale_overflow", base, ["--scale", "1e60"]),
        ("scale_not_a_number", base, ["--scale", "abc"]),
        ("bad_causal", base, ["--causal", "diagonal"]),
        ("fused_with_weights", base, ["--path", "fused", "--weights", "p.npy"]),
        ("fused_with_heatmap", base, ["--path", "fused", "--heatmap", "heads.png"]),
        ("bad_path", base, ["--path", "three-stage"]),
        ("weights_same_as_out", base, ["--weights", "out.npy"]),
        ("weights_too_large", {"q.npy": np.zeros((1, 8, 100000, 1), np.float32),
                               "k.npy": np.zeros((1, 8, 100000, 1), np.float32),
                               "v.npy": np.zeros((1, 8, 100000, 1), np.float32)}, ["--weights", "p.npy"]),
        ("heatmap_dir_missing", base, ["--heatmap", "no/such/dir/heads.png"]),
        # float32 values beyond the compute dtype's range would become inf (then NaN everywhere).
        ("f16_overflow", dict(base, **{"k.npy": overflowing(kv, 7.5e4)}), ["--dtype", "f16"]),
        ("bf16_overflow", dict(base, **{"v.npy": overflowing(kv, 3.4e38)}), ["--dtype", "bf16"]),
        # Score modifiers
        ("window_one_side", base, ["--window", "16"]),
        ("window_not_integers", base, ["--window", "a:b"]),
        ("window_side_below_minus_1", base, ["--window", "-2:0"]),
        ("window_three_sides", base, ["--window", "1:2:3"]),
        ("softcap_zero", base, ["--softcap", "0"]),
        ("softcap_negative", base, ["--softcap", "-5"]),
        ("softcap_inf", base, ["--softcap", "inf"]),
        ("align_unknown", base, ["--align", "diagonal"]),
        ("align_disagrees_with_causal", base, ["--align", "top-left", "--causal", "bottom-right"]),
        ("alibi_wrong_shape", dict(base, **{"a.npy": np.ones(3, np.float32)}), ["--alibi", "a.npy"]),
        ("alibi_float64", dict(base, **{"a.npy": np.ones(2, np.float64)}), ["--alibi", "a.npy"]),
        ("alibi_nan", dict(base, **{"a.npy": np.array([0.5, np.nan], np.float32)}), ["--alibi", "a.npy"]),
        ("sinks_per_batch", dict(base, **{"s.npy": np.ones((2, 2), np.float32)}), ["--sinks", "s.npy"]),
        ("sinks_inf", dict(base, **{"s.npy": np.array([0.5, np.inf], np.float32)}), ["--sinks", "s.npy"]),
        ("sinks_missing_file", base, ["--sinks", "nothing.npy"]),
    ]


# The message an error case must give, where the wording is the point of the case.
EXPECTED_MESSAGE = {
    "window_side_below_minus_1": "--window: the left side -2 must be >= 0, or -1 for unbounded",
    "softcap_zero": "--softcap: 0 must be finite and > 0",
    "align_disagrees_with_causal": "align (top-left) must agree with causal (bottom-right)",
    "alibi_wrong_shape": "--alibi (a.npy): shape (3,) must be (heads,) = (2,) or (batch, heads) = (2, 2)",
    "sinks_per_batch": "--sinks (s.npy): shape (2, 2) must be (heads,) = (2,)",
    "f16_overflow": "--k (k.npy): 2 values overflow f16 (largest magnitude 75000 > 65504)",
    "bf16_overflow": "--v (v.npy): 2 values overflow bf16 (largest magnitude 3.4e+38 > 3.38953e+38)",
}


def overflowing(array, magnitude):
    """A copy with two finite values of the given magnitude (one negative), one just inside f16's
    range, and a NaN and an inf, which are data, not overflow: only the first two count."""
    out = array.copy()
    out[0, 0, 0, :3] = [magnitude, -magnitude, 65000.0]
    out[1, 1, 2, 0] = np.nan
    out[1, 1, 2, 1] = np.inf
    return out


def check_error_case(vkattn, name, files, extra, directory):
    os.makedirs(directory, exist_ok=True)
    for filename, content in files.items():
        path = os.path.join(directory, filename)
        if isinstance(content, bytes):
            open(path, "wb").write(content)
        else:
            np.save(path, content)
    args = ["run", "--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "--out", "out.npy", "--lse", "lse.npy"] + extra
    proc = subprocess.run([vkattn] + args, cwd=directory, capture_output=True, text=True, timeout=300)
    lines = proc.stderr.splitlines()
    leftovers = [f for f in os.listdir(directory) if f.startswith(("out.npy", "lse.npy", "p.npy", "heads.png"))]
    if proc.returncode == 0:
        return False, "succeeded, expected a failure"
    if len(lines) != 1 or not lines[0].startswith("vkattn: error: "):
        return False, f"stderr is not one 'vkattn: error:' line: {proc.stderr!r}"
    if leftovers:
        return False, f"left output files behind: {leftovers}"
    if proc.stdout:
        return False, f"wrote to stdout: {proc.stdout!r}"
    if name in EXPECTED_MESSAGE and EXPECTED_MESSAGE[name] not in lines[0]:
        return False, f"the message does not say {EXPECTED_MESSAGE[name]!r}: {lines[0]!r}"
    return True, f"exit {proc.returncode}: {lines[0][len('vkattn: error: '):]}"


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
        for case in gen_case.CASES:
            print(case.name)
        for name, _, _ in errors:
            print("error:" + name)
        return 0
    vkattn = os.path.abspath(args.vkattn)
    if not os.path.exists(vkattn):
        sys.exit(f"check_run: error: {vkattn} does not exist (build it, or pass --vkattn)")

    selected = args.case or [c.name for c in gen_case.CASES] + ([] if args.no_errors else ["error:" + e[0] for e in errors])
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
