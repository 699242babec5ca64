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
"""
import argparse
import dataclasses
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
    sys.exit("check_run: error: numpy is required (Debian: apt install python3-numpy; run with /usr/bin/python3)")

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_case  # noqa: E402
import sdpa_reference  # noqa: E402

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


@dataclasses.dataclass
class PagedCase:
    """A `vkattn run` over a paged KV cache: len(cache_lens) sequences, their pages handed out from a
    shuffled pool (plus spare_pages no sequence uses), a spare -1 column in the block table."""
    name: str
    cache_lens: list
    heads: int = 4
    kv_heads: int = 2
    seq_q: int = 1
    dim: int = 32
    dim_v: int = None  # None: = dim
    page_size: int = 16
    seq_new: int = 0  # --k-new/--v-new of this many tokens, appended first
    spare_pages: int = 2
    file_dtype: str = "f4"
    dtype: str = None  # --dtype (None: the files')
    int_dtype: type = np.int32  # of --block-table and --cache-lens
    causal: str = "bottom-right"
    window: tuple = None
    align: str = None
    softcap: float = None
    alibi: str = None  # 'h': (H,), 'bh': (B,H)
    sinks: bool = False
    check: bool = False  # also --check: stdout must say it passed
    cache_out: bool = False  # also --k-cache-out/--v-cache-out, compared exactly
    kv_dtype: str = None  # 'q8_0': --kv-dtype q8_0 (the rows nobody holds are 0, not NaN: q8_0 holds no NaN)
    page_order: str = None  # 'hnd': --page-order hnd, caches (num_pages, kv_heads, page_size, dim)

    def __post_init__(self):
        self.dim_v = self.dim_v or self.dim

    @property
    def compute_dtype(self):
        return self.dtype or ("f16" if self.file_dtype == "f2" else "f32")


PAGED_CASES = [
    PagedCase("paged_gqa_shuffled_lens_0_1_17", cache_lens=[0, 1, 17], heads=8, kv_heads=2, seq_q=3),
    PagedCase("paged_append_across_page_edge", cache_lens=[14, 30, 5], seq_new=4, seq_q=4, cache_out=True,
              check=True, int_dtype=np.int64),
    PagedCase("paged_f16_append_gqa", cache_lens=[40, 0, 23], heads=4, kv_heads=1, seq_new=1, dim=64,
              file_dtype="f2", cache_out=True),
    PagedCase("paged_modifiers_top_left", cache_lens=[0, 9, 33], seq_q=5, causal="none", window=(6, 2),
              align="top-left", softcap=5.0, alibi="bh", sinks=True, page_size=8, dim=24, dim_v=40, check=True),
    PagedCase("paged_bf16_from_f32_window_sinks", cache_lens=[50, 3], seq_q=2, window=(16, 0), sinks=True,
              alibi="h", dtype="bf16", seq_new=2, cache_out=True),
    PagedCase("paged_q8_0_append_gqa", cache_lens=[40, 0, 17], heads=4, kv_heads=2, seq_new=2, dim=64, dim_v=32,
              kv_dtype="q8_0", cache_out=True, check=True),
    PagedCase("paged_q8_0_f16", cache_lens=[3, 33], seq_q=2, dim=32, file_dtype="f2", kv_dtype="q8_0",
              softcap=8.0, sinks=True),
    PagedCase("paged_hnd_append_across_page_edge", cache_lens=[14, 30, 0], heads=8, kv_heads=2, seq_new=3, seq_q=2,
              page_order="hnd", cache_out=True, check=True),
    PagedCase("paged_hnd_q8_0_f16_window", cache_lens=[40, 7], seq_new=1, dim=64, file_dtype="f2", kv_dtype="q8_0",
              page_order="hnd", window=(16, 0), cache_out=True),
]


def q8_0_values(x):
    """What ggml's q8_0 blocks hold for float32 x (rows of a multiple of 32 along the last axis): per
    32 values d = f16(max|x| / 127), q = round(x / d) half away from zero, clamped to [-127, 127],
    value d * q. Written from the format's definition, not from vkattn's code."""
    blocks = np.asarray(x, np.float32).reshape(-1, 32)
    d = (np.abs(blocks).max(axis=1) / np.float32(127)).astype(np.float16).astype(np.float32)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.abs(blocks.astype(np.float64)) / d
    q = np.where(d == 0, 0.0, np.sign(blocks) * np.minimum(np.floor(ratio + 0.5), 127.0))
    return (d * q).astype(np.float32).reshape(np.shape(x))


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


def paged_pages(case, rng):
    """(block table (B, max_pages) with -1 past each sequence's pages, num_pages): shuffled pages."""
    ps = case.page_size
    need = [-(-(length + case.seq_new) // ps) for length in case.cache_lens]
    num_pages = sum(need) + case.spare_pages
    order = rng.permutation(num_pages)
    table = np.full((len(need), max(need + [1]) + 1), -1, dtype=np.int64)
    used = 0
    for b, n in enumerate(need):
        table[b, :n] = order[used:used + n]
        used += n
    return table, num_pages


def generate_paged(case, seed):
    """(files, `vkattn run` args, (O, LSE) of the reference, expected caches (K, V) after the append
    in the compute dtype, V values the GPU sees)."""
    rng = np.random.default_rng(zlib.crc32(case.name.encode()) + seed)
    file_type = np.float16 if case.file_dtype == "f2" else np.float32
    batch, heads, groups, ps = len(case.cache_lens), case.heads, case.kv_heads, case.page_size
    table, num_pages = paged_pages(case, rng)
    unheld = 0.0 if case.kv_dtype else np.nan  # rows nobody holds: NaN (q8_0: 0, it has no NaN)
    kc = np.full((num_pages, ps, groups, case.dim), unheld, dtype=file_type)
    vc = np.full((num_pages, ps, groups, case.dim_v), unheld, dtype=file_type)
    for b, length in enumerate(case.cache_lens):
        for t in range(length):
            page, slot = table[b, t // ps], t % ps
            kc[page, slot] = rng.standard_normal((groups, case.dim))
            vc[page, slot] = rng.standard_normal((groups, case.dim_v))
    q = rng.standard_normal((batch, heads, case.seq_q, case.dim)).astype(file_type)
    kn = rng.standard_normal((batch, groups, case.seq_new, case.dim)).astype(file_type)
    vn = rng.standard_normal((batch, groups, case.seq_new, case.dim_v)).astype(file_type)
    files = {"q": q, "kc": kc, "vc": vc, "bt": table.astype(case.int_dtype),
             "cl": np.asarray(case.cache_lens, dtype=case.int_dtype)}
    args = ["--q", "q.npy", "--k-cache", "kc.npy", "--v-cache", "vc.npy", "--block-table", "bt.npy",
            "--cache-lens", "cl.npy", "--out", "out.npy", "--lse", "lse.npy"]
    if case.seq_new:
        files.update(kn=kn, vn=vn)
        args += ["--k-new", "kn.npy", "--v-new", "vn.npy"]
    if case.cache_out:
        args += ["--k-cache-out", "kc_out.npy", "--v-cache-out", "vc_out.npy"]
    if case.causal != "none":
        args += ["--causal", case.causal]
    if case.dtype:
        args += ["--dtype", case.dtype]
    if case.window is not None:
        args += ["--window", f"{case.window[0]}:{case.window[1]}"]
    if case.align:
        args += ["--align", case.align]
    if case.softcap is not None:
        args += ["--softcap", repr(case.softcap)]
    alibi = sinks = None
    if case.alibi:
        alibi = (rng.random((heads,) if case.alibi == "h" else (batch, heads)) * 0.5).astype(np.float32)
        files["alibi"] = alibi
        args += ["--alibi", "alibi.npy"]
    if case.sinks:
        sinks = (rng.random(heads) * 4.0 - 1.0).astype(np.float32)
        files["sinks"] = sinks
        args += ["--sinks", "sinks.npy"]
    if case.check:
        args += ["--check"]
    if case.kv_dtype:
        args += ["--kv-dtype", case.kv_dtype]

    # The caches after the append, then each sequence's keys gathered into a dense (1, G, len, D).
    # q8_0: the caches given are quantized as read; the appended rows after rounding to the dtype.
    dtype = case.compute_dtype
    q_seen, k_seen, v_seen = (sdpa_reference.round_to(x, dtype) for x in (q, kc, vc))
    kn_seen, vn_seen = sdpa_reference.round_to(kn, dtype), sdpa_reference.round_to(vn, dtype)
    if case.kv_dtype:
        k_seen, v_seen = q8_0_values(kc), q8_0_values(vc)
        kn_seen, vn_seen = q8_0_values(kn_seen), q8_0_values(vn_seen)
    v_used = [vn_seen.ravel()]
    for b, length in enumerate(case.cache_lens):
        for t in range(length, length + case.seq_new):
            page, slot = table[b, t // ps], t % ps
            k_seen[page, slot] = kn_seen[b, :, t - length]
            v_seen[page, slot] = vn_seen[b, :, t - length]
    out = np.zeros((batch, heads, case.seq_q, case.dim_v))
    lse = np.full((batch, heads, case.seq_q), -np.inf)
    for b, length in enumerate(case.cache_lens):
        tokens = np.arange(length + case.seq_new)
        rows = (table[b, tokens // ps], tokens % ps)
        k = k_seen[rows].transpose(1, 0, 2)[None]  # (1, G, len, D)
        v = v_seen[rows].transpose(1, 0, 2)[None]
        v_used.append(v.ravel())
        if tokens.size == 0:  # no keys: O = 0, LSE = -inf, or the sink's logit
            if sinks is not None:
                lse[b] = sinks[:, None]
            continue
        out[b], lse[b] = sdpa_reference.attention(
            q_seen[b:b + 1], k, v, causal=case.causal, window=case.window, align=case.align, softcap=case.softcap,
            alibi=alibi[b:b + 1] if alibi is not None and alibi.ndim == 2 else alibi, sinks=sinks)
    if case.page_order == "hnd":  # the same caches, each page's heads first
        heads_first = lambda cache: np.ascontiguousarray(cache.transpose(0, 2, 1, 3))
        files.update(kc=heads_first(kc), vc=heads_first(vc))
        k_seen, v_seen = heads_first(k_seen), heads_first(v_seen)
        args += ["--page-order", "hnd"]
    return files, args, (out, lse), (k_seen, v_seen), np.concatenate(v_used)


def check_paged_case(vkattn, case, directory, seed):
    files, args, (ref_out, ref_lse), (ref_kc, ref_vc), v_seen = generate_paged(case, seed)
    gen_case.write(directory, files)
    start = time.time()
    proc = subprocess.run([vkattn, "run"] + args, cwd=directory, capture_output=True, text=True, timeout=900)
    seconds = time.time() - start
    if proc.returncode != 0:
        return False, f"vkattn run exited {proc.returncode}: {proc.stderr.strip()}", seconds
    if case.check != proc.stdout.startswith("check: passed"):
        return False, f"stdout {proc.stdout!r} (--check {'given' if case.check else 'not given'})", seconds
    out_f16 = case.file_dtype == "f2" and case.compute_dtype != "bf16"
    expected_dtype = np.float16 if out_f16 else np.float32
    cache_dtype = np.float32 if case.kv_dtype else expected_dtype  # q8_0 caches: written as f32 values
    results = {}
    for name, shape, dtype in [("out", ref_out.shape, expected_dtype), ("lse", ref_lse.shape, np.float32)] + (
            [("kc_out", ref_kc.shape, cache_dtype), ("vc_out", ref_vc.shape, cache_dtype)] if case.cache_out
            else []):
        results[name] = np.load(os.path.join(directory, name + ".npy"))
        if results[name].dtype != dtype or results[name].shape != shape:
            return (False, f"{name}.npy is {results[name].dtype} {results[name].shape}, expected "
                    f"{np.dtype(dtype)} {shape}", seconds)
    finite_v = np.abs(v_seen[np.isfinite(v_seen)])
    scale = float(finite_v.max()) if finite_v.size and finite_v.max() > 0 else 1.0
    err = compare(results["out"], ref_out, scale)
    lse_err = compare(results["lse"], ref_lse, 1.0)
    finite = np.isfinite(ref_lse)
    if np.isfinite(lse_err) and finite.any():
        got = results["lse"][finite].astype(np.float64)
        lse_err = float(np.max(np.abs(got - ref_lse[finite]) / (1.0 + np.abs(ref_lse[finite]))))
    tol = TOLERANCE[case.compute_dtype]
    ok = err <= tol and lse_err <= LSE_TOLERANCE
    detail = f"err {err:.2e} / tol {tol:.0e}  lse {lse_err:.2e} / {LSE_TOLERANCE:.0e}"
    if np.isinf(ref_lse).any():
        detail += f"  ({int(np.isinf(ref_lse).sum())} rows without keys)"
    if case.cache_out:
        # Copies of the rounded inputs with the new rows written: bit for bit, NaN rows included.
        caches_ok = True
        for name, want in (("kc_out", ref_kc), ("vc_out", ref_vc)):
            got = results[name].astype(np.float32)
            if not np.array_equal(got, want.astype(np.float32), equal_nan=True):
                bad = np.argwhere(~((got == want) | (np.isnan(got) & np.isnan(want))))
                caches_ok = False
                detail += f"  {name}.npy differs at {len(bad)} values (first {tuple(int(i) for i in bad[0])})"
        ok = ok and caches_ok
        detail += "  caches ok" if caches_ok else ""
    return ok, detail, seconds


@dataclasses.dataclass
class VarlenCase:
    """A `vkattn run` over packed sequences: Q (sum(seq_q), heads, dim), K and V (sum(seq_k), kv_heads,
    dim), sequence b of seq_q[b] queries attending its seq_k[b] keys."""
    name: str
    seq_q: list
    seq_k: list
    heads: int = 4
    kv_heads: int = 2
    dim: int = 32
    dim_v: int = None  # None: = dim
    file_dtype: str = "f4"
    dtype: str = None  # --dtype (None: the files')
    int_dtype: type = np.int32  # of --cu-seqlens-q/-k
    causal: str = "bottom-right"
    window: tuple = None
    align: str = None
    softcap: float = None
    alibi: str = None  # 'h': (H,), 'bh': (B,H)
    sinks: bool = False
    check: bool = False  # also --check: stdout must say it passed
    kv_dtype: str = None  # 'q8_0': --kv-dtype q8_0
    weights: bool = False  # --weights p.npy (the three-stage path): P (heads, total_q, total_k) checked too

    def __post_init__(self):
        self.dim_v = self.dim_v or self.dim

    @property
    def compute_dtype(self):
        return self.dtype or ("f16" if self.file_dtype == "f2" else "f32")


VARLEN_CASES = [
    VarlenCase("varlen_gqa_empty_sequences", seq_q=[3, 0, 1, 5], seq_k=[7, 4, 0, 2], heads=8, kv_heads=2,
               check=True),
    VarlenCase("varlen_f16_mha_top_left", seq_q=[17, 1], seq_k=[17, 40], heads=2, kv_heads=2, dim=64,
               file_dtype="f2", causal="top-left", int_dtype=np.int64),
    VarlenCase("varlen_modifiers_top_left", seq_q=[0, 9, 4], seq_k=[5, 12, 0], causal="none", window=(6, 2),
               align="top-left", softcap=5.0, alibi="bh", sinks=True, dim=24, dim_v=40, check=True),
    VarlenCase("varlen_bf16_from_f32_decode_window_sinks", seq_q=[1, 1, 1], seq_k=[30, 0, 3], window=(8, 0),
               sinks=True, alibi="h", dtype="bf16"),
    VarlenCase("varlen_q8_0_gqa_empty_check", seq_q=[3, 0, 6, 1], seq_k=[20, 5, 33, 0], heads=4, kv_heads=2, dim=64,
               dim_v=32, window=(16, 0), sinks=True, kv_dtype="q8_0", check=True),
    VarlenCase("varlen_weights_gqa_empty_modifiers", seq_q=[4, 0, 7, 2], seq_k=[9, 3, 7, 0], heads=4, kv_heads=2,
               window=(5, 0), alibi="bh", sinks=True, weights=True, check=True),
    VarlenCase("varlen_weights_f16_top_left", seq_q=[6, 1], seq_k=[6, 11], heads=2, kv_heads=1, dim=16,
               file_dtype="f2", causal="top-left", weights=True),
]


def generate_varlen(case, seed):
    """(files, `vkattn run` args, (O (total_q, H, Dv), LSE (H, total_q)) of the reference, V values
    the GPU sees)."""
    rng = np.random.default_rng(zlib.crc32(case.name.encode()) + seed)
    file_type = np.float16 if case.file_dtype == "f2" else np.float32
    batch, heads, groups = len(case.seq_q), case.heads, case.kv_heads
    cu_q = np.concatenate([[0], np.cumsum(case.seq_q)]).astype(case.int_dtype)
    cu_k = np.concatenate([[0], np.cumsum(case.seq_k)]).astype(case.int_dtype)
    total_q, total_k = int(cu_q[-1]), int(cu_k[-1])
    q = rng.standard_normal((total_q, heads, case.dim)).astype(file_type)
    k = rng.standard_normal((total_k, groups, case.dim)).astype(file_type)
    v = rng.standard_normal((total_k, groups, case.dim_v)).astype(file_type)
    files = {"q": q, "k": k, "v": v, "cq": cu_q, "ck": cu_k}
    args = ["--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "--cu-seqlens-q", "cq.npy", "--cu-seqlens-k", "ck.npy",
            "--out", "out.npy", "--lse", "lse.npy"]
    if case.causal != "none":
        args += ["--causal", case.causal]
    if case.dtype:
        args += ["--dtype", case.dtype]
    if case.window is not None:
        args += ["--window", f"{case.window[0]}:{case.window[1]}"]
    if case.align:
        args += ["--align", case.align]
    if case.softcap is not None:
        args += ["--softcap", repr(case.softcap)]
    alibi = sinks = None
    if case.alibi:
        alibi = (rng.random((heads,) if case.alibi == "h" else (batch, heads)) * 0.5).astype(np.float32)
        files["alibi"] = alibi
        args += ["--alibi", "alibi.npy"]
    if case.sinks:
        sinks = (rng.random(heads) * 4.0 - 1.0).astype(np.float32)
        files["sinks"] = sinks
        args += ["--sinks", "sinks.npy"]
    if case.check:
        args += ["--check"]
    if case.kv_dtype:
        args += ["--kv-dtype", case.kv_dtype]
    if case.weights:
        args += ["--weights", "p.npy"]

    # One dense problem per sequence: its rows sliced out of the packed tensors.
    # q8_0: K and V quantized as read (before rounding to the dtype).
    dtype = case.compute_dtype
    q_seen, k_seen, v_seen = (sdpa_reference.round_to(x, dtype) for x in (q, k, v))
    if case.kv_dtype:
        k_seen, v_seen = q8_0_values(k), q8_0_values(v)
    out = np.zeros((total_q, heads, case.dim_v))
    lse = np.full((heads, total_q), -np.inf)
    weights = np.zeros((heads, total_q, total_k))  # 0 outside each row's sequence
    for b in range(batch):
        q0, q1, k0, k1 = int(cu_q[b]), int(cu_q[b + 1]), int(cu_k[b]), int(cu_k[b + 1])
        if q1 == q0:
            continue
        if k1 == k0:  # no keys: O = 0, LSE = -inf, or the sink's logit
            if sinks is not None:
                lse[:, q0:q1] = sinks[:, None]
            continue
        o_b, lse_b, p_b = sdpa_reference.attention(
            q_seen[q0:q1].transpose(1, 0, 2)[None], k_seen[k0:k1].transpose(1, 0, 2)[None],
            v_seen[k0:k1].transpose(1, 0, 2)[None], causal=case.causal, window=case.window, align=case.align,
            softcap=case.softcap, alibi=alibi[b:b + 1] if alibi is not None and alibi.ndim == 2 else alibi,
            sinks=sinks, weights=True)
        out[q0:q1] = o_b[0].transpose(1, 0, 2)
        lse[:, q0:q1] = lse_b[0]
        weights[:, q0:q1, k0:k1] = p_b[0]
    return files, args, (out, lse, weights), v_seen


def check_varlen_case(vkattn, case, directory, seed):
    files, args, (ref_out, ref_lse, ref_weights), v_seen = generate_varlen(case, seed)
    gen_case.write(directory, files)
    start = time.time()
    proc = subprocess.run([vkattn, "run"] + args, cwd=directory, capture_output=True, text=True, timeout=900)
    seconds = time.time() - start
    if proc.returncode != 0:
        return False, f"vkattn run exited {proc.returncode}: {proc.stderr.strip()}", seconds
    if case.check != proc.stdout.startswith("check: passed"):
        return False, f"stdout {proc.stdout!r} (--check {'given' if case.check else 'not given'})", seconds
    out_f16 = case.file_dtype == "f2" and case.compute_dtype != "bf16"
    expected_dtype = np.float16 if out_f16 else np.float32
    results = {}
    expected = [("out", ref_out.shape, expected_dtype), ("lse", ref_lse.shape, np.float32)]
    if case.weights:
        expected.append(("p", ref_weights.shape, np.float32))
    for name, shape, dtype in expected:
        results[name] = np.load(os.path.join(directory, name + ".npy"))
        if results[name].dtype != dtype or results[name].shape != shape:
            return (False, f"{name}.npy is {results[name].dtype} {results[name].shape}, expected "
                    f"{np.dtype(dtype)} {shape}", seconds)
    finite_v = np.abs(v_seen[np.isfinite(v_seen)])
    scale = float(finite_v.max()) if finite_v.size and finite_v.max() > 0 else 1.0
    err = compare(results["out"], ref_out, scale)
    lse_err = compare(results["lse"], ref_lse, 1.0)
    finite = np.isfinite(ref_lse)
    if np.isfinite(lse_err) and finite.any():
        got = results["lse"][finite].astype(np.float64)
        lse_err = float(np.max(np.abs(got - ref_lse[finite]) / (1.0 + np.abs(ref_lse[finite]))))
    tol = TOLERANCE[case.compute_dtype]
    ok = err <= tol and lse_err <= LSE_TOLERANCE
    detail = f"err {err:.2e} / tol {tol:.0e}  lse {lse_err:.2e} / {LSE_TOLERANCE:.0e}"
    if case.weights:
        # Weights are probabilities: absolute error; exactly 0 outside each row's sequence and at masked keys.
        p_err = compare(results["p"], ref_weights, 1.0)
        zeros_ok = bool(np.all(results["p"][ref_weights == 0] == 0))
        ok = ok and p_err <= tol and zeros_ok
        detail += f"  P {p_err:.2e}" + ("" if zeros_ok else "  (P not exactly 0 where the reference is)")
    if np.isinf(ref_lse).any():
        detail += f"  ({int(np.isinf(ref_lse).sum())} rows without keys)"
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
    ] + q8_0_error_cases(base) + paged_error_cases(q, kv) + varlen_error_cases()


def q8_0_error_cases(base):
    """Bad dense --kv-dtype q8_0 input: `base` has dims of 16; q32 dims of 32, a NaN in K."""
    rng = np.random.default_rng(10)
    q32 = {"q.npy": rng.standard_normal((2, 2, 8, 32)).astype(np.float32),
           "k.npy": rng.standard_normal((2, 2, 10, 32)).astype(np.float32),
           "v.npy": rng.standard_normal((2, 2, 10, 32)).astype(np.float32)}
    k_nan = q32["k.npy"].copy()
    k_nan[0, 1, 2, 3] = np.nan  # element ((0 * 2 + 1) * 10 + 2) * 32 + 3 = 387
    q8_0 = ["--kv-dtype", "q8_0"]
    return [
        ("q8_0_dim_16", base, q8_0),
        ("q8_0_nan_k", dict(q32, **{"k.npy": k_nan}), q8_0),
        ("q8_0_weights", q32, q8_0 + ["--weights", "p.npy"]),
        ("q8_0_heatmap", q32, q8_0 + ["--heatmap", "heads.png"]),
        ("q8_0_unfused", q32, q8_0 + ["--path", "unfused"]),
        # V of 2e5, which q8_0 holds (scale 2e5/127 < 65504), but which O (a weighted mean of V's rows)
        # in f16 does not: refused like --dtype f16 without q8_0, never an Inf in O (issue 37, defect 2).
        ("q8_0_f16_overflow_v", dict(q32, **{"v.npy": q8_0_big(q32["v.npy"])}), q8_0 + ["--dtype", "f16"]),
    ]


def q8_0_big(v):
    """A copy of V with one value of 2e5 (q8_0 holds it: its block's scale 2e5/127 fits f16, and the
    block then stands for 127 * f16(2e5/127) = 200025)."""
    out = v.copy()
    out.flat[5] = 2e5
    return out


def varlen_error_cases():
    """Bad packed-sequence input: Q (8, 2, 16), K and V (10, 2, 16), two sequences."""
    rng = np.random.default_rng(9)
    q = rng.standard_normal((8, 2, 16)).astype(np.float32)
    kv = rng.standard_normal((10, 2, 16)).astype(np.float32)
    cq, ck = np.array([0, 3, 8], np.int32), np.array([0, 4, 10], np.int32)
    files = {"q.npy": q, "k.npy": kv, "v.npy": kv, "cq.npy": cq, "ck.npy": ck}
    cu = ["--cu-seqlens-q", "cq.npy", "--cu-seqlens-k", "ck.npy"]
    return [
        ("varlen_missing_cu_k", files, cu[:2]),
        ("varlen_cu_float", dict(files, **{"cq.npy": cq.astype(np.float32)}), cu),
        ("varlen_cu_2d", dict(files, **{"ck.npy": ck[None]}), cu),
        ("varlen_cu_not_ending_at_total", dict(files, **{"ck.npy": np.array([0, 4, 9], np.int32)}), cu),
        ("varlen_cu_decreasing", dict(files, **{"cq.npy": np.array([0, 5, 3, 8], np.int32),
                                                "ck.npy": np.array([0, 4, 6, 10], np.int32)}), cu),
        ("varlen_cu_not_from_0", dict(files, **{"cq.npy": np.array([1, 3, 8], np.int32)}), cu),
        ("varlen_cu_batches_differ", dict(files, **{"ck.npy": np.array([0, 4, 6, 10], np.int32)}), cu),
        ("varlen_q_4d", dict(files, **{"q.npy": q[None]}), cu),
        ("varlen_heads_not_divisible", dict(files, **{"k.npy": np.zeros((10, 3, 16), np.float32),
                                                      "v.npy": np.zeros((10, 3, 16), np.float32)}), cu),
        ("varlen_alibi_wrong_batch", dict(files, **{"a.npy": np.ones((3, 2), np.float32)}), cu + ["--alibi", "a.npy"]),
        ("varlen_mask", dict(files, **{"mask.npy": np.ones((8, 10), bool)}), cu + ["--mask", "mask.npy"]),
        ("varlen_k_cache", files, cu + ["--k-cache", "k.npy"]),
        ("varlen_heatmap", files, cu + ["--heatmap", "p.png"]),
        ("varlen_weights_fused", files, cu + ["--weights", "p.npy", "--path", "fused"]),
        ("varlen_q8_0_dim_16", files, cu + ["--kv-dtype", "q8_0"]),
        ("varlen_q8_0_f16_overflow_v", {"q.npy": np.zeros((8, 2, 32), np.float32), "k.npy": np.zeros((10, 2, 32), np.float32),
                                        "v.npy": q8_0_big(np.zeros((10, 2, 32), np.float32)), "cq.npy": cq, "ck.npy": ck},
         cu + ["--kv-dtype", "q8_0", "--dtype", "f16"]),
    ]


def paged_error_cases(q, kv):
    """Bad paged-cache input: Q (2, 2, 8, 16) over caches of 4 pages of 16 rows, 2 KV heads."""
    rng = np.random.default_rng(8)
    cache = rng.standard_normal((4, 16, 2, 16)).astype(np.float32)
    table = np.array([[0, 1], [2, 3]], np.int32)
    lens = np.array([20, 3], np.int32)
    files = {"q.npy": q, "kc.npy": cache, "vc.npy": cache, "bt.npy": table, "cl.npy": lens}
    paged = ["--k-cache", "kc.npy", "--v-cache", "vc.npy", "--block-table", "bt.npy", "--cache-lens", "cl.npy",
             "--k-cache-out", "kc_out.npy", "--v-cache-out", "vc_out.npy"]
    no_table = paged[:4] + paged[6:]
    q32 = {"q.npy": np.zeros((2, 2, 1, 32), np.float32), "kc.npy": np.zeros((4, 16, 2, 32), np.float32),
           "vc.npy": np.zeros((4, 16, 2, 32), np.float32)}
    new = rng.standard_normal((2, 2, 13, 16)).astype(np.float32)
    return [
        ("paged_missing_block_table", files, no_table),
        ("paged_block_table_float", dict(files, **{"bt.npy": table.astype(np.float32)}), paged),
        ("paged_cache_lens_2d", dict(files, **{"cl.npy": lens[None]}), paged),
        ("paged_k_with_k_cache", dict(files, **{"k.npy": kv, "v.npy": kv}), ["--k", "k.npy"] + paged),
        ("paged_mask", dict(files, **{"mask.npy": np.ones((8, 20), bool)}), paged + ["--mask", "mask.npy"]),
        ("paged_k_new_alone", dict(files, **{"kn.npy": new}), paged + ["--k-new", "kn.npy"]),
        ("paged_weights", files, paged + ["--weights", "p.npy"]),
        ("paged_cache_lens_beyond_capacity", dict(files, **{"cl.npy": np.array([33, 3], np.int32)}), paged),
        ("paged_append_beyond_capacity", dict(files, **{"kn.npy": new, "vn.npy": new}),
         paged + ["--k-new", "kn.npy", "--v-new", "vn.npy"]),
        ("paged_table_entry_not_a_page", dict(files, **{"bt.npy": np.array([[0, 1], [4, -1]], np.int32)}), paged),
        ("paged_cache_3d", dict(files, **{"kc.npy": cache[0]}), paged),
        ("paged_f16_cache_f32_q", dict(files, **{"vc.npy": cache.astype(np.float16)}), paged),
        ("paged_q8_0_dim_16", files, paged + ["--kv-dtype", "q8_0"]),
        ("paged_page_order_without_cache", {"q.npy": q, "k.npy": kv, "v.npy": kv}, ["--page-order", "hnd"]),
        ("paged_q8_0_nan_cache", dict(q32, **{"bt.npy": table, "cl.npy": lens, "kc.npy": np.full((4, 16, 2, 32), np.nan, np.float32)}),
         paged + ["--kv-dtype", "q8_0"]),
        ("paged_check_dense", {"q.npy": q, "k.npy": kv, "v.npy": kv}, ["--check"]),
        ("paged_q8_0_f16_overflow_v", dict(q32, **{"bt.npy": table, "cl.npy": lens, "vc.npy": q8_0_big(q32["vc.npy"])}),
         paged + ["--kv-dtype", "q8_0", "--dtype", "f16"]),
    ]


# The message an error case must give, where the wording is the point of the case.
EXPECTED_MESSAGE = {
    "window_side_below_minus_1": "--window: the left side -2 must be >= 0, or -1 for unbounded",
    "softcap_zero": "--softcap: 0 must be > 0",
    "q8_0_f16_overflow_v": "--v (v.npy) as q8_0 blocks: 1 value overflows f16 (largest magnitude 200025 > 65504)",
    "varlen_q8_0_f16_overflow_v": "--v (v.npy) as q8_0 blocks: 1 value overflows f16 (largest magnitude 200025 > 65504)",
    "paged_q8_0_f16_overflow_v":
        "--v-cache (vc.npy) as q8_0 blocks: 1 value overflows f16 (largest magnitude 200025 > 65504)",
    "align_disagrees_with_causal": "align (top-left) must agree with causal (bottom-right)",
    "alibi_wrong_shape": "--alibi (a.npy): shape (3,) must be (heads,) = (2,) or (batch, heads) = (2, 2)",
    "sinks_per_batch": "--sinks (s.npy): shape (2, 2) must be (heads,) = (2,)",
    "f16_overflow": "--k (k.npy): 2 values overflow f16 (largest magnitude 75000 > 65504)",
    "bf16_overflow": "--v (v.npy): 2 values overflow bf16 (largest magnitude 3.4e+38 > 3.38953e+38)",
    "paged_missing_block_table": "--k-cache needs --block-table",
    "paged_block_table_float": "--block-table (bt.npy): dtype '<f4' is not supported; use int32 ('<i4') or int64",
    "paged_cache_lens_2d": "--cache-lens (cl.npy): shape (1, 2) must be (batch,) = (2,)",
    "paged_k_with_k_cache": "--k with --k-cache: give dense K and V (--k, --v) or a paged cache",
    "paged_mask": "--mask cannot be used with a paged cache: the cache lengths (--cache-lens) are the key lengths",
    "paged_k_new_alone": "--k-new needs --v-new",
    "paged_weights": "--weights cannot be used with a paged cache",
    "paged_cache_lens_beyond_capacity":
        "cache_lens[0] (33) exceeds the block table's capacity max_pages * page_size = 2 * 16 = 32",
    "paged_append_beyond_capacity": "cache_lens[0] (20) + k_new.seq (13) = 33 exceeds the block table's capacity",
    "paged_table_entry_not_a_page": "block_table[1][0] (4) is not a page: must be in [0, 4)",
    "paged_cache_3d": "kc.npy: the K cache must be a 4-D array (num_pages, page_size, kv_heads, dim)",
    "paged_f16_cache_f32_q": "vc.npy: dtype '<f2' differs from Q's '<f4'",
    "paged_q8_0_dim_16": "k_cache.dim (16) must be a multiple of 32 for q8_0",
    "paged_q8_0_nan_cache": "--k-cache (kc.npy): quantize_q8_0: values[0] is nan: q8_0 holds finite values only",
    "paged_check_dense": "--check needs a paged cache",
    "paged_page_order_without_cache": "--page-order needs a paged cache",
    "q8_0_dim_16": "k.dim (16) must be a multiple of 32 for q8_0",
    "q8_0_nan_k": "--k (k.npy): quantize_q8_0: values[387] is nan: q8_0 holds finite values only",
    "q8_0_weights": "--weights cannot be used with --kv-dtype q8_0",
    "q8_0_heatmap": "--heatmap cannot be used with --kv-dtype q8_0",
    "q8_0_unfused": "--path unfused cannot run --kv-dtype q8_0",
    "varlen_missing_cu_k": "--cu-seqlens-q needs --cu-seqlens-k",
    "varlen_cu_float": "--cu-seqlens-q (cq.npy): dtype '<f4' is not supported; use int32 ('<i4') or int64",
    "varlen_cu_2d": "--cu-seqlens-k (ck.npy): shape (1, 3) must be (batch + 1,)",
    "varlen_cu_not_ending_at_total": "--cu-seqlens-k[2] (9) must equal total_k (K's rows) (10)",
    "varlen_cu_decreasing": "--cu-seqlens-q[2] (3) < --cu-seqlens-q[1] (5)",
    "varlen_cu_not_from_0": "--cu-seqlens-q[0] (1) must be 0",
    "varlen_cu_batches_differ": "--cu-seqlens-k (ck.npy): 4 values, but --cu-seqlens-q has 3: both hold batch + 1",
    "varlen_q_4d": "q.npy: Q must be a 3-D array (total_q, heads, dim_qk)",
    "varlen_alibi_wrong_batch": "--alibi (a.npy): shape (3, 2) must be (heads,) = (2,) or (batch, heads) = (2, 2)",
    "varlen_mask": "--mask cannot be used with packed sequences",
    "varlen_k_cache": "--k-cache cannot be used with packed sequences",
    "varlen_heatmap": "--heatmap cannot be used with packed sequences",
    "varlen_weights_fused": "--path fused cannot give --weights",
    "varlen_q8_0_dim_16": "k.dim (16) must be a multiple of 32 for q8_0",
}
# Usage errors exit 2: which options go together, and a bad value of an option (refused as the
# command line is parsed, issue 37); bad inputs (files and their values) exit 1.
EXPECTED_EXIT = {name: 2 for name in ("scale_inf", "scale_nan", "scale_overflow", "scale_not_a_number",
                                      "window_one_side", "window_not_integers", "window_side_below_minus_1",
                                      "window_three_sides", "softcap_zero", "softcap_negative", "softcap_inf",
                                      "paged_missing_block_table", "paged_k_with_k_cache", "paged_mask",
                                      "paged_k_new_alone", "paged_weights", "paged_check_dense",
                                      "paged_page_order_without_cache",
                                      "varlen_missing_cu_k", "varlen_mask", "varlen_k_cache", "varlen_heatmap",
                                      "varlen_weights_fused", "q8_0_weights", "q8_0_heatmap", "q8_0_unfused")}


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
    dense = [] if "--k-cache" in extra else ["--k", "k.npy", "--v", "v.npy"]
    args = ["run", "--q", "q.npy"] + dense + ["--out", "out.npy", "--lse", "lse.npy"] + extra
    proc = subprocess.run([vkattn] + args, cwd=directory, capture_output=True, text=True, timeout=300)
    lines = proc.stderr.splitlines()
    leftovers = [f for f in os.listdir(directory)
                 if f.startswith(("out.npy", "lse.npy", "p.npy", "heads.png", "kc_out.npy", "vc_out.npy"))]
    if proc.returncode == 0:
        return False, "succeeded, expected a failure"
    if name in EXPECTED_EXIT and proc.returncode != EXPECTED_EXIT[name]:
        return False, f"exit {proc.returncode}, expected {EXPECTED_EXIT[name]}: {proc.stderr.strip()!r}"
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
