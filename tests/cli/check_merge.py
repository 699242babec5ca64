#!/usr/bin/env python3
"""Checks `vkattn merge --o O1.npy --lse L1.npy ... --out O.npy --lse-out L.npy` (merging attention states).

    python3 tests/cli/check_merge.py --vkattn build/release/tools/vkattn

1. Attention over all the keys (`vkattn run`) equals the merge of attention over three disjoint key
   ranges (f32 and f16 files).
2. Against an fp64 NumPy merge of random parts, some rows of some parts with no key (LSE -inf, O NaN)
   and one row with none in any part (O 0, LSE -inf), 1 and 5 parts.
3. Usage errors exit 2, bad files exit 1, each with one `vkattn: error:` line, nothing on stdout and
   no output file written.
Exits 1 when any check fails.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

FAILURES = []


def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        FAILURES.append(what)


def merge_reference(os_, ls):
    """fp64: LSE = m + log sum e^(LSE_i - m), O = sum e^(LSE_i - m) / T O_i; -inf parts add nothing."""
    ls = np.stack([l.astype(np.float64) for l in ls])
    m = ls.max(axis=0)
    finite = np.isfinite(m)
    safe_m = np.where(finite, m, 0.0)
    w = np.where(np.isneginf(ls), 0.0, np.exp(ls - safe_m))
    total = w.sum(axis=0)
    lse = np.where(finite, safe_m + np.log(np.where(finite, total, 1.0)), -np.inf)
    o = np.zeros(os_[0].shape, np.float64)
    for i, part in enumerate(os_):
        wi = np.where(finite, w[i] / np.where(finite, total, 1.0), 0.0)[..., None]
        o += np.where(wi > 0, wi * np.nan_to_num(part.astype(np.float64)), 0.0)
    return o, lse


def run(vkattn, *args):
    return subprocess.run([vkattn, *args], capture_output=True, text=True, timeout=300)


def key_ranges(vkattn, tmp, dtype):
    rng = np.random.default_rng(7)
    q = rng.standard_normal((2, 4, 9, 32)).astype(dtype)
    k = rng.standard_normal((2, 2, 40, 32)).astype(dtype)
    v = rng.standard_normal((2, 2, 40, 32)).astype(dtype)
    p = lambda name: os.path.join(tmp, name)
    np.save(p("q.npy"), q)
    merge_args = []
    for name, lo, hi in (("all", 0, 40), ("a", 0, 11), ("b", 11, 29), ("c", 29, 40)):
        np.save(p(f"k_{name}.npy"), np.ascontiguousarray(k[:, :, lo:hi]))
        np.save(p(f"v_{name}.npy"), np.ascontiguousarray(v[:, :, lo:hi]))
        r = run(vkattn, "run", "--q", p("q.npy"), "--k", p(f"k_{name}.npy"), "--v", p(f"v_{name}.npy"),
                "--out", p(f"o_{name}.npy"), "--lse", p(f"l_{name}.npy"))
        if r.returncode != 0:
            check(False, f"vkattn run {name}: {r.stderr.strip()}")
            return
        if name != "all":
            merge_args += ["--o", p(f"o_{name}.npy"), "--lse", p(f"l_{name}.npy")]
    r = run(vkattn, "merge", *merge_args, "--out", p("o_m.npy"), "--lse-out", p("l_m.npy"))
    check(r.returncode == 0 and r.stdout == "", f"merge of three key ranges ({np.dtype(dtype).name}) exits 0: {r.stderr.strip()}")
    if r.returncode != 0:
        return
    got, want = np.load(p("o_m.npy")), np.load(p("o_all.npy"))
    tol = 1e-5 if dtype == np.float32 else 2e-3
    check(got.dtype == want.dtype, f"merged O keeps the parts' file dtype ({got.dtype})")
    check(np.abs(got.astype(np.float64) - want).max() <= tol, f"merged O equals attention over every key ({np.dtype(dtype).name})")
    check(np.abs(np.load(p("l_m.npy")) - np.load(p("l_all.npy"))).max() <= 1e-5 * (1 + np.abs(np.load(p("l_all.npy"))).max()),
          f"merged LSE equals attention's ({np.dtype(dtype).name})")


def random_parts(vkattn, tmp, parts):
    rng = np.random.default_rng(parts)
    shape = (1, 3, 7, 12)
    os_, ls, args = [], [], []
    for i in range(parts):
        lse = rng.uniform(-4, 4, shape[:-1]).astype(np.float32)
        lse[rng.random(shape[:-1]) < 0.2] = -np.inf
        lse[:, :, 3] = -np.inf  # row 3: no part saw a key
        o = rng.standard_normal(shape).astype(np.float32)
        o[np.isneginf(lse)] = np.nan
        os_.append(o)
        ls.append(lse)
        np.save(os.path.join(tmp, f"po{i}.npy"), o)
        np.save(os.path.join(tmp, f"pl{i}.npy"), lse)
        args += ["--o", os.path.join(tmp, f"po{i}.npy"), "--lse", os.path.join(tmp, f"pl{i}.npy")]
    r = run(vkattn, "merge", *args, "--out", os.path.join(tmp, "pm.npy"), "--lse-out", os.path.join(tmp, "plm.npy"))
    check(r.returncode == 0, f"merge of {parts} random parts exits 0: {r.stderr.strip()}")
    if r.returncode != 0:
        return
    want_o, want_l = merge_reference(os_, ls)
    got_o, got_l = np.load(os.path.join(tmp, "pm.npy")), np.load(os.path.join(tmp, "plm.npy"))
    check(np.all(got_o[:, :, 3] == 0) and np.all(np.isneginf(got_l[:, :, 3])), f"{parts} parts: a row no part saw a key of is O 0, LSE -inf")
    check(np.allclose(got_o, want_o, atol=2e-6, rtol=0) and not np.isnan(got_o).any(), f"{parts} parts: O matches the fp64 merge")
    finite = np.isfinite(want_l)
    check(np.array_equal(np.isneginf(got_l), ~finite) and np.allclose(got_l[finite], want_l[finite], atol=1e-5),
          f"{parts} parts: LSE matches the fp64 merge")


def errors(vkattn, tmp):
    p = lambda name: os.path.join(tmp, name)
    np.save(p("e_o.npy"), np.zeros((1, 2, 3, 4), np.float32))
    np.save(p("e_o5.npy"), np.zeros((1, 2, 3, 5), np.float32))
    np.save(p("e_l.npy"), np.zeros((1, 2, 3), np.float32))
    np.save(p("e_l4.npy"), np.zeros((1, 2, 4), np.float32))
    out = p("e_out.npy")
    cases = [
        (["--o", p("e_o.npy"), "--out", out], 2, "--lse is required"),
        (["--o", p("e_o.npy"), "--lse", p("e_l.npy"), "--lse", p("e_l.npy"), "--out", out], 2, "give one --lse per --o"),
        (["--o", p("e_o.npy"), "--lse", p("e_l4.npy"), "--out", out], 1, "want (1, 2, 3)"),
        (["--o", p("e_o.npy"), "--lse", p("e_l.npy"), "--o", p("e_o5.npy"), "--lse", p("e_l.npy"), "--out", out], 1,
         "every part's O has one shape and dtype"),
        (["--o", p("missing.npy"), "--lse", p("e_l.npy"), "--out", out], 1, "missing.npy"),
        (["--o", p("e_o.npy"), "--lse", p("e_l.npy"), "--out", p("e_o.npy")], 1, "refusing to overwrite an input"),
    ]
    for args, code, text in cases:
        r = run(vkattn, "merge", *args)
        lines = r.stderr.strip().splitlines()
        check(r.returncode == code and r.stdout == "" and len(lines) == 1 and lines[0].startswith("vkattn: error:") and text in lines[0]
              and not os.path.exists(out), f"merge {' '.join(os.path.basename(a) for a in args)}: exit {code}, '{text}'")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vkattn", default="build/release/tools/vkattn")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        key_ranges(args.vkattn, tmp, np.float32)
        key_ranges(args.vkattn, tmp, np.float16)
        random_parts(args.vkattn, tmp, 1)
        random_parts(args.vkattn, tmp, 5)
        errors(args.vkattn, tmp)
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
