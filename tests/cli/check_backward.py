#!/usr/bin/env python3
"""Checks `vkattn run --grad-out ... --dq ... --dk ... --dv ... [--dsinks ...]` (the backward pass)
against (a) an independent fp64 NumPy backward (sdpa_backward.py) and (b), where torch imports,
torch.autograd in float64 on a textbook attention (torch_backward.py); and checks its usage errors.

    python3 tests/cli/check_backward.py                       # every case, the build's vkattn
    python3 tests/cli/check_backward.py --case gqa_dim_v_ne_dim_qk --vkattn build/release/tools/vkattn
    python3 tests/cli/check_backward.py --list
    python3 tests/cli/check_backward.py --self-test           # no vkattn: the references themselves

One line per case: PASS/FAIL and, for each gradient, its max error normalised by its reference's
max magnitude (max|got - want| / max(max|want|, 1e-3)) against the tolerance of the compute dtype
(TOLERANCE: f32 2e-4, f16 1e-2, bf16 6e-2), the references fed the inputs (Q, K, V, dO) rounded to
that dtype. A gradient the NumPy reference gives as exactly 0 (a fully masked row's dQ; dK and dV of
a key no row sees) must be exactly 0, and any NaN or Inf fails. O is checked too (the forward of the
same call, docs/testing.md's tolerances). The gradients must be .npy files in the inputs' layout and
dtype (f32 for bf16, like --out), dsinks f32 (heads,). Exits 1 when any case fails.

The dense cases are gen_case.Case's (gen_case.generate writes the inputs and `vkattn run` arguments);
the packed ones run_serving_cases.VarlenCase's (generate_varlen), their references one dense call per
sequence. dO is drawn from its own generator, in Q's file dtype, in O's shape. K and V poisoned with
NaN and Inf at keys past a batch element's key length must not leak into any gradient.

The error cases: --grad-out without all three of --dq/--dk/--dv, and a --grad-out not of O's shape,
are usage errors (exit 2); each must print one `vkattn: error:` line on stderr, nothing on stdout, and
leave no output file (out, lse, dq, dk, dv, dsinks) behind.

--self-test needs no vkattn: it checks sdpa_backward against central differences of
sdpa_reference.attention (fp64, every element of tiny cases) and, where torch imports, against
torch.autograd on the same cases (torch's part is skipped, and said so, otherwise); then it runs a
few of the cases through fake_vkattn_backward.py, a stand-in writing the references' values: they
must pass, and each of its deliberate mistakes (a wrong dK, dsinks' sign, no GQA sum in dV, a
fully masked row's dQ not 0, a NaN, a wrong dtype) must make a case fail.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zlib

try:
    import numpy as np
except ImportError:
    sys.exit("check_backward: error: numpy is required (Debian: apt install python3-numpy; run with /usr/bin/python3)")

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_case  # noqa: E402
import sdpa_reference  # noqa: E402
import torch_backward  # noqa: E402
from gen_case import Case  # noqa: E402
from run_compare import TOLERANCE as FORWARD_TOLERANCE, compare  # noqa: E402
from run_serving_cases import VarlenCase, generate_varlen  # noqa: E402
from sdpa_backward import live_scores, sdpa_backward, varlen_backward  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOLERANCE = {"f32": 2e-4, "f16": 1e-2, "bf16": 6e-2}  # max|got - want| / max(max|want|, 1e-3)
FLOOR = 1e-3
GRADIENTS = ("dq", "dk", "dv", "dsinks")
OUTPUTS = ("out.npy", "lse.npy", "dq.npy", "dk.npy", "dv.npy", "dsinks.npy")
# A --grad-out not of O's shape is a usage error (the option's contract: exit 2), like a --grad-out
# without --dq/--dk/--dv.
SHAPE_EXIT = 2

DENSE_CASES = [
    Case("odd_sizes_f32", batch=2, heads=3, seq_q=33, seq_k=47, dim=37),
    Case("gqa_dim_v_ne_dim_qk", batch=2, heads=8, kv_heads=2, seq_q=29, seq_k=61, dim=48, dim_v=24),
    Case("mqa_decode", batch=2, heads=6, kv_heads=1, seq_q=1, seq_k=300, dim=64, causal="bottom-right"),
    Case("causal_top_left_sq_lt_sk", seq_q=37, seq_k=90, causal="top-left"),
    Case("causal_bottom_right_sq_gt_sk", seq_q=60, seq_k=37, causal="bottom-right"),  # rows < 23 fully masked
    Case("window_two_sided_top_left_gqa", heads=4, kv_heads=2, seq_q=53, seq_k=37, window=(5, 5), align="top-left"),
    Case("window_causal_kv_lengths_poisoned", batch=3, seq_q=20, seq_k=70, window=(16, -1), causal="bottom-right",
         kv_lengths=[70, 0, 33], poison=True),
    Case("alibi_heads_causal", heads=4, seq_q=33, seq_k=50, alibi="h", causal="top-left", scale=0.3),
    Case("softcap_alibi_bh_float_mask", seq_q=30, seq_k=17, alibi="bh", softcap=5.0, mask="f32", mask_shape="bh",
         masked_rows=3, align="top-left"),
    Case("sinks_fully_masked_rows", seq_q=9, seq_k=4, causal="bottom-right", sinks=True),
    Case("sinks_kv_lengths_gqa", batch=3, heads=4, kv_heads=2, seq_q=17, seq_k=33, kv_lengths=[0, 7, 33], sinks=True),
    Case("bool_mask_fully_masked_rows", seq_q=40, seq_k=50, mask="bool", mask_shape="b1", masked_rows=5),
    Case("bool_mask_2d_kv_lengths", batch=2, seq_q=24, seq_k=41, mask="bool", kv_lengths=[41, 12]),
    Case("longer_f32", batch=1, heads=2, seq_q=257, seq_k=513, dim=64, causal="bottom-right"),
    Case("unfused_forward_gqa_mask", heads=4, kv_heads=2, seq_q=21, seq_k=35, mask="bool", window=(-1, 4),
         path="unfused"),
    Case("f16_files_gqa_softcap", heads=4, kv_heads=2, seq_q=63, seq_k=130, dim=64, file_dtype="f2", softcap=8.0,
         causal="bottom-right"),
    Case("f16_files_float_mask_masked_rows", heads=4, seq_q=33, seq_k=40, file_dtype="f2", mask="f16",
         mask_shape="1h", masked_rows=2),
    Case("f16_from_f32_d128_sinks", batch=1, heads=4, kv_heads=2, seq_q=40, seq_k=70, dim=128, dtype="f16",
         sinks=True, window=(32, 0)),
    Case("bf16_from_f32_causal_alibi", seq_q=40, seq_k=90, dim=48, dtype="bf16", causal="top-left", alibi="bh"),
    Case("bf16_modifiers_all_at_once", batch=2, heads=4, kv_heads=2, seq_q=31, seq_k=57, dim=40, window=(16, -1),
         causal="bottom-right", alibi="bh", softcap=5.0, sinks=True, mask="bool", mask_shape="bh",
         kv_lengths=[57, 20], poison=True, dtype="bf16"),
]

VARLEN_CASES = [
    VarlenCase("varlen_gqa_empty_sequences_sinks", seq_q=[3, 0, 6, 5], seq_k=[7, 4, 9, 0], heads=8, kv_heads=2,
               sinks=True),
    VarlenCase("varlen_f16_mha_top_left", seq_q=[17, 1], seq_k=[17, 40], heads=2, kv_heads=2, dim=64,
               file_dtype="f2", causal="top-left", int_dtype=np.int64),
    VarlenCase("varlen_modifiers_top_left", seq_q=[0, 9, 4], seq_k=[5, 12, 0], causal="none", window=(6, 2),
               align="top-left", softcap=5.0, alibi="bh", sinks=True, dim=24, dim_v=40),
    VarlenCase("varlen_bf16_decode_window_sinks", seq_q=[1, 1, 1], seq_k=[30, 0, 3], window=(8, 0), sinks=True,
               alibi="h", dtype="bf16"),
    VarlenCase("varlen_f32_causal_uneven", seq_q=[40, 1, 23], seq_k=[70, 33, 23], heads=4, kv_heads=1, dim=48,
               dim_v=32),
]

# --quick: one case each of GQA with dim_v != dim_qk, every modifier at once (bf16), f16 files, fully
# masked rows with sinks, and packed batches (empty sequences; modifiers): what the README's test
# command runs (the full list runs in the extended tests).
QUICK_CASES = ("gqa_dim_v_ne_dim_qk", "bf16_modifiers_all_at_once", "f16_files_gqa_softcap", "sinks_fully_masked_rows",
               "varlen_gqa_empty_sequences_sinks", "varlen_modifiers_top_left")

# Tiny cases for --self-test (central differences over every element).
SELF_TEST_CASES = [
    Case("st_plain", batch=2, heads=2, seq_q=5, seq_k=6, dim=3),
    Case("st_gqa_dim_v", batch=2, heads=4, kv_heads=2, seq_q=4, seq_k=7, dim=3, dim_v=5, scale=0.7),
    Case("st_causal_bottom_right_masked_rows", batch=1, heads=2, seq_q=6, seq_k=3, dim=4, causal="bottom-right"),
    Case("st_causal_top_left", batch=1, heads=2, seq_q=4, seq_k=7, dim=4, causal="top-left"),
    Case("st_window_align_top_left", batch=1, heads=2, seq_q=6, seq_k=8, dim=3, window=(2, 1), align="top-left"),
    Case("st_alibi_softcap_float_mask", batch=2, heads=2, seq_q=5, seq_k=6, dim=3, alibi="bh", softcap=1.5,
         mask="f32", mask_shape="bh", masked_rows=1, scale=1.3),
    Case("st_sinks_kv_lengths_poisoned", batch=3, heads=4, kv_heads=2, seq_q=4, seq_k=6, dim=3, sinks=True,
         kv_lengths=[0, 2, 6], poison=True),
    Case("st_bool_mask_masked_rows_sinks", batch=2, heads=2, seq_q=5, seq_k=6, dim=3, mask="bool", mask_shape="1h",
         masked_rows=2, sinks=True, causal="top-left"),
    VarlenCase("st_varlen_empty_sequences", seq_q=[2, 0, 3, 2], seq_k=[3, 2, 4, 0], heads=4, kv_heads=2, dim=3,
               dim_v=2, sinks=True, softcap=2.0, alibi="bh", window=(2, 0)),
]


class Problem:
    """One call: its files and `vkattn run` arguments, the inputs as the device sees them (rounded
    to the compute dtype, dO included) and the options of the references."""

    def __init__(self, case, seed):
        self.case = case
        self.packed = isinstance(case, VarlenCase)
        if self.packed:
            files, args, _, _ = generate_varlen(case, seed)
            self.cu_q, self.cu_k = files["cq"], files["ck"]
            self.options = dict(causal=case.causal, window=case.window, align=case.align, softcap=case.softcap,
                                alibi=files.get("alibi"), sinks=files.get("sinks"))
            out_shape = (files["q"].shape[0], case.heads, case.dim_v)
        else:
            files, args, _, _ = gen_case.generate(case, seed)
            self.options = dict(causal=case.causal, scale=case.scale, mask=files.get("mask"),
                                kv_lengths=case.kv_lengths, window=case.window, align=case.align,
                                softcap=case.softcap, alibi=files.get("alibi"), sinks=files.get("sinks"))
            out_shape = (case.batch, case.heads, case.seq_q, case.dim_v)
        rng = np.random.default_rng(zlib.crc32(case.name.encode()) + seed + 7919)
        files["dout"] = rng.standard_normal(out_shape).astype(files["q"].dtype)
        self.files, self.args = files, args
        self.dtype = case.compute_dtype
        self.seen = {name: sdpa_reference.round_to(files[key], self.dtype)
                     for name, key in (("q", "q"), ("k", "k"), ("v", "v"), ("dout", "dout"))}
        self.sinks = files.get("sinks") is not None

    def grad_args(self):
        return (["--grad-out", "dout.npy", "--dq", "dq.npy", "--dk", "dk.npy", "--dv", "dv.npy"]
                + (["--dsinks", "dsinks.npy"] if self.sinks else []))

    def reference(self, backward=sdpa_backward, sanitize=False):
        q, k, v, dout = (self.seen[n] for n in ("q", "k", "v", "dout"))
        if sanitize:  # poisoned keys no row sees: 0 (torch's autograd multiplies their zero gradient by NaN)
            q, k, v = (np.where(np.isfinite(x), x, 0.0) for x in (q, k, v))
        if self.packed:
            return varlen_backward(q, k, v, dout, self.cu_q, self.cu_k, backward=backward, **self.options)
        return backward(q, k, v, dout, **self.options)


def gradient_error(got, want):
    """max|got - want| / max(max|want|, FLOOR); inf for NaN/Inf where the reference has a number, or
    a non-zero where the reference is exactly 0."""
    scale = max(float(np.max(np.abs(want), initial=0.0)), FLOOR)
    err = compare(got, want, scale)
    zeros = want == 0.0
    if (got[zeros] != 0.0).any():
        return np.inf, int((got[zeros] != 0.0).sum())
    return err, 0


def output_dtype(case):
    return np.float16 if case.file_dtype == "f2" and case.compute_dtype != "bf16" else np.float32


def check_case(vkattn, case, directory, seed, use_torch):
    problem = Problem(case, seed)
    gen_case.write(directory, problem.files)
    start = time.time()
    proc = subprocess.run([vkattn, "run"] + problem.args + problem.grad_args(), cwd=directory, capture_output=True,
                          text=True, timeout=900)
    seconds = time.time() - start
    if proc.returncode != 0:
        return False, f"vkattn run exited {proc.returncode}: {proc.stderr.strip()}", seconds

    want = problem.reference()
    dtype = output_dtype(case)
    got = {}
    for name in ("out",) + GRADIENTS:
        if name == "dsinks" and not problem.sinks:
            if os.path.exists(os.path.join(directory, "dsinks.npy")):
                return False, "dsinks.npy written without --dsinks", seconds
            continue
        expected_shape = want[name].shape
        expected_dtype = np.float32 if name == "dsinks" else dtype
        path = os.path.join(directory, name + ".npy")
        if not os.path.exists(path):
            return False, f"{name}.npy was not written", seconds
        got[name] = np.load(path)
        if got[name].dtype != expected_dtype or got[name].shape != expected_shape:
            return (False, f"{name}.npy is {got[name].dtype} {got[name].shape}, expected {np.dtype(expected_dtype)} "
                    f"{expected_shape}", seconds)

    tol = TOLERANCE[problem.dtype]
    ok = True
    finite_v = np.abs(problem.seen["v"][np.isfinite(problem.seen["v"])])
    out_err = compare(got["out"], want["out"], max(float(finite_v.max(initial=0.0)), 1e-30) if finite_v.size else 1.0)
    ok &= out_err <= FORWARD_TOLERANCE[problem.dtype]
    parts = [f"O {out_err:.1e}"]
    for name in GRADIENTS:
        if name not in got:
            continue
        err, nonzero = gradient_error(got[name], want[name])
        ok &= err <= tol
        parts.append(f"{name} {err:.1e}" + (f" ({nonzero} not 0)" if nonzero else ""))
    detail = "  ".join(parts) + f" / tol {tol:.0e}"
    if use_torch:
        autograd = problem.reference(torch_backward.torch_backward, sanitize=True)
        errs = []
        for name in got:
            if name == "out":
                continue
            scale = max(float(np.max(np.abs(autograd[name]), initial=0.0)), FLOOR)
            err = compare(got[name], autograd[name], scale)
            ok &= err <= tol
            errs.append(err)
        detail += f"  torch {max(errs):.1e}"
    return bool(ok), detail, seconds


# ---------------------------------------------------------------------------------------------------
# Usage errors


def error_cases():
    """(name, files, extra args, expected exit (None: any non-zero)). Base: a dense f32 call."""
    rng = np.random.default_rng(11)
    q = rng.standard_normal((2, 4, 8, 16)).astype(np.float32)
    k = rng.standard_normal((2, 2, 10, 16)).astype(np.float32)
    v = rng.standard_normal((2, 2, 10, 12)).astype(np.float32)
    dout = rng.standard_normal((2, 4, 8, 12)).astype(np.float32)
    base = {"q.npy": q, "k.npy": k, "v.npy": v, "dout.npy": dout}
    grads = ["--dq", "dq.npy", "--dk", "dk.npy", "--dv", "dv.npy"]
    with_grad = ["--grad-out", "dout.npy"]
    pq = rng.standard_normal((9, 4, 16)).astype(np.float32)
    pk = rng.standard_normal((12, 2, 16)).astype(np.float32)
    packed = {"q.npy": pq, "k.npy": pk, "v.npy": pk, "cq.npy": np.array([0, 4, 9], np.int32),
              "ck.npy": np.array([0, 5, 12], np.int32)}
    packed_args = ["--cu-seqlens-q", "cq.npy", "--cu-seqlens-k", "ck.npy"]
    return [
        ("grad_out_alone", base, with_grad, 2),
        ("dq_without_grad_out", base, grads, 2),
        ("dsinks_without_sinks", base, with_grad + grads + ["--dsinks", "dsinks.npy"], 2),
        ("grad_out_q8_0", dict(base, **{"q.npy": np.zeros((2, 4, 8, 32), np.float32),
                                        "k.npy": np.zeros((2, 2, 10, 32), np.float32),
                                        "v.npy": np.zeros((2, 2, 10, 32), np.float32)}),
         with_grad + grads + ["--kv-dtype", "q8_0"], 2),
        ("grad_out_without_dq", base, with_grad + grads[2:], 2),
        ("grad_out_without_dk", base, with_grad + grads[:2] + grads[4:], 2),
        ("grad_out_without_dv", base, with_grad + grads[:4], 2),
        ("grad_out_wrong_dim_v", dict(base, **{"dout.npy": dout[..., :11].copy()}), with_grad + grads, SHAPE_EXIT),
        ("grad_out_dim_qk_not_dim_v", dict(base, **{"dout.npy": np.zeros((2, 4, 8, 16), np.float32)}),
         with_grad + grads, SHAPE_EXIT),
        ("grad_out_wrong_seq_q", dict(base, **{"dout.npy": np.zeros((2, 4, 9, 12), np.float32)}), with_grad + grads,
         SHAPE_EXIT),
        ("grad_out_kv_heads", dict(base, **{"dout.npy": np.zeros((2, 2, 8, 12), np.float32)}), with_grad + grads,
         SHAPE_EXIT),
        ("grad_out_3d_dense", dict(base, **{"dout.npy": dout[0].copy()}), with_grad + grads, SHAPE_EXIT),
        ("varlen_grad_out_wrong_total", dict(packed, **{"dout.npy": np.zeros((10, 4, 16), np.float32)}),
         packed_args + with_grad + grads, SHAPE_EXIT),
        ("varlen_grad_out_4d", dict(packed, **{"dout.npy": np.zeros((1, 9, 4, 16), np.float32)}),
         packed_args + with_grad + grads, SHAPE_EXIT),
        # Not usage errors by the options' spelling, but must fail cleanly all the same.
        ("grad_out_missing_file", base, ["--grad-out", "nothing.npy"] + grads, None),
        ("dq_same_file_as_dk", base, with_grad + ["--dq", "dq.npy", "--dk", "dq.npy", "--dv", "dv.npy"], None),
        ("dq_overwrites_input_q", base, with_grad + ["--dq", "q.npy", "--dk", "dk.npy", "--dv", "dv.npy"], None),
    ]


def check_error_case(vkattn, name, files, extra, expected_exit, directory):
    os.makedirs(directory, exist_ok=True)
    for filename, array in files.items():
        np.save(os.path.join(directory, filename), array)
    args = ["run", "--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "--out", "out.npy", "--lse", "lse.npy"] + extra
    proc = subprocess.run([vkattn] + args, cwd=directory, capture_output=True, text=True, timeout=300)
    lines = proc.stderr.splitlines()
    leftovers = sorted(f for f in os.listdir(directory) if f.startswith(OUTPUTS))
    if proc.returncode == 0:
        return False, "succeeded, expected a failure"
    if expected_exit is not None and proc.returncode != expected_exit:
        return False, f"exit {proc.returncode}, expected {expected_exit}: {proc.stderr.strip()!r}"
    if len(lines) != 1 or not lines[0].startswith("vkattn: error: "):
        return False, f"stderr is not one 'vkattn: error:' line: {proc.stderr!r}"
    if leftovers:
        return False, f"left output files behind: {leftovers}"
    if proc.stdout:
        return False, f"wrote to stdout: {proc.stdout!r}"
    return True, f"exit {proc.returncode}: {lines[0][len('vkattn: error: '):]}"


# ---------------------------------------------------------------------------------------------------
# --self-test: the references without vkattn


def forward_loss(problem, q, k, v, sinks):
    """sum(dO * O) of the fp64 forward (sdpa_reference.attention), per sequence when packed."""
    dout = problem.seen["dout"].astype(np.float64)
    options = dict(problem.options, sinks=sinks)
    if not problem.packed:
        return float(np.sum(dout * sdpa_reference.attention(q, k, v, **options)[0]))
    total = 0.0
    alibi = options.pop("alibi")
    cu_q, cu_k = problem.cu_q, problem.cu_k
    for b in range(len(cu_q) - 1):
        q0, q1, k0, k1 = int(cu_q[b]), int(cu_q[b + 1]), int(cu_k[b]), int(cu_k[b + 1])
        if q1 == q0 or k1 == k0:
            continue
        slopes = alibi[b:b + 1] if alibi is not None and alibi.ndim == 2 else alibi
        o = sdpa_reference.attention(q[q0:q1].transpose(1, 0, 2)[None], k[k0:k1].transpose(1, 0, 2)[None],
                                     v[k0:k1].transpose(1, 0, 2)[None], alibi=slopes, **options)[0]
        total += float(np.sum(dout[q0:q1] * o[0].transpose(1, 0, 2)))
    return total


def central_differences(problem, eps=1e-6):
    """Every finite element of Q, K, V and the sinks, perturbed by ±eps in fp64."""
    x = {n: problem.seen[n].astype(np.float64) for n in ("q", "k", "v")}
    x["sinks"] = None if problem.options.get("sinks") is None else problem.options["sinks"].astype(np.float64)
    grads = {}
    for name in ("q", "k", "v", "sinks"):
        if x[name] is None:
            grads["d" + name] = None
            continue
        grad = np.zeros_like(x[name])
        for index in np.ndindex(x[name].shape):
            if not np.isfinite(x[name][index]):
                continue  # poisoned keys: no finite difference; the reference must give 0 there
            saved = x[name][index]
            values = []
            for step in (eps, -eps):
                x[name][index] = saved + step
                values.append(forward_loss(problem, x["q"], x["k"], x["v"], x["sinks"]))
            x[name][index] = saved
            grad[index] = (values[0] - values[1]) / (2 * eps)
        grads["d" + name] = grad
    return grads


def self_test(seed):
    use_torch = torch_backward.available()
    if not use_torch:
        print("torch: not importable; the autograd comparison is skipped (Debian: apt install python3-torch)")
    failures = 0
    for case in SELF_TEST_CASES:
        problem = Problem(case, seed)
        want = problem.reference()
        parts, ok = [], True
        fd = central_differences(problem)
        fd_err = 0.0
        for name in GRADIENTS:
            if want[name] is None:
                continue
            scale = max(float(np.max(np.abs(want[name]))), FLOOR)
            fd_err = max(fd_err, float(np.max(np.abs(np.nan_to_num(fd[name]) - want[name]))) / scale)
            if not np.isfinite(want[name]).all():
                fd_err = np.inf
        ok &= fd_err <= 1e-6
        parts.append(f"central differences {fd_err:.1e} / 1e-6")
        if use_torch:
            autograd = problem.reference(torch_backward.torch_backward, sanitize=True)
            t_err = 0.0
            for name in GRADIENTS:
                if want[name] is None:
                    ok &= autograd[name] is None
                    continue
                scale = max(float(np.max(np.abs(want[name]))), FLOOR)
                t_err = max(t_err, compare(autograd[name], want[name], scale))
            ok &= t_err <= 1e-10
            parts.append(f"torch autograd {t_err:.1e} / 1e-10")
        failures += not ok
        print(f"{'PASS' if ok else 'FAIL'}  {case.name:40s} {'  '.join(parts)}", flush=True)
    fake_total, fake_failures = fake_vkattn_runs(seed, use_torch)
    total = len(SELF_TEST_CASES) + fake_total
    failures += fake_failures
    print(f"{total - failures}/{total} passed (self-test{'' if use_torch else ', torch skipped'})")
    return 1 if failures else 0


# check_case through fake_vkattn_backward.py: right outputs pass, and each way of getting one wrong fails.
FAKE_CASES = ("sinks_fully_masked_rows", "gqa_dim_v_ne_dim_qk", "varlen_gqa_empty_sequences_sinks")
FAKE_BREAKS = ("", "dk", "dq_row", "dsinks", "dv_gqa", "dtype", "nan")


def fake_vkattn_runs(seed, use_torch):
    cases = {c.name: c for c in DENSE_CASES + VARLEN_CASES}
    failures = 0
    with tempfile.TemporaryDirectory(prefix="vkattn-backward-fake-") as root:
        fake = os.path.join(root, "vkattn")
        with open(fake, "w") as script:
            script.write(f"#!/bin/sh\nexec {sys.executable} "
                         f"{os.path.join(os.path.dirname(os.path.abspath(__file__)), 'fake_vkattn_backward.py')} \"$@\"\n")
        os.chmod(fake, 0o755)
        for broken in FAKE_BREAKS:
            os.environ["FAKE_BACKWARD_BREAK"] = broken
            results = []
            for name in FAKE_CASES:
                ok, detail, _ = check_case(fake, cases[name], os.path.join(root, f"{broken}-{name}"), seed, use_torch)
                results.append((ok, detail))
            want_pass = broken == ""
            ok = all(r[0] for r in results) if want_pass else not all(r[0] for r in results)
            failures += not ok
            what = "right outputs pass" if want_pass else f"broken {broken}: caught"
            print(f"{'PASS' if ok else 'FAIL'}  fake vkattn, {what:30s} "
                  f"{' | '.join(('ok' if r[0] else 'FAIL') + ' ' + r[1] for r in results)}", flush=True)
        os.environ.pop("FAKE_BACKWARD_BREAK", None)
    return len(FAKE_BREAKS), failures


def default_vkattn():
    built = os.path.join(REPO, "build", "release", "tools", "vkattn")
    return built if os.path.exists(built) else shutil.which("vkattn") or built


def main():
    parser = argparse.ArgumentParser(description="Check `vkattn run --grad-out` (the backward pass) against fp64 "
                                                 "NumPy and torch.autograd.")
    parser.add_argument("--vkattn", default=default_vkattn(), help="the vkattn binary (default: %(default)s)")
    parser.add_argument("--case", action="append", help="run only this case (repeatable; see --list)")
    parser.add_argument("--list", action="store_true", help="list the cases")
    parser.add_argument("--seed", type=int, default=0, help="offset to every case's seed")
    parser.add_argument("--keep", help="keep each case's files under this directory")
    parser.add_argument("--no-errors", action="store_true", help="skip the usage-error cases")
    parser.add_argument("--quick", action="store_true", help="only the cases of QUICK_CASES (and the usage errors)")
    parser.add_argument("--no-torch", action="store_true", help="skip the torch.autograd comparison")
    parser.add_argument("--self-test", action="store_true",
                        help="check the references (central differences, torch.autograd); needs no vkattn")
    args = parser.parse_args()

    if args.self_test:
        return self_test(args.seed)
    errors = error_cases()
    cases = {c.name: c for c in DENSE_CASES + VARLEN_CASES}
    if args.list:
        for name in cases:
            print(name)
        for e in errors:
            print("error:" + e[0])
        return 0
    vkattn = os.path.abspath(args.vkattn)
    if not os.path.exists(vkattn):
        sys.exit(f"check_backward: error: {vkattn} does not exist (build it, or pass --vkattn)")
    use_torch = torch_backward.available() and not args.no_torch
    if not use_torch:
        print("torch: " + ("--no-torch" if args.no_torch else "not importable") + "; the autograd comparison is skipped")

    chosen = list(QUICK_CASES) if args.quick else list(cases)
    selected = args.case or chosen + ([] if args.no_errors else ["error:" + e[0] for e in errors])
    root = args.keep or tempfile.mkdtemp(prefix="vkattn-backward-")
    failures = 0
    for name in selected:
        directory = os.path.join(root, name.replace(":", "_"))
        seconds = 0.0
        if name.startswith("error:"):
            matches = [e for e in errors if e[0] == name[len("error:"):]]
            if not matches:
                sys.exit(f"check_backward: error: no case named {name!r} (see --list)")
            ok, detail = check_error_case(vkattn, *matches[0], directory)
        elif name in cases:
            ok, detail, seconds = check_case(vkattn, cases[name], directory, args.seed, use_torch)
        else:
            sys.exit(f"check_backward: error: no case named {name!r} (see --list)")
        failures += not ok
        print(f"{'PASS' if ok else 'FAIL'}  {name:36s} {detail}  [{seconds:.1f}s]", flush=True)
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    total = len(selected)
    print(f"{total - failures}/{total} passed (seed offset {args.seed})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
