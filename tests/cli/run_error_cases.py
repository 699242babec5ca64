"""check_run.py's bad inputs to `vkattn run`: the cases (error_cases: dense, q8_0, paged, packed),
the message and exit status some of them must give (EXPECTED_MESSAGE, EXPECTED_EXIT), and
check_error_case (one "vkattn: error:" line on stderr, a non-zero exit, no output file)."""
import os
import subprocess
import tempfile

import numpy as np


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
        ("dim_over_576", {"q.npy": np.zeros((1, 1, 2, 600), np.float32), "k.npy": np.zeros((1, 1, 3, 600), np.float32),
                          "v.npy": np.zeros((1, 1, 3, 600), np.float32)}, []),
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
    "softcap_zero": "--softcap: must be finite and > 0, got 0",
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
