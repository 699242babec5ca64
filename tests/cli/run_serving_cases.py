"""check_run.py's serving cases of `vkattn run`: a paged KV cache (PagedCase, PAGED_CASES,
check_paged_case) and packed sequences (VarlenCase, VARLEN_CASES, check_varlen_case), each with its
NumPy reference built from the dense one (sdpa_reference.py)."""
import dataclasses
import os
import subprocess
import sys
import time
import zlib

import numpy as np

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_case  # noqa: E402
import sdpa_reference  # noqa: E402
from q8_0_reference import q8_0_values  # noqa: E402
from run_compare import LSE_TOLERANCE, TOLERANCE, compare  # noqa: E402


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
    path: str = None  # 'unfused': --path unfused (the three-stage path, its GEMMs through the block table)

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
    PagedCase("paged_unfused_append_across_page_edge", cache_lens=[14, 30, 5], heads=8, kv_heads=2, seq_new=3,
              seq_q=2, path="unfused", cache_out=True, check=True),
    PagedCase("paged_unfused_hnd_modifiers", cache_lens=[0, 9, 33], seq_q=5, causal="none", window=(6, 2),
              align="top-left", softcap=5.0, alibi="bh", sinks=True, page_size=8, dim=24, dim_v=40,
              page_order="hnd", path="unfused"),
]


def add_call_options(case, rng, batch, heads, files, args):
    """The options a paged and a packed case share (causal, dtype, the score modifiers, --check,
    --kv-dtype), added to `args`; the ALiBi slopes and sinks drawn from `rng` (in this order, after
    the tensors) into `files`. Returns (alibi, sinks), None where the case has none."""
    if case.causal != "none":
        args += ["--causal", case.causal]
    if case.dtype:
        args += ["--dtype", case.dtype]
    alibi, sinks = gen_case.add_modifiers(case, rng, batch, heads, files, args)
    if case.check:
        args += ["--check"]
    if case.kv_dtype:
        args += ["--kv-dtype", case.kv_dtype]
    return alibi, sinks


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
    alibi, sinks = add_call_options(case, rng, batch, heads, files, args)
    if case.path:
        args += ["--path", case.path]

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
    alibi, sinks = add_call_options(case, rng, batch, heads, files, args)
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
